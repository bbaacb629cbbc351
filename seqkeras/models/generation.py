"""Generation over the model contract: `generate(model, ...)` runs
`seqkeras.decoding` on a model's cached step.

A model generates when it implements the generation contract of
`seqkeras.models.SequenceModel`: `init_cache(inputs, batch_size,
max_length)` runs its conditioning half once, `call_with_cache(tokens,
cache, index) -> (logits, cache)` is one decoding step, and
`conditioning_input` / `prompt_input` name its inputs. Every generative
builder returns such a class, and the steps reuse the trained model's own
layers (no copies):

- `RecurrentLanguageModel` (`recurrent_language_model`): each layer's recurrent
  states;
- `TransformerLanguageModel` (`transformer_language_model`): each block's
  key/value cache;
- `RecurrentSeq2Seq` (`seq2seq`): the decoder states, plus the encoder
  outputs (computed once);
- `TransformerSeq2Seq` (`transformer_seq2seq`): self-attention key/value
  caches, cross-attention keys and values (projected once), the encoder
  outputs;
- `ConditionedDecoder` (`conditioned_decoder`): the decoder states
  (initialised from the features once).
"""

import inspect

import keras
from keras import ops

from seqkeras import decoding
from seqkeras.data.tokens import BOS, EOS, PAD
from seqkeras.layers import validation
from seqkeras.layers.validation import static_shape
from seqkeras.data.checks import check_token_ids
from seqkeras.data.sequences import length_batches

STRATEGIES = ("greedy", "beam", "sample")


def check_generative(where, model, requirement="works on models that implement"):
    """Raises a clear ValueError unless `model` implements the generation
    contract (`init_cache`, `call_with_cache`, `prompt_input`); the message
    reads "`where` `requirement` the generation contract ..."."""
    ok = (
        isinstance(model, keras.Model)
        and callable(getattr(model, "init_cache", None))
        and callable(getattr(model, "call_with_cache", None))
        and getattr(model, "generates", True)
        and getattr(model, "prompt_input", None) is not None
    )
    if not ok:
        raise ValueError(
            f"`{where}` {requirement} the generation "
            "contract of `seqkeras.models.SequenceModel` (`init_cache`, "
            "`call_with_cache`, `prompt_input`), as the generative builders' "
            "models do (recurrent_language_model, transformer_language_model, "
            "recurrent_seq2seq, transformer_seq2seq, conditioned_decoder). Received: "
            f"{getattr(model, 'name', type(model).__name__)!r} "
            f"({type(model).__name__})"
        )


def decoder_step(model):
    """`(start, step)`: the model's `init_cache` and `call_with_cache` (see
    the module docstring).

    Args:
        model: a generative model of `seqkeras.models` (or a user's
            subclass implementing the contract).

    Returns:
        The pair of bound methods.
    """
    check_generative("decoder_step", model)
    return model.init_cache, model.call_with_cache


def generate(
    model,
    inputs=None,
    prompt=None,
    max_length=32,
    strategy="greedy",
    bos_id=BOS,
    eos_id=EOS,
    pad_id=PAD,
    jit_compile="auto",
    prompt_lengths=None,
    projection_dtype=None,
    runtime=None,
    **kwargs,
):
    """Generates token ids with a model from `seqkeras.models`.

    Args:
        model: a model implementing the generation contract (see the
            module docstring): a `recurrent_language_model`,
            `transformer_language_model`, `seq2seq`, `transformer_seq2seq`,
            `conditioned_decoder`, or a user's subclass.
        inputs: what the decoder is conditioned on: source ids (batch,
            source_time) for the seq2seq models, features (batch,
            feature_dim) for `conditioned_decoder`; None for language
            models.
        prompt: int (batch, prompt_length); language models need one,
            decoders default to `[[bos_id]] * batch`.
        max_length: tokens in all, prompt included (a Transformer's
            `max_length` bounds it).
        strategy: `"greedy"`, `"beam"` or `"sample"`.
        bos_id: the first token of a decoder's default prompt (a seq2seq
            model's or `conditioned_decoder`'s; default
            `seqkeras.data.tokens.BOS`).
        eos_id: generation stops per row at this id (None: never).
        pad_id: the id written after a row's end (after its `eos_id`;
            default `seqkeras.data.tokens.PAD`).
        jit_compile: TensorFlow backend, called eagerly: True runs the
            decoding loop as one XLA-compiled graph, False as a plain
            TensorFlow graph (`tf.function`, no XLA), `"auto"` (default)
            the library's compile-mode policy
            (`seqkeras.training.choose_jit_compile(model, "generate")`: XLA
            in every precision, decoding being bound by per-op
            overhead). Inside a traced function (an export) the loop is
            part of that graph.
        prompt_lengths: greedy and sample: int (batch,), each row's prompt
            length when prompts of different lengths are right-padded to
            one width (default: all the full width).
        projection_dtype: the dtype the output projection (the tied
            embedding or the logits layer's kernel) is cast to once, before
            the decoding loop, and read in at every step. Default: the
            model's compute dtype (`mixed_bfloat16` models: bfloat16, half
            the bytes per step of float32). `"bfloat16"` on a float32
            model trades logits exact to float32 for that speed.
        runtime: None (Keras: fixed `max_length` buffers written in place)
            or a `seqkeras.decoding.Runtime`, the layout of the decoding
            state an export's target runtime needs (its cache layout,
            buffer writes and while loop).
        **kwargs: the strategy's options: `beam_width`,
            `length_penalty_alpha`, `return_all_beams` (beam);
            `temperature`, `top_k`, `top_p`, `seed` (sample).

    Returns:
        int32 (batch, max_length) ids, prompt included (beam: also the
        scores, as `seqkeras.decoding.beam_search`).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.recurrent_language_model(20, 8, cell="gru")
        >>> ids = seqkeras.models.generate(model, prompt=np.array([[5, 6]]),
        ...                                max_length=6, strategy="sample",
        ...                                top_k=3, seed=1)
        >>> np.asarray(ids).shape
        (1, 6)
    """
    check_generative("generate", model)
    conditioning = getattr(model, "conditioning_input", None)
    if strategy not in STRATEGIES:
        raise ValueError(
            "`generate` received an invalid value for `strategy`: expected "
            f"one of {STRATEGIES}. Received: strategy={strategy!r}"
        )
    decoding.check_strategy_options("generate", strategy, kwargs)
    sizes = getattr(model, "vocabulary_sizes", {})
    prompt_input = model.prompt_input
    kind = type(model).__name__
    if conditioning is None:
        if prompt is None:
            raise ValueError(
                f"`generate` on a {kind} needs a `prompt` (batch, prompt_length) of token ids"
            )
        batch = ops.shape(prompt)[0]
    else:
        if inputs is None:
            raise ValueError(f"`generate` on a {kind} needs `inputs` (its `{conditioning}`)")
        _check_conditioning(model, conditioning, inputs, sizes)
        batch = ops.shape(inputs)[0]
        if prompt is None:
            prompt = ops.full((batch, 1), bos_id, "int32")
        else:
            rows, given = static_shape(prompt), static_shape(inputs)
            if None not in (rows[0], given[0]) and rows[0] != given[0]:
                raise ValueError(
                    f"`generate`: the prompt has {rows[0]} rows and `inputs` "
                    f"{given[0]}; give one prompt row per input row. "
                    f"Received: prompt.shape={rows}, inputs.shape={given}"
                )
    if prompt_input in sizes:
        check_token_ids("generate", "prompt", prompt, sizes[prompt_input])
    vocab = model.outputs[0].shape[-1] if model.outputs else None
    for arg in ("top_k", "beam_width"):  # at most one per token
        value = kwargs.get(arg)
        if vocab is not None and validation.is_integer(value) and value > vocab:
            raise ValueError(
                f"`generate` received {arg}={value}, more than the model's "
                f"{vocab} tokens; use {arg} <= {vocab}"
            )
    limit = getattr(model, "max_generation_length", None)
    if limit is not None and max_length > limit:
        raise ValueError(
            f"`generate`: max_length={max_length} is more than the "
            f"model's {limit} learned positions"
        )
    runtime = decoding._runtime("generate", runtime)
    start = model_start(model)

    if projection_dtype is None:
        projection_dtype = model.dtype_policy.compute_dtype
    elif projection_dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(
            "`generate` received an invalid value for `projection_dtype`: "
            'expected None, "float32", "bfloat16" or "float16". '
            f"Received: projection_dtype={projection_dtype!r}"
        )

    def run(inputs, prompt, lengths):
        # the step's weights laid out once, outside the loop, and passed to
        # every step (a value, like the cache)
        step = model_step(model, projection_dtype)
        cache = start(inputs, ops.shape(prompt)[0], max_length, runtime.cache_layout)
        split_step, cache, shared = split_cache(model, step, cache)
        options = dict(eos_id=eos_id, pad_id=pad_id, shared=shared, runtime=runtime, **kwargs)
        if prefill:
            cache, options["start"] = prefill_prompt(step, prompt, cache, given, lengths, compiled)
        if strategy == "greedy":
            return decoding.greedy(
                split_step, prompt, cache, max_length, prompt_lengths=lengths, **options
            )
        if strategy == "beam":
            return decoding.beam_search(
                split_step, prompt, cache, max_length, compiled=compiled, **options
            )
        return decoding.sample(
            split_step, prompt, cache, max_length, prompt_lengths=lengths, **options
        )

    # Argument errors surface before tracing.
    if strategy == "sample":
        decoding.check_sampling(name="generate", **kwargs)
    elif strategy == "beam":
        decoding.check_beam(name="generate", **kwargs)
    prompt = ops.convert_to_tensor(prompt, "int32")
    decoding.check_prompt("generate", prompt, max_length)
    # greedy or sampling, a model whose step takes several tokens: the
    # prompt (with `prompt_lengths`, the part every row has) is prefilled
    # in one pass
    given = prompt_lengths is not None
    prefill = (
        strategy != "beam"
        and getattr(model, "prefills", False)
        and getattr(model, "shared_cache_index", None) is None
    )
    if prompt_lengths is None:
        prompt_lengths = ops.full((ops.shape(prompt)[0],), ops.shape(prompt)[1], "int32")
    elif strategy == "beam":
        raise ValueError(
            "`generate`: beam search takes prompts of one "
            "length; `prompt_lengths` is for greedy and sample"
        )
    else:
        prompt_lengths = ops.convert_to_tensor(prompt_lengths, "int32")
        if tuple(prompt_lengths.shape) != tuple(prompt.shape[:1]):
            raise ValueError(
                "`generate` expects `prompt_lengths` of shape (batch,), one "
                "length per prompt row. Received: prompt_lengths.shape="
                f"{tuple(prompt_lengths.shape)}, prompt.shape="
                f"{tuple(prompt.shape)}"
            )
    jit = _jit_choice(model, jit_compile)  # validated on every backend and in every context
    if runtime.while_loop is not None and jit and _executing_eagerly():
        raise ValueError(
            "`generate`: a `runtime` whose loop state may change shape (its `while_loop`, "
            "e.g. TF Serving's) does not compile with XLA; pass jit_compile=False. Received: "
            f"jit_compile={jit_compile!r}"
        )
    # the loop is compiled: XLA (TensorFlow), jax.jit (JAX)
    compiled = jit or keras.backend.backend() == "jax"
    if keras.backend.backend() == "tensorflow" and _executing_eagerly():
        key = (max_length, strategy, eos_id, pad_id, projection_dtype, jit, prefill, given, runtime)
        run = _compiled(model, run, key + (tuple(sorted(kwargs.items())),), jit)
    inputs = ops.zeros((1,)) if inputs is None else inputs
    return run(ops.convert_to_tensor(inputs), prompt, prompt_lengths)


def prefill_prompt(step, prompt, cache, given, lengths, compiled):
    """`(cache, start)`: the prompt's first `start` positions fed to the
    model's `step` in one pass (a prefill), the decoding loop to go on
    from position `start`.

    One prompt length (`given` False): all but the last token, `start =
    width - 1`. Prompts of different lengths, right-padded (`lengths`,
    (batch,)): the positions every row has, `start = min(lengths) - 1`,
    the longer rows' remaining prompt tokens forced by the loop, step by
    step; every prefilled position is a real token, so no mask is needed.
    A width or a `start` known only when the graph runs (a served
    signature) is prefilled with a graph-time size, where the loop is
    not XLA-compiled (XLA compiles static shapes: there only a static
    width is prefilled)."""
    width = static_shape(prompt)[1]
    if not given and width is not None:
        if width < 2:
            return cache, 0
        _, cache = step(prompt[:, : width - 1], cache, 0)
        return cache, width - 1
    if compiled:
        return cache, 0
    if given:
        shortest = ops.minimum(ops.min(lengths), ops.shape(prompt)[1])
        start = ops.maximum(shortest - 1, 0)
    else:
        start = ops.shape(prompt)[1] - 1
    start = ops.cast(start, "int32")

    def fed():
        return step(prompt[:, :start], cache, 0)[1]

    return ops.cond(start > 0, fed, lambda: cache), start


def _takes(fn, argument):
    """Whether `fn` accepts the keyword `argument` (a user's subclass may
    implement the contract without the optional arguments)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return argument in parameters or any(
        p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def model_start(model):
    """`start(inputs, batch_size, max_length, layout)`: the model's
    `init_cache`, the layout passed on. A model whose `init_cache` takes
    no `layout` (a user's subclass written before it) keeps the caches it
    makes: recurrent states need none; key/value caches it makes as plain
    tuples are `"fixed"` buffers (TF Serving's audit,
    `seqkeras.export.assert_servable`, then names their XLA-only writes)."""
    if _takes(model.init_cache, "layout"):
        return model.init_cache

    def start(inputs, batch_size, max_length, layout):
        return model.init_cache(inputs, batch_size, max_length)

    return start


def model_step(model, projection_dtype=None):
    """`step(tokens, cache, index) -> (logits, cache)`: the model's
    `call_with_cache` with its step weights (`prepare_step_weights`, the
    output matrix cast to `projection_dtype`) made once, here, and passed
    to every step; a model without them steps on its variables."""
    prepare = getattr(model, "prepare_step_weights", None)
    if not callable(prepare) or not _takes(model.call_with_cache, "step_weights"):
        return model.call_with_cache
    weights = prepare(projection_dtype or model.dtype_policy.compute_dtype)

    def step(tokens, cache, index):
        return model.call_with_cache(tokens, cache, index, step_weights=weights)

    return step


def split_cache(model, step, cache):
    """`(step, cache, shared)`: a model whose `shared_cache_index` is `n`
    has `cache[n:]` (the encoder outputs, their projected keys and values,
    the source mask) the same for every decoded row of a source; the
    decoding loops carry it as `shared` (never repeated for the beams,
    never reordered; finished sources leave it) and `cache[:n]` as the
    cache. `step(tokens, cache, index, shared)` runs the model's
    `call_with_cache` on the whole. Other models: `shared` is None."""
    n = getattr(model, "shared_cache_index", None)
    if n is None or n >= len(cache):
        return step, cache, None

    def shared_step(tokens, varying, index, shared):
        logits, full = step(tokens, list(varying) + list(shared), index)
        return logits, list(full[:n])

    return shared_step, list(cache[:n]), list(cache[n:])


def _check_conditioning(model, name, inputs, sizes):
    """Clear errors for the source ids / features a decoder conditions on
    (its input `name`)."""
    shape = static_shape(inputs)
    spec = [t for t in model.inputs if t.name == name]
    ids = bool(spec) and "int" in str(spec[0].dtype)
    if ids:
        if len(shape) != 2:
            raise ValueError(
                "`generate` expects source ids of shape (batch, "
                f"source_length). Received: inputs.shape={shape}"
            )
        if shape[1] == 0:
            raise ValueError(
                "`generate` needs at least one source token per row. "
                f"Received: inputs.shape={shape}"
            )
        if name in sizes:
            check_token_ids("generate", f"inputs ({name})", inputs, sizes[name])
    else:
        width = spec[0].shape[-1] if spec else None
        if len(shape) != 2 or (width is not None and shape[1] != width):
            raise ValueError(
                f"`generate` expects features of shape (batch, {width}). "
                f"Received: inputs.shape={shape}"
            )
    if shape[0] == 0:
        raise ValueError(f"`generate` needs at least one input row. Received: inputs.shape={shape}")


COMPILED_CACHE_SIZE = 8  # compiled decoders kept per model


def _executing_eagerly():
    """TensorFlow runs this call eagerly (not while tracing an export)."""
    import tensorflow as tf

    return tf.executing_eagerly()


def _jit_choice(model, jit_compile):
    """`generate`'s `jit_compile` as a bool ("auto": the library's
    compile-mode policy for generation, `choose_jit_compile`)."""
    if jit_compile == "auto":
        from seqkeras.models.tasks import choose_jit_compile

        return choose_jit_compile(model, purpose="generate")[0]
    if not isinstance(jit_compile, bool):
        raise ValueError(
            "`generate` received an invalid value for `jit_compile`: expected True, False or "
            f'"auto". Received: jit_compile={jit_compile!r}'
        )
    return jit_compile


def _compiled(model, run, key, jit_compile=True):
    """The traced (XLA-compiled with `jit_compile`) decoder for `key`
    (length, strategy, options), the most recently used
    `COMPILED_CACHE_SIZE` kept per model (`seqkeras._traced`): every new
    option value (e.g. a sampling seed) compiles a new function, and an
    unbounded cache grew without end."""
    import functools

    import tensorflow as tf

    from seqkeras import _traced

    # one function per key, each traced for its own shapes: through a
    # `functools.partial` (no `__code__`), TensorFlow's retracing warning
    # counts each function's own traces, not those of every `run` closure
    # (one code object) as retraces of one function
    return _traced.cached(
        model,
        "generate",
        key,
        lambda: tf.function(
            functools.partial(run), jit_compile=jit_compile, reduce_retracing=True, autograph=False
        ),
        max_size=COMPILED_CACHE_SIZE,
    )


def translate_texts(
    model,
    texts,
    source_tokenizer,
    target_tokenizer,
    max_length,
    source_length=None,
    beam_width=1,
    length_penalty_alpha=0.0,
    batch_size=64,
):
    """Strings in, strings out, in order: `texts` encoded by
    `source_tokenizer` (EOS added; cut at `source_length` tokens), sorted
    by length and decoded `batch_size` at a time (each batch padded to
    `batch_size` rows and a multiple of 8 tokens: few compiled shapes) by
    `generate` (greedy, or beam search when `beam_width` > 1), then
    detokenized by `target_tokenizer`. The tokenizers are objects with
    `encode(strings, add_eos=...)` (ragged ids) and `decode(ids)` (e.g.
    `seqkeras.data.SubwordTokenizer`).

    Args:
        model: a seq2seq model of `seqkeras.models`.
        texts: the source strings.
        source_tokenizer: encodes the sources.
        target_tokenizer: decodes the outputs.
        max_length: output tokens in all, BOS and EOS included.
        source_length: sources longer than this many tokens are cut (None:
            the model's own bound, or no cut).
        beam_width: 1 for greedy decoding, more for beam search.
        length_penalty_alpha: beam search's GNMT length penalty (0: none).
        batch_size: sources per `generate` call.

    Returns:
        `(strings, cut)`: the translations, and how many sources were
        longer than `source_length` tokens (cut there).

    Examples:
        >>> import seqkeras
        >>> from seqkeras.data import SubwordTokenizer
        >>> tok = SubwordTokenizer.train(["ein hund", "a dog"], 40)
        >>> model = seqkeras.models.recurrent_seq2seq(tok.vocabulary_size,
        ...                                 tok.vocabulary_size, units=8)
        >>> out, cut = seqkeras.models.translate_texts(
        ...     model, ["ein hund", "hund"], tok, tok, max_length=5)
        >>> len(out), all(isinstance(s, str) for s in out), cut
        (2, True, 0)
    """
    import numpy as np

    if isinstance(texts, str):
        raise TypeError("`translate_texts` expects `texts` to be a list of strings, not a str")
    for arg, value in (
        ("batch_size", batch_size),
        ("beam_width", beam_width),
        ("max_length", max_length),
    ):
        validation.positive_int("translate_texts", arg, value)
    if source_length is not None:
        validation.positive_int("translate_texts", "source_length", source_length)
    rows = [list(r) for r in source_tokenizer.encode(list(texts), add_eos=True).numpy()]
    cut = 0
    if source_length is not None:
        cut = sum(len(r) > source_length for r in rows)
        rows = [r[:source_length] for r in rows]
    out = [None] * len(rows)
    for chunk, given in length_batches(rows, batch_size, source_length):
        x = np.full((batch_size, given.shape[1]), PAD, "int32")  # one batch shape: one program
        x[:, 0] = EOS  # padding rows: an empty sentence
        x[: len(chunk)] = given
        if beam_width > 1:
            y, _ = generate(
                model,
                x,
                max_length=max_length,
                strategy="beam",
                beam_width=beam_width,
                length_penalty_alpha=length_penalty_alpha,
            )
        else:
            y = generate(model, x, max_length=max_length)
        strings = target_tokenizer.decode(np.asarray(y)[: len(chunk), 1:]).numpy()  # no BOS
        for j, i in enumerate(chunk):
            out[i] = strings[j].decode("utf-8")
    return out, cut
