"""The keyboard's mixture (keras_seq.runtime.mixture): the neural step model, a compact
n-gram and a cache of typed words, mixed linearly with weights fitted by EM."""

import json
import subprocess
import sys

import numpy as np
import pytest

from keras_seq.errors import KerasSeqError
from keras_seq.ngram.compact import NgramStream, read_compact, write_compact
from keras_seq.ngram.kneser_ney import train_kneser_ney
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.runtime.mixture import (
    HALF_LIVES,
    MixedLM,
    MixSpec,
    NgramOnModelVocab,
    WordCache,
    fit_mixture,
    fit_weights,
    mixture_outcomes,
    source_probs,
    stream_targets,
)
from tests.fixtures.lm_runs import corpus_text, exported


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """``(step model path, compact n-gram path, validation text)``: the tiny trained run's
    float32 step model and a KN3 on the same words."""
    out, _ = exported(tmp_path_factory)
    lines = [line.split() for line in corpus_text().splitlines()]
    root = tmp_path_factory.mktemp("mixture")
    ngram = root / "kn3.q8.bin"
    write_compact(train_kneser_ney(lines, order=3), ngram, quantize_bits=8)
    return out / "step_float32.tflite", ngram, corpus_text(60, seed=7)


def test_the_mixture_is_the_weighted_sum_of_its_sources(parts):
    model, ngram, text = parts
    spec = MixSpec({"neural": 0.6, "ngram": 0.3, "cache": 0.1}, ngram=ngram.name)
    lm = MixedLM(model, spec, ngram=ngram)
    lm.keep_parts = True
    alone = LiteRTLM(model)
    stream = NgramStream(read_compact(ngram))
    words = read_compact(ngram).vocab.index
    inputs, _, _ = stream_targets(lm.tokenizer, text)
    vocab = lm.tokenizer.vocab
    for i, token in enumerate(inputs[:40]):
        mixed = np.exp(lm.step(int(token)).astype(np.float64))
        logits = alone.step(int(token)).astype(np.float64)
        neural = np.exp(logits - logits.max())
        neural /= neural.sum()
        word = "</s>" if token == lm.tokenizer.eos_id else vocab[token]
        stream.step(words[word])
        # by hand: the n-gram's distribution on the model's ids (<eos> is </s>, <pad> 0)
        dist = stream.distribution()
        ng = np.array([0.0 if t == lm.tokenizer.pad_id else 10 ** dist[words[
            "</s>" if t == lm.tokenizer.eos_id else vocab[t]]] for t in range(len(vocab))])
        ng /= ng.sum()
        np.testing.assert_allclose(lm.parts[0], neural, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(lm.parts[1], ng, rtol=2e-6, atol=1e-9)
        cache = lm.parts[2]
        w = np.array([0.6, 0.3, 0.1]) if cache.sum() else np.array([2 / 3, 1 / 3, 0.0])
        np.testing.assert_allclose(mixed, w[0] * neural + w[1] * ng + w[2] * cache,
                                   rtol=2e-5)
        assert abs(mixed.sum() - 1) < 1e-4, i
    assert lm.suggest(3)  # suggestions read the mixture's log-probabilities


def test_weight_one_on_the_model_is_the_model_alone(parts):
    model, _, text = parts
    lm, alone = MixedLM(model, MixSpec({"neural": 1.0})), LiteRTLM(model)
    for token in stream_targets(lm.tokenizer, text)[0][:30]:
        logits = alone.step(int(token)).astype(np.float64)
        expected = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
        np.testing.assert_allclose(lm.step(int(token)), expected, atol=2e-5)


def test_the_cache_fades_by_half_each_half_life_and_survives_a_reset(parts):
    cache = WordCache(5, half_life=10, ignored=(0,))
    cache.add(3)
    for _ in range(10):
        cache.add(4)
    cache.add(0)  # ignored: <pad>/<unk>/<eos> are not words the user typed
    # word 3 was typed 10 words before the last: it weighs half of the last word
    weights = np.array([2 ** (i / 10) for i in range(11)])
    assert cache.prob(3) == pytest.approx(weights[0] / weights.sum())
    assert cache.words == 11 and cache.probs().sum() == pytest.approx(1.0)
    flat = WordCache(5, half_life=None)
    for token in (1, 1, 2):
        flat.add(token)
    assert flat.probs().tolist() == pytest.approx([0, 2 / 3, 1 / 3, 0, 0])
    model, _, text = parts
    lm = MixedLM(model, MixSpec({"neural": 0.5, "cache": 0.5}, half_life=50))
    lm.feed_text("the cat sat")
    typed = lm._cache.words
    lm.reset()
    assert lm._cache.words == typed == 3  # a new sentence, the same user
    lm.forget()
    assert lm._cache.words == 0


def test_em_finds_the_weights_a_grid_search_finds():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet([1, 1, 1], size=500) * rng.uniform(0.1, 1, (500, 1))
    w, ppl = fit_weights(probs)
    grid = [(a, b, 1 - a - b) for a in np.linspace(0, 1, 101) for b in np.linspace(0, 1, 101)
            if a + b <= 1 + 1e-9]
    best = min(grid, key=lambda g: -np.log(probs @ np.array(g)).mean())
    best_ppl = float(np.exp(-np.log(probs @ np.array(best)).mean()))
    assert ppl <= best_ppl + 1e-6 and np.abs(w - best).max() < 0.02
    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()


def test_fitted_on_validation_the_mixture_beats_each_source(parts):
    model, ngram, text = parts
    said = []
    spec = fit_mixture(model, read_compact(ngram), text, ngram.name, printer=said.append)
    fitted = spec.fitted
    assert fitted["ppl"] <= min(fitted["ppl_neural"], fitted["ppl_ngram"],
                                fitted["ppl_neural_ngram"])
    assert sum(spec.weights.values()) == pytest.approx(1.0)
    assert spec.half_life in HALF_LIVES or spec.weights["cache"] == 0
    assert "mixture fitted on" in said[0]
    # the PPL the fit reports is the one the mixture gets typing the same text
    lm = MixedLM(model, spec, ngram=ngram)
    _, ppl = mixture_outcomes(lm, text)
    assert ppl == pytest.approx(fitted["ppl"], rel=0.01)
    # without the n-gram: the model and the cache only
    spec = fit_mixture(model, None, text, None, sources=("neural", "cache"),
                       printer=lambda *a: None)
    assert spec.weights["ngram"] == 0 and spec.ngram is None


def test_source_probs_gives_a_cache_column_per_half_life(parts):
    model, ngram, text = parts
    lm = MixedLM(model, MixSpec({"neural": 0.5, "ngram": 0.5}, ngram="x"), ngram=ngram)
    inputs, targets, _ = stream_targets(lm.tokenizer, text)
    probs = source_probs(lm, inputs[:50], targets[:50])
    assert probs.shape == (50, 2 + len(HALF_LIVES))
    assert (probs[:, :2] > 0).all() and (probs <= 1).all()


def test_the_spec_round_trips_and_refuses_bad_weights(parts, tmp_path):
    spec = MixSpec({"neural": 0.7, "ngram": 0.2, "cache": 0.1}, ngram="kn3.q8.bin",
                   half_life=50, fitted={"ppl": 1.5})
    spec.save(tmp_path / "mix.json")
    assert MixSpec.load(tmp_path / "mix.json") == spec
    for weights, message in (({"neural": 0.7, "ngram": 0.2}, "sum to 1"),
                             ({"neural": 1.2, "cache": -0.2}, "≥ 0"),
                             ({"neural": 0.5, "lstm": 0.5}, "the sources are")):
        with pytest.raises(KerasSeqError, match=message):
            MixSpec(weights, ngram="x")
    with pytest.raises(KerasSeqError, match="names no n-gram"):
        MixSpec({"neural": 0.5, "ngram": 0.5})
    (tmp_path / "bad.json").write_text(json.dumps({"weights": {"neural": 1.0}}))
    with pytest.raises(KerasSeqError, match="not a keras-seq mixture"):
        MixSpec.load(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text(json.dumps({"format": "keras-seq-mix/1",
                                                   "weights": {"neural": 1.0}, "extra": 1}))
    with pytest.raises(KerasSeqError, match="a mixture has 'weights' and may have fitted"):
        MixSpec.load(tmp_path / "bad.json")
    with pytest.raises(KerasSeqError, match="must be numbers by source"):
        MixSpec({"neural": "most"})
    # a mix.json names its n-gram beside it
    model, ngram, _ = parts
    (tmp_path / "kn3.q8.bin").write_bytes(ngram.read_bytes())
    lm = MixedLM(model, tmp_path / "mix.json")
    assert lm._ngram is not None and lm.step(lm.start_id()).shape == (lm.vocab_size,)


def test_an_ngram_on_another_vocabulary_is_refused(parts, tmp_path):
    model, _, _ = parts
    other = train_kneser_ney([["zz", "yy", "xx"]] * 5, order=2, discount_fallback=True)
    tokenizer = LiteRTLM(model).tokenizer
    with pytest.raises(KerasSeqError, match="another vocabulary"):
        NgramOnModelVocab(other, tokenizer)


def test_the_demo_mixes_when_told(parts, tmp_path):
    model, ngram, _ = parts
    (tmp_path / "kn3.q8.bin").write_bytes(ngram.read_bytes())
    MixSpec({"neural": 0.5, "ngram": 0.4, "cache": 0.1}, ngram="kn3.q8.bin",
            half_life=50).save(tmp_path / "mix.json")
    code = ("import sys\nfrom keras_seq.cli import main\n"
            f"rc = main(['demo', '--model', {str(model)!r}, '--mix', "
            f"{str(tmp_path / 'mix.json')!r}])\n"
            "print('TF' if 'tensorflow' in sys.modules else 'NO_TF', file=sys.stderr)\n"
            "sys.exit(rc)\n")
    res = subprocess.run([sys.executable, "-c", code], input="the cat\n/quit\n",
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mixed: neural 0.50, ngram 0.40, cache 0.10" in res.stdout
    assert "NO_TF" in res.stderr
    assert sum(1 for line in res.stdout.splitlines() if "µs]" in line) == 2
