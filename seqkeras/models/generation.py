"""Generation for every generative builder: a cached step function per
model kind, and `generate(model, ...)` over `seqkeras.decoding`.

The step functions reuse the trained model's own layers (no copies):

| model | cache |
|---|---|
| `rnn_language_model` | each layer's recurrent states |
| `transformer_language_model` | each block's key/value cache |
| `seq2seq` | the decoder states, plus the encoder outputs (computed once) |
| `transformer_seq2seq` | self-attention key/value caches, cross-attention keys and values (projected once), the encoder outputs |
| `conditioned_decoder` | the decoder states (initialised from the features once) |

`decoder_step(model)` returns `(start, step)`: `start(inputs, batch_size,
max_length)` runs the encoder half once and returns the initial cache;
`step(tokens, cache, index) -> (logits, cache)` is one decoding step.
"""

import keras
from keras import ops

from seqkeras import decoding
from seqkeras.data.synthetic import BOS, EOS, PAD
from seqkeras.layers.validation import static_shape
from seqkeras.models.base import check_token_ids

KINDS = ("rnn_language_model", "transformer_language_model", "seq2seq",
         "transformer_seq2seq", "conditioned_decoder")
STRATEGIES = ("greedy", "beam", "sample")


def _kind(model):
    if not isinstance(model, keras.Model) or model.name not in KINDS:
        raise ValueError(
            "`generate` works on models built by seqkeras.models "
            f"({', '.join(KINDS)}). Received: "
            f"{getattr(model, 'name', type(model).__name__)!r}")
    return model.name


def _as_list(states):
    return list(states) if isinstance(states, (list, tuple)) else [states]


def _layers(model, prefix):
    out, i = [], 0
    while True:
        try:
            out.append(model.get_layer(f"{prefix}{i}"))
        except ValueError:
            return out
        i += 1


def _optional_layer(model, name):
    names = {layer.name for layer in model.layers}
    return model.get_layer(name) if name in names else None


def _logits_head(model, embedding=None):
    """`h (batch, dim) -> float32 logits`: the model's dense output layer,
    or, with tied weights, `h @ E^T` without materialising `E^T` (the
    embedding's reverse call transposes the (vocab, dim) matrix at every
    decoding step)."""
    dense = _optional_layer(model, "logits_dense")
    if dense is not None or embedding is None:
        return lambda h: ops.cast(dense(h), "float32")
    return lambda h: ops.cast(ops.einsum(
        "bd,vd->bv", h, ops.cast(embedding.embeddings, h.dtype)), "float32")


def _transformer_step(model, embedding, positions, blocks):
    """One decoding step through causal blocks with key/value caches:
    `run(tokens, self_caches, index, **cross) -> (logits, self_caches)`,
    `cross` being the blocks' cross-attention arguments (seq2seq)."""
    norm = _optional_layer(model, "decoder_norm")
    head = _logits_head(model, embedding)

    def run(tokens, caches, index, memory=None, mask=None, cross=None):
        x = positions(embedding(ops.expand_dims(tokens, 1)),
                      start_index=index)
        new_caches = []
        for i, (block, c) in enumerate(zip(blocks, caches)):
            if memory is None:
                x, c = block(x, self_attention_cache=c,
                             self_attention_cache_index=index)
            else:
                x, c = block(x, memory, encoder_padding_mask=mask,
                             self_attention_cache=c,
                             self_attention_cache_index=index,
                             cross_attention_cache=cross[i])
            new_caches.append(c)
        if norm is not None:
            x = norm(x)
        return head(x[:, 0]), new_caches

    return run


def _recurrent_step(layers):
    """One step through stacked seqkeras `Recurrent` layers' cells."""
    def run(x, cache):
        new_cache = []
        for layer, states in zip(layers, cache):
            x, states = layer.cell(x, list(states))
            new_cache.append(_as_list(states))
        return x, new_cache
    return run


def _encoder_model(model, input_name, outputs):
    inp = model.get_layer(input_name).output
    return keras.Model(inp, [model.get_layer(n).output for n in outputs])


def decoder_step(model):
    """`(start, step)` for a model from `seqkeras.models` (see the module
    docstring)."""
    kind = _kind(model)

    if kind == "rnn_language_model":
        emb = model.get_layer("embedding")
        layers = _layers(model, "recurrent_")
        project = _optional_layer(model, "projection")
        head = _logits_head(model, emb)
        run = _recurrent_step(layers)

        def start(inputs, batch_size, max_length):
            return [layer.cell.get_initial_state(batch_size)
                    for layer in layers]

        def step(tokens, cache, index):
            h, cache = run(emb(tokens), cache)
            if project is not None:
                h = project(h)
            return head(h), cache

        return start, step

    if kind == "transformer_language_model":
        blocks = _layers(model, "decoder_block_")
        run = _transformer_step(model, model.get_layer("embedding"),
                                model.get_layer("positions"), blocks)

        def start(inputs, batch_size, max_length):
            return [b.init_cache(batch_size, max_length) for b in blocks]

        return start, run

    if kind == "conditioned_decoder":
        n = len(_layers(model, "decoder_init_"))
        encoder = _encoder_model(model, "features",
                                 [f"decoder_init_{i}" for i in range(n)])
        emb = model.get_layer("target_embedding")
        decoder = model.get_layer("decoder")
        head = _logits_head(model)

        def start(inputs, batch_size, max_length):
            return _as_list(encoder(inputs))

        def step(tokens, cache, index):
            h, states = decoder.cell(emb(tokens), list(cache))
            return head(h), _as_list(states)

        return start, step

    if kind == "seq2seq":
        n = len(_layers(model, "decoder_init_"))
        emb = model.get_layer("target_embedding")
        decoder = model.get_layer("decoder")
        head = _logits_head(model)
        attention = hasattr(decoder, "step")
        # Without attention the decoder only needs the initial states (the
        # fixed context); with it, also the encoder outputs.
        encoder = _encoder_model(
            model, "source_ids", (["memory"] if attention else [])
            + [f"decoder_init_{i}" for i in range(n)])

        def start(source_ids, batch_size, max_length):
            outputs = _as_list(encoder(source_ids))
            if not attention:
                return [outputs]
            memory, init = outputs[0], outputs[1:]
            mask = ops.not_equal(source_ids, PAD)
            return [decoder.get_initial_state(batch_size, init), memory, mask]

        def step(tokens, cache, index):
            x = emb(tokens)
            if not attention:
                h, states = decoder.cell(x, list(cache[0]))
                return head(h), [_as_list(states)]
            states, memory, mask = cache
            h, states, _ = decoder.step(x, states, memory, mask)
            return head(h), [_as_list(states), memory, mask]

        return start, step

    # transformer_seq2seq
    encoder = _encoder_model(model, "source_ids", ["memory"])
    blocks = _layers(model, "decoder_block_")
    run = _transformer_step(model, model.get_layer("target_embedding"),
                            model.get_layer("target_positions"), blocks)

    def start(source_ids, batch_size, max_length):
        memory = encoder(source_ids)
        mask = ops.not_equal(source_ids, PAD)
        return [[b.init_cache(batch_size, max_length) for b in blocks],
                [b.compute_cross_attention_cache(memory) for b in blocks],
                memory, mask]

    def step(tokens, cache, index):
        self_caches, cross_caches, memory, mask = cache
        logits, self_caches = run(tokens, self_caches, index, memory, mask,
                                  cross_caches)
        return logits, [self_caches, cross_caches, memory, mask]

    return start, step


def generate(model, inputs=None, prompt=None, max_length=32,
             strategy="greedy", bos_id=BOS, eos_id=EOS, pad_id=PAD,
             jit_compile=True, prompt_lengths=None, **kwargs):
    """Generates token ids with a model from `seqkeras.models`.

    Args:
        model: a `rnn_language_model`, `transformer_language_model`,
            `seq2seq`, `transformer_seq2seq` or `conditioned_decoder`.
        inputs: what the decoder is conditioned on: source ids (batch,
            source_time) for the seq2seq models, features (batch,
            feature_dim) for `conditioned_decoder`; None for language
            models.
        prompt: int (batch, prompt_length); language models need one,
            decoders default to `[[bos_id]] * batch`.
        max_length: tokens in all, prompt included (a Transformer's
            `max_length` bounds it).
        strategy: `"greedy"`, `"beam"` or `"sample"`.
        eos_id: generation stops per row at this id (None: never).
        jit_compile: run the decoding loop as one XLA-compiled graph
            (TensorFlow backend).
        prompt_lengths: greedy and sample: int (batch,), each row's prompt
            length when prompts of different lengths are right-padded to
            one width (default: all the full width).
        **kwargs: the strategy's options: `beam_width`,
            `length_penalty_alpha`, `return_all_beams` (beam);
            `temperature`, `top_k`, `top_p`, `seed` (sample).

    Returns:
        int32 (batch, max_length) ids, prompt included (beam: also the
        scores, as `seqkeras.decoding.beam_search`).

    Example:

    >>> import numpy as np, seqkeras
    >>> model = seqkeras.models.rnn_language_model(20, 8, cell="gru")
    >>> ids = seqkeras.models.generate(model, prompt=np.array([[5, 6]]),
    ...                                max_length=6, strategy="sample",
    ...                                top_k=3, seed=1)
    >>> np.asarray(ids).shape
    (1, 6)
    """
    kind = _kind(model)
    if strategy not in STRATEGIES:
        raise ValueError(
            "`generate` received an invalid value for `strategy`: expected "
            f"one of {STRATEGIES}. Received: strategy={strategy!r}")
    decoding.check_strategy_options("generate", strategy, kwargs)
    sizes = getattr(model, "vocabulary_sizes", {})
    prompt_input = ("token_ids" if kind.endswith("language_model")
                    else "target_ids")
    if kind.endswith("language_model"):
        if prompt is None:
            raise ValueError(f"`generate` on a {kind} needs a `prompt` "
                             "(batch, prompt_length) of token ids")
        batch = ops.shape(prompt)[0]
    else:
        if inputs is None:
            raise ValueError(f"`generate` on a {kind} needs `inputs` (the "
                             "source ids or the features)")
        _check_conditioning(model, kind, inputs, sizes)
        batch = ops.shape(inputs)[0]
        if prompt is None:
            prompt = ops.full((batch, 1), bos_id, "int32")
        else:
            rows, given = static_shape(prompt), static_shape(inputs)
            if None not in (rows[0], given[0]) and rows[0] != given[0]:
                raise ValueError(
                    f"`generate`: the prompt has {rows[0]} rows and `inputs` "
                    f"{given[0]}; give one prompt row per input row. "
                    f"Received: prompt.shape={rows}, inputs.shape={given}")
    if prompt_input in sizes:
        check_token_ids("generate", "prompt", prompt, sizes[prompt_input])
    vocab = model.outputs[0].shape[-1] if model.outputs else None
    for arg in ("top_k", "beam_width"):  # at most one per token
        value = kwargs.get(arg)
        if vocab is not None and decoding._is_int(value) and value > vocab:
            raise ValueError(
                f"`generate` received {arg}={value}, more than the model's "
                f"{vocab} tokens; use {arg} <= {vocab}")
    if kind.startswith("transformer"):
        positions = model.get_layer(
            "positions" if kind == "transformer_language_model"
            else "target_positions")
        limit = getattr(positions, "max_length", None)
        if limit is not None and max_length > limit:
            raise ValueError(
                f"`generate`: max_length={max_length} is more than the "
                f"model's {limit} learned positions")
    start, step = decoder_step(model)

    def run(inputs, prompt, lengths):
        cache = start(inputs, ops.shape(prompt)[0], max_length)
        if strategy == "greedy":
            return decoding.greedy(step, prompt, cache, max_length, eos_id,
                                   pad_id, prompt_lengths=lengths, **kwargs)
        if strategy == "beam":
            return decoding.beam_search(step, prompt, cache, max_length,
                                        eos_id=eos_id, pad_id=pad_id,
                                        **kwargs)
        return decoding.sample(step, prompt, cache, max_length,
                               eos_id=eos_id, pad_id=pad_id,
                               prompt_lengths=lengths, **kwargs)

    # Argument errors surface before tracing.
    if strategy == "sample":
        decoding.check_sampling(name="generate", **kwargs)
    elif strategy == "beam":
        decoding.check_beam(name="generate", **kwargs)
    prompt = ops.convert_to_tensor(prompt, "int32")
    decoding.check_prompt("generate", prompt, max_length)
    if prompt_lengths is None:
        prompt_lengths = ops.full((ops.shape(prompt)[0],),
                                  ops.shape(prompt)[1], "int32")
    elif strategy == "beam":
        raise ValueError("`generate`: beam search takes prompts of one "
                         "length; `prompt_lengths` is for greedy and sample")
    else:
        prompt_lengths = ops.convert_to_tensor(prompt_lengths, "int32")
        if tuple(prompt_lengths.shape) != tuple(prompt.shape[:1]):
            raise ValueError(
                "`generate` expects `prompt_lengths` of shape (batch,), one "
                "length per prompt row. Received: prompt_lengths.shape="
                f"{tuple(prompt_lengths.shape)}, prompt.shape="
                f"{tuple(prompt.shape)}")
    if jit_compile and keras.backend.backend() == "tensorflow":
        run = _compiled(model, run, (kind, max_length, strategy, eos_id,
                                     pad_id, tuple(sorted(kwargs.items()))))
    inputs = ops.zeros((1,)) if inputs is None else inputs
    return run(ops.convert_to_tensor(inputs), prompt, prompt_lengths)


def _check_conditioning(model, kind, inputs, sizes):
    """Clear errors for the source ids / features a decoder conditions on."""
    name = "features" if kind == "conditioned_decoder" else "source_ids"
    shape = static_shape(inputs)
    if name == "source_ids":
        if len(shape) != 2:
            raise ValueError(
                "`generate` expects source ids of shape (batch, "
                f"source_length). Received: inputs.shape={shape}")
        if shape[1] == 0:
            raise ValueError(
                "`generate` needs at least one source token per row. "
                f"Received: inputs.shape={shape}")
        if name in sizes:
            check_token_ids("generate", "inputs (source_ids)", inputs,
                            sizes[name])
    else:
        spec = [t for t in model.inputs if t.name == name]
        width = spec[0].shape[-1] if spec else None
        if len(shape) != 2 or (width is not None and shape[1] != width):
            raise ValueError(
                f"`generate` expects features of shape (batch, {width}). "
                f"Received: inputs.shape={shape}")
    if shape[0] == 0:
        raise ValueError(f"`generate` needs at least one input row. "
                         f"Received: inputs.shape={shape}")


COMPILED_CACHE_SIZE = 8  # compiled decoders kept per model


def _compiled(model, run, key):
    """The XLA-compiled decoder for `key` (length, strategy, options), the
    most recently used `COMPILED_CACHE_SIZE` kept per model: every new
    option value (e.g. a sampling seed) compiles a new function, and an
    unbounded cache grew without end."""
    import collections

    import tensorflow as tf

    cache = model.__dict__.setdefault("_seqkeras_generate",
                                      collections.OrderedDict())
    if key in cache:
        cache.move_to_end(key)
    else:
        cache[key] = tf.function(run, jit_compile=True, reduce_retracing=True)
        while len(cache) > COMPILED_CACHE_SIZE:
            cache.popitem(last=False)
    return cache[key]
