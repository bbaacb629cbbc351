"""The files a byte-level BPE tokenizer is read from and written to:
GGUF metadata (through `seqkeras._gguf`, the `gguf` package) and Hugging
Face's `tokenizer.json` / `tokenizer_config.json`; each reader returns
`ByteLevelBPETokenizer`'s constructor arguments. Also GPT-2's byte
alphabet, which both the files and the tokenizer spell tokens in."""

import json
import os

from seqkeras import _gguf

# transformers' GGUF loader (integrations/gguf/gguf_tokenizer_mapping.py):
# `tokenizer.ggml.pre` values it gives a split of their own; every other
# value keeps GPT-2's split (the ByteLevel pre-tokenizer), "smollm" too.
_GGUF_OTHER_SPLITS = frozenset(
    "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano dbrx "
    "smaug-bpe tekken qwen2 deepseek-r1-qwen kormo f2llmv2 megrez qwen35 gpt-4o llama4 "
    "kanana2 talkie minimax-m2".split()
)
_GGUF_CONTROL, _GGUF_USER_DEFINED = 3, 4
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"


def bytes_to_unicode():
    """GPT-2's map of the 256 byte values to printable characters (a dict
    int -> str): printable Latin-1 bytes are themselves, the others are
    U+0100 onwards ("Ġ" is the space)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    chars, extra = {}, 0
    for b in range(256):
        if b in kept:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


_BYTE_CHARS = bytes_to_unicode()
_CHAR_BYTES = {c: b for b, c in _BYTE_CHARS.items()}


# -- GGUF ----------------------------------------------------------------


def read_gguf_metadata(path):
    """The key-value metadata of a GGUF file as a dict (strings as str,
    arrays as lists), read with the `gguf` package (`seqkeras._gguf`, the
    checkpoint reader's too)."""
    return _gguf.metadata(_gguf.reader("read_gguf_metadata", path))


def _from_gguf(path, where):
    """The constructor's arguments from a GGUF file's metadata, as
    transformers' GGUF loader builds the tokenizer."""
    meta = read_gguf_metadata(path)
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(
            f"{where} expects a byte-level BPE GGUF (tokenizer.ggml.model 'gpt2'). "
            f"Received: {model!r} in {path}"
        )
    pre = meta.get("tokenizer.ggml.pre")
    if pre in _GGUF_OTHER_SPLITS:
        raise ValueError(
            f"{where} supports GGUF pre-tokenizers that transformers reads with GPT-2's split. "
            f"Received: tokenizer.ggml.pre {pre!r} in {path} (its split is not implemented)"
        )
    alphabet = set(_CHAR_BYTES)
    tokens = [
        t if set(t) <= alphabet else "".join(_BYTE_CHARS[b] for b in t.encode("utf-8"))
        for t in meta["tokenizer.ggml.tokens"]
    ]
    kinds = meta.get("tokenizer.ggml.token_type")
    kinds = list(kinds) if kinds is not None else [1] * len(tokens)
    raw = meta["tokenizer.ggml.tokens"]
    special = [
        t
        for t, kind, r in zip(tokens, kinds, raw)
        if (kind == _GGUF_CONTROL and set(r) <= alphabet) or kind == _GGUF_USER_DEFINED
    ]

    def token_id(key):
        value = meta.get(f"tokenizer.ggml.{key}")
        return None if value is None else int(value)

    bos, eos = token_id("bos_token_id"), token_id("eos_token_id")
    # transformers adds the BOS / EOS tokens as special tokens too
    special += [tokens[i] for i in (bos, eos) if i is not None]
    return {
        "vocabulary": tokens,
        "merges": meta.get("tokenizer.ggml.merges", []),
        "pre_tokenizer": "gpt2",
        "bos_id": bos,
        "eos_id": eos,
        "special_tokens": list(dict.fromkeys(special)),
        "add_bos": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "chat_template": meta.get("tokenizer.chat_template"),
        "pad_id": token_id("padding_token_id"),
        "unk_id": token_id("unknown_token_id"),
    }


# -- Hugging Face tokenizer.json -----------------------------------------


def _byte_level_ok(spec, path, where, field):
    if spec.get("type") != "ByteLevel":
        return False
    if spec.get("add_prefix_space", False):
        raise ValueError(f"{where}: {path} {field}.add_prefix_space must be false. Received: true")
    if not spec.get("use_regex", True):
        raise ValueError(f"{where}: {path} {field}.use_regex must be true. Received: false")
    return True


def _pre_tokenizer_name(spec, path, where):
    spec = spec or {}
    if _byte_level_ok(spec, path, where, "pre_tokenizer"):
        return "gpt2"
    if spec.get("type") == "Sequence":
        steps = spec.get("pretokenizers") or []
        if (
            len(steps) == 2
            and steps[0].get("type") == "Digits"
            and steps[0].get("individual_digits")
            and _byte_level_ok(steps[1], path, where, "pre_tokenizer.pretokenizers[1]")
        ):
            return "smollm"
    raise ValueError(
        f"{where}: {path} pre_tokenizer must be ByteLevel, or Digits(individual_digits) then "
        f"ByteLevel. Received: {json.dumps(spec)[:200]}"
    )


def _token_content(value):
    if isinstance(value, dict):
        return value.get("content")
    return value


def read_settings(path, where):
    """`ByteLevelBPETokenizer`'s constructor arguments from `path`: a GGUF
    file, a directory holding a `tokenizer.json`, or a `tokenizer.json`
    itself; a ValueError naming `where` for anything else."""
    path = os.fspath(path)
    if os.path.isfile(path) and _gguf.is_gguf(path):
        return _from_gguf(path, where)
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, TOKENIZER_JSON)):
        return _from_hf(os.path.join(path, TOKENIZER_JSON), path, where)
    if os.path.isfile(path) and path.endswith(".json"):
        return _from_hf(path, os.path.dirname(path), where)
    raise ValueError(
        f"{where} expects a GGUF file or a directory with {TOKENIZER_JSON}. Received: {path}"
    )


def read_tokenizer_json(path, model_type, where):
    """`(spec, model)`: a Hugging Face `tokenizer.json` and its `model`
    entry, which must be of `model_type` ("BPE", "WordPiece"); a
    ValueError naming `where` otherwise."""
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    model = spec.get("model") or {}
    if model.get("type") != model_type:
        raise ValueError(
            f"{where}: {path} model.type must be {model_type!r}. Received: {model.get('type')!r}"
        )
    return spec, model


def _from_hf(path, directory, where):
    """The constructor's arguments from a `tokenizer.json` (and the
    `tokenizer_config.json` / `chat_template.jinja` beside it)."""
    spec, model = read_tokenizer_json(path, "BPE", where)
    for field, default in (
        ("dropout", None),
        ("continuing_subword_prefix", ""),
        ("end_of_word_suffix", ""),
        ("byte_fallback", False),
        ("ignore_merges", False),
    ):
        value = model.get(field)
        if value not in (None, default):
            raise ValueError(
                f"{where}: {path} model.{field} must be {json.dumps(default)}. "
                f"Received: {json.dumps(value)}"
            )
    if spec.get("normalizer") is not None:
        raise ValueError(
            f"{where}: {path} normalizer must be null. Received: "
            f"{json.dumps(spec['normalizer'])[:200]}"
        )
    pre_tokenizer = _pre_tokenizer_name(spec.get("pre_tokenizer"), path, where)
    vocab = dict(model.get("vocab") or {})
    special = []
    for added in spec.get("added_tokens") or []:
        for flag in ("lstrip", "rstrip", "single_word"):
            if added.get(flag):
                raise ValueError(
                    f"{where}: {path} added token {added.get('content')!r}: {flag} must be false. "
                    "Received: true"
                )
        content, i = added["content"], added["id"]
        if vocab.get(content, i) != i:
            raise ValueError(
                f"{where}: {path} added token {content!r} has id {i}, the vocabulary "
                f"{vocab[content]}"
            )
        vocab[content] = i
        special.append(content)
    config = {}
    config_path = os.path.join(directory, TOKENIZER_CONFIG)
    if os.path.isfile(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        template = {t.get("name"): t.get("template") for t in template}.get("default")
    jinja = os.path.join(directory, "chat_template.jinja")
    if template is None and os.path.isfile(jinja):
        with open(jinja, encoding="utf-8") as f:
            template = f.read()

    def configured(name):
        token = _token_content(config.get(name))
        return vocab.get(token) if token is not None else None

    bos, eos = configured("bos_token"), configured("eos_token")
    add_bos, add_eos = False, False
    processor = spec.get("post_processor") or {}
    steps = processor.get("processors", []) if processor.get("type") == "Sequence" else [processor]
    for step in steps:
        if step.get("type") == "TemplateProcessing":
            single = step.get("single") or []
            tokens = step.get("special_tokens") or {}

            def special_id(item):
                name = item["SpecialToken"]["id"]
                ids = (tokens.get(name) or {}).get("ids") or [vocab.get(name)]
                return ids[0]

            if single and "SpecialToken" in single[0]:
                add_bos, bos = True, special_id(single[0]) if bos is None else bos
            if len(single) > 1 and "SpecialToken" in single[-1]:
                add_eos, eos = True, special_id(single[-1]) if eos is None else eos
        elif step.get("type") not in (None, "ByteLevel"):
            raise ValueError(
                f"{where}: {path} post_processor must be TemplateProcessing or ByteLevel. "
                f"Received: {step.get('type')!r}"
            )
    if "add_bos_token" in config:
        add_bos = bool(config["add_bos_token"]) and bos is not None
    if "add_eos_token" in config:
        add_eos = bool(config["add_eos_token"]) and eos is not None
    return {
        "vocabulary": vocab,
        "merges": model.get("merges") or [],
        "pre_tokenizer": pre_tokenizer,
        "bos_id": bos,
        "eos_id": eos,
        "special_tokens": special,
        "add_bos": add_bos,
        "add_eos": add_eos,
        "chat_template": template,
        "pad_id": configured("pad_token"),
        "unk_id": configured("unk_token"),
    }


def _hf_tokenizer_json(tok):
    """A `tokenizer.json` dict for `tok` (what `save` writes)."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    byte_level["use_regex"] = True
    pre = dict(byte_level)
    if tok.pre_tokenizer == "smollm":
        digits = {"type": "Digits", "individual_digits": True}
        pre = {"type": "Sequence", "pretokenizers": [digits, byte_level]}
    single, special_tokens = [{"Sequence": {"id": "A", "type_id": 0}}], {}
    for add, token_id, front in ((tok.add_bos, tok.bos_id, True), (tok.add_eos, tok.eos_id, False)):
        if add:
            token = tok.vocabulary[token_id]
            item = {"SpecialToken": {"id": token, "type_id": 0}}
            single = [item, *single] if front else [*single, item]
            special_tokens[token] = {"id": token, "ids": [token_id], "tokens": [token]}
    pair = single + [
        {"Sequence": {"id": "B", "type_id": 1}} if "Sequence" in item else item for item in single
    ]
    index = {t: i for i, t in enumerate(tok.vocabulary)}
    added = [
        {
            "id": index[t],
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for t in tok.special_tokens
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": sorted(added, key=lambda a: a["id"]),
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": single,
            "pair": pair,
            "special_tokens": special_tokens,
        },
        "decoder": dict(byte_level),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": index,
            "merges": [m.split(" ") for m in tok.merges],
        },
    }
