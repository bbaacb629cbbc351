"""`SequenceModel`: the functional `keras.Model` every builder returns.

It knows the vocabulary size of each token-id input and checks token ids
before they reach an embedding: under XLA (the library's default
`jit_compile=True`) an out-of-range id is not an error, the gather clamps
it or reads zeros, so a model would train and predict on garbage
silently. The check runs where the data is still concrete, before the
compiled step: eager calls, `fit`/`evaluate`/`predict` on arrays (and on
`tf.data` datasets, through `seqkeras.data.check_token_dataset`, in the
input pipeline), `seqkeras.models.generate`, and in-graph asserts in
exported serving signatures (`seqkeras.export.saved_model`).
"""

import keras
import numpy as np
import tensorflow as tf

from seqkeras.data.checks import MARKER
from seqkeras.data.checks import check_token_dataset
from seqkeras.data.checks import check_token_ids
from seqkeras.models import steps


def named_inputs(model, x):
    """`{input name: value}` for the model inputs `x` (a dict by name, a
    list in `model.inputs` order, or the one input)."""
    names = [t.name for t in model.inputs]
    if isinstance(x, dict):
        return dict(x)
    if isinstance(x, (list, tuple)) and len(names) > 1:
        return dict(zip(names, x))
    return {names[0]: x}


@keras.saving.register_keras_serializable(package="seqkeras")
class SequenceModel(keras.Model):
    """A functional `keras.Model` whose token-id inputs are checked.

    Args:
        inputs, outputs, name: as for `keras.Model` (functional).
        vocabulary_sizes: `{input name: vocabulary size}` for the inputs
            that carry token ids; ids outside `[0, size)`, strings and
            non-integer values raise a clear error in eager calls, `fit`,
            `evaluate`, `predict` (arrays and `tf.data` datasets) and
            `seqkeras.models.generate` instead of being used silently.
        parts: `{role: layer, list of layers or None}`: the model's own
            layers its contract methods use (`model.part(role)`); saved as
            layer names in the config and resolved when loading.

    The contract a subclass implements so that `seqkeras.models.generate`,
    the SavedModel `generate*` signatures, `streaming_tflite` and
    `export_and_verify` work on it (the builders' classes do):

    - generation: `prompt_input` (the token-id input generated tokens feed),
      `conditioning_input` (None for a language model), `init_cache(inputs,
      batch_size, max_length)`, `call_with_cache(token_ids, cache, index)
      -> (float32 logits, cache)`, optionally `max_generation_length`;
    - streaming: `streamable = True`, `stream_start(inputs, batch_size)`,
      `stream_step(x, states) -> (output, states)` (by default the
      generation cache for one step), `stream_input`, `stream_output`,
      `stream_per_step`.

    Examples:
        >>> import keras, numpy as np, seqkeras
        >>> ids = keras.Input((None,), dtype="int32", name="token_ids")
        >>> x = keras.layers.Embedding(10, 4)(ids)
        >>> model = seqkeras.models.SequenceModel(
        ...     ids, keras.layers.GlobalAveragePooling1D()(x),
        ...     vocabulary_sizes={"token_ids": 10})
        >>> try:
        ...     model(np.array([[3, 12]]))
        ... except ValueError as e:
        ...     print(e)
        `SequenceModel`: input `token_ids` has token id 12, outside [0, 10)...
    """

    #: What the model predicts, for `compile_model`'s loss and metrics and
    #: the export signatures: `"tokens"`, `"classes"` or `"regression"`
    #: (None: `infer_task` reads it from the outputs).
    task = None
    #: The input that conditions generation (`"source_ids"`,
    #: `"features"`), or None: a language model, which continues a prompt.
    conditioning_input = None
    #: The token-id input that generated tokens are fed back into.
    prompt_input = None
    #: Whether `stream_start`/`stream_step` give a step model (recurrent
    #: kinds); Transformers need the whole sequence.
    streamable = False
    #: Whether each streamed step's output matches the full pass at that
    #: step (taggers, language models) or only the last one does
    #: (classifiers, forecasters: the output of the sequence so far).
    stream_per_step = True

    def __init__(self, *args, vocabulary_sizes=None, parts=None, **kwargs):
        super().__init__(*args, **kwargs)
        # Plain attribute (not tracked): the parts are this model's own
        # layers, already tracked through the functional graph.
        object.__setattr__(self, "_parts", self._resolve_parts(parts or {}))
        sizes = dict(vocabulary_sizes or {})
        names = [t.name for t in self.inputs]
        for key, size in sizes.items():
            if key not in names:
                raise ValueError(
                    f"`{type(self).__name__}` received `vocabulary_sizes` for an "
                    f"input it does not have: expected names among {names}. "
                    f"Received: {key!r}"
                )
            if not isinstance(size, (int, np.integer)) or size < 1:
                raise ValueError(
                    f"`{type(self).__name__}` expects positive integer "
                    f"`vocabulary_sizes`. Received: {key}={size!r}"
                )
        self.vocabulary_sizes = {k: int(v) for k, v in sizes.items()}

    def _resolve_parts(self, parts):
        """`{role: layer, list of layers or None}` from layers or, when
        loading, their names in this model."""
        if not isinstance(parts, dict):
            raise TypeError(
                f"`{type(self).__name__}` expects `parts` to be a dict of "
                f"role -> layer(s). Received: {type(parts).__name__}"
            )
        own = {id(layer): layer for layer in self.layers}

        def resolve(role, value):
            if value is None:
                return None
            if isinstance(value, (list, tuple)):
                return [resolve(role, v) for v in value]
            if isinstance(value, str):
                return self.get_layer(value)
            if id(value) not in own:
                raise ValueError(
                    f"`{type(self).__name__}`: part {role!r} must be one of "
                    f"the model's own layers. Received: {value!r}"
                )
            return value

        return {role: resolve(role, v) for role, v in parts.items()}

    def part(self, role):
        """The layer (or list of layers; None when absent) playing `role`
        in this model, as the builder declared it (e.g. `"embedding"`,
        `"decoder"`, `"logits"`)."""
        return self._parts.get(role)

    def get_config(self):
        config = super().get_config()
        config["vocabulary_sizes"] = dict(self.vocabulary_sizes)

        def names(value):
            if isinstance(value, list):
                return [names(v) for v in value]
            return None if value is None else value.name

        config["parts"] = {k: names(v) for k, v in self._parts.items()}
        return config

    # -- The generation contract (`seqkeras.models.generate`, the
    # SavedModel `generate*` signatures, streaming decoders) --

    @property
    def generates(self):
        """Whether this model implements the generation contract."""
        return type(self).call_with_cache is not SequenceModel.call_with_cache

    @property
    def max_generation_length(self):
        """The most tokens `generate` may produce (e.g. a Transformer's
        learned positions), or None for no limit."""
        return None

    def init_cache(self, inputs, batch_size, max_length, layout="fixed"):
        """The decoding state before the first step, a value (docs/design.md,
        "State as a value"): runs the conditioning half once (`inputs` are
        the `conditioning_input` values; None for a language model). Any
        nested structure of tensors; key/value caches are laid out as
        `layout` asks (`seqkeras.layers.state`: `"fixed"`, `"scatter"` or
        `"growing"`)."""
        raise ValueError(self._not_implemented("init_cache"))

    def call_with_cache(self, token_ids, cache, index, step_weights=None):
        """One decoding step: `token_ids` (batch,) int at position `index`
        -> `(logits, cache)`, float32 logits (batch, vocabulary).
        `step_weights`: `prepare_step_weights(dtype)`, made once per
        decoding request (default: the variables)."""
        raise ValueError(self._not_implemented("call_with_cache"))

    def prepare_step_weights(self, dtype=None):
        """The weights the decoding step reads, laid out once per decoding
        request and passed to every `call_with_cache(...,
        step_weights=)`: the output matrix cast to `dtype` (default the
        compute dtype) and each decoder block's fused projections
        (`seqkeras.models.steps.model_step_weights`)."""
        return steps.model_step_weights(self, dtype or self.dtype_policy.compute_dtype)

    # -- The streaming contract (`seqkeras.export.streaming_tflite`) --

    @property
    def stream_input(self):
        """`(name, shape without batch, dtype)` of one streamed step's
        input; a generative model streams its decoder tokens."""
        return ("token_ids", (), "int32")

    @property
    def stream_output(self):
        """The name of a streamed step's output."""
        return self.output_names[0]

    def stream_start(self, inputs, batch_size, max_length=None):
        """The states before the first streamed step (a nested structure
        of tensors): the conditioning half run on `inputs` for decoders,
        zeros otherwise. Generative models: `init_cache` for one step.
        `max_length`: the positions a key/value cache holds (models
        that stream over positions)."""
        if not self.streamable:
            raise ValueError(self._not_implemented("stream_start"))
        return self.init_cache(inputs, batch_size, 1)

    def stream_step(self, x, states):
        """One streamed step: `x` (batch, *stream_input shape) and the
        states -> `(output, states)`. Generative models: `call_with_cache`
        (a recurrent cache does not depend on the position)."""
        if not self.streamable:
            raise ValueError(self._not_implemented("stream_step"))
        return self.call_with_cache(x, states, 0)

    def _not_implemented(self, method):
        return (
            f"model {self.name!r} ({type(self).__name__}) does not "
            f"implement `{method}`: generation needs `init_cache` and "
            "`call_with_cache` (and `conditioning_input`/`prompt_input`), "
            "streaming needs `streamable = True` and `stream_start`/"
            "`stream_step`; the builders in `seqkeras.models` return "
            "classes that do"
        )

    def check_inputs(self, x, where=None):
        """Checks the token ids in the model inputs `x` (see
        `check_token_ids`); symbolic inputs pass unchecked."""
        if x is None or not self.vocabulary_sizes:
            return
        where = where or type(self).__name__
        values = named_inputs(self, x)
        for name, size in self.vocabulary_sizes.items():
            if name in values:
                check_token_ids(where, name, values[name], size)

    def _check_data(self, x, where):
        """Checks `x` (arrays) or returns it wrapped with an in-pipeline
        check (a `tf.data.Dataset`)."""
        if not self.vocabulary_sizes or x is None:
            return x
        if isinstance(x, tf.data.Dataset):
            return check_token_dataset(x, self, where)
        if isinstance(x, (dict, list, tuple, np.ndarray)) or hasattr(x, "shape"):
            self.check_inputs(x, where)
        return x

    def __call__(self, *args, **kwargs):
        self.check_inputs(args[0] if args else kwargs.get("inputs"))
        return super().__call__(*args, **kwargs)

    def fit(self, x=None, y=None, *args, **kwargs):
        _build_optimizer(self)
        x = self._check_data(x, "fit")
        validation = kwargs.get("validation_data")
        if validation is not None:
            if isinstance(validation, (list, tuple)):
                self._check_data(validation[0], "fit (validation_data)")
            else:
                kwargs["validation_data"] = self._check_data(validation, "fit (validation_data)")
        with _pipeline_errors():
            return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        x = self._check_data(x, "evaluate")
        with _pipeline_errors():
            return super().evaluate(x, y, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        x = self._check_data(x, "predict")
        with _pipeline_errors():
            return super().predict(x, *args, **kwargs)


def _build_optimizer(model):
    """Builds `model.optimizer`'s variables for `model.trainable_variables`
    now, where the TensorFlow backend would build them inside the first
    trace of the train step: a `tf.function` whose first trace creates
    variables is traced a second time, so building them first halves the
    first `fit`'s tracing (a small Transformer seq2seq's first one-epoch
    `fit`: 18.6 s against 8.9 s; SmolLM2 with LoRA: about 68 s of tracing
    saved). Nothing happens on other backends (Keras builds the optimizer
    before tracing there), for a model that is not compiled, or for an
    optimizer already built. Metrics named by strings are still made in
    the trace (`compile_model` passes metric objects)."""
    optimizer = getattr(model, "optimizer", None)
    if keras.backend.backend() == "tensorflow" and optimizer is not None and not optimizer.built:
        # in the model's distribution strategy's scope, as Keras builds it
        # there (mirrored slots for mirrored weights)
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)


class _pipeline_errors:
    """Re-raises an input pipeline's token-id check failure (a TensorFlow
    InvalidArgumentError carrying `MARKER`) as a ValueError with our
    message alone."""

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is None or MARKER not in str(error):
            return False
        message = str(error).split(MARKER, 1)[1].split("\n")[0]
        message = message.replace("] [", " ").rstrip("]")  # Assert's data
        raise ValueError(message) from None


def copy_layers(name, model, layers, source, hint):
    """Copies each of `layers` (from a trained `source` model, named in
    messages) into the layer of `model` with the same name. `name`, the
    caller, is named in the ValueError raised for a layer `model` lacks
    (with `hint`) or whose weight shapes differ; nothing is copied then.
    Returns the names of the layers copied."""
    targets = []
    for layer in layers:
        try:
            target = model.get_layer(layer.name)
        except ValueError:
            raise ValueError(
                f"`{name}`: `model` ({model.name}) has no layer {layer.name!r} ({hint})"
            ) from None
        shapes = [tuple(w.shape) for w in layer.weights]
        found = [tuple(w.shape) for w in target.weights]
        if found != shapes:
            raise ValueError(
                f"`{name}`: layer {layer.name!r} has weights of shapes {found} in `model` "
                f"({model.name}), {shapes} in {source} ({hint})"
            )
        targets.append(target)
    for layer, target in zip(layers, targets):
        target.set_weights(layer.get_weights())
    return [layer.name for layer in layers]
