"""Tagging metrics: token accuracy, per-tag and micro/macro F1, and BIO span F1.

Inputs are tag strings of real tokens only (cut padded predictions to each sentence's
length first), one list per sentence.

* ``accuracy`` — correct tags over all tokens, the default tag included.
* ``per_tag`` / ``micro`` / ``macro`` — precision, recall and F1 per tag over the tags
  other than ``default_tag`` (``O`` for BIO, ``lower|`` for ``restore-punct``: the tag
  that means "nothing to mark"), which would otherwise swamp the averages. Micro pools the
  counts of those tags; macro is the unweighted mean over every such tag that occurs in
  the references or the predictions. A ratio with a zero denominator is 0.
* ``spans`` (``scheme="bio"`` only) — entity precision/recall/F1 as CoNLL's
  ``conlleval`` computes them: a span is correct only if its type and both boundaries
  match. An ``I-X`` after ``O`` or after a span of another type starts a new span, so
  IOB1 and IOB2 both work (``E-X`` and ``S-X``, IOBES, end a span at their token). The
  tests check :func:`bio_spans` against an independent copy of conlleval's chunk rules on
  random tag sequences.

Example:

>>> report = tagging_report([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]], scheme="bio")
>>> report["accuracy"], report["spans"]["f1"]
(0.6666666666666666, 0.0)
"""

from __future__ import annotations

import collections

SCHEMES = ("plain", "bio")


def _prf(correct: int, predicted: int, true: int) -> dict:
    precision = correct / predicted if predicted else 0.0
    recall = correct / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _as_sentences(seqs, name: str) -> list[list[str]]:
    seqs = list(seqs)
    if seqs and all(isinstance(t, str) for t in seqs):
        return [seqs]  # one flat sentence
    out = []
    for i, sent in enumerate(seqs):
        if isinstance(sent, str):
            raise ValueError(f"tagging_report: {name}[{i}] is the string {sent!r}; expected "
                             "a list of tag strings per sentence")
        out.append([str(t) for t in sent])
    return out


def bio_spans(sentences: list[list[str]]) -> set[tuple[int, str, int, int]]:
    """Entity spans ``(sentence, type, first, last)`` (inclusive token indices) of BIO tags.

    >>> sorted(bio_spans([["B-PER", "I-PER", "O", "I-LOC", "I-ORG"]]))
    [(0, 'LOC', 3, 3), (0, 'ORG', 4, 4), (0, 'PER', 0, 1)]
    """
    return {(i, kind, start, end)
            for i, sent in enumerate(sentences)
            for kind, start, end in _chunks(sent)}


def _chunk_ends(prev_tag: str, prev_kind: str, tag: str, kind: str) -> bool:
    """conlleval.pl's ``endOfChunk`` (E and S end a span too): does one end before this
    token?"""
    return (prev_tag in ("E", "S")
            or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
            or (prev_tag not in ("O", ".") and prev_kind != kind))


def _chunk_starts(prev_tag: str, prev_kind: str, tag: str, kind: str) -> bool:
    """conlleval.pl's ``startOfChunk`` (S starts a span too): does one start here?"""
    return (tag in ("B", "S")
            or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
            or (tag not in ("O", ".") and prev_kind != kind))


def _chunks(sentence) -> list[tuple[str, int, int]]:
    """``(type, first, last)`` of one sentence's spans; its end closes an open span."""
    chunks, start = [], 0
    prev_tag, prev_kind = "O", ""
    for i, label in enumerate([*sentence, "O"]):
        tag, _, kind = str(label).partition("-")  # "B-PER" -> B, PER; "O" -> O, ""
        if _chunk_ends(prev_tag, prev_kind, tag, kind):
            chunks.append((prev_kind, start, i - 1))
        if _chunk_starts(prev_tag, prev_kind, tag, kind):
            start = i
        prev_tag, prev_kind = tag, kind
    return chunks


def span_scores(true_tags, pred_tags) -> dict:
    """Span (entity) precision/recall/F1, micro over all types and per type (conlleval)."""
    true_spans = bio_spans(true_tags)
    pred_spans = bio_spans(pred_tags)
    correct = true_spans & pred_spans
    out = {**_prf(len(correct), len(pred_spans), len(true_spans)),
           "true_spans": len(true_spans), "pred_spans": len(pred_spans),
           "correct_spans": len(correct), "per_type": {}}
    kinds = sorted({s[1] for s in true_spans | pred_spans})
    for kind in kinds:
        t = sum(1 for s in true_spans if s[1] == kind)
        p = sum(1 for s in pred_spans if s[1] == kind)
        c = sum(1 for s in correct if s[1] == kind)
        out["per_type"][kind] = {**_prf(c, p, t), "support": t, "predicted": p, "correct": c}
    return out


def tagging_report(true_tags, pred_tags, scheme: str = "plain",
                   default_tag: str | None = None) -> dict:
    """Scores of predicted tags against reference tags.

    Args:
        true_tags: reference tags, one list of strings per sentence (a single flat list
            is one sentence).
        pred_tags: predicted tags, the same lengths (real tokens only).
        scheme: ``"plain"`` or ``"bio"`` (adds span scores); see
            :attr:`keras_seq.tasks.tag.data.TaggingData.scheme`.
        default_tag: the tag left out of ``per_tag``/``micro``/``macro``; ``None`` means
            ``"O"`` for BIO and no tag otherwise. Pass ``"lower|"`` for ``restore-punct``
            (``TaggingData.default_tag`` holds the right value).

    Returns:
        dict with ``sentences``, ``tokens``, ``accuracy``, ``default_tag``, ``per_tag``
        (``{tag: {precision, recall, f1, support, predicted}}``), ``micro`` and ``macro``
        (``{precision, recall, f1}``) and, for BIO, ``spans`` (``precision``, ``recall``,
        ``f1``, span counts and ``per_type``).

    Raises:
        ValueError: unknown scheme, or a different number of sentences or tokens.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"tagging_report: received scheme={scheme!r}; expected one of "
                         f"{', '.join(SCHEMES)}")
    true_s = _as_sentences(true_tags, "true_tags")
    pred_s = _as_sentences(pred_tags, "pred_tags")
    if len(true_s) != len(pred_s):
        raise ValueError(f"tagging_report: {len(true_s)} reference sentence(s) but "
                         f"{len(pred_s)} predicted; expected one prediction per sentence")
    for i, (t, p) in enumerate(zip(true_s, pred_s)):
        if len(t) != len(p):
            raise ValueError(
                f"tagging_report: sentence {i} has {len(t)} reference tag(s) but {len(p)} "
                "predicted; expected one per real token (cut padded predictions to the "
                "sentence length)"
            )
    if default_tag is None and scheme == "bio":
        default_tag = "O"
    pairs = [(t, p) for ts, ps in zip(true_s, pred_s) for t, p in zip(ts, ps)]
    tokens = len(pairs)
    true_count = collections.Counter(t for t, _ in pairs)
    pred_count = collections.Counter(p for _, p in pairs)
    correct = collections.Counter(t for t, p in pairs if t == p)
    tags = sorted((set(true_count) | set(pred_count)) - {default_tag})
    per_tag = {tag: {**_prf(correct[tag], pred_count[tag], true_count[tag]),
                     "support": true_count[tag], "predicted": pred_count[tag]}
               for tag in tags}
    micro = _prf(sum(correct[t] for t in tags), sum(pred_count[t] for t in tags),
                 sum(true_count[t] for t in tags))
    macro = {k: (sum(s[k] for s in per_tag.values()) / len(tags) if tags else 0.0)
             for k in ("precision", "recall", "f1")}
    report = {"sentences": len(true_s), "tokens": tokens,
              "accuracy": sum(correct.values()) / tokens if tokens else 0.0,
              "default_tag": default_tag, "per_tag": per_tag, "micro": micro, "macro": macro}
    if scheme == "bio":
        report["spans"] = span_scores(true_s, pred_s)
    return report


def format_report(report: dict, max_tags: int = 30) -> str:
    """Plain-text summary of :func:`tagging_report` (tags by support, at most ``max_tags``)."""
    lines = [f"tokens {report['tokens']:,}  sentences {report['sentences']:,}  "
             f"accuracy {report['accuracy']:.4f}"]
    skip = f" (without {report['default_tag']!r})" if report["default_tag"] is not None else ""
    lines.append(f"micro F1{skip} {report['micro']['f1']:.4f}  "
                 f"macro F1 {report['macro']['f1']:.4f}")
    if "spans" in report:
        s = report["spans"]
        lines.append(f"spans: precision {s['precision']:.4f}  recall {s['recall']:.4f}  "
                     f"F1 {s['f1']:.4f}  ({s['correct_spans']} correct of {s['true_spans']} "
                     f"true, {s['pred_spans']} predicted)")
    ranked = sorted(report["per_tag"].items(), key=lambda kv: (-kv[1]["support"], kv[0]))
    if ranked:
        width = max(8, *(len(t) for t, _ in ranked[:max_tags]))
        lines.append(f"{'tag':<{width}} {'prec':>7} {'recall':>7} {'F1':>7} {'support':>8}")
        for tag, s in ranked[:max_tags]:
            lines.append(f"{tag:<{width}} {s['precision']:>7.4f} {s['recall']:>7.4f} "
                         f"{s['f1']:>7.4f} {s['support']:>8,}")
        if len(ranked) > max_tags:
            lines.append(f"... {len(ranked) - max_tags} more tag(s)")
    return "\n".join(lines)
