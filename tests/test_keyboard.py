"""Keyboard metrics (keras_seq/keyboard.py) on hand-computed examples, and their intervals."""

import numpy as np
import pytest

from keras_seq.errors import KerasSeqError
from keras_seq.keyboard import (
    END_OF_LINE,
    IN_VOCAB,
    LINE_END,
    UNKNOWN,
    KeyboardScorer,
    format_metrics,
    paired_bootstrap,
    positions,
)
from keras_seq.ngram.kneser_ney import train_kneser_ney
from keras_seq.ngram.scorer import keyboard_outcomes

VOCAB = ["<pad>", "<unk>", "<eos>", "the", "then", "a", "cat"]


def scores(**probs):
    """log-probabilities over VOCAB, 1e-6 for every id not named (eos: ``eos=``)."""
    p = np.full(len(VOCAB), 1e-6)
    for word, value in probs.items():
        p[VOCAB.index("<eos>" if word == "eos" else word)] = value
    return np.log(p)


def scorer(k):
    return KeyboardScorer(VOCAB, blocked=[0, 1], end_of_line=2, k=k)


def test_the_worked_example_of_the_docs():
    # the then a cat at .4 .3 .2 .1: with one suggestion `then` is never offered (every
    # prefix of it is a prefix of `the`, which stays ahead): typed in full, 5 of 5
    one = scorer(1)
    one.add(scores(the=.4, then=.3, a=.2, cat=.1), "then")
    m = one.outcomes().metrics()
    assert (m["ksr"], m["top1"], m["top3"], m["prefix1"], m["prefix2"]) == (0, 0, 1, 0, 0)
    two = scorer(2)  # second in the strip before any letter: one tap of five keystrokes
    two.add(scores(the=.4, then=.3, a=.2, cat=.1), "then")
    assert two.outcomes().metrics()["ksr"] == pytest.approx(0.8)


def test_every_metric_on_four_positions():
    s = scorer(3)
    s.add(scores(the=.4, then=.3, a=.2, cat=.1, eos=.05), "cat")  # rank 3; `c` brings it
    s.add(scores(eos=.5, the=.2), END_OF_LINE)  # the line ends: first suggestion
    s.add(scores(the=.5), "dog")  # not in the vocabulary: typed in full, 4 keystrokes
    s.add(scores(a=.5, the=.2), "a")  # first suggestion; one letter: no prefix counts
    out = s.outcomes()
    assert out.kind.tolist() == [IN_VOCAB, LINE_END, UNKNOWN, IN_VOCAB]
    assert out.rank.tolist()[:2] == [3, 0] and out.rank[3] == 0
    assert out.prefix_rank.tolist() == [[0, 0], [-1, -1], [-1, -1], [-1, -1]]
    assert (out.typed.tolist(), out.plain.tolist()) == ([2, 0, 4, 1], [4, 0, 4, 2])
    m = out.metrics()
    assert m["top1"] == m["top3"] == 2 / 4  # eol and `a`; `cat` is 4th, `dog` never
    assert m["top1_iv"] == m["top3_iv"] == 1 / 2  # `cat` and `a`
    assert m["prefix1"] == m["prefix2"] == 1.0  # only `cat` is longer than 1 and 2 letters
    assert m["ksr"] == pytest.approx(1 - 7 / 10)
    assert (m["positions"], m["in_vocab_words"], m["unknown_words"]) == (4, 2, 1)
    assert "keystrokes saved 30.00%" in format_metrics(m)


def test_ties_go_to_the_lower_id_and_blocked_ids_are_never_suggested():
    s = scorer(1)
    s.add(scores(the=.3, then=.3), "then")  # tied with `the` (id 3 < 4): second
    s.add(scores(the=.3, then=.3), "the")
    s.add(np.log([.9, .9, 1e-6, .05, .04, .01, 1e-6]), "the")  # <pad>, <unk> left out
    assert s.outcomes().rank.tolist() == [1, 0, 0]
    with pytest.raises(KerasSeqError, match="vocabulary of 7"):
        s.add(np.zeros(5), "the")
    with pytest.raises(KerasSeqError, match="k ≥ 1"):
        scorer(0)


def test_the_paired_bootstrap_brackets_the_difference():
    rng = np.random.default_rng(0)
    good, bad = scorer(3), scorer(3)
    for _ in range(600):
        target = rng.choice(["the", "then", "a", "cat"])
        good.add(scores(**{target: .9}), target)
        bad.add(scores(**{target: .9}) if rng.random() < 0.5 else scores(eos=.9), target)
    a, b = good.outcomes(), bad.outcomes()
    same = paired_bootstrap(a, a, block=50, samples=200)
    assert all(d["diff"] == d["low"] == d["high"] == 0 for d in same.values())
    diff = paired_bootstrap(a, b, block=50, samples=500)["top1"]
    assert 0 < diff["low"] < diff["diff"] < diff["high"] < 1
    assert diff["diff"] == pytest.approx(a.metrics()["top1"] - b.metrics()["top1"])
    assert 0.4 < diff["diff"] < 0.6
    short = scorer(3)
    short.add(scores(the=.9), "the")
    with pytest.raises(KerasSeqError, match="same positions"):
        paired_bootstrap(a, short.outcomes())


def test_an_ngram_is_scored_at_every_word_and_line_end():
    lines = [["the", "cat", "sat"], ["the", "dog", "sat"]] * 3
    model = train_kneser_ney(lines, order=3, discount_fallback=True)
    raw = [["the", "cat", "sat"], ["a", "cat", "sat"]]  # `a` is unknown to the model
    out = keyboard_outcomes(model, raw, k=3)
    assert positions(raw) == ["the", "cat", "sat", None, "a", "cat", "sat", None]
    assert out.kind.tolist() == [1, 1, 1, 0, 2, 1, 1, 0]
    # every known target ranks first where its context was seen in training; `cat` after
    # the unknown `a` backs off to unigrams, where the, sat, </s> (in every line) beat it
    assert out.rank.tolist()[:4] == [0, 0, 0, 0] and out.rank.tolist()[5:] == [3, 0, 0]
    assert out.typed.tolist() == [1, 1, 1, 0, 2, 2, 1, 0]  # `a` typed; `cat` after its `c`
    m = out.metrics()
    assert m["positions"] == 8 and m["unknown_words"] == 1
    assert m["top3"] == 6 / 8 and m["ksr"] == pytest.approx(1 - 8 / 22)
