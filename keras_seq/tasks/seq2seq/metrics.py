"""Sequence-to-sequence metrics: exact match, token accuracy, corpus BLEU, per length.

* **exact match** — share of outputs equal to the reference, token for token;
* **token accuracy** — position-wise: matching positions over ``max(len(hyp), len(ref))``
  summed over the corpus (so missing and extra tokens both count as errors);
* **BLEU** — corpus BLEU from ``sacrebleu``, the ``seq2seq`` extra (``tokenize="char"`` for
  character-level targets, its standard ``13a`` tokenizer otherwise).

No TensorFlow import here.

Example:

>>> exact_match([[1, 2], [3]], [[1, 2], [4]])
0.5
>>> token_accuracy([[1, 2, 3]], [[1, 2]])
0.6666666666666666
"""

from __future__ import annotations

import math

from keras_seq.errors import KerasSeqError
from keras_seq.extras import require


def _check(hyps, refs):
    if len(hyps) != len(refs):
        raise KerasSeqError(f"got {len(hyps)} hypotheses for {len(refs)} references; "
                            "expected one hypothesis per reference")


def exact_match(hyps, refs) -> float:
    _check(hyps, refs)
    if not refs:
        return float("nan")
    return sum(list(h) == list(r) for h, r in zip(hyps, refs)) / len(refs)


def token_accuracy(hyps, refs) -> float:
    _check(hyps, refs)
    right = total = 0
    for h, r in zip(hyps, refs):
        right += sum(a == b for a, b in zip(h, r))
        total += max(len(h), len(r))
    return right / total if total else float("nan")


def require_bleu():
    """``sacrebleu`` (the ``seq2seq`` extra), or the one-line error naming it."""
    return require("sacrebleu", "seq2seq", "the BLEU score")


def corpus_bleu(hyp_texts, ref_texts, char_level: bool = False) -> float:
    """Corpus BLEU (0–100) with sacrebleu."""
    sacrebleu = require_bleu()
    _check(hyp_texts, ref_texts)
    if not ref_texts:
        return float("nan")
    tokenize = "char" if char_level else "13a"
    return float(sacrebleu.corpus_bleu(list(hyp_texts), [list(ref_texts)],
                                       tokenize=tokenize).score)


def bucket_edges(max_len: int, n_buckets: int = 8) -> list[tuple[int, int]]:
    """``n_buckets`` equal-width inclusive ranges covering ``1 … max_len``."""
    width = max(1, math.ceil(max_len / n_buckets))
    return [(lo, min(lo + width - 1, max_len)) for lo in range(1, max_len + 1, width)]


def by_length(lengths, hyps, refs, edges) -> list[dict]:
    """Exact match and token accuracy per source-length bucket ``[(lo, hi), ...]``."""
    _check(hyps, refs)
    rows = []
    for lo, hi in edges:
        idx = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        h, r = [hyps[i] for i in idx], [refs[i] for i in idx]
        rows.append({"bucket": f"{lo}-{hi}", "lo": lo, "hi": hi, "n": len(idx),
                     "exact_match": exact_match(h, r) if idx else float("nan"),
                     "token_accuracy": token_accuracy(h, r) if idx else float("nan")})
    return rows


def summarize(hyps, refs, hyp_texts, ref_texts, lengths, edges, char_level: bool) -> dict:
    """Every metric at once: overall numbers plus the per-length table."""
    return {
        "n": len(refs),
        "exact_match": exact_match(hyps, refs),
        "token_accuracy": token_accuracy(hyps, refs),
        "bleu": corpus_bleu(hyp_texts, ref_texts, char_level=char_level),
        "by_length": by_length(lengths, hyps, refs, edges),
    }
