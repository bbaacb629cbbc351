"""Decoding over a step function: greedy, beam search, and sampling with
temperature, top-k and top-p (nucleus).

Every strategy drives one step function

    step_fn(tokens, cache, index) -> (logits, cache)

where `tokens` (batch,) are the ids at position `index`, `cache` is any
nest of tensors whose leading dimension is the batch (RNN states, a
Transformer's key/value cache, encoder outputs), and `logits`
(batch, vocab) score the token at position `index + 1`. The whole loop is
one `keras.ops.while_loop` with fixed shapes, so it compiles with XLA and
traces into a SavedModel signature.

Prompts are (batch, prompt_length) id arrays (for a seq2seq decoder, the
BOS token); greedy decoding and sampling also take prompts of different
lengths, right-padded, with `prompt_lengths` (beam search: one length).
Prompt tokens are fed through the step function first (filling the
cache); generation starts after the prompt and stops at `max_length`
tokens in all (prompt included). After a row emits `eos_id` it is
finished: it stays EOS and is padded with `pad_id` from then on.

Why not `keras_hub.samplers`: its samplers advance a `next(prompt, cache,
index)` callback that also returns hidden states and expects a prompt
mask; they stop only when every row has ended and leave the tokens after
an end token for the caller to mask; `BeamSampler` has no length penalty
and returns no scores unless all beams are asked for; and their random
draws come from a stateful `SeedGenerator`, so an exported signature gives
different samples on each call for the same seed. Here a seed is an
argument (stateless draws: the same seed gives the same samples, also in
an export), EOS stops and pads each row, and beam search applies GNMT's
length penalty and returns log-probabilities.
"""

import collections

import numpy as np
from keras import ops
from keras import tree

from seqkeras.layers import state as state_values
from seqkeras.layers import validation

__all__ = ["greedy", "sample", "beam_search", "length_penalty", "choose_token", "Runtime"]


class Runtime(collections.namedtuple("Runtime", ["cache_layout", "buffer_writes", "while_loop"])):
    """Where a decoding loop runs, as a value the caller passes (never a
    mode a layer reads): how the model's key/value caches are laid out,
    how the token buffer is written, and which while loop drives the
    steps.

    Args:
        cache_layout: the key/value caches' layout, passed to the model's
            `init_cache(..., layout=)` (`seqkeras.layers.state`):
            `"fixed"` (default), `"scatter"` or `"growing"`.
        buffer_writes: how the (batch, max_length) token buffer is
            written: `"fixed"` (`keras.ops.slice_update`, default) or
            `"scatter"` (`keras.ops.scatter_update`: standard TensorFlow
            ops, for TF Serving).
        while_loop: None (`keras.ops.while_loop`, fixed loop-state
            shapes), or `loop(cond, body, loop_vars)` whose loop state may
            change shape between iterations (`seqkeras.export`'s serving
            loop): then a finished row leaves the loop state at the step it
            ends.

    Examples:
        >>> from seqkeras import decoding
        >>> decoding.Runtime().cache_layout
        'fixed'
    """

    __slots__ = ()

    def __new__(cls, cache_layout="fixed", buffer_writes="fixed", while_loop=None):
        state_values.check_layout("Runtime", cache_layout, "cache_layout")
        if buffer_writes not in ("fixed", "scatter"):
            raise ValueError(
                "`Runtime` received an invalid value for `buffer_writes`: expected "
                f"'fixed' or 'scatter'. Received: buffer_writes={buffer_writes!r}"
            )
        if while_loop is not None and not callable(while_loop):
            raise TypeError(
                "`Runtime` expects `while_loop` None or a function `loop(cond, body, "
                f"loop_vars)`. Received: {type(while_loop).__name__}"
            )
        return super().__new__(cls, cache_layout, buffer_writes, while_loop)

    @property
    def dynamic_shapes(self):
        """Whether the loop state may change shape (a `while_loop` given)."""
        return self.while_loop is not None

    def loop(self, cond, body, loop_vars):
        """Runs the while loop (see `while_loop`)."""
        if self.while_loop is None:
            return ops.while_loop(cond, body, loop_vars)
        return self.while_loop(cond, body, loop_vars)


#: Keras, XLA and TFLite: fixed caches, slice updates, `keras.ops.while_loop`.
DEFAULT_RUNTIME = Runtime()


def _runtime(name, runtime):
    if runtime is None:
        return DEFAULT_RUNTIME
    if not isinstance(runtime, Runtime):
        raise TypeError(
            f"`{name}` expects `runtime` None or a `seqkeras.decoding.Runtime`. "
            f"Received: {type(runtime).__name__}"
        )
    return runtime


def check_prompt(name, prompt, max_length):
    """Raises a clear ValueError for a bad prompt or max_length (and a
    TypeError for a prompt that holds no ids: text, or floats that are
    not whole numbers)."""
    validation.numeric(name, "prompt", prompt)
    validation.whole_numbers(name, "prompt", prompt)
    validation.ids_in_range(name, "prompt", prompt)
    shape = tuple(prompt.shape)
    if len(shape) != 2:
        raise ValueError(
            f"`{name}` expects `prompt` of shape (batch, prompt_length). "
            f"Received: prompt.shape={shape}"
        )
    if not validation.is_integer(max_length) or max_length <= 0:
        raise ValueError(
            f"`{name}` received an invalid value for `max_length`: expected "
            f"a positive integer. Received: max_length={max_length!r}"
        )
    if shape[1] is not None and shape[1] > max_length:
        raise ValueError(
            f"`{name}`: the prompt ({shape[1]} tokens) is longer than max_length={max_length}"
        )
    if shape[1] is not None and shape[1] == 0:
        raise ValueError(f"`{name}` needs at least one prompt token (e.g. BOS)")
    if shape[0] is not None and shape[0] == 0:
        raise ValueError(f"`{name}` needs at least one prompt row. Received: prompt.shape={shape}")


def check_special_ids(name, eos_id, pad_id):
    """Raises a clear error unless `eos_id` is None or an id and `pad_id`
    an id (an integer >= 0, or a scalar integer tensor of a served
    graph)."""
    for arg, value in (("eos_id", eos_id), ("pad_id", pad_id)):
        if (arg == "eos_id" and value is None) or _is_integer_scalar(value):
            continue
        validation.non_negative_int(name, arg, value)


def check_prompt_lengths(name, prompt_lengths, prompt):
    """Raises a ValueError naming `name` unless `prompt_lengths` is one
    length per prompt row (where both are known)."""
    shape = validation.static_shape(prompt_lengths)
    rows = validation.static_shape(prompt)[0]
    if len(shape) != 1 or (None not in (shape[0], rows) and shape[0] != rows):
        raise ValueError(
            f"`{name}` expects `prompt_lengths` of shape (batch,) = ({rows},), one length "
            f"per prompt row. Received: prompt_lengths.shape={shape}"
        )
    validation.whole_numbers(name, "prompt_lengths", prompt_lengths)


def check_sampling(temperature=1.0, top_k=None, top_p=None, seed=0, name="sample"):
    """Raises a clear ValueError for bad sampling arguments (the message
    names the function `name`)."""
    if not validation.is_finite_number(temperature) or temperature < 0:
        raise ValueError(
            f"`{name}` received an invalid value for `temperature`: expected "
            f"a finite number >= 0. Received: temperature={temperature!r}"
        )
    if top_k is not None and (not validation.is_integer(top_k) or top_k <= 0):
        raise ValueError(
            f"`{name}` received an invalid value for `top_k`: expected a "
            f"positive integer or None. Received: top_k={top_k!r}"
        )
    if top_p is not None and (not validation.is_finite_number(top_p) or not 0 < top_p <= 1):
        raise ValueError(
            f"`{name}` received an invalid value for `top_p`: expected a "
            f"number in (0, 1] or None. Received: top_p={top_p!r}"
        )
    if not validation.is_integer(seed) and not _is_integer_scalar(seed):
        raise ValueError(
            f"`{name}` received an invalid value for `seed`: "
            f"expected an integer (or a scalar integer tensor). Received: seed={seed!r}"
        )


def _is_integer_scalar(x):
    """A scalar tensor of an integer dtype (a served graph's `seed`
    input)."""
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None or len(shape) != 0 or isinstance(x, np.ndarray):
        return False
    from keras import backend

    return "int" in backend.standardize_dtype(dtype)


def check_beam(beam_width=4, length_penalty_alpha=0.0, return_all_beams=False, name="beam_search"):
    """Raises a clear ValueError for bad beam-search arguments (the message
    names the function `name`)."""
    if not validation.is_integer(beam_width) or beam_width <= 0:
        raise ValueError(
            f"`{name}` received an invalid value for `beam_width`: "
            "expected a positive integer. Received: "
            f"beam_width={beam_width!r}"
        )
    if not validation.is_finite_number(length_penalty_alpha) or length_penalty_alpha < 0:
        raise ValueError(
            f"`{name}` received an invalid value for "
            "`length_penalty_alpha`: expected a finite number >= 0. "
            f"Received: length_penalty_alpha={length_penalty_alpha!r}"
        )
    if not isinstance(return_all_beams, (bool, np.bool_)):
        raise ValueError(
            f"`{name}` received an invalid value for `return_all_beams`: "
            f"expected a bool. Received: return_all_beams={return_all_beams!r}"
        )


#: The options each strategy takes (anything else is refused by `generate`).
STRATEGY_OPTIONS = {
    "greedy": (),
    "beam": ("beam_width", "length_penalty_alpha", "return_all_beams"),
    "sample": ("temperature", "top_k", "top_p", "seed"),
}


def check_strategy_options(name, strategy, options):
    """Raises a clear ValueError for options that `strategy` does not take
    (e.g. `top_k` with greedy decoding)."""
    allowed = STRATEGY_OPTIONS[strategy]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        owners = [s for s, keys in STRATEGY_OPTIONS.items() if unknown[0] in keys]
        hint = f"; `{unknown[0]}` is an option of strategy={owners[0]!r}" if owners else ""
        raise ValueError(
            f"`{name}` with strategy={strategy!r} takes "
            f"{', '.join(allowed) if allowed else 'no options'}. Received: "
            f"{', '.join(f'{k}={options[k]!r}' for k in unknown)}{hint}"
        )


def _buffer(prompt, max_length, pad_id, runtime):
    batch, length = ops.shape(prompt)[0], ops.shape(prompt)[1]
    tokens = ops.full((batch, max_length), pad_id, "int32")
    prompt = ops.cast(prompt, "int32")
    return state_values.write(tokens, (0, 0), prompt, runtime.buffer_writes), length


def _write(tokens, index, values, runtime):
    return state_values.write(tokens, (0, index), ops.expand_dims(values, 1), runtime.buffer_writes)


def _with_shared(step_fn, shared):
    """`step(tokens, cache, index, shared)` from a step function that takes
    `shared` (given) or not (None)."""
    if shared is None:
        return lambda tokens, cache, index, shared: step_fn(tokens, cache, index)
    return step_fn


def _take(nest, rows):
    return tree.map_structure(lambda x: ops.take(x, rows, axis=0), nest)


def _nonzero(x):
    """int32 indices of the True entries of a bool vector."""
    return ops.cast(ops.reshape(ops.nonzero(x)[0], (-1,)), "int32")


def _decode(
    name,
    step_fn,
    prompt,
    cache,
    max_length,
    eos_id,
    pad_id,
    choose,
    extra,
    prompt_lengths=None,
    shared=None,
    compact=False,
    start=0,
    runtime=None,
):
    """The loop shared by greedy decoding and sampling; `choose(logits,
    index, extra) -> (next_tokens, extra)`. `compact` (greedy where the
    loop state may change shape, `runtime.dynamic_shapes`): a row
    leaves the loop state at the step it ends. `start`: the positions
    already in `cache` (a prefilled prompt; fewer than every row's
    prompt): the loop begins by feeding `prompt[:, start]`."""
    prompt = ops.convert_to_tensor(prompt)
    check_prompt(name, prompt, max_length)
    check_special_ids(name, eos_id, pad_id)
    width = prompt.shape[1]
    # a graph-time start is the caller's
    if validation.is_integer(start) or not hasattr(start, "shape"):
        start = validation.non_negative_int(name, "start", start)
    if validation.is_integer(start) and width is not None and start >= width:
        raise ValueError(
            f"`{name}` expects `start` (the prompt positions already in the cache) below the "
            f"prompt's {width} tokens. Received: start={start}"
        )
    runtime = _runtime(name, runtime)
    tokens, prompt_length = _buffer(prompt, max_length, pad_id, runtime)
    batch = ops.shape(tokens)[0]
    prompt_length = ops.full((batch,), prompt_length, "int32")
    if prompt_lengths is not None:  # per row: (batch,)
        check_prompt_lengths(name, prompt_lengths, prompt)
        prompt_length = ops.maximum(
            ops.minimum(ops.cast(prompt_lengths, "int32"), prompt_length), 1
        )
    step = _with_shared(step_fn, shared)
    shared = () if shared is None else shared
    if max_length == 1:
        return tokens

    def advance(index, tokens, cache, shared, lengths, extra):
        """One step: `(cache, extra, in_prompt, forced, chosen)`, per row
        whether position `index + 1` is still the prompt, its prompt token
        and the token chosen."""
        logits, cache = step(ops.take(tokens, index, axis=1), cache, index, shared)
        chosen, extra = choose(ops.cast(logits, "float32"), index, extra)
        in_prompt = index + 1 < lengths
        forced = ops.take(tokens, ops.minimum(index + 1, max_length - 1), axis=1)
        return cache, extra, in_prompt, forced, chosen

    if compact and eos_id is not None:

        def cond(index, tokens, cache, shared, lengths, alive, out, extra):
            return ops.logical_and(index < max_length - 1, ops.shape(tokens)[0] > 0)

        def body(index, tokens, cache, shared, lengths, alive, out, extra):
            cache, extra, in_prompt, forced, chosen = advance(
                index, tokens, cache, shared, lengths, extra
            )
            tokens = _write(tokens, index + 1, ops.where(in_prompt, forced, chosen), runtime)
            ended = ops.logical_and(ops.logical_not(in_prompt), ops.equal(chosen, eos_id))
            state = (tokens, cache, shared, lengths, alive, out)

            def leave():  # the ended rows' answers out, the rest on
                gone, kept = _nonzero(ended), _nonzero(ops.logical_not(ended))
                written = ops.scatter_update(
                    out, ops.expand_dims(ops.take(alive, gone), 1), ops.take(tokens, gone, axis=0)
                )
                return _take((tokens, cache, shared, lengths, alive), kept) + (written,)

            state = ops.cond(ops.any(ended), leave, lambda: state)
            return (index + 1,) + tuple(state) + (extra,)

        out = ops.full((batch, max_length), pad_id, "int32")
        state = (start, tokens, cache, shared, prompt_length, ops.arange(batch, dtype="int32"))
        _, tokens, _, _, _, alive, out, _ = runtime.loop(cond, body, state + (out, extra))
        return ops.scatter_update(out, ops.expand_dims(alive, 1), tokens)

    done = ops.zeros((batch,), "bool")

    def cond(index, tokens, cache, done, extra):
        return ops.logical_and(index < max_length - 1, ops.logical_not(ops.all(done)))

    def body(index, tokens, cache, done, extra):
        cache, extra, in_prompt, forced, chosen = advance(
            index, tokens, cache, shared, prompt_length, extra
        )
        nxt = ops.where(in_prompt, forced, ops.where(done, pad_id, chosen))
        if eos_id is not None:
            done = ops.logical_or(
                done, ops.logical_and(ops.logical_not(in_prompt), ops.equal(nxt, eos_id))
            )
        return index + 1, _write(tokens, index + 1, nxt, runtime), cache, done, extra

    _, tokens, _, _, _ = runtime.loop(cond, body, (start, tokens, cache, done, extra))
    return tokens


def greedy(
    step_fn,
    prompt,
    cache,
    max_length,
    eos_id=None,
    pad_id=0,
    prompt_lengths=None,
    shared=None,
    start=0,
    runtime=None,
):
    """Greedy decoding: `y_t = argmax_y P(y | y_<t)`.

    Where the loop state may change shape (a `runtime` with a
    `while_loop`: graphs traced for TF Serving), a row leaves the loop at
    the step it emits `eos_id`, and the loop ends when no row is left.

    Args:
        step_fn: `(tokens, cache, index) -> (logits, cache)`, or with
            `shared`, `(tokens, cache, index, shared) -> (logits, cache)`.
        prompt: int (batch, prompt_length), e.g. `[[BOS]] * batch`.
        cache: the step function's initial cache (a nest of tensors).
        max_length: tokens in all, prompt included.
        eos_id: the end token, or None.
        pad_id: written after EOS.
        prompt_lengths: optional int (batch,): each row's prompt length, for
            prompts of different lengths right-padded to one width (a row
            generates from its own length on; at least 1 token is fed).
            Default: every row's prompt is the full width.
        shared: optional nest of tensors, batch-leading, that the step
            reads and never changes (e.g. an encoder's keys and values):
            carried beside the cache, passed to `step_fn`.
        start: how many of the prompt's first positions `cache` already
            holds (a prompt prefilled in one pass); the loop begins by
            feeding `prompt[:, start]`. Below every row's prompt length.
        runtime: a `Runtime` (how the token buffer is written, which
            while loop runs); default `keras.ops` with fixed shapes.

    Returns:
        int32 (batch, max_length): the prompt followed by the generated ids.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from seqkeras import decoding
        >>> def step(tokens, cache, index):  # always predicts token + 1
        ...     return ops.one_hot(tokens + 1, 6), cache
        >>> np.asarray(decoding.greedy(step, np.array([[1]]), (), max_length=5,
        ...                            eos_id=4)).tolist()
        [[1, 2, 3, 4, 0]]
    """

    def choose(logits, index, extra):
        return ops.cast(ops.argmax(logits, axis=-1), "int32"), extra

    return _decode(
        "greedy",
        step_fn,
        prompt,
        cache,
        max_length,
        eos_id,
        pad_id,
        choose,
        ops.zeros((), "int32"),
        prompt_lengths,
        shared,
        compact=_runtime("greedy", runtime).dynamic_shapes,
        start=start,
        runtime=runtime,
    )


_CHUNK = 64  # vocabulary chunk for the two-level top-k
_SMALL_K = 64  # up to this k, top-k avoids `top_k` (a full sort on CPU XLA)
_BISECTIONS = 24  # top-p threshold search: exact up to max_p / 2 ** 24


def _largest(values, k):
    """Indices (batch, k) of the k largest entries, by k rounds of argmax
    (XLA on CPU lowers `top_k` inside a while loop to a full sort: 57 ms
    for 8 x 50,257 logits; this is well under a millisecond for small k)."""
    width = ops.shape(values)[-1]
    picked = []
    for _ in range(k):
        i = ops.argmax(values, axis=-1)
        picked.append(i)
        values = ops.where(ops.one_hot(i, width) > 0, -float("inf"), values)
    return ops.stack(picked, axis=1)


def _top_k_candidates(logits, k):
    """`(values, ids)` (batch, k * 64): the 64-token chunks holding the k
    largest logits (the top k lie in the k chunks with the largest
    maxima), with the logits below the k-th largest set to -inf."""
    batch, vocab = ops.shape(logits)[0], logits.shape[-1]
    n = -(-vocab // _CHUNK)
    padded = ops.pad(logits, ((0, 0), (0, n * _CHUNK - vocab)), constant_values=-float("inf"))
    chunks = ops.reshape(padded, (batch, n, _CHUNK))
    best = _largest(ops.max(chunks, axis=-1), k)  # (batch, k) chunk ids
    rows = ops.expand_dims(ops.arange(batch) * n, 1)
    flat = ops.reshape(best + rows, (-1,))
    values = ops.reshape(
        ops.take(ops.reshape(chunks, (-1, _CHUNK)), flat, axis=0), (batch, k * _CHUNK)
    )
    ids = ops.reshape(ops.expand_dims(best, -1) * _CHUNK + ops.arange(_CHUNK), (batch, k * _CHUNK))
    kth = ops.take_along_axis(values, _largest(values, k)[:, -1:], axis=1)
    values = ops.where(values < kth, -float("inf"), values)
    return values, ids


def _top_p_filter(logits, top_p):
    """Logits outside the nucleus set to -inf: the nucleus is {p >= t} for
    the largest t whose kept mass reaches top_p, found by bisection (a sort
    would cost as much as `top_k` does)."""
    probs = ops.softmax(logits, axis=-1)
    lo = ops.zeros_like(probs[:, :1])
    hi = ops.max(probs, axis=-1, keepdims=True)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        mass = ops.sum(ops.where(probs >= mid, probs, 0.0), axis=-1, keepdims=True)
        ok = mass >= top_p
        lo, hi = ops.where(ok, mid, lo), ops.where(ok, hi, mid)
    return ops.where(probs >= lo, logits, -float("inf"))


def _choose_sample(logits, top_k, top_p, seed, step):
    """One draw per row from softmax(logits) restricted to top-k / top-p:
    Gumbel-max over the kept logits (an exact draw from their softmax)."""
    ids = None
    vocab = logits.shape[-1]
    if top_k is not None and vocab is not None and top_k >= vocab:
        top_k = None  # every token kept (clamped, as Hugging Face's top-k does)
    # the chunked top-k needs k distinct chunks (a vocabulary of fewer than
    # k * 64 tokens has fewer: the same chunk would be picked twice)
    if top_k is not None and top_k <= _SMALL_K and top_k < vocab and -(-vocab // _CHUNK) >= top_k:
        logits, ids = _top_k_candidates(logits, top_k)
    elif top_k is not None:
        kth = ops.top_k(logits, top_k)[0][:, -1:]
        logits = ops.where(logits < kth, -float("inf"), logits)
    if top_p is not None and top_p < 1.0:
        logits = _top_p_filter(logits, top_p)
    noise = _uniform(ops.shape(logits), seed, step)
    pick = ops.argmax(logits - ops.log(-ops.log(noise)), axis=-1)
    if ids is not None:
        pick = ops.take_along_axis(ids, ops.expand_dims(pick, 1), axis=1)[:, 0]
    return ops.cast(pick, "int32")


def choose_token(logits, index, temperature=0.0, top_k=None, top_p=None, seed=0):
    """The next token of each row, exactly as `greedy` (temperature 0) and
    `sample` choose it from the logits of position `index`: one function,
    so that a caller that runs its own loop (`ChatSession`) draws the same
    tokens as `generate` and the served signatures for the same seed.

    Args:
        logits: float (batch, vocab), the scores of the token at `index +
            1`.
        index: int, the position of the token those logits follow (the
            draw depends on it and on `seed`, statelessly).
        temperature, top_k, top_p, seed: as `sample`'s.

    Returns:
        int32 (batch,).

    Examples:
        >>> import numpy as np
        >>> from seqkeras import decoding
        >>> np.asarray(decoding.choose_token(np.array([[0.1, 3.0, 0.2]]), 0)).tolist()
        [1]
    """
    check_sampling(temperature, top_k, top_p, seed, name="choose_token")
    logits = ops.cast(ops.convert_to_tensor(logits), "float32")
    if len(logits.shape) != 2:
        raise ValueError(
            "`choose_token` expects `logits` of shape (batch, vocab). Received: "
            f"logits.shape={tuple(logits.shape)}"
        )
    if temperature == 0:
        return ops.cast(ops.argmax(logits, axis=-1), "int32")
    seed = ops.convert_to_tensor(seed, "int32")
    index = ops.convert_to_tensor(index, "int32")
    return _choose_sample(logits / temperature, top_k, top_p, seed, index)


def sample(
    step_fn,
    prompt,
    cache,
    max_length,
    temperature=1.0,
    top_k=None,
    top_p=None,
    seed=0,
    eos_id=None,
    pad_id=0,
    prompt_lengths=None,
    shared=None,
    start=0,
    runtime=None,
):
    """Random sampling with temperature, top-k and top-p (nucleus).

    The logits are divided by `temperature`, filtered to the `top_k` most
    likely tokens and to the smallest set whose probability reaches `top_p`,
    then one token is drawn (Gumbel-max over the kept logits, an exact draw
    from their softmax). `temperature=0` is greedy decoding.

    Args:
        step_fn: as `greedy`'s.
        prompt: as `greedy`'s.
        cache: as `greedy`'s.
        max_length: as `greedy`'s.
        eos_id: as `greedy`'s.
        pad_id: as `greedy`'s.
        prompt_lengths: as `greedy`'s.
        shared: as `greedy`'s (every row stays in the loop: a row's
            draws depend on its position in the batch).
        start: as `greedy`'s.
        runtime: as `greedy`'s.
        temperature: >= 0.
        top_k: keep the k most likely tokens (a positive integer), or None.
        top_p: keep the nucleus of probability mass top_p in (0, 1], or None.
        seed: an integer; the same seed gives the same samples.

    Returns:
        int32 (batch, max_length).

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from seqkeras import decoding
        >>> def step(tokens, cache, index):  # token 7 most likely, then 6, ...
        ...     return ops.arange(8, dtype="float32")[None] / 4, cache
        >>> a = np.asarray(decoding.sample(step, np.array([[1]]), (), 6, top_k=2,
        ...                                seed=3))
        >>> b = np.asarray(decoding.sample(step, np.array([[1]]), (), 6, top_k=2,
        ...                                seed=3))
        >>> bool((a == b).all()), set(a[0, 1:].tolist()) <= {6, 7}
        (True, True)
    """
    check_sampling(temperature, top_k, top_p, seed)
    if temperature == 0:
        return greedy(
            step_fn,
            prompt,
            cache,
            max_length,
            eos_id,
            pad_id,
            prompt_lengths,
            shared,
            start,
            runtime,
        )

    def choose(logits, index, seed_base):
        return _choose_sample(logits / temperature, top_k, top_p, seed_base, index), seed_base

    return _decode(
        "sample",
        step_fn,
        prompt,
        cache,
        max_length,
        eos_id,
        pad_id,
        choose,
        ops.convert_to_tensor(seed, "int32"),
        prompt_lengths,
        shared,
        start=start,
        runtime=runtime,
    )


def _mix(x):
    """lowbias32 (C. Wellons), an integer hash, in wrapping int32
    arithmetic with logical right shifts."""

    def shr(v, k):
        return ops.bitwise_and(ops.right_shift(v, k), (1 << (32 - k)) - 1)

    x = ops.bitwise_xor(x, shr(x, 16))
    x = x * 0x7FEB352D
    x = ops.bitwise_xor(x, shr(x, 15))
    x = x * -0x7B935975  # 0x846CA68B as int32
    return ops.bitwise_xor(x, shr(x, 16))


def _uniform(shape, seed, step):
    """Uniform (0, 1) noise that depends only on (seed, step, position):
    a counter-based generator. Keras' random ops take a Python int or a
    stateful SeedGenerator, and a generator's state would advance between
    calls of an exported signature; hashing the counters gives the same
    draws for the same seed everywhere."""
    rows = ops.expand_dims(ops.arange(shape[0], dtype="int32"), 1)
    cols = ops.expand_dims(ops.arange(shape[1], dtype="int32"), 0)
    key = _mix(
        ops.cast(seed, "int32") * -0x61C88647  # golden ratio
        + ops.cast(step, "int32") * 0x27D4EB2F
    )
    x = _mix(rows * 0x165667B1 + cols + key)  # one hash per element
    bits = ops.bitwise_and(ops.right_shift(x, 8), 0xFFFFFF)  # 24 bits
    return (ops.cast(bits, "float32") + 0.5) / float(1 << 24)


def length_penalty(length, alpha):
    """GNMT's length penalty (Wu et al. 2016): ((5 + |Y|) / 6) ** alpha.

    Args:
        length: the hypotheses' lengths (numbers >= 0, any shape).
        alpha: a finite number >= 0 (0: no penalty).
    """
    if not validation.is_finite_number(alpha) or alpha < 0:
        raise ValueError(
            "`length_penalty` received an invalid value for `alpha`: expected a "
            f"finite number >= 0. Received: alpha={alpha!r}"
        )
    if length is None:
        raise TypeError("`length_penalty` expects numeric `length`. Received: length=None")
    validation.numeric("length_penalty", "length", length)
    values = validation.concrete_values(length)
    if values is not None and values.size and np.issubdtype(values.dtype, np.number):
        if not np.all(values >= 0):  # NaN too
            raise ValueError(
                "`length_penalty` expects `length` >= 0. Received: length with the "
                f"value {values[~(values >= 0)].flat[0]!r}"
            )
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def _row_best(values, k, compiled):
    """`(values, ids)` (rows, k): each row's k largest entries, best first
    (ties: the lower id, as `top_k`); by k rounds of argmax when
    `compiled` (see `_largest`)."""
    if not compiled or k > _SMALL_K:
        values, ids = ops.top_k(values, k)
        return values, ops.cast(ids, "int32")
    ids = ops.cast(_largest(values, k), "int32")
    return ops.take_along_axis(values, ids, axis=1), ids


def _beam_candidates(logits, scores, done, k, pad_id, compiled):
    """`(best, parent, chosen)` of a beam step: the k best continuations of
    each source's k beams by total log-probability, `best` (sources, k)
    their totals, `parent` (rows,) the row each continues (within the
    step's rows) and `chosen` (rows,) its token.

    Each beam's k best tokens by logit are its k best by log-probability
    (log_softmax shifts a row by a constant), so only those k are
    normalised, and the source's k best are the best of its k * k: the
    candidates of one `top_k` over all k * vocab (ties: the lower beam,
    then the lower token). A finished beam extends with `pad_id` alone, at
    no cost."""
    logits = ops.cast(logits, "float32")
    vocab = logits.shape[-1]
    per_beam = k if vocab is None else min(k, vocab)  # a beam's candidates
    values, ids = _row_best(logits, per_beam, compiled)
    peak = ops.max(logits, axis=-1, keepdims=True)
    norm = ops.log(ops.sum(ops.exp(logits - peak), axis=-1, keepdims=True))
    logp = values - peak - norm
    # a finished beam's candidates, as `top_k` orders (0 at pad_id, -1e9
    # elsewhere): pad_id, then the lowest other ids
    ended_ids = [pad_id] + [i for i in range(per_beam + 1) if i != pad_id][: per_beam - 1]
    ended = ops.expand_dims(done, 1)
    logp = ops.where(ended, ops.convert_to_tensor([[0.0] + [-1e9] * (per_beam - 1)]), logp)
    ids = ops.where(ended, ops.convert_to_tensor([ended_ids], "int32"), ids)
    width = k * per_beam
    total = ops.reshape(ops.expand_dims(scores, 1) + logp, (-1, width))  # (sources, k * per_beam)
    best, pick = _row_best(total, k, compiled)
    n = ops.shape(total)[0]
    beam = pick // per_beam  # which of the source's beams
    parent = ops.reshape(beam + ops.expand_dims(ops.arange(n, dtype="int32") * k, 1), (-1,))
    flat_ids = ops.reshape(ids, (-1, width))
    chosen = ops.reshape(ops.take_along_axis(flat_ids, pick, axis=1), (-1,))
    return best, parent, chosen


def beam_search(
    step_fn,
    prompt,
    cache,
    max_length,
    beam_width=4,
    length_penalty_alpha=0.0,
    eos_id=None,
    pad_id=0,
    return_all_beams=False,
    compiled=False,
    shared=None,
    runtime=None,
):
    """Beam search with GNMT's length penalty.

    Keeps the `beam_width` most probable prefixes (by total log-probability)
    at every step; a beam that emitted EOS keeps its score and is padded.
    Without a length penalty (and without `return_all_beams`) a source is
    final once its best beam has ended: later tokens only lower the other
    beams' scores, so its answer cannot change; with one, once all its
    beams have. The loop stops when every source is final, and where the
    loop state may change shape (a `runtime` with a `while_loop`: graphs
    traced for TF Serving) a final source's beams leave the loop state at
    that step.
    At the end beams are ranked by `log P(Y) / lp(Y)` with
    `lp(Y) = ((5 + |Y|) / 6) ** alpha` (`alpha = 0`: raw log-probability),
    |Y| counting generated tokens up to and including EOS.

    Args:
        step_fn, prompt, cache, max_length, eos_id, pad_id: as `greedy`;
            every cache leaf must have the batch as its leading dimension
            (it is repeated to batch * beam_width rows, source-major: row
            `i * beam_width + j` is beam j of source i, and reordered per
            step).
        beam_width: a positive integer; 1 is greedy decoding.
        length_penalty_alpha: alpha >= 0.
        return_all_beams: return every beam, best first.
        compiled: the loop will be compiled by XLA. The k best candidates
            of a step are then found by k rounds of argmax per beam and
            across beams (XLA fuses each round into one pass over the
            logits), not by `top_k`, which XLA on CPU lowers to a full
            sort of the (batch, beam_width * vocab) scores at every step.
            The same candidates either way (ties: the lower beam, then the
            lower token, as `top_k`).
        shared: optional nest of per-source tensors (batch-leading) the step
            reads and never changes, e.g. an encoder's keys and values:
            neither repeated for the beams nor reordered, passed as
            `step_fn(tokens, cache, index, shared)` while `tokens` and the
            cache have batch * beam_width rows (the step reads source i's
            entries for rows `i * beam_width ...`).
        runtime: as `greedy`'s.

    Returns:
        `(sequences, scores)`: int32 (batch, max_length) and float32
        (batch,) log-probabilities of the generated tokens (length-
        normalised when alpha > 0); with `return_all_beams`, (batch, beam,
        max_length) and (batch, beam).

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from seqkeras import decoding
        >>> def step(tokens, cache, index):  # always predicts token + 1
        ...     return ops.log(0.1 + 0.8 * ops.one_hot(tokens + 1, 6)), cache
        >>> seqs, scores = decoding.beam_search(step, np.array([[1]]), (), 4,
        ...                                     beam_width=2, eos_id=3)
        >>> np.asarray(seqs).tolist()
        [[1, 2, 3, 0]]
    """
    check_beam(beam_width, length_penalty_alpha)
    prompt = ops.convert_to_tensor(prompt)
    check_prompt("beam_search", prompt, max_length)
    check_special_ids("beam_search", eos_id, pad_id)
    runtime = _runtime("beam_search", runtime)
    k = beam_width
    batch = ops.shape(prompt)[0]
    flat_prompt = ops.repeat(prompt, k, axis=0)  # (batch * k, length)
    tokens, prompt_length = _buffer(flat_prompt, max_length, pad_id, runtime)
    cache = tree.map_structure(lambda c: ops.repeat(c, k, axis=0), cache)
    step = _with_shared(step_fn, shared)
    shared = () if shared is None else shared
    # Only beam 0 is live at first, so the k copies do not fill the beam
    # with duplicates.
    scores = ops.tile(ops.concatenate([ops.zeros((1,)), ops.full((k - 1,), -1e9)]), [batch])
    done = ops.zeros((batch * k,), "bool")
    lengths = ops.zeros((batch * k,), "int32")  # generated tokens
    every_beam = bool(length_penalty_alpha) or return_all_beams

    def final(done):
        """(sources,): the sources whose answer can no longer change."""
        done = ops.reshape(done, (-1, k))
        return ops.all(done, axis=1) if every_beam else done[:, 0]

    def advance(index, tokens, cache, shared, scores, done, lengths):
        """One step: `(parent, tokens, cache, scores, done, lengths)`, the
        cache from the step (not yet reordered by `parent`)."""
        n = ops.shape(tokens)[0] // k  # sources in the loop
        current = ops.take(tokens, index, axis=1)
        logits, cache = step(current, cache, index, shared)
        in_prompt = index + 1 < prompt_length
        best, parent, chosen = _beam_candidates(logits, scores, done, k, pad_id, compiled)
        # Inside the prompt, keep every beam and force the prompt token.
        identity = ops.arange(n * k, dtype="int32")
        parent = ops.where(in_prompt, identity, parent)
        forced = ops.take(tokens, ops.minimum(index + 1, max_length - 1), axis=1)
        new_scores = ops.where(in_prompt, scores, ops.reshape(best, (-1,)))
        tokens = ops.take(tokens, parent, axis=0)
        done = ops.take(done, parent, axis=0)
        lengths = ops.take(lengths, parent, axis=0)
        nxt = ops.where(in_prompt, forced, ops.where(done, pad_id, chosen))
        lengths = lengths + ops.cast(
            ops.logical_and(ops.logical_not(in_prompt), ops.logical_not(done)), "int32"
        )
        if eos_id is not None:
            done = ops.logical_or(
                done, ops.logical_and(ops.logical_not(in_prompt), ops.equal(nxt, eos_id))
            )
        tokens = _write(tokens, index + 1, nxt, runtime)
        return parent, tokens, cache, new_scores, done, lengths

    if max_length > 1 and runtime.dynamic_shapes and eos_id is not None:

        def cond(index, tokens, *rest):
            return ops.logical_and(index < max_length - 1, ops.shape(tokens)[0] > 0)

        def body(index, tokens, cache, shared, scores, done, lengths, alive, out):
            parent, tokens, cache, scores, done, lengths = advance(
                index, tokens, cache, shared, scores, done, lengths
            )
            ended = final(done)
            kept = _nonzero(ops.logical_not(ended))
            kept_rows = _beam_rows(kept, k)
            # the beam reorder and the leaving sources in one gather
            cache = _take(cache, ops.take(parent, kept_rows))
            rows = (tokens, scores, done, lengths)

            def leave():  # the final sources' beams out, the rest on
                gone = _nonzero(ended)
                at = ops.expand_dims(_beam_rows(ops.take(alive, gone), k), 1)
                written = tuple(
                    ops.scatter_update(o, at, ops.take(x, _beam_rows(gone, k), axis=0))
                    for o, x in zip(out, (tokens, scores, lengths))
                )
                return _take((shared, alive), kept) + (written,)

            shared, alive, out = ops.cond(
                ops.any(ended), leave, lambda: (shared, alive, tuple(out))
            )
            tokens, scores, done, lengths = _take(rows, kept_rows)
            return index + 1, tokens, cache, shared, scores, done, lengths, alive, out

        out = (
            ops.full((batch * k, max_length), pad_id, "int32"),
            ops.zeros((batch * k,), "float32"),
            ops.zeros((batch * k,), "int32"),
        )
        alive = ops.arange(batch, dtype="int32")
        state = (0, tokens, cache, shared, scores, done, lengths, alive, out)
        _, tokens, _, _, scores, _, lengths, alive, out = runtime.loop(cond, body, state)
        at = ops.expand_dims(_beam_rows(alive, k), 1)
        tokens, scores, lengths = (
            ops.scatter_update(o, at, x) for o, x in zip(out, (tokens, scores, lengths))
        )
    elif max_length > 1:

        def cond(index, tokens, cache, scores, done, lengths):
            return ops.logical_and(index < max_length - 1, ops.logical_not(ops.all(final(done))))

        def body(index, tokens, cache, scores, done, lengths):
            parent, tokens, cache, scores, done, lengths = advance(
                index, tokens, cache, shared, scores, done, lengths
            )
            cache = _take(cache, parent)
            return index + 1, tokens, cache, scores, done, lengths

        _, tokens, _, scores, done, lengths = runtime.loop(
            cond, body, (0, tokens, cache, scores, done, lengths)
        )
    final_scores = scores
    if length_penalty_alpha:
        final_scores = scores / length_penalty(ops.maximum(lengths, 1), length_penalty_alpha)
    final_scores = ops.reshape(final_scores, (batch, k))
    order = ops.argsort(-final_scores, axis=-1)  # best first
    tokens = ops.reshape(tokens, (batch, k, max_length))
    tokens = ops.take_along_axis(tokens, order[:, :, None], axis=1)
    final_scores = ops.take_along_axis(final_scores, order, axis=1)
    if not return_all_beams:
        tokens, final_scores = tokens[:, 0], final_scores[:, 0]
    return tokens, final_scores


def _beam_rows(sources, k):
    """The rows (sources x k beams, source-major) of int32 (n,) sources."""
    return ops.reshape(ops.expand_dims(sources * k, 1) + ops.arange(k, dtype="int32"), (-1,))
