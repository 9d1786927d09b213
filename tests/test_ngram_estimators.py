"""Counting, MLE, add-k and Kneser-Ney on corpora small enough to check by hand."""

import math
import warnings

import numpy as np
import pytest

from keras_seq.errors import DataError
from keras_seq.ngram import CountModel, NgramCounts, Vocabulary, evaluate, train_kneser_ney
from keras_seq.ngram.counts import word_ids
from keras_seq.ngram.kneser_ney import DiscountWarning, adjusted_counts, discounts_for


def _counts(lines, order):
    vocab = Vocabulary.from_lines(lines)
    return vocab, NgramCounts.from_stream(vocab.encode(lines), order, len(vocab))


def _p(model, context, word):
    return 10 ** model.distribution(context)[model.vocab.index[word]]


def test_counting_all_orders_with_boundaries():
    vocab, c = _counts([["a", "b"], ["a"]], 3)
    assert vocab.words == ["<unk>", "<s>", "</s>", "a", "b"]
    assert c.lookup(("<s>", "a"), vocab) == 2
    assert c.lookup(("a", "</s>"), vocab) == 1
    assert c.lookup(("<s>", "a", "b"), vocab) == 1
    assert c.lookup(("a", "b", "</s>"), vocab) == 1
    assert c.lookup(("b", "a"), vocab) == 0  # never across lines
    assert c.lookup(("<s>",), vocab) == 2 and c.lookup(("<unk>",), vocab) == 0
    assert c.n_tokens == 5  # a b </s> a </s>


def test_mle_and_addk_by_hand():
    lines = [["a", "b"], ["a", "a"]]
    vocab, counts = _counts(lines, 2)
    stream = vocab.encode([["a", "b"]])
    mle = 10 ** CountModel(counts, vocab, "mle").token_log10probs(stream)
    np.testing.assert_allclose(mle, [1.0, 1 / 3, 1.0])
    # |V| = 4 predictable tokens (<unk>, </s>, a, b); c(<s>)=2, c(a)=3, c(b)=1
    add1 = 10 ** CountModel(counts, vocab, "addk", 1.0).token_log10probs(stream)
    np.testing.assert_allclose(add1, [3 / 6, 2 / 7, 2 / 5])
    _, uni = _counts(lines, 1)
    p = 10 ** CountModel(uni, vocab, "addk", 1.0).token_log10probs(stream)
    np.testing.assert_allclose(p, [4 / 10, 2 / 10, 3 / 10])  # 6 training tokens


def test_mle_gives_infinite_perplexity_on_unseen_ngram():
    vocab, counts = _counts([["a", "b"], ["b", "a"]], 2)
    model = CountModel(counts, vocab, "mle")
    assert math.isfinite(evaluate(model, [["a", "b"]]).ppl)
    assert math.isinf(evaluate(model, [["a", "a"]]).ppl)
    assert math.isinf(evaluate(model.to_backoff(), [["a", "a"]]).ppl)
    assert math.isfinite(evaluate(CountModel(counts, vocab, "addk"), [["a", "a"]]).ppl)


def test_kneser_ney_by_hand():
    # <s> a b </s> / <s> a </s>; every order degenerate → fallback D = 0.5, 1, 1.5
    with pytest.warns(DiscountWarning):
        m = train_kneser_ney([["a", "b"], ["a"]], order=2, discount_fallback=True)
    # unigram adjusted counts a=1 b=1 </s>=2 → u = .125 .125 .25, γ = .5, uniform = 1/4
    assert _p(m, [], "a") == pytest.approx(0.25)
    assert _p(m, [], "</s>") == pytest.approx(0.375)
    assert _p(m, [], "<unk>") == pytest.approx(0.125)  # only the interpolated mass
    assert _p(m, [], "<s>") == 0.0
    assert _p(m, ["<s>"], "a") == pytest.approx(0.5 + 0.5 * 0.25)
    assert _p(m, ["<s>"], "b") == pytest.approx(0.5 * 0.25)  # unseen: γ(<s>) p(b)
    assert _p(m, ["a"], "b") == pytest.approx(0.25 + 0.5 * 0.25)
    assert _p(m, ["a"], "</s>") == pytest.approx(0.25 + 0.5 * 0.375)
    assert _p(m, ["b"], "</s>") == pytest.approx(0.5 + 0.5 * 0.375)


def test_adjusted_counts_keep_raw_counts_for_bos_and_top_order():
    vocab, c = _counts([["x", "y"], ["x", "y"], ["z", "y"]], 3)
    adj = adjusted_counts(c)
    idx = {tuple(vocab.words[i] for i in row): a
           for n in (1, 2, 3) for row, a in zip(word_ids(c.tables, n), adj[n - 1])}
    assert idx[("y",)] == 2  # preceded by x and z
    assert idx[("<s>",)] == 0
    assert idx[("<s>", "x")] == 2  # starts with <s>: raw count
    assert idx[("x", "y")] == 1  # continuation: only <s> before it
    assert idx[("<s>", "x", "y")] == 2  # highest order: raw


def test_discount_formula_and_fallback():
    adj = np.array([1] * 10 + [2] * 5 + [3] * 3 + [4] * 2 + [7])
    d = discounts_for(adj, 2, fallback=False)
    np.testing.assert_allclose(d, [0, 0.5, 1.1, 3 - 4 * 0.5 * 2 / 3], rtol=1e-6)
    with pytest.raises(DataError, match="Kneser-Ney discounts"):
        discounts_for(np.array([1, 1, 2]), 3, fallback=False)
    with pytest.warns(DiscountWarning, match="fallback"):
        assert discounts_for(np.array([1, 1, 2]), 3) == [0.0, 0.5, 1.0, 1.5]


def _zipf_lines(seed=0, n_lines=300, vocab=40):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    return [[f"w{i}" for i in rng.choice(vocab, size=rng.integers(1, 12), p=p)]
            for _ in range(n_lines)]


@pytest.mark.parametrize("smoothing", ["kn", "addk", "mle"])
def test_every_context_normalises(smoothing):
    lines = _zipf_lines()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        if smoothing == "kn":
            model = train_kneser_ney(lines, 3)
        else:
            vocab, counts = _counts(lines, 3)
            model = CountModel(counts, vocab, smoothing, 0.5).to_backoff()
    words = model.vocab.words
    contexts = [[]] + [[words[i] for i in row]
                       for n in (1, 2) for row in word_ids(model.tables, n)]
    checked = 0
    for ctx in contexts:
        if "</s>" in ctx or (smoothing == "mle" and "<unk>" in ctx):
            continue  # nothing follows </s>; MLE is undefined after an unseen context
        total = np.power(10.0, model.distribution(ctx)).sum()
        assert total == pytest.approx(1.0, abs=1e-9), ctx
        checked += 1
    assert checked > 100


def test_kn_discounts_estimated_on_real_looking_text():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DiscountWarning)
        model = train_kneser_ney(_zipf_lines(n_lines=3000, vocab=3000), 2)
    for d in model.metadata["discounts"].values():
        assert 0 < d[1] < 1 < d[3] < 3


def test_bad_orders_and_empty_input():
    with pytest.raises(DataError, match="1 to 10"):
        train_kneser_ney([["a"]], 0)
    with pytest.raises(DataError, match="1 to 10"):
        train_kneser_ney([["a"]], 11)
    with pytest.raises(DataError, match="empty"):
        train_kneser_ney([[], []], 2)


def test_all_oov_heldout_is_an_error():
    with pytest.warns(DiscountWarning):
        model = train_kneser_ney([["a", "b"], ["b", "a"]], 2)
    with pytest.raises(DataError, match="out of the model's vocabulary"):
        evaluate(model, [["zz", "yy"]])


def test_topk_and_seeded_sampling():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        model = train_kneser_ney(_zipf_lines(), 3)
    best = model.top_k(["<s>"], 3)
    assert len(best) == 3 and best[0][1] >= best[1][1] >= best[2][1]
    assert model.sample(30, seed=3) == model.sample(30, seed=3)
    assert sum(len(line) for line in model.sample(30, seed=3)) <= 30


def _chi_square(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson's statistic over the tokens expected ≥ 5 times (the rest pooled)."""
    n = counts.sum()
    big = probs * n >= 5
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(probs[big] * n, probs[~big].sum() * n)
    keep = expected > 0
    stat = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    return stat, int(keep.sum()) - 1


@pytest.mark.parametrize("prompt", [[], ["w0"]], ids=["line-start", "after-w0"])
def test_sample_frequencies_follow_the_model(prompt):
    # The first sampled token of 3000 seeds, counted, against p(w | <s> prompt).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        model = train_kneser_ney(_zipf_lines(), 3)
    probs = np.power(10.0, model.distribution(["<s>", *prompt]))
    counts = np.zeros(len(probs))
    eos = model.vocab.index["</s>"]
    for seed in range(3000):
        lines = model.sample(1, seed=seed, context=prompt or None)
        line = lines[0] if lines else []
        drawn = line[len(prompt):]
        counts[eos if not drawn else model.vocab.index[drawn[0]]] += 1
    stat, dof = _chi_square(counts, probs)
    assert dof >= 10
    # χ² has mean dof and sd √(2·dof); 5 sd above the mean has p < 1e-4.
    assert stat < dof + 5 * np.sqrt(2 * dof), (stat, dof)
    top = int(np.argmax(probs))
    assert counts[top] / 3000 == pytest.approx(probs[top], abs=0.03)


def test_sampling_a_certain_model_is_certain():
    # MLE on one repeated line: every next token has probability 1.
    vocab, counts = _counts([["a", "b", "c"]] * 3, 3)
    model = CountModel(counts, vocab, "mle").to_backoff()
    for seed in range(5):
        assert model.sample(8, seed=seed) == [["a", "b", "c"], ["a", "b", "c"]]
        assert model.sample(6, seed=seed) == [["a", "b", "c"], ["a", "b"]]
        assert model.sample(4, seed=seed, context=["a"]) == [["a", "b", "c"], ["a"]]
    assert model.top_k(["<s>", "a"], 1) == [("b", 1.0)]
