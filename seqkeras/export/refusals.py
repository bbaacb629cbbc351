"""What an exporter refuses, decided by what the layers declare.

A layer that needs string ops or lookup tables declares
`uses_lookup_tables = True` (Keras' own lookup layers, which declare
nothing, are recognised by type); a layer that carries state from one
call to the next declares `stateful = True`. Exporters call these checks
before writing anything.
"""

import keras

from seqkeras.layers.walk import all_layers

#: Keras' preprocessing layers that hold lookup tables or hash strings
#: (they declare no property of their own).
KERAS_LOOKUP_LAYERS = (
    keras.layers.TextVectorization,
    keras.layers.StringLookup,
    keras.layers.IntegerLookup,
    keras.layers.Hashing,
)


def uses_lookup_tables(layer):
    """Whether `layer` runs string ops or lookup tables: its own
    `uses_lookup_tables` declaration, else whether it is one of Keras'
    lookup layers."""
    declared = getattr(layer, "uses_lookup_tables", None)
    if declared is not None:
        return bool(declared)
    return isinstance(layer, KERAS_LOOKUP_LAYERS)


def refuse_text_layers(name, model):
    """Raises a clear ValueError when `model` takes strings or holds a
    layer that uses lookup tables (string ops and hash tables, which
    builtin TFLite and ONNX do not run)."""
    found = [
        f"{type(layer).__name__} {layer.name!r}"
        for layer in all_layers(model)
        if uses_lookup_tables(layer)
    ]
    strings = [t.name for t in model.inputs if t.dtype == "string"]
    if found or strings:
        what = f"the layer {found[0]}" if found else f"the string input {strings[0]!r}"
        raise ValueError(
            f"`{name}` cannot export model {model.name!r}: {what} needs "
            "string ops and lookup tables, which builtin TFLite and ONNX "
            "do not run. Export the model that takes token ids (the layers "
            "after the lookup) and ship the vocabulary beside the file "
            "(e.g. `layer.get_vocabulary()`); `saved_model` keeps the "
            "lookup in the graph."
        )


def refuse_stateful(name, model):
    """Raises a clear ValueError for a model with stateful layers: served,
    it would carry its states from one request to the next."""
    stateful = [
        layer.name for layer in all_layers(model) if getattr(layer, "stateful", False) is True
    ]
    if stateful:
        raise ValueError(
            f"`{name}` refuses model {model.name!r}: its layers "
            f"{stateful} are stateful, so a served model would carry its "
            "states from one request to the next. Build the same model "
            "with stateful=False, copy the weights "
            "(`new.set_weights(model.get_weights())`) and export that; "
            "for token-by-token serving export the streaming step model "
            "(`seqkeras.export.streaming_tflite`), which takes and returns "
            "the states."
        )


def refuse_unbuilt(name, model):
    """Raises a clear ValueError for a model without defined inputs (an
    unbuilt `Sequential`, a subclassed model never called on
    `keras.Input`s): an export's signatures take the model's inputs."""
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):
        inputs = None
    if not inputs:
        raise ValueError(
            f"`{name}` needs a model with defined inputs, e.g. built on `keras.Input` "
            "(a functional model, a Sequential that starts with `keras.Input(shape)`, or a "
            f"seqkeras builder's model). Received: {type(model).__name__} "
            f"{getattr(model, 'name', '')!r}, "
            "which has none"
        )
