"""Chatting with a Llama-family checkpoint: the checkpoint's chat template
(rendered with jinja2 as `transformers` renders it), its byte-level BPE
tokenizer, and the model's own cached decoding step: each turn's new
prompt tokens in one pass (prefill), then the reply one token at a time,
so each token shows as it comes, chosen by `seqkeras.decoding`'s
`choose_token` (the same tokens as `generate` for the same seed).

    python -m seqkeras.pretrained chat PATH [--prompt TEXT] [--sample]

`PATH` is a GGUF file or a Hugging Face directory (with `tokenizer.json`
and a chat template). Without `--prompt` it reads one user turn per line
from standard input and keeps the conversation.
"""

import numpy as np

from seqkeras.decoding import choose_token
from seqkeras.layers import validation


class ChatSession:
    """A conversation with a `DecoderLanguageModel` and its tokenizer.

    Each turn renders the whole conversation with the chat template,
    encodes it, and feeds the model only the tokens its key/value cache
    does not hold yet (the previous turns stay cached), in one pass; the
    reply is decoded one token at a time by the model's step
    (`call_with_cache` over a cache of `context` positions, compiled as
    the library's policy says for generation, `choose_jit_compile`), its
    weights laid out once (`prepare_step_weights`). Tokens are chosen by
    `seqkeras.decoding.choose_token`: greedy, or sampled with a stateless
    draw from the seed and the position, as `generate(...,
    strategy="sample", seed=...)` draws them.

    Args:
        model: a model with the generation contract (`init_cache`,
            `call_with_cache`), e.g. `llama_language_model` loaded with
            `load_pretrained`.
        tokenizer: a `seqkeras.data.ByteLevelBPETokenizer` with a chat
            template.
        eos_ids: ids that end a reply (default:
            `seqkeras.models.instruction.end_of_turn_ids`: the tokenizer's
            EOS and the template's end-of-turn tokens in the vocabulary).
        context: cached positions (the conversation's longest length).
        system: an optional system message (else the template's default).

    Examples:
        >>> import numpy as np, seqkeras
        >>> from seqkeras.pretrained.chat import sample_token
        >>> int(sample_token(np.array([0.1, 3.0, 0.2]), temperature=0))  # greedy
        1
    """

    def __init__(self, model, tokenizer, eos_ids=None, context=2048, system=None):
        where = "ChatSession"
        self.context = validation.positive_int(where, "context", context)
        limit = getattr(model, "max_generation_length", None)
        if limit is not None:
            self.context = min(self.context, limit)
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(f"`{where}`: the tokenizer has no chat template")
        self.model, self.tokenizer = model, tokenizer
        if eos_ids is None:
            from seqkeras.models.instruction import end_of_turn_ids

            eos_ids = end_of_turn_ids(tokenizer)
        self.eos_ids = sorted(set(int(i) for i in eos_ids))
        self.messages = [] if system is None else [{"role": "system", "content": system}]
        self.fed = []  # the ids the cache holds, in order
        self.cache = None
        self._steps = None

    def _functions(self):
        """`(prefill, step)`: the model's step on (1, T) new tokens (one
        trace for every T) and on one token, compiled as
        `choose_jit_compile(model, "generate")` says; both read the step
        weights laid out once here."""
        import tensorflow as tf

        from seqkeras.models.generation import model_step
        from seqkeras.models.tasks import choose_jit_compile

        if self._steps is None:
            step = model_step(self.model)
            jit = choose_jit_compile(self.model, purpose="generate")[0]
            # several tokens: a plain graph (one trace for every length; XLA
            # would compile one program per prompt length)
            prefill = tf.function(step, reduce_retracing=True, autograph=False)
            one = tf.function(step, jit_compile=jit, reduce_retracing=True, autograph=False)
            self._steps = prefill, one
        return self._steps

    def _feed(self, tokens):
        """Feeds `tokens` (a list of ids) at the next positions in one pass;
        returns the logits (1, vocab) after the last."""
        import tensorflow as tf

        if len(self.fed) + len(tokens) > self.context:
            raise ValueError(
                f"`ChatSession`: the conversation is longer than context={self.context} tokens"
            )
        prefill, one = self._functions()
        index = tf.constant(len(self.fed), "int32")
        if len(tokens) == 1:
            logits, self.cache = one(tf.constant(tokens, "int32"), self.cache, index)
        else:
            logits, self.cache = prefill(tf.constant([tokens], "int32"), self.cache, index)
        self.fed += [int(t) for t in tokens]
        return logits

    def _prompt_ids(self):
        text = self.tokenizer.apply_chat_template(self.messages, add_generation_prompt=True)
        return [int(i) for i in self.tokenizer.encode([text])[0].numpy()]

    def reply(self, text, max_new_tokens=256, temperature=0.0, top_k=None, top_p=None, seed=None):
        """Yields the reply to the user turn `text` piece by piece (text as
        it decodes: a piece ends on a whole UTF-8 character); the
        conversation keeps the reply. `temperature` 0 is greedy; a `seed`
        (default: a random one) gives the tokens `generate(...,
        strategy="sample", seed=seed)` gives on the rendered prompt."""
        from seqkeras.decoding import check_sampling

        validation.positive_int("ChatSession.reply", "max_new_tokens", max_new_tokens)
        check_sampling(temperature, top_k, top_p, 0 if seed is None else seed, "ChatSession.reply")
        if not isinstance(text, str):
            raise TypeError(
                f"`ChatSession.reply` expects `text` to be a str. Received: {type(text).__name__}"
            )
        # a generator of its own, so that the checks above raise at the
        # call, not at the first `next`
        return self._reply(text, max_new_tokens, temperature, top_k, top_p, seed)

    def _reply(self, text, max_new_tokens, temperature, top_k, top_p, seed):
        self.messages.append({"role": "user", "content": text})
        ids = self._prompt_ids()
        shared = 0
        while shared < min(len(ids), len(self.fed)) and ids[shared] == self.fed[shared]:
            shared += 1
        if self.cache is None or shared < len(self.fed):  # the cache cannot be reused
            self.cache = self.model.init_cache(None, 1, self.context)
            self.fed, shared = [], 0
        if shared == len(ids):  # the prompt was all cached: feed its last token again
            self.fed.pop()
            shared -= 1
        logits = self._feed(ids[shared:])
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31 - 1))
        reply, shown = [], ""
        for _ in range(max_new_tokens):
            # the logits follow position len(fed) - 1, as in `generate`
            token = int(choose_token(logits, len(self.fed) - 1, temperature, top_k, top_p, seed)[0])
            if token in self.eos_ids:
                self.fed.append(token)  # the template's end of turn, cached
                break
            reply.append(token)
            text_so_far = self._decode(reply)
            if not text_so_far.endswith("\ufffd"):  # a whole character
                yield text_so_far[len(shown) :]
                shown = text_so_far
            if len(self.fed) >= self.context:
                break
            logits = self._feed([token])
        text = self._decode(reply)
        if len(text) > len(shown):  # the end of the reply (an incomplete character too)
            yield text[len(shown) :]
        self.messages.append({"role": "assistant", "content": text})
        # the rendered conversation may differ from what was fed (e.g. the
        # end-of-turn token); the next turn's prefix match settles it

    def _decode(self, ids):
        if not ids:
            return ""
        # special tokens (a template's markers) are not text, as the served
        # `chat` signature decodes them
        text = self.tokenizer.decode([ids], skip_special_tokens=True)
        return text.numpy()[0].decode("utf-8", "replace")


def sample_token(logits, temperature=0.0, top_k=None, top_p=None, rng=None):
    """The next token from float `logits` (vocab,): argmax when
    `temperature` is 0, else a draw from softmax(logits / temperature)
    restricted to the `top_k` most likely and the smallest set whose
    probability reaches `top_p`: `seqkeras.decoding.choose_token` with a
    seed drawn from `rng` (a NumPy generator; default a new one)."""
    rng = np.random.default_rng() if rng is None else rng
    seed = int(rng.integers(2**31 - 1)) if temperature else 0
    logits = np.asarray(logits, "float32")[None]
    return int(choose_token(logits, 0, temperature, top_k, top_p, seed)[0])


def load_chat(path, context=2048, system=None):
    """A `ChatSession` over the checkpoint at `path` (a GGUF file or a
    Hugging Face directory): its model loaded with `load_pretrained`, its
    tokenizer with `ByteLevelBPETokenizer.load`."""
    from seqkeras.data import ByteLevelBPETokenizer
    from seqkeras.pretrained.checkpoints import read_checkpoint
    from seqkeras.pretrained.models import llama_language_model
    from seqkeras.pretrained.models import load_pretrained

    checkpoint = read_checkpoint(path)
    if checkpoint.model_type != "llama":
        raise ValueError(
            f"`load_chat`: {path} is a {checkpoint.model_type} checkpoint; chat needs a "
            "Llama-family one (llama, qwen2, mistral)"
        )
    model = llama_language_model(checkpoint.architecture)
    load_pretrained(model, checkpoint)
    tokenizer = ByteLevelBPETokenizer.load(path)
    eos = [i for i in checkpoint.architecture.get("eos_ids", []) if i is not None]
    session = ChatSession(model, tokenizer, context=context, system=system)
    session.eos_ids = sorted(set(session.eos_ids) | set(eos))
    return session


def add_parser(sub):
    """The `chat` subcommand of `python -m seqkeras.pretrained`."""
    chat = sub.add_parser("chat", help="stream replies using the checkpoint's chat template")
    chat.add_argument("path", help="a GGUF file or a Hugging Face directory")
    chat.add_argument("--prompt", help="one user turn (default: read turns from stdin)")
    chat.add_argument("--system", help="a system message (default: the template's)")
    chat.add_argument("--max-new-tokens", type=int, default=256)
    chat.add_argument("--sample", action="store_true", help="sample instead of greedy")
    chat.add_argument("--temperature", type=float, default=0.7)
    chat.add_argument("--top-k", type=int, default=50)
    chat.add_argument("--top-p", type=float, default=0.9)
    chat.add_argument("--seed", type=int, default=None)
    chat.add_argument("--context", type=int, default=2048, help="cached positions")
    return chat


def run(args):
    """Runs the `chat` subcommand: one `--prompt`, or a conversation of
    one user turn per line of standard input; the reply streams to
    standard output, its timing to standard error."""
    import sys
    import time

    session = load_chat(args.path, context=args.context, system=args.system)
    options = dict(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature if args.sample else 0.0,
        top_k=args.top_k if args.sample else None,
        top_p=args.top_p if args.sample else None,
        seed=args.seed,
    )

    def turn(text):
        start, count = time.perf_counter(), 0
        for piece in session.reply(text, **options):
            sys.stdout.write(piece)
            sys.stdout.flush()
            count += 1
        seconds = time.perf_counter() - start
        sys.stdout.write("\n")
        sys.stderr.write(f"[{count} tokens in {seconds:.1f} s]\n")

    if args.prompt is not None:
        turn(args.prompt)
        return 0
    for line in sys.stdin:
        if line.strip():
            turn(line.rstrip("\n"))
    return 0
