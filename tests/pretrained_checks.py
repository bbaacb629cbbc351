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
