"""SavedModel export with named serving signatures (TF Serving layout).

`serving_default` takes the model's own named inputs and returns its named
outputs; generative models also get `generate` (greedy) and
`generate_beam` signatures that run the compiled decoding loop inside the
graph. Given the character vocabulary, text models take raw strings:
`serve_text` (strings in, the model's outputs out) for models over
`token_ids` (classifier, tagger, language models) and `generate_text`
(strings in, decoded strings out: the translation of a seq2seq model, the
continuation of each prompt for a language model). The tokenizer is graph
ops: `tf.strings` unicode splitting and a static hash table. Everything
is traced in `export_mode()` and written to a temporary directory that is
moved into place only when complete.
"""

import os
import shutil
import tempfile

import tensorflow as tf

from seqkeras.data.checks import checked_inputs
from seqkeras.data.tokens import FIRST_ID, UNK
from seqkeras.layers import export_mode as export_targets
from seqkeras.layers.export_mode import export_mode


def call_model(model, inputs, **kwargs):
    """Calls `model` on a dict of its named inputs (a single-input model
    takes the bare tensor)."""
    return model(inputs if len(inputs) > 1 else next(iter(inputs.values())),
                 **kwargs)


def serving_function(model, check=True):
    """A `tf.function` taking a dict of the model's named inputs (dynamic
    batch and time) and returning a dict of its named outputs. With
    `check`, token ids outside a `SequenceModel`'s vocabulary fail the
    request (InvalidArgument naming the input, the vocabulary size and the
    id) instead of being used silently."""
    specs = {t.name: tf.TensorSpec(t.shape, t.dtype, name=t.name)
             for t in model.inputs}
    names = list(model.output_names)

    @tf.function(input_signature=[specs])
    def serve(inputs):
        if check:
            inputs = checked_inputs(model, inputs, "serving_default")
        outputs = call_model(model, inputs, training=False)
        if isinstance(outputs, dict):  # a model with named outputs
            return dict(outputs)
        outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        return dict(zip(names, outputs))

    return serve


def _all_layers(model):
    """Every layer of `model`, nested models included."""
    for layer in getattr(model, "layers", []):
        yield layer
        if hasattr(layer, "layers"):
            yield from _all_layers(layer)


TEXT_LAYERS = ("TextVectorization", "StringLookup", "IntegerLookup",
               "Hashing")


def refuse_text_layers(name, model):
    """Raises a clear ValueError when `model` takes strings or holds a
    lookup layer (string ops and hash tables, which builtin TFLite and
    ONNX do not run)."""
    found = [f"{type(layer).__name__} {layer.name!r}"
             for layer in _all_layers(model)
             if type(layer).__name__ in TEXT_LAYERS]
    strings = [t.name for t in model.inputs if "string" in str(t.dtype)]
    if found or strings:
        what = (f"the layer {found[0]}" if found
                else f"the string input {strings[0]!r}")
        raise ValueError(
            f"`{name}` cannot export model {model.name!r}: {what} needs "
            "string ops and lookup tables, which builtin TFLite and ONNX "
            "do not run. Export the model that takes token ids (the layers "
            "after the lookup) and ship the vocabulary beside the file "
            "(e.g. `layer.get_vocabulary()`); `saved_model` keeps the "
            "lookup in the graph.")


def refuse_stateful(name, model):
    """Raises a clear ValueError for a model with stateful layers: served,
    it would carry its states from one request to the next."""
    stateful = [layer.name for layer in _all_layers(model)
                if getattr(layer, "stateful", False) is True]
    if stateful:
        raise ValueError(
            f"`{name}` refuses model {model.name!r}: its layers "
            f"{stateful} are stateful, so a served model would carry its "
            "states from one request to the next. Build the same model "
            "with stateful=False, copy the weights "
            "(`new.set_weights(model.get_weights())`) and export that; "
            "for token-by-token serving export the streaming step model "
            "(`seqkeras.export.streaming_tflite`), which takes and returns "
            "the states.")


def check_target(name, path, overwrite, want="file"):
    """The absolute `path` an export `name` may write (a `want` = "file" or
    "dir"); raises a clear ValueError when it exists as the other kind, or
    at all unless `overwrite`. Creates the parent directory."""
    path = os.path.abspath(str(path))
    other = os.path.isdir if want == "file" else os.path.isfile
    if other(path):
        raise ValueError(f"`{name}`: {path} exists and is a "
                         f"{'directory' if want == 'file' else 'file'}")
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"`{name}`: {path} exists; pass overwrite=True "
                         "to replace it")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def generate_functions(model, max_length, beam_width=4,
                       length_penalty_alpha=0.0, eos_id=None,
                       vocabulary=None, check=True):
    """`{signature name: tf.function}` for a model implementing the
    generation contract (`seqkeras.models.SequenceModel`): `generate`
    (greedy) and `generate_beam` over ids, plus `generate_text` (strings in
    and out) when `vocabulary` (a `seqkeras.data.CharVocabulary`) is given
    for a model that continues prompts or conditions on token ids (then
    also `"_resources"`: the lookup table, for the caller to track)."""
    from seqkeras.data.tokens import EOS
    from seqkeras.models.generation import check_generative, generate

    check_generative("saved_model", model,
                     "generate signatures need a generative model: one "
                     "that implements")
    eos_id = EOS if eos_id is None else eos_id
    conditioning = getattr(model, "conditioning_input", None)
    if conditioning is not None:
        name = conditioning
        spec = [t for t in model.inputs if t.name == name][0]
        spec = tf.TensorSpec(spec.shape, spec.dtype, name=name)
    else:
        name = "prompt_ids"
        spec = tf.TensorSpec((None, None), tf.int32, name=name)

    def decode(inputs, strategy, **kwargs):
        if conditioning is not None:
            return generate(model, inputs, max_length=max_length,
                            strategy=strategy, eos_id=eos_id,
                            jit_compile=False, **kwargs)
        return generate(model, prompt=inputs, max_length=max_length,
                        strategy=strategy, eos_id=eos_id, jit_compile=False,
                        **kwargs)

    fed = {"prompt_ids": model.prompt_input}

    @tf.function(input_signature=[{name: spec}])
    def greedy(inputs):
        if check:
            inputs = checked_inputs(model, inputs, "generate", fed)
        return {"ids": decode(inputs[name], "greedy")}

    @tf.function(input_signature=[{name: spec}])
    def beam(inputs):
        if check:
            inputs = checked_inputs(model, inputs, "generate_beam", fed)
        ids, scores = decode(inputs[name], "beam", beam_width=beam_width,
                             length_penalty_alpha=length_penalty_alpha)
        return {"ids": ids, "scores": scores}

    functions = {"generate": greedy, "generate_beam": beam}
    if vocabulary is not None and spec.dtype.is_integer:
        encode, table = _text_encoder(vocabulary)
        # as `CharVocabulary.decode`: PAD, BOS -> "", UNK -> "?"
        tokens = tf.constant(vocabulary.decode_table())

        @tf.function(input_signature=[_TEXT_SIGNATURE])
        def text(inputs):
            ids, lengths = encode(inputs["text"])
            if conditioning is not None:  # e.g. a translation
                out = decode(ids, "greedy")[:, 1:]  # drop BOS
                first = tf.zeros_like(lengths)
            else:  # a language model continues each prompt
                out = decode(ids, "greedy", prompt_lengths=lengths)
                first = lengths
            steps = tf.range(tf.shape(out)[1])[None]
            new = steps >= first[:, None]
            ended = tf.cumsum(tf.cast(tf.logical_and(
                new, tf.equal(out, eos_id)), tf.int32), axis=1) > 0
            keep = tf.logical_and(new, tf.logical_not(ended))
            pieces = tf.where(keep, tf.gather(tokens, out), "")
            return {"text": tf.strings.reduce_join(pieces, axis=1)}

        functions["generate_text"] = text
        functions["_resources"] = [table]  # to be tracked by the module
    return functions


def as_char_vocabulary(name, vocabulary):
    """A `CharVocabulary` from one, or from a plain list of its characters
    (in id order from 4; a list that starts with the reserved tokens
    `<pad>, <bos>, <eos>, <unk>` may include them)."""
    from seqkeras.data.text import CharVocabulary
    from seqkeras.data.tokens import RESERVED

    if isinstance(vocabulary, CharVocabulary):
        return vocabulary
    if isinstance(vocabulary, (list, tuple)) or hasattr(vocabulary,
                                                        "tolist"):
        tokens = [str(t) for t in list(vocabulary)]
        if tuple(tokens[:len(RESERVED)]) == RESERVED:
            tokens = tokens[len(RESERVED):]
        try:
            return CharVocabulary(tokens)
        except ValueError as error:
            raise ValueError(
                f"`{name}` received a `vocabulary` list it cannot use: "
                f"{error}. The raw-string signatures split text into "
                "characters; give the characters in id order from 4.") from None
    raise TypeError(
        f"`{name}` expects `vocabulary` to be a "
        "`seqkeras.data.CharVocabulary` or a list of its characters. "
        f"Received: {type(vocabulary).__name__}")


_TEXT_SIGNATURE = {"text": tf.TensorSpec((None,), tf.string, name="text")}


def _text_encoder(vocabulary):
    """`(encode, table)`: `encode(strings)` gives the ids (batch, time)
    int32, right-padded with 0, and each string's length, as
    `CharVocabulary.encode` does, in graph ops (`tf.strings` unicode
    splitting and a static hash table; unknown characters are UNK)."""
    characters = tf.constant(list(vocabulary.characters))
    ids = tf.range(FIRST_ID, FIRST_ID + len(vocabulary.characters),
                   dtype=tf.int64)
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(characters, ids),
        default_value=UNK)

    def encode(strings):
        chars = tf.strings.unicode_split(strings, "UTF-8")
        ids = tf.cast(table.lookup(chars), tf.int32)
        return ids.to_tensor(0), tf.cast(ids.row_lengths(), tf.int32)

    return encode, table


TEXT_INPUT = "token_ids"


def _one_step_at_least(x, padding):
    """Dense (batch, time) `x` widened to one padded column when `time`
    is 0 (every string of the batch empty): an empty text is one padded
    step, which the models mask."""
    short = tf.maximum(1 - tf.shape(x)[1], 0)
    return tf.pad(x, [[0, 0], [0, short]], constant_values=padding)


def _tokenizer_encoder(tokenizer):
    """`encode(strings)` -> ids (batch, time) int32 right-padded with 0
    (at least one column) from an object with a graph-op
    `encode(strings)` giving ragged ids."""

    def encode(strings):
        ids = tf.cast(tokenizer.encode(strings), tf.int32).to_tensor(0)
        return _one_step_at_least(ids, 0), None

    return encode


def text_function(model, vocabulary=None, tokenizer=None):
    """`(tf.function, resource)`: the `serve_text` signature of a model
    whose input is `token_ids` (classifier, tagger, language models): raw
    strings `text` (batch,) in, the model's named outputs out (padding
    masked as for padded ids), and for a classifier also `probabilities`
    (the softmax of its logits). The strings are split into characters
    of the `CharVocabulary` `vocabulary`, or encoded by `tokenizer` (an
    object with graph-op `encode(strings)` giving ragged ids, e.g.
    `seqkeras.data.WordTokenizer`)."""
    if [t.name for t in model.inputs] != [TEXT_INPUT]:
        raise ValueError(
            "`saved_model`: a raw-string signature needs a model whose one "
            f"input is `{TEXT_INPUT}`. Received inputs: "
            f"{[t.name for t in model.inputs]}")
    if tokenizer is not None:
        encode, resource = _tokenizer_encoder(tokenizer), tokenizer
    else:
        encode, resource = _text_encoder(vocabulary)
    names = list(model.output_names)
    from seqkeras.models.training import infer_task

    classes = infer_task(model) == "classes"

    @tf.function(input_signature=[_TEXT_SIGNATURE])
    def serve(inputs):
        ids, _ = encode(inputs["text"])
        outputs = model(ids, training=False)
        outputs = outputs if isinstance(outputs, (list, tuple, dict)) \
            else [outputs]
        result = (dict(outputs) if isinstance(outputs, dict)
                  else dict(zip(names, outputs)))
        if classes:
            result["probabilities"] = tf.nn.softmax(
                tf.cast(result[names[0]], tf.float32))
        return result

    return serve, resource


def graph_entity_spans(tags):
    """`(types, starts, ends)` of the entities in string IOB `tags`
    (batch, time; "" or "<pad>" at padding), (batch, entities) each,
    padded with "" / -1; ends exclusive. The rules of
    `seqkeras.data.entities.entity_spans` (conlleval's), in graph ops."""
    tags = tf.where(tf.equal(tags, "<pad>"), "", tags)
    entity = tf.strings.regex_full_match(tags, "[BI]-.+")
    prefix = tf.where(entity, tf.strings.substr(tags, 0, 2), "")
    kind = tf.where(entity, tf.strings.regex_replace(tags, "^[BI]-", ""),
                    "")
    batch = tf.shape(tags)[0]
    prev_entity = tf.concat([tf.zeros([batch, 1], tf.bool),
                             entity[:, :-1]], axis=1)
    prev_kind = tf.concat([tf.fill([batch, 1], ""), kind[:, :-1]], axis=1)
    continues = tf.logical_and(
        tf.logical_and(tf.equal(prefix, "I-"), prev_entity),
        tf.equal(kind, prev_kind))
    starts = tf.logical_and(entity, tf.logical_not(continues))
    next_continues = tf.concat([continues[:, 1:],
                                tf.zeros([batch, 1], tf.bool)], axis=1)
    ends = tf.logical_and(entity, tf.logical_not(next_continues))
    position = tf.broadcast_to(tf.range(tf.shape(tags)[1]), tf.shape(tags))
    return (tf.ragged.boolean_mask(kind, starts).to_tensor(""),
            tf.ragged.boolean_mask(position, starts).to_tensor(-1),
            tf.ragged.boolean_mask(position + 1, ends).to_tensor(-1))


def tagging_function(model, features, tag_vocabulary):
    """The `tag` signature of a tagger over word features: raw sentences
    `text` (batch,) in (split into words by `features.split`); out `words` and
    `tags` (batch, time) strings ("" at padding), and the entities:
    `entity_types` (batch, entities) strings, `entity_starts`,
    `entity_ends` (word indices, end exclusive; -1 padding). `features`
    is a `seqkeras.data.WordFeatures`, `tag_vocabulary` the tags in id
    order. A `CRFTagger`'s tags are its Viterbi path."""
    names = [t.name for t in model.inputs]
    table = tf.constant(list(tag_vocabulary))

    @tf.function(input_signature=[_TEXT_SIGNATURE])
    def tag(inputs):
        words = _one_step_at_least(
            features.split(inputs["text"]).to_tensor(""), "")
        feats = features(words)
        outputs = model({k: feats[k] for k in names}, training=False)
        if isinstance(outputs, dict) and "tags" in outputs:
            ids = outputs["tags"]
        else:
            logits = outputs["logits"] if isinstance(outputs, dict) \
                else outputs
            ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        tags = tf.gather(table, ids)
        tags = tf.where(tf.equal(words, ""), "", tags)
        types, starts, ends = graph_entity_spans(tags)
        return {"words": words, "tags": tags, "entity_types": types,
                "entity_starts": starts, "entity_ends": ends}

    return tag


def translate_function(model, source_tokenizer, target_tokenizer,
                       max_length, beam_width=4, length_penalty_alpha=0.0,
                       eos_id=None):
    """The `translate` signature of a seq2seq model: raw source strings
    `text` (batch,) in, target strings `text` out, with the source
    tokenizer, beam search (greedy when `beam_width` is 1) and the target
    detokenizer all in the graph. The tokenizers are objects with graph-op
    `encode(strings, add_eos=...)` (ragged ids) and `decode(ids)`, e.g.
    `seqkeras.data.SubwordTokenizer`s whose vocabulary sizes are the
    model's."""
    from seqkeras.data.tokens import EOS, PAD
    from seqkeras.models.generation import check_generative, generate

    check_generative("saved_model (translate)", model)
    key = getattr(model, "conditioning_input", None)
    sizes = getattr(model, "vocabulary_sizes", {})
    for tokenizer, name in ((source_tokenizer, key),
                            (target_tokenizer, model.prompt_input)):
        size = getattr(tokenizer, "vocabulary_size", None)
        if name not in sizes or size != sizes[name]:
            raise ValueError(
                "`saved_model` (translate): the tokenizer for "
                f"`{name}` has {size} tokens, the model "
                f"{sizes.get(name)}; export the tokenizers the model was "
                "trained with")
    eos_id = EOS if eos_id is None else eos_id

    @tf.function(input_signature=[_TEXT_SIGNATURE])
    def translate(inputs):
        ids = source_tokenizer.encode(inputs["text"], add_eos=True)
        ids = ids.to_tensor(PAD)
        if beam_width > 1:
            out, _ = generate(model, ids, max_length=max_length,
                              strategy="beam", beam_width=beam_width,
                              length_penalty_alpha=length_penalty_alpha,
                              eos_id=eos_id, jit_compile=False)
        else:
            out = generate(model, ids, max_length=max_length, eos_id=eos_id,
                           jit_compile=False)
        return {"text": target_tokenizer.decode(out[:, 1:])}  # no BOS

    return translate


def saved_model(model, path, overwrite=False, generate=None,
                vocabulary=None, target="serving", translate=None,
                tokenizer=None, tagging=None):
    """Writes `model` as a SavedModel at `path` (e.g.
    `saved_models/<name>/<version>`) with a `serving_default` signature whose
    inputs and outputs carry the model's names (`token_ids` -> `logits`).

    Args:
        generate: for generative models, a dict of `generate_functions`
            options (`max_length` required; `beam_width`,
            `length_penalty_alpha`, `eos_id`): adds the `generate`,
            `generate_beam` (and with `vocabulary`, `generate_text`)
            signatures.
        vocabulary: the model's `CharVocabulary`: adds the raw-string
            signatures, `serve_text` (models over `token_ids`) and, with
            `generate`, `generate_text`.
        translate: for a seq2seq model trained on subword text, a dict of
            `translate_function` arguments (`source_tokenizer`,
            `target_tokenizer`, `max_length`; `beam_width`,
            `length_penalty_alpha`, `eos_id`): adds the `translate`
            signature, strings in and strings out.
        tokenizer: for a model over `token_ids` trained on words or
            subwords, its tokenizer (graph-op `encode(strings)`, e.g.
            `seqkeras.data.WordTokenizer`): adds `serve_text`, strings in,
            the model's outputs (and a classifier's `probabilities`) out.
        tagging: for a tagger over word features, a dict of
            `tagging_function` arguments (`features`, `tag_vocabulary`):
            adds the `tag` signature, sentences in, words, tags and entity
            spans out.

        target: `"serving"` (the default: standard TensorFlow ops only,
            which the TF Serving binary runs; no XLA-only op such as
            `XlaDynamicUpdateSlice`) or `"tflite"` (a graph for the TFLite
            converter, whose loop-buffer writes become the fast
            DYNAMIC_UPDATE_SLICE builtin; Python TensorFlow runs it, TF
            Serving does not).

    The graph is traced in `seqkeras.layers.export_mode(target)`. The files
    go to a temporary directory next to `path` first; `path` appears only
    when the write succeeded. An existing `path` raises unless `overwrite`;
    with `overwrite` the previous version is renamed aside, the new one
    moved in, and only then the previous one deleted.

    Returns:
        `path`.
    """
    if target not in export_targets.TARGETS:
        raise ValueError(
            "`saved_model` received an invalid value for `target`: expected "
            f"one of {export_targets.TARGETS}. Received: target={target!r}")
    refuse_stateful("saved_model", model)
    if vocabulary is not None:
        vocabulary = as_char_vocabulary("saved_model", vocabulary)
    path = check_target("saved_model", path, overwrite, want="dir")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    try:
        module = tf.Module()
        module.model = model  # tracks the variables
        with export_mode(target):
            check = target == "serving"  # TFLite has no Assert op
            module.serve = serving_function(model, check)
            signatures = {"serving_default":
                          module.serve.get_concrete_function()}
            resources = []
            if (vocabulary is not None or tokenizer is not None) and (
                    TEXT_INPUT in [t.name for t in model.inputs]):
                module.serve_text, table = text_function(
                    model, vocabulary, tokenizer)
                resources.append(table)
                signatures["serve_text"] = (
                    module.serve_text.get_concrete_function())
            if generate is not None:
                functions = generate_functions(model, vocabulary=vocabulary,
                                               check=check, **generate)
                resources += functions.pop("_resources", [])
                module.generators = functions
                for key, fn in functions.items():
                    signatures[key] = fn.get_concrete_function()
            if translate is not None:
                module.translate = translate_function(model, **translate)
                signatures["translate"] = (
                    module.translate.get_concrete_function())
            if tagging is not None:
                module.tag = tagging_function(model, **tagging)
                module.word_features = tagging["features"]
                signatures["tag"] = module.tag.get_concrete_function()
            module.resources = resources
            # inside export_mode too: saving traces the Keras model's own
            # functions (its default signature), which must not carry
            # training-graph (XLA-only) ops either
            tf.saved_model.save(module, tmp, signatures=signatures)
        replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def replace_dir(new, path):
    """Moves the directory `new` to `path`; an existing `path` is renamed
    aside first and deleted only once `new` is in place (a crash in
    between leaves the previous version or the new one, never neither)."""
    old = None
    if os.path.exists(path):
        old = tempfile.mkdtemp(prefix=".old-", dir=os.path.dirname(path))
        os.rmdir(old)
        os.replace(path, old)
    try:
        os.replace(new, path)
    except BaseException:
        if old is not None:
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
