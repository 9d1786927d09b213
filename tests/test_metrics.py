import math

import numpy as np
import pytest

from keras_seq.errors import NotComparableError
from keras_seq.metrics import (
    PerplexityResult,
    check_comparable,
    cross_entropy,
    perplexity_from_log_probs,
    perplexity_from_probs,
)
from keras_seq.models.perplexity import Perplexity


def test_seed_arithmetic():
    probs = [0.5, 0.25, 0.4, 0.1]  # product 1/200
    # By hand: (ln 2 + ln 4 + ln 2.5 + ln 10) / 4 = (0.693147 + 1.386294 + 0.916291
    # + 2.302585) / 4 = 5.298317 / 4 nats; PPL = 200^(1/4); the first three: 20^(1/3).
    assert cross_entropy(np.log(probs)) == pytest.approx(1.3245793, abs=1e-6)
    assert perplexity_from_probs(probs) == pytest.approx(3.7606031, abs=1e-6)
    assert perplexity_from_probs(probs[:3]) == pytest.approx(2.7144176, abs=1e-6)
    assert cross_entropy(np.log(probs), base=2) == pytest.approx(1.9109640, abs=1e-6)


def test_bits_and_nats():
    lp = np.log([0.5, 0.25])
    assert cross_entropy(lp, base=2) == pytest.approx(1.5)
    assert cross_entropy(lp) == pytest.approx(1.5 * math.log(2))


def test_mask_counts_only_real_tokens():
    lp = np.log(np.array([[0.5, 0.25, 1e-9], [0.4, 1e-9, 1e-9]]))
    mask = np.array([[1, 1, 0], [1, 0, 0]], bool)
    expected = perplexity_from_probs([0.5, 0.25, 0.4])
    assert perplexity_from_log_probs(lp, mask) == pytest.approx(expected)
    with pytest.raises(ValueError, match="mask shape"):
        cross_entropy(lp, mask[:, :2])
    with pytest.raises(ValueError, match="zero tokens"):
        cross_entropy(lp, np.zeros_like(mask))


def test_zero_probability_gives_infinity():
    assert perplexity_from_probs([0.5, 0.0]) == math.inf


def _result(**fp):
    base = {"tokenizer": "word:abc", "split": "val", "corpus_sha256": "123"}
    return PerplexityResult.from_log_probs(np.log([0.5, 0.5]), fingerprint={**base, **fp})


def test_comparability_guard():
    check_comparable(_result(), _result())
    with pytest.raises(NotComparableError, match="tokenized differently"):
        check_comparable(_result(), _result(tokenizer="word:other"))
    with pytest.raises(NotComparableError, match="different splits"):
        _result().check_comparable(_result(split="test"))
    with pytest.raises(NotComparableError, match="different corpora"):
        check_comparable(_result(), _result(corpus_sha256="456"))
    assert isinstance(NotComparableError("x"), ValueError)


def test_result_dict():
    r = _result()
    d = r.to_dict()
    assert d["ppl"] == pytest.approx(2.0) and d["bits"] == pytest.approx(1.0) and d["tokens"] == 2


def test_keras_metric_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 7)).astype("float32")
    y = rng.integers(1, 7, size=(2, 5))
    y[1, 3:] = 0  # padding
    m = Perplexity(ignore_class=0)
    m.update_state(y[:1], logits[:1])
    m.update_state(y[1:], logits[1:])
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(logp, y[..., None], -1)[..., 0]
    expected = perplexity_from_log_probs(picked, y != 0)
    assert float(m.result()) == pytest.approx(expected, rel=1e-5)
    clone = Perplexity.from_config(m.get_config())
    assert clone.ignore_class == 0
