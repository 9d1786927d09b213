import numpy as np
import pytest

from keras_seq.sampling import (
    GreedySampler,
    TemperatureSampler,
    TopKSampler,
    TopPSampler,
    make_sampler,
    repetition_score,
)

LOGITS = np.log(np.array([0.5, 0.3, 0.15, 0.05]))


def test_greedy():
    assert GreedySampler()(LOGITS) == 0


def test_temperature_reshapes_distribution():
    p1 = TemperatureSampler(1.0).probabilities(LOGITS)
    np.testing.assert_allclose(p1, [0.5, 0.3, 0.15, 0.05])
    sharp = TemperatureSampler(0.1).probabilities(LOGITS)
    assert sharp[0] > 0.99
    with pytest.raises(ValueError, match="temperature must be > 0"):
        TemperatureSampler(0)


def test_top_k_keeps_k():
    p = TopKSampler(2).probabilities(LOGITS)
    np.testing.assert_allclose(p, [0.5 / 0.8, 0.3 / 0.8, 0, 0])
    with pytest.raises(ValueError):
        TopKSampler(0)


def test_top_p_smallest_nucleus():
    np.testing.assert_allclose(TopPSampler(0.5).probabilities(LOGITS), [1, 0, 0, 0])
    np.testing.assert_allclose(TopPSampler(0.8).probabilities(LOGITS),
                               [0.5 / 0.8, 0.3 / 0.8, 0, 0])
    assert TopPSampler(0.81).probabilities(LOGITS)[2] > 0
    with pytest.raises(ValueError):
        TopPSampler(0)


def test_sampling_is_seeded_and_follows_probabilities():
    s = TopKSampler(3)
    a = [s(LOGITS, np.random.default_rng(7)) for _ in range(5)]
    b = [s(LOGITS, np.random.default_rng(7)) for _ in range(5)]
    assert a == b
    rng = np.random.default_rng(0)
    draws = np.bincount([TemperatureSampler()(LOGITS, rng) for _ in range(4000)], minlength=4)
    np.testing.assert_allclose(draws / 4000, [0.5, 0.3, 0.15, 0.05], atol=0.03)


def test_make_sampler_and_repetition():
    assert isinstance(make_sampler("top-p", top_p=0.5), TopPSampler)
    with pytest.raises(ValueError, match="unknown sampler"):
        make_sampler("beam")
    assert repetition_score(list("abcdefgh")) == 0
    assert repetition_score(list("abab" * 10)) > 0.8


def test_special_ids_are_never_sampled():
    from keras_seq.data.tokenizers import make_tokenizer
    from keras_seq.sampling import special_ids, without_ids

    tok = make_tokenizer("word").fit("a b c\nb c\n")
    banned = special_ids(tok)
    assert banned == sorted({tok.pad_id, tok.unk_id}) and tok.eos_id not in banned
    logits = np.zeros(tok.vocab_size)
    logits[banned] = 30.0  # the model's favourites
    masked = without_ids(logits, banned)
    assert np.isfinite(masked).all() and set(np.argsort(-masked)[:3]).isdisjoint(banned)
    rng = np.random.default_rng(0)
    draws = {TopPSampler(0.99)(masked, rng) for _ in range(200)}
    assert draws.isdisjoint(banned)
    np.testing.assert_array_equal(without_ids(logits, []), logits)
