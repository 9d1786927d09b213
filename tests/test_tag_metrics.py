"""Tagging metrics against hand-computed values and conlleval's chunk rules."""

import random

import pytest

from keras_seq.tasks.tag.metrics import (
    bio_spans,
    format_report,
    span_scores,
    tagging_report,
)


def test_token_accuracy_and_f1_without_the_default_tag():
    true = [["Cap|", "lower|", "lower|."], ["lower|", "lower|,", "lower|"]]
    pred = [["Cap|", "lower|", "lower|"], ["lower|,", "lower|,", "lower|"]]
    report = tagging_report(true, pred, default_tag="lower|")
    assert report["tokens"] == 6 and report["sentences"] == 2
    assert report["accuracy"] == pytest.approx(4 / 6)
    per = report["per_tag"]
    assert set(per) == {"Cap|", "lower|.", "lower|,"}  # the default tag is left out
    assert per["Cap|"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1,
                           "predicted": 1}
    assert per["lower|."]["f1"] == 0.0 and per["lower|."]["predicted"] == 0
    assert per["lower|,"]["precision"] == pytest.approx(0.5)
    assert per["lower|,"]["recall"] == pytest.approx(1.0)
    assert per["lower|,"]["f1"] == pytest.approx(2 / 3)
    # micro: 2 correct of 3 predicted and 3 true non-default tags.
    assert report["micro"]["precision"] == pytest.approx(2 / 3)
    assert report["micro"]["recall"] == pytest.approx(2 / 3)
    assert report["micro"]["f1"] == pytest.approx(2 / 3)
    # macro: mean over Cap|, lower|., lower|,.
    assert report["macro"]["f1"] == pytest.approx((1 + 0 + 2 / 3) / 3)
    assert report["macro"]["precision"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert report["macro"]["recall"] == pytest.approx((1 + 0 + 1) / 3)
    assert "spans" not in report
    # With no default tag every tag counts, and micro F1 equals accuracy.
    everything = tagging_report(true, pred)
    assert "lower|" in everything["per_tag"]
    assert everything["micro"]["f1"] == pytest.approx(4 / 6)
    assert everything["per_tag"]["lower|"]["precision"] == pytest.approx(2 / 3)


def test_span_f1_is_low_where_token_accuracy_is_high():
    true = [["B-PER", "I-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O", "B-ORG", "I-ORG"],
            ["O", "O", "B-MISC", "O", "O", "O", "O", "O", "O", "O"]]
    pred = [["B-PER", "I-PER", "O", "O", "O", "B-LOC", "I-LOC", "I-LOC", "B-ORG", "B-ORG"],
            ["O", "O", "B-MISC", "O", "O", "O", "O", "O", "O", "O"]]
    report = tagging_report(true, pred, scheme="bio")
    # 3 wrong tokens of 20, but every span in sentence 1 has a boundary error:
    # true PER 0-2, LOC 5-6, ORG 8-9, MISC; predicted PER 0-1, LOC 5-7, ORG 8, ORG 9, MISC.
    assert report["accuracy"] == pytest.approx(17 / 20)
    spans = report["spans"]
    assert (spans["true_spans"], spans["pred_spans"], spans["correct_spans"]) == (4, 5, 1)
    assert spans["precision"] == pytest.approx(1 / 5)
    assert spans["recall"] == pytest.approx(1 / 4)
    assert spans["f1"] == pytest.approx(2 * (1 / 5) * (1 / 4) / (1 / 5 + 1 / 4))  # 2/9
    assert spans["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                        "support": 1, "predicted": 2, "correct": 0}
    assert spans["per_type"]["MISC"]["f1"] == 1.0
    # Token-level F1 over non-O tags: 6 correct of 8 predicted and 8 true.
    assert report["default_tag"] == "O"
    assert report["micro"]["f1"] == pytest.approx(6 / 8)


def test_conlleval_span_rules():
    # I-X after O, or after a span of another type, starts a span; B-X always does.
    assert bio_spans([["O", "I-PER", "I-PER", "B-LOC", "I-PER", "B-PER", "B-PER"]]) == {
        (0, "PER", 1, 2), (0, "LOC", 3, 3), (0, "PER", 4, 4), (0, "PER", 5, 5),
        (0, "PER", 6, 6)}
    # IOB1 and IOB2 spellings of the same span agree, though half the tokens differ.
    report = tagging_report([["B-PER", "I-PER", "O"]], [["I-PER", "I-PER", "O"]], "bio")
    assert report["accuracy"] == pytest.approx(2 / 3)
    assert report["spans"]["f1"] == 1.0
    # IOBES: E-X and S-X end a span at their token.
    assert bio_spans([["B-A", "E-A", "I-A", "S-B", "E-B", "O", "S-A"]]) == {
        (0, "A", 0, 1), (0, "A", 2, 2), (0, "B", 3, 3), (0, "B", 4, 4), (0, "A", 6, 6)}
    # Spans never run across a sentence boundary.
    assert bio_spans([["B-X"], ["I-X"]]) == {(0, "X", 0, 0), (1, "X", 0, 0)}
    assert span_scores([["B-X"], ["I-X"]], [["B-X"], ["B-X"]])["f1"] == 1.0
    # No spans at all: zeros, not errors.
    empty = span_scores([["O", "O"]], [["O", "O"]])
    assert (empty["precision"], empty["recall"], empty["f1"]) == (0.0, 0.0, 0.0)


def _conlleval_chunks(sentence):
    """conlleval.pl's startOfChunk / endOfChunk for B/I/O tags, written out independently."""
    chunks, start = set(), None
    prev_tag, prev_type = "O", ""
    for i, label in enumerate(list(sentence) + ["O"]):  # the sentence end closes a chunk
        tag, _, kind = label.partition("-")
        end = (prev_tag in ("B", "I") and tag in ("B", "O")) or (
            prev_tag != "O" and prev_type != kind)
        begin = tag == "B" or (prev_tag == "O" and tag == "I") or (
            tag != "O" and prev_type != kind)
        if end and start is not None:
            chunks.add((prev_type, start, i - 1))
            start = None
        if begin:
            start = i
        prev_tag, prev_type = tag, kind
    return chunks


def test_spans_match_conlleval_rules_on_random_sequences():
    rng = random.Random(0)
    labels = ["O", "O", "B-A", "I-A", "B-B", "I-B"]
    for _ in range(300):
        sentence = [rng.choice(labels) for _ in range(rng.randint(1, 12))]
        ours = {(kind, a, b) for _, kind, a, b in bio_spans([sentence])}
        assert ours == _conlleval_chunks(sentence), sentence


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"sentence 1 has 2 reference tag\(s\) but 3"):
        tagging_report([["O"], ["O", "O"]], [["O"], ["O", "O", "O"]])
    with pytest.raises(ValueError, match=r"2 reference sentence\(s\) but 1"):
        tagging_report([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="scheme='iob'"):
        tagging_report([["O"]], [["O"]], scheme="iob")
    # A flat list is one sentence.
    assert tagging_report(["A", "B"], ["A", "A"])["accuracy"] == 0.5


def test_format_report_lists_the_numbers():
    report = tagging_report([["B-X", "O"]], [["B-X", "B-X"]], scheme="bio")
    text = format_report(report)
    assert "accuracy 0.5000" in text and "without 'O'" in text
    assert "spans: precision 0.5000  recall 1.0000" in text and "B-X" in text
