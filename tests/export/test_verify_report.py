"""`export_and_verify` checks the streaming step model and the raw-string
signatures, and reports them."""

import os

import numpy as np

import seqkeras
from seqkeras.export import export_and_verify

VOCAB = seqkeras.data.CharVocabulary("abcdefgh")


def test_report_covers_the_step_model_and_raw_strings(tmp_path):
    model = seqkeras.models.recurrent_language_model(
        len(VOCAB), 6, units=8, cell="gru", num_layers=2
    )
    ids = np.random.default_rng(0).integers(4, len(VOCAB), size=(2, 7))
    report = export_and_verify(
        model,
        "lm",
        [ids.astype("int32")],
        str(tmp_path),
        formats=("savedmodel", "tflite"),
        generate={"max_length": 9},
        vocabulary=VOCAB,
        texts=["abc", "h"],
    )
    assert os.path.exists(report["tflite_step"])
    assert report["tflite_step_tokens_checked"] == 7
    assert report["tflite_step_max_abs_diff"] <= 1e-5
    assert report["tflite_step_ms_per_token"] > 0
    assert report["tflite_ms_per_sequence"] > 0
    assert report["serve_text_max_abs_diff"] <= 1e-5
    assert report["generate_text"].startswith("'abc' -> ")


def test_report_says_why_a_model_has_no_step_model(tmp_path):
    model = seqkeras.models.tagger(10, 3, units=4, embedding_dim=4)
    ids = np.array([[4, 5, 6, 0]], "int32")
    report = export_and_verify(
        model, "tagger", [ids], str(tmp_path), formats=("savedmodel", "tflite")
    )
    assert report["tflite_step"].startswith("none:")
    assert "whole sequence" in report["tflite_step"]


def test_decoder_step_model_is_checked_from_the_sample(tmp_path):
    model = seqkeras.models.recurrent_seq2seq(
        10, 10, units=6, embedding_dim=4, attention="additive"
    )
    sample = {
        "source_ids": np.array([[4, 5, 6, 0]], "int32"),
        "target_ids": np.array([[1, 7, 8, 9, 0]], "int32"),
    }
    report = export_and_verify(
        model, "s2s", [sample], str(tmp_path), formats=("savedmodel", "tflite")
    )
    assert report["tflite_step_tokens_checked"] == 4  # cut at the PAD
    assert report["tflite_step_max_abs_diff"] <= 1e-5
