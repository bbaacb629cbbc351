"""`load_llama` gives the checkpoint's logits (transformers' on the same
tiny random checkpoint) and its chat tokenizer in one call."""

import numpy as np
import pytest

from seqkeras.pretrained import load_llama
from tests.pretrained_checks import tiny_chat_directory


def test_load_llama_matches_transformers(tmp_path):
    import torch
    import transformers

    path = tiny_chat_directory(str(tmp_path), ["the cat sat on the mat"] * 20)
    model, tokenizer, resolved = load_llama(path)
    assert resolved == path
    ids = tokenizer.encode(["the cat sat"]).to_list()[0]
    ours = np.asarray(model(np.array([ids], "int32")))
    with torch.no_grad():
        theirs = transformers.LlamaForCausalLM.from_pretrained(path)(torch.tensor([ids])).logits
    np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-4)
    with pytest.raises(TypeError, match="load_llama.*`path`"):
        load_llama(3)
    with pytest.raises(ValueError):
        load_llama(str(tmp_path / "nowhere"))
