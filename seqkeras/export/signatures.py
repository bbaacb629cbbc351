"""SavedModel signatures as objects: what `saved_model(model, path,
signatures=[...])` writes.

Each signature object holds its options (checked when it is made) and,
called as `signature(model, check=True)`, returns a `Functions`: a dict
`{signature name: tf.function}` whose `resources` are the lookup tables
and tokenizers the functions use (the writer tracks them). A new model
family adds a signature class here and touches nothing else.

- `Forward()`: `serving_default`, the model's named inputs to its named
  outputs.
- `Generate(max_length)`, `GenerateBeam(max_length, beam_width)`:
  `generate` and `generate_beam`, token ids in, the decoding loop in the
  graph (`generation(...)` gives both, and `GenerateText` with a
  vocabulary).
- `GenerateSample(max_length, temperature, top_k, top_p)`:
  `generate_sample`, sampling with a `seed` input (and a language model's
  `prompt_lengths`: prompts of different lengths in one request).
- `GenerateText(vocabulary, max_length)`: `generate_text`, strings in,
  decoded strings out (a translation, or each prompt's continuation).
- `ServeText(vocabulary=... | tokenizer=...)`: `serve_text`, strings in,
  the outputs of a model over `token_ids` out (a classifier's
  `probabilities` too).
- `Tag(features, tag_vocabulary)`: `tag`, sentences in, words, tags and
  entity spans out.
- `Chat(tokenizer, max_length)`: `chat`, a user's message in, the
  assistant's reply out (a decoder language model; template, tokenizer
  and decoding loop in the graph); sampled with a `seed` input when given
  a `temperature`.
- `Translate(source_tokenizer, target_tokenizer, max_length)`:
  `translate`, strings in and out, beam search in the graph.

`check`: in-graph request checks (off for a TFLite-bound graph: TFLite
has no Assert op): token ids outside the vocabulary, inputs longer than
the model's positions (`request_checks.position_limit`), empty texts and
prompts longer than `max_length` fail the request with InvalidArgument
naming the signature and the input, instead of an answer.

Decoding signatures (`Generate`, `GenerateBeam`, `GenerateText`,
`Translate`) run `seqkeras.models.generate`, so the model's own
`call_with_cache` is the step, for every generative model. For TF
Serving (`target="serving"`) they pass `generate` the serving runtime
(`seqkeras.export.loops.SERVING`): attention caches grow by one position
per step and finished rows leave the loop; `saved_model(...,
jit_compile=True)` makes each loop one XLA cluster instead (fixed-size
caches written in place).

Every `tf.function` seqkeras traces (here, in `generate`, the streaming,
on-device and TFLite exports) has `autograph=False`: the maths is
`keras.ops` that also runs on JAX, with `keras.ops.while_loop` /
`keras.ops.cond` where the graph branches, so autograph had nothing to
convert, and converting cost a third of an export (a two-layer recurrent
seq2seq with three decoding signatures: 4.3 s against 6.5 s).
"""

import tensorflow as tf

from seqkeras import decoding
from seqkeras.data.checks import checked_inputs
from seqkeras.data.tables import static_table
from seqkeras.data.tokens import EOS, FIRST_ID, PAD, RESERVED, UNK
from seqkeras.export import loops
from seqkeras.export import request_checks as requests

TEXT_INPUT = "token_ids"
_TEXT_SIGNATURE = {"text": tf.TensorSpec((None,), tf.string, name="text")}


class Functions(dict):
    """`{signature name: tf.function}`, and in `resources` the trackable
    objects (lookup tables, tokenizers) the functions use."""

    def __init__(self, functions, resources=()):
        super().__init__(functions)
        self.resources = list(resources)


class Signature:
    """A group of named serving functions, built for a model when the
    SavedModel is written. Subclasses set `names` (the signature names
    they add) and implement `build(model, check)`."""

    names = ()
    #: set by the writer (`saved_model(..., jit_compile=True)`): decoding
    #: loops become one XLA cluster each
    jit_compile = False
    #: set by the writer: the runtime the graph is for (`"serving"` or
    #: `"tflite"`), which chooses the decoding runtime passed to `generate`
    target = "serving"

    def __call__(self, model, check=True, jit_compile=False, target="serving"):
        self.jit_compile = bool(jit_compile)
        self.target = target
        return self.build(model, check)

    def build(self, model, check):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(self.names)})"


# -- the model's own inputs and outputs ------------------------------------


def call_model(model, inputs, **kwargs):
    """Calls `model` on a dict of its named inputs (a single-input model
    takes the bare tensor)."""
    if len(inputs) > 1:
        return model(inputs, **kwargs)
    return model(next(iter(inputs.values())), **kwargs)


class Forward(Signature):
    """`serving_default`: a dict of the model's named inputs (dynamic
    batch and time) to a dict of its named outputs. With `check`, token
    ids outside a `SequenceModel`'s vocabulary and token-id inputs longer
    than its positions fail the request (InvalidArgument naming the
    input, the limit and what was received) instead of being used
    silently."""

    names = ("serving_default",)

    def build(self, model, check=True):
        specs = {t.name: tf.TensorSpec(t.shape, t.dtype, name=t.name) for t in model.inputs}
        names = list(model.output_names)
        limit = requests.position_limit(model)

        @tf.function(autograph=False, input_signature=[specs])
        def serve(inputs):
            if check:
                inputs = checked_inputs(model, inputs, "serving_default")
                inputs = requests.within_positions(model, inputs, "serving_default", limit)
            outputs = call_model(model, inputs, training=False)
            if isinstance(outputs, dict):  # a model with named outputs
                return dict(outputs)
            if not isinstance(outputs, (list, tuple)):
                outputs = [outputs]
            return dict(zip(names, outputs))

        return Functions({"serving_default": serve})


def serving_function(model, check=True):
    """The `serving_default` `tf.function` of `model` (`Forward`).

    Args:
        model: a Keras model with defined inputs.
        check: put the request checks (token ids inside the vocabulary,
            inputs no longer than the model's positions) in the graph.

    Returns:
        A `tf.function` of the model's named inputs.
    """
    import keras

    if not isinstance(model, keras.Model):
        raise TypeError(
            "`serving_function` expects `model` to be a Keras model. "
            f"Received: {type(model).__name__}"
        )
    try:
        built = bool(model.inputs)
    except (AttributeError, ValueError):  # a Sequential model never built
        built = False
    if not built:
        raise ValueError(
            f"`serving_function` needs a `model` with defined inputs (a functional model, or "
            f"one built on an `Input`); model {model.name!r} has none"
        )
    if not isinstance(check, bool):
        raise TypeError(
            "`serving_function` received an invalid value for `check`: expected True or "
            f"False. Received: check={check!r}"
        )
    return Forward()(model, check)["serving_default"]


# -- generation over token ids ---------------------------------------------


def _generation_input(model):
    """`(name, TensorSpec)` of the generate signatures' input: the
    conditioning input, or `prompt_ids` for a language model."""
    conditioning = getattr(model, "conditioning_input", None)
    if conditioning is None:
        return "prompt_ids", tf.TensorSpec((None, None), tf.int32, name="prompt_ids")
    spec = [t for t in model.inputs if t.name == conditioning][0]
    return conditioning, tf.TensorSpec(spec.shape, spec.dtype, name=conditioning)


_SOURCE_BUCKET = 16


def _decoder(model, max_length, eos_id, jit_compile=False, target="serving"):
    """`decode(inputs, strategy, **options)`: `seqkeras.models.generate` on
    the conditioning input (or continuing a prompt), in a function XLA
    compiles whole with `jit_compile`."""
    from seqkeras.models.generation import generate

    conditioned = getattr(model, "conditioning_input", None) is not None

    def run(inputs, strategy, runtime=loops.runtime_for(target), **kwargs):
        options = dict(
            max_length=max_length, strategy=strategy, eos_id=eos_id, runtime=runtime, **kwargs
        )
        if conditioned:
            return generate(model, inputs, jit_compile=jit_compile, **options)
        return generate(model, prompt=inputs, jit_compile=jit_compile, **options)

    if not jit_compile:
        return run
    compiled = {}

    def decode(inputs, strategy, **kwargs):
        if conditioned and inputs.dtype.is_integer:
            # XLA compiles one program per input shape: source ids padded
            # to a multiple of 16 tokens (masked) bound the programs per
            # batch size to max_source_length / 16
            width = tf.shape(inputs)[1]
            inputs = tf.pad(inputs, [[0, 0], [0, (-width) % _SOURCE_BUCKET]])
        key = (strategy, tuple(sorted(kwargs)))
        if key not in compiled:  # one XLA cluster per strategy

            def loop(inputs, *values):
                options = dict(zip(sorted(kwargs), values))
                # fixed caches, which XLA writes in place
                return run(inputs, strategy, decoding.DEFAULT_RUNTIME, **options)

            compiled[key] = tf.function(loop, jit_compile=True, autograph=False)
        return compiled[key](inputs, *[kwargs[k] for k in sorted(kwargs)])

    return decode


def _decoding_options(name, max_length, eos_id, beam_width=1, length_penalty_alpha=0.0):
    """The decoding signatures' options, checked when the signature is
    made (`name`: the class or function the messages name)."""
    import numbers

    from seqkeras.layers import validation

    validation.positive_int(name, "max_length", max_length)
    if eos_id is not None:
        validation.non_negative_int(name, "eos_id", eos_id)
    validation.positive_int(name, "beam_width", beam_width)
    alpha = length_penalty_alpha
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not alpha == alpha:
        raise TypeError(
            f"`{name}` received an invalid value for `length_penalty_alpha`: expected a "
            f"number. Received: length_penalty_alpha={alpha!r}"
        )
    # the rules of `beam_search` itself (a negative alpha refused), so a
    # signature never accepts what the decoding it serves refuses
    decoding.check_beam(beam_width, alpha, name=name)


class _Generation(Signature):
    where = "saved_model"

    def __init__(self, max_length, eos_id=None):
        _decoding_options(type(self).__name__, max_length, eos_id)
        self.max_length = max_length
        self.eos_id = EOS if eos_id is None else eos_id

    def _prepare(self, model):
        from seqkeras.models.generation import check_generative

        check_generative(
            self.where, model, "generate signatures need a generative model: one that implements"
        )
        decode = _decoder(model, self.max_length, self.eos_id, self.jit_compile, self.target)
        return _generation_input(model), decode

    def _checked_ids(self, model, where, name, ids):
        """`ids` (a prompt, or token-id conditioning) passed through the
        request checks: at least one token; a prompt no longer than
        `max_length` (it is included), a conditioning input no longer
        than the model's positions."""
        ids = requests.at_least_one(where, name, ids)
        if getattr(model, "conditioning_input", None) is None:
            what = "tokens (max_length: the prompt and the generated tokens)"
            return requests.at_most(where, name, ids, self.max_length, what=what)
        limit = requests.position_limit(model)
        return ids if limit is None else requests.at_most(where, name, ids, limit)


class Generate(_Generation):
    """`generate`: greedy decoding, ids in (`source_ids` or
    `prompt_ids`), `ids` out, the decoding loop in the graph."""

    names = ("generate",)

    def build(self, model, check=True):
        (name, spec), decode = self._prepare(model)
        fed = {"prompt_ids": model.prompt_input}

        @tf.function(autograph=False, input_signature=[{name: spec}])
        def greedy(inputs):
            if check:
                inputs = checked_inputs(model, inputs, "generate", fed)
                if spec.dtype.is_integer:
                    inputs = {name: self._checked_ids(model, "generate", name, inputs[name])}
            return {"ids": decode(inputs[name], "greedy")}

        return Functions({"generate": greedy})


class GenerateBeam(_Generation):
    """`generate_beam`: beam search, ids in, `ids` and `scores` out."""

    names = ("generate_beam",)

    def __init__(self, max_length, beam_width=4, length_penalty_alpha=0.0, eos_id=None):
        _decoding_options("GenerateBeam", max_length, eos_id, beam_width, length_penalty_alpha)
        super().__init__(max_length, eos_id)
        self.beam_width = beam_width
        self.length_penalty_alpha = length_penalty_alpha

    def build(self, model, check=True):
        (name, spec), decode = self._prepare(model)
        fed = {"prompt_ids": model.prompt_input}

        @tf.function(autograph=False, input_signature=[{name: spec}])
        def beam(inputs):
            if check:
                inputs = checked_inputs(model, inputs, "generate_beam", fed)
                if spec.dtype.is_integer:
                    inputs = {name: self._checked_ids(model, "generate_beam", name, inputs[name])}
            ids, scores = decode(
                inputs[name],
                "beam",
                beam_width=self.beam_width,
                length_penalty_alpha=self.length_penalty_alpha,
            )
            return {"ids": ids, "scores": scores}

        return Functions({"generate_beam": beam})


class GenerateSample(_Generation):
    """`generate_sample` (or `name`): sampling with temperature, top-k and
    top-p, ids in, `ids` out, with a `seed` input (int32 scalar: the same
    seed gives the same ids as `generate(..., strategy="sample",
    seed=seed)`, draws stateless in the graph). A language model also takes
    `prompt_lengths` (int32 (batch,)): each row's prompt length in
    right-padded `prompt_ids`, so prompts of different lengths share a
    request (the positions every row has are prefilled in one pass).
    `temperature=0` is greedy decoding.

    Args:
        max_length: tokens in all, prompt included.
        eos_id: the end token (default EOS).
        temperature, top_k, top_p: as `seqkeras.decoding.sample`'s.
        name: the signature's name.
    """

    def __init__(
        self,
        max_length,
        eos_id=None,
        temperature=1.0,
        top_k=None,
        top_p=None,
        name="generate_sample",
    ):
        from seqkeras.decoding import check_sampling

        super().__init__(max_length, eos_id)
        check_sampling(temperature, top_k, top_p, 0, name="GenerateSample")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                "`GenerateSample` received an invalid value for `name`: expected a "
                f"signature name (an identifier). Received: name={name!r}"
            )
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.names = (name,)

    def build(self, model, check=True):
        (name, spec), decode = self._prepare(model)
        fed = {"prompt_ids": model.prompt_input}
        prompted = getattr(model, "conditioning_input", None) is None
        signature = self.names[0]
        specs = {name: spec, "seed": tf.TensorSpec((), tf.int32, name="seed")}
        if prompted:
            specs["prompt_lengths"] = tf.TensorSpec((None,), tf.int32, name="prompt_lengths")
        options = _sampling_options(self.temperature, self.top_k, self.top_p)

        @tf.function(autograph=False, input_signature=[specs])
        def sample(inputs):
            ids = inputs[name]
            if check:
                ids = checked_inputs(model, {name: ids}, signature, fed)[name]
                if spec.dtype.is_integer:
                    ids = self._checked_ids(model, signature, name, ids)
            given = {}
            if prompted:
                lengths = inputs["prompt_lengths"]
                if check:
                    lengths = requests.prompt_lengths(signature, lengths, ids)
                given["prompt_lengths"] = lengths
            if not self.temperature:
                return {"ids": decode(ids, "greedy", **given)}
            return {"ids": decode(ids, "sample", seed=inputs["seed"], **given, **options)}

        return Functions({signature: sample})


def _sampling_options(temperature, top_k, top_p):
    """The keyword arguments of a sampled decode (`seqkeras.decoding.sample`)
    for the signatures that sample (`GenerateSample`, `Chat`): {} for
    `temperature=0` (greedy decoding), the options given otherwise."""
    if not temperature:
        return {}
    options = dict(temperature=temperature, top_k=top_k, top_p=top_p)
    return {k: v for k, v in options.items() if v is not None}


def _reply_positions(out, first, eos_id):
    """bool (batch, time): the generated ids of `out` (from each row's
    `first` position) before its first `eos_id`."""
    steps = tf.range(tf.shape(out)[1])[None]
    new = steps >= first[:, None]
    ended = tf.cumsum(tf.cast(tf.logical_and(new, tf.equal(out, eos_id)), tf.int32), axis=1) > 0
    return tf.logical_and(new, tf.logical_not(ended))


class GenerateText(_Generation):
    """`generate_text`: strings in, decoded strings out, with the
    `CharVocabulary` `vocabulary` in the graph: the translation of a
    conditioned model, the continuation of each prompt for a language
    model."""

    names = ("generate_text",)

    def __init__(self, vocabulary, max_length, eos_id=None):
        super().__init__(max_length, eos_id)
        self.vocabulary = as_char_vocabulary("GenerateText", vocabulary)

    @staticmethod
    def applies(model):
        """Whether `model` generates from token ids (a prompt, or a
        conditioning input of ids), which text can be encoded into."""
        return _generation_input(model)[1].dtype.is_integer

    def build(self, model, check=True):
        (_, spec), decode = self._prepare(model)
        if not spec.dtype.is_integer:
            raise ValueError(
                "`GenerateText` needs a model conditioned on token ids or "
                f"continuing a prompt; model {model.name!r} is conditioned "
                f"on {spec.dtype.name} values"
            )
        conditioned = getattr(model, "conditioning_input", None) is not None
        encode, table = _text_encoder(self.vocabulary)
        # as `CharVocabulary.decode`: PAD, BOS -> "", UNK -> "?"
        tokens = tf.constant(self.vocabulary.decode_table())
        eos_id = self.eos_id

        @tf.function(autograph=False, input_signature=[_TEXT_SIGNATURE])
        def text(inputs):
            ids, lengths = encode(inputs["text"])
            if check:
                ids = requests.no_empty("generate_text", "text", ids, lengths)
                ids = self._checked_ids(model, "generate_text", "text", ids)
            if conditioned:  # e.g. a translation
                out = decode(ids, "greedy")[:, 1:]  # drop BOS
                first = tf.zeros_like(lengths)
            else:  # a language model continues each prompt
                out = decode(ids, "greedy", prompt_lengths=lengths)
                first = lengths
            keep = _reply_positions(out, first, eos_id)
            pieces = tf.where(keep, tf.gather(tokens, out), "")
            return {"text": tf.strings.reduce_join(pieces, axis=1)}

        return Functions({"generate_text": text}, [table])


class Chat(_Generation):
    """`chat`: a user's message in (`text`, strings (batch,)), the
    assistant's greedy reply out (`reply`): the chat template's text
    around one user turn, the byte-level BPE tokenizer, the decoding loop
    and the detokenizer all in the graph (a decoder language model with
    its `seqkeras.data.ByteLevelBPETokenizer`).

    Args:
        tokenizer: the model's `ByteLevelBPETokenizer` (with a chat
            template).
        max_length: tokens in all, prompt and reply (the cache's bound).
        system: a system message for every request (default: the
            template's).
        temperature, top_k, top_p: sampling (as
            `seqkeras.decoding.sample`'s); the signature then also takes
            `seed` (int32 scalar): the same seed gives the reply
            `ChatSession.reply(..., seed=)` gives to one message (a row's
            draws depend on its place in the batch: one message per
            request for that equality). Default `temperature=0`: greedy.
    """

    names = ("chat",)

    def __init__(self, tokenizer, max_length, system=None, temperature=0.0, top_k=None, top_p=None):
        from seqkeras.decoding import check_sampling
        from seqkeras.models.instruction import chat_text, end_of_turn_id

        check_sampling(temperature, top_k, top_p, 0, name="Chat")
        self.tokenizer = tokenizer
        self.prefix, self.suffix = chat_text(tokenizer, system)
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        super().__init__(max_length, end_of_turn_id(tokenizer))

    def build(self, model, check=True):
        (_, spec), decode = self._prepare(model)
        if not spec.dtype.is_integer or getattr(model, "conditioning_input", None):
            raise ValueError(f"`Chat` needs a language model; model {model.name!r} is not one")
        tokenizer, eos_id = self.tokenizer, self.eos_id
        prefix, suffix = tf.constant(self.prefix), tf.constant(self.suffix)
        specs = dict(_TEXT_SIGNATURE)
        options = _sampling_options(self.temperature, self.top_k, self.top_p)
        if options:
            specs["seed"] = tf.TensorSpec((), tf.int32, name="seed")

        @tf.function(autograph=False, input_signature=[specs])
        def chat(inputs):
            texts = tf.strings.join([prefix, inputs["text"], suffix])
            ragged = tokenizer.encode(texts)
            lengths = tf.cast(ragged.row_lengths(), tf.int32)
            ids = ragged.to_tensor()
            if check:
                message = tf.strings.length(tf.strings.strip(inputs["text"]))
                ids = requests.no_empty("chat", "text", ids, message)
                what = (
                    f"tokens with the chat template, leaving room for a reply "
                    f"(max_length={self.max_length})"
                )
                ids = requests.at_most("chat", "text", ids, self.max_length - 1, what=what)
            if options:
                out = decode(ids, "sample", prompt_lengths=lengths, seed=inputs["seed"], **options)
            else:
                out = decode(ids, "greedy", prompt_lengths=lengths)
            reply = tf.ragged.boolean_mask(out, _reply_positions(out, lengths, eos_id))
            return {"reply": tokenizer.decode(reply, skip_special_tokens=True)}

        return Functions({"chat": chat}, [tokenizer])


def generation(
    max_length,
    beam_width=4,
    length_penalty_alpha=0.0,
    eos_id=None,
    vocabulary=None,
):
    """`[Generate, GenerateBeam]`, and `GenerateText` when `vocabulary` (a
    `CharVocabulary`) is given: the generate signatures of a generative
    model (`GenerateText.applies(model)` tells whether it takes text)."""
    _decoding_options("generation", max_length, eos_id, beam_width, length_penalty_alpha)
    found = [
        Generate(max_length, eos_id),
        GenerateBeam(max_length, beam_width, length_penalty_alpha, eos_id),
    ]
    if vocabulary is not None:
        found.append(GenerateText(vocabulary, max_length, eos_id))
    return found


# -- raw strings in --------------------------------------------------------


def as_char_vocabulary(name, vocabulary):
    """A `CharVocabulary` from one, or from a plain list of its characters
    (in id order from 4; a list that starts with the reserved tokens
    `<pad>, <bos>, <eos>, <unk>` may include them)."""
    from seqkeras.data.text import CharVocabulary

    if isinstance(vocabulary, CharVocabulary):
        return vocabulary
    if isinstance(vocabulary, (list, tuple)) or hasattr(vocabulary, "tolist"):
        tokens = [str(t) for t in list(vocabulary)]
        if tuple(tokens[: len(RESERVED)]) == RESERVED:
            tokens = tokens[len(RESERVED) :]
        try:
            return CharVocabulary(tokens)
        except ValueError as error:
            raise ValueError(
                f"`{name}` received a `vocabulary` list it cannot use: "
                f"{error}. The raw-string signatures split text into "
                "characters; give the characters in id order from 4."
            ) from None
    raise TypeError(
        f"`{name}` expects `vocabulary` to be a "
        "`seqkeras.data.CharVocabulary` or a list of its characters. "
        f"Received: {type(vocabulary).__name__}"
    )


def _text_encoder(vocabulary):
    """`(encode, table)`: `encode(strings)` gives the ids (batch, time)
    int32, right-padded with 0, and each string's length, as
    `CharVocabulary.encode` does, in graph ops (`tf.strings` unicode
    splitting and a static hash table; unknown characters are UNK)."""
    characters = tf.constant(list(vocabulary.characters))
    ids = tf.range(FIRST_ID, FIRST_ID + len(vocabulary.characters), dtype=tf.int64)
    table = static_table(characters, ids, UNK)

    def encode(strings):
        chars = tf.strings.unicode_split(strings, "UTF-8")
        ids = tf.cast(table.lookup(chars), tf.int32)
        return ids.to_tensor(0), tf.cast(ids.row_lengths(), tf.int32)

    return encode, table


def _one_step_at_least(x, padding):
    """Dense (batch, time) `x` widened to one padded column when `time`
    is 0 (every string of the batch empty): an empty text is one padded
    step, which the models mask."""
    short = tf.maximum(1 - tf.shape(x)[1], 0)
    return tf.pad(x, [[0, 0], [0, short]], constant_values=padding)


def _tokenizer_encoder(tokenizer):
    """`encode(strings)` -> ids (batch, time) int32 right-padded with 0
    (at least one column) and each string's length, from an object with
    a graph-op `encode(strings)` giving ragged ids."""

    def encode(strings):
        ragged = tf.cast(tokenizer.encode(strings), tf.int32)
        lengths = tf.cast(ragged.row_lengths(), tf.int32)
        return _one_step_at_least(ragged.to_tensor(0), 0), lengths

    return encode


class ServeText(Signature):
    """`serve_text` of a model whose one input is `token_ids`
    (classifier, tagger, language models): raw strings `text` (batch,)
    in, the model's named outputs out (padding masked as for padded ids),
    and for a model whose `task` is `"classes"` also `probabilities` (the
    softmax of its logits). The strings are split into characters of the
    `CharVocabulary` `vocabulary`, or encoded by `tokenizer` (an object
    with graph-op `encode(strings)` giving ragged ids, e.g.
    `seqkeras.data.WordTokenizer`)."""

    names = ("serve_text",)

    def __init__(self, vocabulary=None, tokenizer=None):
        if (vocabulary is None) == (tokenizer is None):
            raise ValueError(
                "`ServeText` needs one of `vocabulary` (characters) or "
                "`tokenizer` (an object with graph-op `encode`). Received: "
                f"vocabulary={vocabulary!r}, tokenizer={tokenizer!r}"
            )
        if vocabulary is not None:
            vocabulary = as_char_vocabulary("ServeText", vocabulary)
        self.vocabulary, self.tokenizer = vocabulary, tokenizer

    def build(self, model, check=True):
        from seqkeras.models.tasks import infer_task

        if [t.name for t in model.inputs] != [TEXT_INPUT]:
            raise ValueError(
                "`ServeText`: a raw-string signature needs a model whose "
                f"one input is `{TEXT_INPUT}`. Received inputs: "
                f"{[t.name for t in model.inputs]}"
            )
        if self.tokenizer is not None:
            encode = _tokenizer_encoder(self.tokenizer)
            resource = self.tokenizer
        else:
            encode, resource = _text_encoder(self.vocabulary)
        names = list(model.output_names)
        classes = infer_task(model) == "classes"
        limit = requests.position_limit(model)

        @tf.function(autograph=False, input_signature=[_TEXT_SIGNATURE])
        def serve(inputs):
            ids, lengths = encode(inputs["text"])
            if check:
                ids = requests.no_empty("serve_text", "text", ids, lengths)
                if limit is not None:
                    ids = requests.at_most("serve_text", "text", ids, limit, what="tokens")
            outputs = model(ids, training=False)
            if not isinstance(outputs, (list, tuple, dict)):
                outputs = [outputs]
            result = dict(outputs) if isinstance(outputs, dict) else dict(zip(names, outputs))
            if classes:
                result["probabilities"] = tf.nn.softmax(tf.cast(result[names[0]], tf.float32))
            return result

        return Functions({"serve_text": serve}, [resource])


def graph_entity_spans(tags):
    """`(types, starts, ends)` of the entities in string IOB `tags`
    (batch, time; "" or "<pad>" at padding), (batch, entities) each,
    padded with "" / -1; ends exclusive. The rules of
    `seqkeras.data.entities.entity_spans` (conlleval's), in graph ops."""
    tags = tf.where(tf.equal(tags, "<pad>"), "", tags)
    entity = tf.strings.regex_full_match(tags, "[BI]-.+")
    prefix = tf.where(entity, tf.strings.substr(tags, 0, 2), "")
    kind = tf.where(entity, tf.strings.regex_replace(tags, "^[BI]-", ""), "")
    batch = tf.shape(tags)[0]
    prev_entity = tf.concat([tf.zeros([batch, 1], tf.bool), entity[:, :-1]], axis=1)
    prev_kind = tf.concat([tf.fill([batch, 1], ""), kind[:, :-1]], axis=1)
    continues = tf.logical_and(
        tf.logical_and(tf.equal(prefix, "I-"), prev_entity), tf.equal(kind, prev_kind)
    )
    starts = tf.logical_and(entity, tf.logical_not(continues))
    next_continues = tf.concat([continues[:, 1:], tf.zeros([batch, 1], tf.bool)], axis=1)
    ends = tf.logical_and(entity, tf.logical_not(next_continues))
    position = tf.broadcast_to(tf.range(tf.shape(tags)[1]), tf.shape(tags))
    return (
        tf.ragged.boolean_mask(kind, starts).to_tensor(""),
        tf.ragged.boolean_mask(position, starts).to_tensor(-1),
        tf.ragged.boolean_mask(position + 1, ends).to_tensor(-1),
    )


class Tag(Signature):
    """`tag` of a tagger over word features: raw sentences `text` (batch,)
    in (split into words by `features.split`); out `words` and `tags`
    (batch, time) strings ("" at padding), and the entities:
    `entity_types` (batch, entities) strings, `entity_starts`,
    `entity_ends` (word indices, end exclusive; -1 padding). `features`
    is a `seqkeras.data.WordFeatures`, `tag_vocabulary` the tags in id
    order. A `CRFTagger`'s tags are its Viterbi path."""

    names = ("tag",)

    def __init__(self, features, tag_vocabulary):
        if isinstance(tag_vocabulary, (str, bytes)) or not hasattr(tag_vocabulary, "__iter__"):
            raise TypeError(
                "`Tag` expects `tag_vocabulary` to be a list of the tags in id order (e.g. "
                f"['O', 'B-PER', 'I-PER']). Received: tag_vocabulary={tag_vocabulary!r}"
            )
        tags = list(tag_vocabulary)
        if not tags or not all(isinstance(t, str) for t in tags):
            raise ValueError(
                "`Tag` expects `tag_vocabulary` to be a non-empty list of tag strings. "
                f"Received: tag_vocabulary={tag_vocabulary!r}"
            )
        self.features = features
        self.tag_vocabulary = tags

    def build(self, model, check=True):
        features = self.features
        names = [t.name for t in model.inputs]
        table = tf.constant(self.tag_vocabulary)
        limit = requests.position_limit(model)

        @tf.function(autograph=False, input_signature=[_TEXT_SIGNATURE])
        def tag(inputs):
            split = features.split(inputs["text"])
            words = _one_step_at_least(split.to_tensor(""), "")
            if check:
                lengths = tf.cast(split.row_lengths(), tf.int32)
                words = requests.no_empty("tag", "text", words, lengths)
                if limit is not None:
                    words = requests.at_most("tag", "text", words, limit, what="words")
            feats = features(words)
            outputs = model({k: feats[k] for k in names}, training=False)
            if isinstance(outputs, dict) and "tags" in outputs:
                ids = outputs["tags"]
            else:
                logits = outputs["logits"] if isinstance(outputs, dict) else outputs
                ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
            tags = tf.gather(table, ids)
            tags = tf.where(tf.equal(words, ""), "", tags)
            types, starts, ends = graph_entity_spans(tags)
            return {
                "words": words,
                "tags": tags,
                "entity_types": types,
                "entity_starts": starts,
                "entity_ends": ends,
            }

        return Functions({"tag": tag}, [features])


class Translate(Signature):
    """`translate` of a seq2seq model: raw source strings `text` (batch,)
    in, target strings `text` out, with the source tokenizer, beam search
    (greedy when `beam_width` is 1) and the target detokenizer all in the
    graph. The tokenizers are objects with graph-op `encode(strings,
    add_eos=...)` (ragged ids) and `decode(ids)`, e.g.
    `seqkeras.data.SubwordTokenizer`s whose vocabulary sizes are the
    model's."""

    names = ("translate",)

    def __init__(
        self,
        source_tokenizer,
        target_tokenizer,
        max_length,
        beam_width=4,
        length_penalty_alpha=0.0,
        eos_id=None,
    ):
        _decoding_options("Translate", max_length, eos_id, beam_width, length_penalty_alpha)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_length = max_length
        self.beam_width = beam_width
        self.length_penalty_alpha = length_penalty_alpha
        self.eos_id = EOS if eos_id is None else eos_id

    def build(self, model, check=True):
        from seqkeras.models.generation import check_generative

        check_generative("saved_model (translate)", model)
        key = getattr(model, "conditioning_input", None)
        sizes = getattr(model, "vocabulary_sizes", {})
        source, target = self.source_tokenizer, self.target_tokenizer
        for tokenizer, name in ((source, key), (target, model.prompt_input)):
            size = getattr(tokenizer, "vocabulary_size", None)
            if name not in sizes or size != sizes[name]:
                raise ValueError(
                    "`saved_model` (translate): the tokenizer for "
                    f"`{name}` has {size} tokens, the model "
                    f"{sizes.get(name)}; export the tokenizers the model "
                    "was trained with"
                )
        max_length, beam_width = self.max_length, self.beam_width
        alpha, eos_id = self.length_penalty_alpha, self.eos_id

        decode = _decoder(model, max_length, eos_id, self.jit_compile, self.target)
        limit = requests.position_limit(model)

        @tf.function(autograph=False, input_signature=[_TEXT_SIGNATURE])
        def translate(inputs):
            ragged = source.encode(inputs["text"], add_eos=True)
            ids = ragged.to_tensor(PAD)
            if check:
                lengths = tf.cast(ragged.row_lengths(), tf.int32) - 1  # EOS added
                ids = requests.no_empty("translate", "text", ids, lengths)
                if limit is not None:
                    what = "tokens (the model's source positions, EOS included)"
                    ids = requests.at_most("translate", "text", ids, limit, what=what)
            if beam_width > 1:
                out, _ = decode(ids, "beam", beam_width=beam_width, length_penalty_alpha=alpha)
            else:
                out = decode(ids, "greedy")
            return {"text": target.decode(out[:, 1:])}  # no BOS

        return Functions({"translate": translate})


__all__ = [
    "Forward",
    "Functions",
    "Generate",
    "GenerateBeam",
    "GenerateText",
    "ServeText",
    "Signature",
    "Tag",
    "Translate",
    "as_char_vocabulary",
    "generation",
    "graph_entity_spans",
    "serving_function",
]
