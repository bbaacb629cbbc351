"""`all_layers(model)`: every layer inside a model or layer, through the
public attributes that hold sublayers (`layers` of models, `stack` of
`StackedRecurrent`, `forward_layer`/`backward_layer` of `Bidirectional`,
`layer` of wrappers, `attention`/`feedforward` of `LlamaDecoderBlock`), so
no private Keras API is needed."""

SUBLAYER_ATTRIBUTES = (
    "layers",
    "stack",
    "forward_layer",
    "backward_layer",
    "layer",
    "attention",
    "feedforward",
)


def all_layers(layer):
    """Every layer nested in `layer` (not `layer` itself), depth first,
    each once.

    Args:
        layer: a Keras layer or model.

    Returns:
        A list of layers.

    Examples:
        >>> import keras, seqkeras
        >>> model = seqkeras.models.tagger(10, 3, units=4, embedding_dim=4)
        >>> names = [type(x).__name__ for x in seqkeras.layers.all_layers(model)]
        >>> names.count("Recurrent")  # the two directions of Bidirectional
        2
    """
    if not hasattr(layer, "trainable_weights") or isinstance(layer, type):
        raise TypeError(
            "`all_layers` expects `layer`, a Keras layer or model. "
            f"Received: layer={layer!r} of type {type(layer).__name__}"
        )
    seen = set()

    def walk(parent):
        for attribute in SUBLAYER_ATTRIBUTES:
            found = getattr(parent, attribute, None)
            children = found if isinstance(found, (list, tuple)) else [found]
            for child in children:
                if child is None or not hasattr(child, "trainable_weights") or id(child) in seen:
                    continue
                seen.add(id(child))
                yield child
                yield from walk(child)

    return list(walk(layer))
