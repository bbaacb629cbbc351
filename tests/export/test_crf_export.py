"""A CRF tagger's Viterbi paths are the same in Keras, the SavedModel
(servable ops), builtin-only TFLite and ONNX."""

import keras
import numpy as np

from seqkeras.export import export_and_verify
from seqkeras.layers import CRF
from seqkeras.export import assert_servable


def test_viterbi_paths_identical_in_every_runtime(tmp_path):
    rng = np.random.default_rng(0)
    tokens = keras.Input((None,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(20, 8, mask_zero=True)(tokens)
    emissions = keras.layers.Dense(5)(x)
    crf = CRF(
        5, transition_initializer=keras.initializers.RandomNormal(stddev=2.0, seed=1), name="crf"
    )
    model = keras.Model(tokens, crf(emissions), name="crf_tagger")
    ids = rng.integers(1, 20, (4, 9)).astype("int32")
    ids[1, 6:] = 0
    ids[3, 2:] = 0
    samples = [ids[:1, :5], ids]
    report = export_and_verify(model, "crf", samples, str(tmp_path), tolerance=0.0)
    for key in ("savedmodel", "tflite", "onnx"):
        assert report[f"{key}_max_abs_diff"] == 0.0
    assert_servable(report["savedmodel"])
    # and the paths are the layer's Viterbi paths, padding tagged 0
    paths = np.asarray(model(ids))
    assert (paths[1, 6:] == 0).all() and (paths[3, 2:] == 0).all()
    assert len(np.unique(paths[ids != 0])) > 1
