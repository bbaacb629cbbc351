"""Instruction fine-tuning of a decoder language model: each prompt rendered
as a user turn through the tokenizer's chat template, the assistant's
answer appended, and the answer's tokens the only targets.

- `instruction_data`: the token ids of every (prompt, answer) pair and
  where its answer starts;
- `InstructionBatches`: length-sorted, padded batches for `model.fit`;
- `answer_model`: the language model, sharing its layers, computing the
  logits of the answer positions only (a 49,152-word vocabulary's logits
  at every position would cost as much as a fifth of the model);
- `generate_answers`: greedy answers decoded with `generate`, for
  evaluation.
"""

import math

import keras
import numpy as np
from keras import ops

from seqkeras.layers import validation


def _strings(where, name, values):
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise TypeError(
            f"`{where}` expects `{name}` as a list of strings. Received: {type(values).__name__}"
        )
    bad = [v for v in values if not isinstance(v, str)]
    if bad:
        raise TypeError(f"`{where}` expects `{name}` as strings. Received: {bad[0]!r}")
    return list(values)


def _conversation(system, prompt, answer=None):
    messages = [] if system is None else [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": prompt})
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    return messages


def render_prompts(tokenizer, prompts, system=None):
    """Each prompt as the chat template renders a user turn followed by
    the assistant's header (`add_generation_prompt=True`)."""
    prompts = _strings("render_prompts", "prompts", prompts)
    return [tokenizer.apply_chat_template(_conversation(system, p)) for p in prompts]


#: Stands for the user's text while the chat template renders one turn.
_MARKER = "\u2063seqkeras-user-turn\u2063"


def chat_text(tokenizer, system=None):
    """`(prefix, suffix)`: the chat template's text before and after one
    user turn's content (with the assistant's header after it)."""
    messages = [] if system is None else [{"role": "system", "content": system}]
    rendered = tokenizer.apply_chat_template(messages + [{"role": "user", "content": _MARKER}])
    if rendered.count(_MARKER) != 1:
        raise ValueError(
            "`chat_text`: the chat template does not render a user turn's content once as it is"
        )
    prefix, suffix = rendered.split(_MARKER)
    return prefix, suffix


def _ids(tokenizer, texts):
    return [np.asarray(row, np.int32) for row in tokenizer.encode(texts).to_list()]


def instruction_data(tokenizer, prompts, answers, system=None):
    """Token ids for instruction fine-tuning.

    Each pair renders twice through `tokenizer`'s chat template: the
    prompt as a user turn with the assistant's header, and the whole
    conversation with the answer as the assistant's turn. The tokens the
    second adds (the answer and the template's end of turn, trailing
    whitespace dropped) are the answer's: the only targets.

    Args:
        tokenizer: a tokenizer with `apply_chat_template` and `encode`
            (`seqkeras.data.ByteLevelBPETokenizer`).
        prompts, answers: lists of strings of one length.
        system: an optional system message (else the template's default).

    Returns:
        `{"token_ids": [int32 array per example], "answer_start": int32
        (n,)}`: the prompt's and answer's ids, and the index of the
        answer's first token.

    Examples:
        >>> import numpy as np
        >>> class Chars:  # a stand-in tokenizer: one id per character
        ...     def apply_chat_template(self, messages, add_generation_prompt=True):
        ...         text = "".join(f"<{m['role']}>{m['content']};" for m in messages)
        ...         return text + ("<assistant>" if add_generation_prompt else "")
        ...     def encode(self, texts):
        ...         import tensorflow as tf
        ...         return tf.ragged.constant([[ord(c) for c in t] for t in texts])
        >>> data = instruction_data(Chars(), ["hi"], ["yo"])
        >>> ids, start = data["token_ids"][0], int(data["answer_start"][0])
        >>> "".join(map(chr, ids[start:]))
        'yo;'
    """
    where = "instruction_data"
    prompts = _strings(where, "prompts", prompts)
    answers = _strings(where, "answers", answers)
    if len(prompts) != len(answers):
        raise ValueError(
            f"`{where}` expects as many answers as prompts. Received: {len(prompts)} prompts, "
            f"{len(answers)} answers"
        )
    if not prompts:
        raise ValueError(f"`{where}` expects at least one prompt in `prompts`. Received: []")
    heads = render_prompts(tokenizer, prompts, system)
    tails = []
    for head, prompt, answer in zip(heads, prompts, answers):
        whole = tokenizer.apply_chat_template(
            _conversation(system, prompt, answer), add_generation_prompt=False
        )
        if not whole.startswith(head):
            raise ValueError(
                f"`{where}`: the chat template renders the answered conversation without the "
                f"prompt's rendering as its start, so the answer cannot be cut out. Received: "
                f"{whole!r} and {head!r}"
            )
        tails.append(whole[len(head) :].rstrip())
    heads, tails = _ids(tokenizer, heads), _ids(tokenizer, tails)
    empty = [i for i, t in enumerate(tails) if not len(t)]
    if empty:
        raise ValueError(
            f"`{where}`: answer {empty[0]} has no tokens. Received: {answers[empty[0]]!r}"
        )
    return {
        "token_ids": [np.concatenate([h, t]) for h, t in zip(heads, tails)],
        "answer_start": np.array([len(h) for h in heads], np.int32),
    }


def _check_data(where, data):
    """`instruction_data`'s result, checked: `(token_ids, answer_start)`."""
    if not isinstance(data, dict) or not {"token_ids", "answer_start"} <= set(data):
        raise ValueError(
            f"`{where}` expects `data` to be `instruction_data`'s result, a dict with "
            "`token_ids` and `answer_start`. Received: "
            f"{sorted(data) if isinstance(data, dict) else type(data).__name__}"
        )
    ids = list(data["token_ids"])
    starts = np.asarray(data["answer_start"])
    if not ids or starts.shape != (len(ids),) or starts.dtype.kind not in "iu":
        raise ValueError(
            f"`{where}` expects `data` with at least one example and one integer "
            "`answer_start` per `token_ids` row. Received: "
            f"{len(ids)} rows, answer_start of shape {starts.shape} and dtype {starts.dtype}"
        )
    lengths = np.array([len(x) for x in ids])
    bad = np.flatnonzero((starts < 1) | (starts >= lengths))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"`{where}` expects each `data` answer_start inside its row (1 <= start < "
            f"length). Received: answer_start={int(starts[i])} for row {i} of length "
            f"{int(lengths[i])}"
        )
    return ids, starts.astype(np.int32)


class InstructionBatches(keras.utils.PyDataset):
    """`instruction_data` as `model.fit` batches for `answer_model`:
    examples of similar length together (sorted, then cut into batches,
    whose order is shuffled each epoch), right-padded with `pad_id` to a
    multiple of `multiple` tokens (few shapes: XLA compiles one program
    per shape).

    Each batch is `({"token_ids": (b, L), "answer_positions": (b, K)},
    answer ids (b, K), weights (b, K))`: the positions whose logits predict
    the answer's tokens (each one before its token), the answer's ids, and
    weight 0 where an answer is shorter than the batch's longest.

    Args:
        data: `instruction_data`'s result.
        batch_size: examples per batch.
        pad_id: the padding id (padding follows the text: causal attention
            never reads it for the answer).
        multiple: padded lengths are multiples of this.
        shuffle: shuffle the batches' order each epoch.
        seed: the shuffling's seed.
    """

    def __init__(self, data, batch_size=16, pad_id=0, multiple=16, shuffle=True, seed=0, **kwargs):
        super().__init__(**kwargs)
        where = "InstructionBatches"
        self.batch_size = validation.positive_int(where, "batch_size", batch_size)
        self.multiple = validation.positive_int(where, "multiple", multiple)
        self.pad_id = validation.non_negative_int(where, "pad_id", pad_id)
        self.ids, self.starts = _check_data(where, data)
        order = np.argsort([len(x) for x in self.ids], kind="stable")
        self.groups = [
            order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)
        ]
        self.widths = [
            int(math.ceil(max(len(self.ids[i]) for i in g) / self.multiple) * self.multiple)
            for g in self.groups
        ]
        # one answer width for every batch: Keras' TensorFlow adapter fixes
        # each axis that its first two batches agree on
        self.answer_width = max(len(x) - s for x, s in zip(self.ids, self.starts))
        self.shuffle = shuffle
        self.rng = np.random.default_rng(seed)
        self.order = np.arange(len(self.groups))
        if shuffle:
            self.rng.shuffle(self.order)
        self._vary_first_widths()

    def _vary_first_widths(self):
        """Puts a batch of another width second when there is one: Keras'
        TensorFlow adapter reads the first two batches for the dataset's
        shapes, and an axis they agree on would be fixed."""
        first = self.widths[self.order[0]]
        other = [k for k in range(1, len(self.order)) if self.widths[self.order[k]] != first]
        if other:
            k = other[0]
            self.order[1], self.order[k] = self.order[k], self.order[1]

    def __len__(self):
        return len(self.groups)

    def on_epoch_end(self):
        if self.shuffle:
            self.rng.shuffle(self.order)
            self._vary_first_widths()

    def __getitem__(self, index):
        group = self.groups[self.order[index]]
        width = self.widths[self.order[index]]
        answer = self.answer_width
        tokens = np.full((len(group), width), self.pad_id, np.int32)
        positions = np.zeros((len(group), answer), np.int32)
        targets = np.zeros((len(group), answer), np.int32)
        weights = np.zeros((len(group), answer), np.float32)
        for row, i in enumerate(group):
            ids, start = self.ids[i], self.starts[i]
            tokens[row, : len(ids)] = ids
            n = len(ids) - start
            positions[row, :n] = np.arange(start - 1, len(ids) - 1)
            targets[row, :n] = ids[start:]
            weights[row, :n] = 1.0
        return {"token_ids": tokens, "answer_positions": positions}, targets, weights


def answer_model(model):
    """A model sharing `model`'s layers (a `DecoderLanguageModel`:
    `decoder_language_model`, `llama_language_model`) that computes the
    logits at given positions only: `{"token_ids": (b, L),
    "answer_positions": (b, K)}` -> float32 logits (b, K, vocab). Training
    it (e.g. on `InstructionBatches`) trains `model`'s trainable weights
    (with `with_lora`, the adapters).

    Args:
        model: a `DecoderLanguageModel`.

    Returns:
        A `SequenceModel` (a functional `keras.Model`) of the two inputs,
        whose `token_ids` are checked against the vocabulary.

    Examples:
        >>> import numpy as np, seqkeras
        >>> lm = seqkeras.models.decoder_language_model(
        ...     vocab_size=30, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16)
        >>> ids = np.array([[3, 4, 5, 6]])
        >>> part = answer_model(lm)({"token_ids": ids, "answer_positions": np.array([[2]])})
        >>> bool(np.allclose(part[:, 0], lm(ids)[:, 2], atol=1e-5))
        True
    """
    from seqkeras.models.base import SequenceModel
    from seqkeras.models.decoder_lm import DecoderLanguageModel

    if not isinstance(model, DecoderLanguageModel):
        raise TypeError(
            "`answer_model` expects a DecoderLanguageModel (decoder_language_model, "
            f"llama_language_model). Received: {type(model).__name__}"
        )
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    positions = keras.Input((None,), dtype="int32", name="answer_positions")
    x = model.part("embedding")(token_ids)
    for block in model.part("blocks"):
        x = block(x)
    x = model.part("norm")(x)
    x = ops.take_along_axis(x, ops.expand_dims(positions, -1), axis=1)
    dense = model.part("logits")
    x = model.part("embedding")(x, reverse=True) if dense is None else dense(x)
    logits = keras.layers.Activation("linear", dtype="float32", name="answer_logits")(x)
    return SequenceModel(
        {"token_ids": token_ids, "answer_positions": positions},
        logits,
        vocabulary_sizes={"token_ids": model.vocabulary_sizes[model.prompt_input]},
    )


#: The chat templates' end-of-turn tokens (ChatML, Llama 3, Phi).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>")


def end_of_turn_ids(tokenizer):
    """Every id that ends an assistant turn: the vocabulary's end-of-turn
    tokens (`END_OF_TURN_TOKENS`) and the tokenizer's EOS, sorted."""
    index = {t: i for i, t in enumerate(tokenizer.vocabulary)}
    ids = [index[t] for t in END_OF_TURN_TOKENS if t in index]
    eos = getattr(tokenizer, "eos_id", None)
    return sorted(set(ids + ([] if eos is None else [eos])))


def end_of_turn_id(tokenizer):
    """The id that ends an assistant turn: the vocabulary's first
    end-of-turn token (`END_OF_TURN_TOKENS`), else the tokenizer's EOS
    (None if neither)."""
    index = {t: i for i, t in enumerate(tokenizer.vocabulary)}
    for token in END_OF_TURN_TOKENS:
        if token in index:
            return index[token]
    return getattr(tokenizer, "eos_id", None)


def answer_ids(
    model, tokenizer, prompts, system=None, max_new_tokens=4, batch_size=32, pad_id=0, multiple=16
):
    """Greedy answer ids of `model` to `prompts` (each a user turn rendered
    with the chat template), decoded with `seqkeras.models.generate` up to
    the end of the turn (not included) or `max_new_tokens`. Prompts are
    sorted by length and right-padded to a multiple of `multiple` tokens
    per batch.

    Args:
        model: a language model of `seqkeras.models` or
            `seqkeras.pretrained` (not a conditioned one).
        tokenizer: its `ByteLevelBPETokenizer`, with a chat template.
        prompts: the user turns, strings.
        system: an optional system message rendered before each turn.
        max_new_tokens: the most answer tokens per prompt, a positive int.
        batch_size: prompts per `generate` call, a positive int.
        pad_id: the id the prompts are right-padded with.
        multiple: each batch's width is a multiple of this many tokens (few
            widths: few compiled decoding loops), a positive int.

    Returns:
        A list of id lists, in the prompts' order.
    """
    return _answer_ids(
        "answer_ids",
        model,
        tokenizer,
        prompts,
        system,
        max_new_tokens,
        batch_size,
        pad_id,
        multiple,
    )


def _answer_ids(
    where, model, tokenizer, prompts, system, max_new_tokens, batch_size, pad_id, multiple
):
    from seqkeras.models.generation import check_generative
    from seqkeras.models.generation import generate

    prompts = _strings(where, "prompts", prompts)
    max_new_tokens = validation.positive_int(where, "max_new_tokens", max_new_tokens)
    batch_size = validation.positive_int(where, "batch_size", batch_size)
    multiple = validation.positive_int(where, "multiple", multiple)
    check_generative(where, model)
    if getattr(model, "conditioning_input", None) is not None:
        raise ValueError(
            f"`{where}` expects `model` to be a decoder language model. Received: "
            f"{model.name!r} ({type(model).__name__}), conditioned on `{model.conditioning_input}`"
        )
    eos = end_of_turn_id(tokenizer)
    ids = _ids(tokenizer, render_prompts(tokenizer, prompts, system))
    order = np.argsort([len(x) for x in ids], kind="stable")
    answers = [None] * len(prompts)
    for i in range(0, len(order), batch_size):
        group = order[i : i + batch_size]
        lengths = np.array([len(ids[j]) for j in group], np.int32)
        width = int(math.ceil(lengths.max() / multiple) * multiple)
        batch = np.full((len(group), width), pad_id, np.int32)
        for row, j in enumerate(group):
            batch[row, : lengths[row]] = ids[j]
        out = np.asarray(
            generate(
                model,
                prompt=batch,
                prompt_lengths=lengths,
                max_length=width + max_new_tokens,
                eos_id=eos,
            )
        )
        for row, j in enumerate(group):
            new = out[row, lengths[row] : lengths[row] + max_new_tokens].tolist()
            answers[j] = new[: new.index(eos)] if eos is not None and eos in new else new
    return answers


def generate_answers(
    model, tokenizer, prompts, system=None, max_new_tokens=4, batch_size=32, pad_id=0, multiple=16
):
    """`answer_ids` decoded to strings, stripped.

    Args:
        model, tokenizer, prompts, system: as `answer_ids`'.
        max_new_tokens, batch_size, pad_id, multiple: as `answer_ids`'.

    Returns:
        A list of strings, in the prompts' order.
    """
    found = _answer_ids(
        "generate_answers (answer_ids)",
        model,
        tokenizer,
        prompts,
        system,
        max_new_tokens,
        batch_size,
        pad_id,
        multiple,
    )
    return [
        tokenizer.decode(np.array([new], np.int32)).numpy()[0].decode("utf-8").strip()
        for new in found
    ]
