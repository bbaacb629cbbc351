"""Our trained `transformer_seq2seq` as a CTranslate2 model: the same
weights, copied through `ctranslate2.specs.TransformerSpec` (pre-LN,
embeddings scaled by sqrt(d), our sinusoid table as the position
encodings, the tied output projection), so that its translations can be
compared with ours and not only timed.

    python benchmarks/ctranslate2_peer.py --model saved_models/translate/transformer \\
        --out /tmp/ct2 [--quantization int8]

`benchmarks/serving.py --peer ctranslate2` runs this (it needs seqkeras to
read the model; the serving benchmark itself runs without it).

Mapping (Keras -> CTranslate2, whose linear weights are (out, in)):
- `source_embedding` / `target_embedding` -> `encoder.embeddings[0]` /
  `decoder.embeddings`, and the tied `decoder.projection` (zero bias);
- `*_block_i.self_attention` -> `layer[i].self_attention.linear[0]` (q, k,
  v fused) and `linear[1]` (output), its LayerNorm the attention spec's
  `layer_norm` (applied to the input: pre-LN);
- `decoder_block_i.cross_attention` -> `layer[i].attention.linear[0]` (q),
  `linear[1]` (k, v fused), `linear[2]` (output);
- the feed-forward Dense pair -> `ffn.linear_0`, `ffn.linear_1`, its
  LayerNorm `ffn.layer_norm`; `encoder_norm` / `decoder_norm` -> the
  stacks' final `layer_norm`; epsilon 1e-5 (`config.layer_norm_epsilon`).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))


def _attention_out(layer):
    w = np.asarray(layer.output_kernel)  # (heads, dim, d)
    return w.reshape(-1, w.shape[-1]).T, np.asarray(layer.output_bias)


def _projection(layer, which):
    w = np.asarray(getattr(layer, f"{which}_kernel"))  # (d, heads, dim)
    return w.reshape(w.shape[0], -1).T, np.asarray(getattr(layer, f"{which}_bias")).reshape(-1)


def _linear(spec, weight, bias):
    spec.weight = np.ascontiguousarray(weight, dtype=np.float32)
    spec.bias = np.ascontiguousarray(bias, dtype=np.float32)


def _norm(spec, layer):
    spec.gamma = np.asarray(layer.gamma, np.float32)
    spec.beta = np.asarray(layer.beta, np.float32)


def _fused(spec, layer, names):
    parts = [_projection(layer, n) for n in names]
    _linear(spec, np.concatenate([w for w, _ in parts]), np.concatenate([b for _, b in parts]))


def _block(spec, block, cross):
    # the encoder block's attention is `self_attention_layer` (keras-hub's name)
    attention = getattr(block, "self_attention", None) or block.self_attention_layer
    _fused(spec.self_attention.linear[0], attention, ("query", "key", "value"))
    _linear(spec.self_attention.linear[1], *_attention_out(attention))
    _norm(spec.self_attention.layer_norm, block.self_attention_layer_norm)
    if cross:
        _fused(spec.attention.linear[0], block.cross_attention, ("query",))
        _fused(spec.attention.linear[1], block.cross_attention, ("key", "value"))
        _linear(spec.attention.linear[2], *_attention_out(block.cross_attention))
        _norm(spec.attention.layer_norm, block.cross_attention_layer_norm)
    for name, dense in (
        ("linear_0", block.feedforward_intermediate_dense),
        ("linear_1", block.feedforward_output_dense),
    ):
        _linear(getattr(spec.ffn, name), np.asarray(dense.kernel).T, np.asarray(dense.bias))
    _norm(spec.ffn.layer_norm, block.feedforward_layer_norm)


def transformer_spec(model, source_tokens, target_tokens, positions=512):
    """A `ctranslate2.specs.TransformerSpec` holding `model`'s weights."""
    import ctranslate2

    encoder_blocks = [layer for layer in model.layers if layer.name.startswith("encoder_block_")]
    decoder_blocks = model.part("blocks")
    first = decoder_blocks[0]
    if not first.norm_first or first.activation != "relu":
        raise ValueError("this copy handles the pre-LN, ReLU Transformer (--model transformer)")
    spec = ctranslate2.specs.TransformerSpec.from_config(
        (len(encoder_blocks), len(decoder_blocks)),
        first.num_heads,
        pre_norm=True,
        activation=ctranslate2.specs.Activation.RELU,
    )
    d = first.self_attention.query_kernel.shape[0]
    table = np.asarray(model.part("positions").encoding(positions, d), np.float32)
    source_embedding = model.get_layer("source_embedding")
    spec.encoder.embeddings[0].weight = np.asarray(source_embedding.embeddings, np.float32)
    spec.encoder.scale_embeddings = True
    spec.encoder.position_encodings.encodings = table
    for layer_spec, block in zip(spec.encoder.layer, encoder_blocks):
        _block(layer_spec, block, cross=False)
    _norm(spec.encoder.layer_norm, model.get_layer("encoder_norm"))
    embeddings = np.asarray(model.part("embedding").embeddings, np.float32)
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.scale_embeddings = True
    spec.decoder.position_encodings.encodings = table
    for layer_spec, block in zip(spec.decoder.layer, decoder_blocks):
        _block(layer_spec, block, cross=True)
    _norm(spec.decoder.layer_norm, model.part("norm"))
    _linear(spec.decoder.projection, embeddings, np.zeros(len(embeddings), np.float32))
    spec.config.bos_token = spec.config.decoder_start_token = "<bos>"
    spec.config.eos_token, spec.config.unk_token = "<eos>", "<unk>"
    spec.config.layer_norm_epsilon = float(first.layer_norm_epsilon)
    spec.register_source_vocabulary(list(source_tokens))
    spec.register_target_vocabulary(list(target_tokens))
    spec.validate()
    return spec


def convert(model_dir, out, quantization=None, tokenize=None):
    """Writes the CTranslate2 model of the trained model in `model_dir`
    (an `apps/translate.py train` directory) to `out`; with `tokenize` (a
    file of sentences), also `out/tokens.json`: each sentence's source ids
    and tokens (EOS added, as our signatures encode) and the target
    vocabulary."""
    import json

    import translate

    model, src, tgt, _ = translate.load(model_dir)
    spec = transformer_spec(model, src.vocabulary, tgt.vocabulary)
    spec.optimize(quantization=quantization)
    os.makedirs(out, exist_ok=True)
    spec.save(out)
    if tokenize:
        with open(tokenize, encoding="utf-8") as f:
            sentences = [s.rstrip("\r\n") for s in f]
        rows = src.encode(sentences, add_eos=True).to_list()
        source = [{"ids": r, "tokens": [src.vocabulary[i] for i in r]} for r in rows]
        with open(os.path.join(out, "tokens.json"), "w", encoding="utf-8") as f:
            json.dump({"source": source, "target_vocabulary": list(tgt.vocabulary)}, f)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="an apps/translate.py train directory")
    p.add_argument("--out", required=True)
    p.add_argument("--quantization", default=None, help="e.g. int8 (default: float32)")
    p.add_argument("--tokenize", help="a file of sentences to write as our source tokens")
    args = p.parse_args(argv)
    print(convert(args.model, args.out, args.quantization, args.tokenize))


if __name__ == "__main__":
    main()
