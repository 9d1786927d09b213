"""Kneser-Ney *estimation* parity with KenLM's ``lmplz`` (issue 18).

``tests/data/kenlm/`` holds ARPA files written by ``lmplz`` 0.3.0 from the first 250 lines
of tiny Shakespeare, tokenized by keras-seq (README.md there has the exact commands). Here
keras-seq estimates interpolated modified Kneser-Ney of the same order on the same tokens
and every entry must match: the same n-gram set per order, and log10 probabilities and
backoff weights within ``ATOL`` (lmplz prints 8 significant digits from float32
arithmetic; keras-seq works in float64, so the observed gap is about 2e-7).

One convention differs, on purpose, and is checked as such: lmplz gives ``<s>`` probability
1 (``0`` in its ARPA: "this allows <s> to be explicitly scored as part of the sentence
without impacting probability", ``initial_probabilities.cc``), keras-seq gives it
probability 0 (``-99``, SRILM's convention). ``<s>`` is only ever a context, never
predicted, so no score depends on it (``test_kenlm_scores_both_files_alike``).

No KenLM binary is needed to run this file; the ARPA files are checked in.
"""

import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from keras_seq.cli import main
from keras_seq.errors import DataError
from keras_seq.ngram import read_arpa, train_kneser_ney, write_arpa
from keras_seq.ngram.counts import BOS_TOKEN, word_ids
from keras_seq.ngram.data import load_tokenized
from keras_seq.ngram.kneser_ney import DiscountWarning
from tests.prereqs import needs

DATA = Path(__file__).parent / "data" / "kenlm"
RAW = DATA / "shakespeare250.txt"
TOKENS = DATA / "shakespeare250.tokens"
ATOL = 1e-5

# lmplz's "Statistics:" lines (D1 D2 D3+ per order), printed to 6 significant digits.
LMPLZ_DISCOUNTS = {
    "shakespeare250.o3.arpa": [
        (0.724138, 1.13742, 1.3908),
        (0.869726, 1.37736, 1.34338),
        (0.964746, 1.55473, 2.03525),
    ],
    "shakespeare250.o4.arpa": [
        (0.724138, 1.13742, 1.3908),
        (0.869726, 1.37736, 1.34338),
        (0.972881, 1.5622, 1.70282),
        (0.988033, 1.62949, 3.0),  # no 4-gram with adjusted count 4: D3+ = 3 exactly
    ],
    # --discount_fallback: the 2-gram D3+ is out of range and there is no 3-gram with
    # adjusted count 3, so lmplz substitutes 0.5 1 1.5 for those orders.
    "shakespeare70.o3.fallback.arpa": [
        (0.77, 0.794783, 0.176667),
        (0.5, 1.0, 1.5),
        (0.5, 1.0, 1.5),
    ],
}


def _token_lines(n=None):
    lines = [line.split() for line in TOKENS.read_text(encoding="utf-8").splitlines()]
    return lines if n is None else lines[:n]


def _entries(model):
    """Per order: {n-gram words: (log10 p, log10 backoff)}."""
    words = model.vocab.words
    out = []
    for n in range(1, model.order + 1):
        cols = word_ids(model.tables, n).tolist()
        probs = model.log10_prob[n - 1].tolist()
        backs = model.log10_backoff[n - 1].tolist()
        out.append({tuple(words[i] for i in row): (p, b)
                    for row, p, b in zip(cols, probs, backs)})
    return out


def assert_same_as_lmplz(ours, lmplz_file):
    """Every n-gram of both models, order by order; returns the max |diff| per order."""
    theirs = read_arpa(DATA / lmplz_file)
    assert ours.order == theirs.order
    assert ours.counts == theirs.counts, "n-gram counts per order differ from lmplz"
    # Unigrams come in KenLM's id order: <unk> <s> </s>, then first appearance.
    assert ours.vocab.words == theirs.vocab.words
    mine, kenlm_side = _entries(ours), _entries(theirs)
    bos = (BOS_TOKEN,)
    # The one convention difference (see the module docstring).
    assert kenlm_side[0][bos][0] == 0.0 and mine[0][bos][0] == -np.inf
    kenlm_side[0][bos] = (mine[0][bos][0], kenlm_side[0][bos][1])
    worst = []
    for n, (a, b) in enumerate(zip(mine, kenlm_side), start=1):
        assert a.keys() == b.keys(), (
            f"{n}-gram sets differ: only keras-seq {sorted(a.keys() - b.keys())[:5]}, "
            f"only lmplz {sorted(b.keys() - a.keys())[:5]}"
        )
        keys = sorted(a)
        got = np.array([a[k] for k in keys])
        want = np.array([b[k] for k in keys])
        assert (np.isfinite(got) == np.isfinite(want)).all()
        got, want = np.nan_to_num(got, neginf=-99.0), np.nan_to_num(want, neginf=-99.0)
        diff = np.abs(got - want).max(axis=1)
        worst.append(float(diff.max()))
        if worst[-1] > ATOL:
            i = int(np.argmax(diff))
            raise AssertionError(
                f"{n}-grams differ from lmplz by up to {worst[-1]:.3g} "
                f"(e.g. {' '.join(keys[i])!r}: keras-seq {got[i].tolist()}, "
                f"lmplz {want[i].tolist()} as [log10 p, log10 backoff])"
            )
    return worst


def _assert_discounts(model, lmplz_file):
    # int keys from train_kneser_ney, str keys after the ARPA header's JSON round trip
    ours = {int(n): d for n, d in model.metadata["discounts"].items()}
    for n, expected in enumerate(LMPLZ_DISCOUNTS[lmplz_file], start=1):
        np.testing.assert_allclose(ours[n][1:], expected, rtol=1e-5,
                                   err_msg=f"{n}-gram discounts differ from lmplz's")


def test_token_file_is_keras_seq_tokenization():
    """The tokens lmplz read are exactly the lines ``keras-seq ngram train`` counts."""
    data = load_tokenized(str(RAW), split="100/0")
    assert data.train == _token_lines()
    assert "<unk>" not in TOKENS.read_text(encoding="utf-8")  # lmplz refuses <unk> in text


@pytest.mark.parametrize("order", [3, 4])
def test_ngram_train_matches_lmplz(tmp_path, order, capsys):
    """``keras-seq ngram train`` (CLI → ARPA file) against ``lmplz -o ORDER``."""
    out = tmp_path / "kn.arpa"
    assert main(["ngram", "train", "--data", str(RAW), "--split-ratio", "100/0",
                 "--order", str(order), "--no-discount-fallback", "--out", str(out)]) == 0
    capsys.readouterr()
    name = f"shakespeare250.o{order}.arpa"
    ours = read_arpa(out)
    _assert_discounts(ours, name)
    worst = assert_same_as_lmplz(ours, name)
    assert max(worst) < ATOL


def test_fallback_discounts_match_lmplz():
    """``lmplz --discount_fallback`` on the first 70 token lines: same orders fall back."""
    with pytest.warns(DiscountWarning) as caught:
        model = train_kneser_ney(_token_lines(70), 3, discount_fallback=True)
    fell_back = sorted(int(re.search(r"for order (\d)", str(w.message)).group(1))
                       for w in caught)
    assert fell_back == [2, 3]  # lmplz: "Substituting fallback discounts" for these two
    _assert_discounts(model, "shakespeare70.o3.fallback.arpa")
    # Through write_arpa/read_arpa, as a file on disk would go.
    buf = io.StringIO()
    write_arpa(model, buf)
    assert_same_as_lmplz(read_arpa(io.StringIO(buf.getvalue())),
                         "shakespeare70.o3.fallback.arpa")


def test_refuses_where_lmplz_refuses():
    """``lmplz -o 4`` on the first 160 token lines stops with "3-gram discount out of range for
    adjusted count 3: -0.928251"; keras-seq without the fallback stops at the same one."""
    with pytest.raises(DataError, match=r"3-gram discount D3=-0\.9283 is outside \[0, 3\]"):
        train_kneser_ney(_token_lines(160), 4, discount_fallback=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DiscountWarning)
        train_kneser_ney(_token_lines(), 4, discount_fallback=False)  # the whole file: fine


@needs("kenlm")  # a skip where it could not build; CI requires it
def test_kenlm_scores_both_files_alike(tmp_path):
    """The ``<s>`` convention does not change any score KenLM computes."""
    import kenlm

    ours = tmp_path / "kn.arpa"
    write_arpa(train_kneser_ney(_token_lines(), 3, discount_fallback=False), ours)
    a, b = kenlm.Model(str(ours)), kenlm.Model(str(DATA / "shakespeare250.o3.arpa"))
    for line in [*_token_lines()[::17], ["citizens", "of", "rome", "quokka", "."]]:
        sentence = " ".join(line)
        assert a.score(sentence) == pytest.approx(b.score(sentence), abs=1e-4)
