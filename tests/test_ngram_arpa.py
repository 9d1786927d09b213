"""ARPA write/read, malformed files, and agreement with the kenlm module."""

import io
import warnings

import numpy as np
import pytest

from keras_seq.errors import DataError
from keras_seq.ngram import read_arpa, train_kneser_ney, write_arpa
from keras_seq.ngram.kneser_ney import DiscountWarning
from keras_seq.ngram.scorer import sentence_log10probs
from tests.prereqs import needs


def _lines(seed=0, n_lines=400, vocab=60):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    return [[f"w{i}" for i in rng.choice(vocab, size=rng.integers(1, 10), p=p)]
            for _ in range(n_lines)]


def _model(order=3):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        return train_kneser_ney(_lines(), order, metadata={"tokenizer_fingerprint": "t:1"})


def _arpa_text(model):
    buf = io.StringIO()
    write_arpa(model, buf)
    return buf.getvalue()


def test_round_trip_keeps_scores_and_metadata():
    model = _model()
    back = read_arpa(io.StringIO(_arpa_text(model)))
    assert back.counts == model.counts
    assert back.metadata["tokenizer_fingerprint"] == "t:1"
    assert back.metadata["smoothing"] == "kn"
    test = _lines(seed=1, n_lines=50, vocab=80)  # includes OOV words
    np.testing.assert_allclose(sentence_log10probs(back, test),
                               sentence_log10probs(model, test), atol=1e-5)
    assert "-99\t<s>\t" in _arpa_text(model)


def _broken(text, old, new):
    assert old in text
    return io.StringIO(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("\\data\\", "\\dada\\", "no \\\\data"),
        ("ngram 2=", "ngram 2=1", "header says ngram 2"),
        ("\\3-grams:", "\\9-grams:", "not in the header"),
        ("\\end\\", "", "missing \\\\end"),
    ],
)
def test_malformed_arpa_is_a_clear_error(old, new, message):
    text = _arpa_text(_model())
    with pytest.raises(DataError, match=message):
        read_arpa(_broken(text, old, new))


def test_missing_section_and_missing_prefix():
    text = _arpa_text(_model(2))
    head, rest = text.split("\\2-grams:")
    with pytest.raises(DataError, match="missing section"):
        read_arpa(io.StringIO(head + "\\end\\\n"))
    with pytest.raises(DataError, match="no such ARPA file"):
        read_arpa("/nonexistent/model.arpa")


@needs("kenlm")  # a skip where it could not build; CI requires it
@pytest.mark.parametrize("order", [2, 3, 5])
def test_kenlm_scores_match(tmp_path, order):
    import kenlm

    model = _model(order)
    path = tmp_path / "m.arpa"
    write_arpa(model, path)
    lm = kenlm.Model(str(path))  # the metadata comment before \data\ is ignored
    test = _lines(seed=2, n_lines=60, vocab=90)
    ours = sentence_log10probs(model, test)
    theirs = [lm.score(" ".join(line), bos=True, eos=True) for line in test]
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    reread = sentence_log10probs(read_arpa(path), test)
    np.testing.assert_allclose(reread, theirs, atol=1e-4)
