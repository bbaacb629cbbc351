"""Data helpers that came out of the apps: the SARIMA baseline against a
series it must forecast exactly, the tag vocabulary's order, CoNLL word
splitting, and the pair of translation tokenizers saved and read back."""

import numpy as np
import pytest

from seqkeras import data


def test_sarima_forecasts_a_pure_seasonal_trend_exactly():
    t = np.arange(96)
    # log-linear trend times a season of 12, no noise: on logarithms, the
    # airline model's two differences leave nothing to forecast
    values = 100 * np.exp(0.01 * t + 0.1 * np.sin(2 * np.pi * t / 12))
    origins = np.arange(72, 96 - 6 + 1)
    name, mean, low, high = data.sarima_forecasts(values, 72, origins, 6, 12)
    assert name.startswith("SARIMA(0,1,1)(0,1,1,12)")
    assert mean.shape == low.shape == high.shape == (len(origins), 6, 1)
    truth = np.stack([values[o : o + 6] for o in origins])[..., None]
    np.testing.assert_allclose(mean, truth, rtol=2e-3)
    assert np.all(low <= mean) and np.all(mean <= high)
    with pytest.raises(ValueError, match="sarima_forecasts.*`horizon`"):
        data.sarima_forecasts(values, 72, origins, 0, 12)
    with pytest.raises(ValueError, match="sarima_forecasts`: every origin"):
        data.sarima_forecasts(values, 72, [95], 6, 12)
    with pytest.raises(ValueError, match="sarima_forecasts.*finite"):
        data.sarima_forecasts(np.r_[values[:-1], np.nan], 72, origins, 6, 12)


def test_tag_vocabulary_pads_first_and_groups_by_type():
    tags = [["B-PER", "I-PER", "O", "B-MISC"], ["B-LOC", "O", "I-LOC"]]
    vocabulary = data.tag_vocabulary(tags)
    assert vocabulary == ["<pad>", "O", "B-LOC", "I-LOC", "B-MISC", "B-PER", "I-PER"]
    assert set(vocabulary[2:]) == {t for s in tags for t in s} - {"O"}
    with pytest.raises(TypeError, match="tag_vocabulary"):
        data.tag_vocabulary(["B-PER", "O"])


def test_split_words_splits_punctuation_off_the_ends():
    assert data.split_words("(EU), U.S. Germany's") == [
        "(", "EU", ")", ",", "U.S", ".", "Germany", "'s",
    ]  # fmt: skip
    assert data.split_words("") == []
    with pytest.raises(TypeError, match="split_words.*`line`"):
        data.split_words(["a"])


def test_translation_tokenizers_round_trip_and_keep_a_pretrained_source(tmp_path):
    sources, targets = ["ein Hund rennt", "eine Katze"], ["a dog runs", "a cat"]
    pair = data.translation_tokenizers(sources, targets, 50)
    data.save_translation_tokenizers(pair, str(tmp_path / "plain"))
    loaded = data.load_translation_tokenizers(str(tmp_path / "plain"))
    for a, b in zip(pair, loaded):
        assert a.encode(["ein Hund"]).to_list() == b.encode(["ein Hund"]).to_list()
    from seqkeras.data.pretraining import pretraining_vocabulary

    bert = data.BertSubwordTokenizer(pretraining_vocabulary(sources, 60))
    kept = data.translation_tokenizers(sources, targets, 50, source_tokenizer=bert)
    assert kept[0] is bert
    data.save_translation_tokenizers(kept, str(tmp_path / "bert"))
    src, tgt = data.load_translation_tokenizers(str(tmp_path / "bert"))
    assert type(src).__name__ == "BertSubwordTokenizer"
    assert type(tgt).__name__ == "SubwordTokenizer"
    with pytest.raises(ValueError, match="load_translation_tokenizers`: no source"):
        data.load_translation_tokenizers(str(tmp_path))
    with pytest.raises(ValueError, match="save_translation_tokenizers.*pair"):
        data.save_translation_tokenizers(pair[0], str(tmp_path))
