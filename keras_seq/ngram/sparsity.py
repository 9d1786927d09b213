"""The sparsity report: how many held-out n-grams training never saw, and what that
does to MLE, add-k and Kneser-Ney perplexity, order by order (measured, not estimated).

For each order n:

* ``unseen_tokens``: share of held-out n-gram occurrences (one per predicted token, with
  the n-1 tokens before it inside the line) that never occur in training;
* ``unseen_types``: the same over distinct held-out n-grams;
* ``train_types`` vs ``possible`` = |V|^n (|V|: training word types plus ``</s>`` and
  ``<unk>``), and their ratio ``coverage``;
* ``ppl_mle`` / ``ppl_addk`` / ``ppl_kn``: perplexity of the order-n model on the split,
  and ``mle_zero``, the share of tokens MLE gives probability 0.

Unseen shares use the raw words (an OOV word makes its n-grams unseen); perplexities map
OOV words to ``<unk>`` like every other evaluation.

Example:

>>> lines = [["a", "b", "c"], ["b", "c", "a"]] * 5
>>> rows = sparsity_report(lines, [["a", "b", "d"]], max_order=2, k=1.0)
>>> [round(r["unseen_tokens"], 2) for r in rows]
[0.25, 0.5]
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np

from keras_seq.extras import pyplot
from keras_seq.ngram.counts import (
    NgramCounts,
    Vocabulary,
    check_order,
    stream_type_ids,
    word_ids,
)
from keras_seq.ngram.estimators import CountModel
from keras_seq.ngram.kneser_ney import DiscountWarning, kneser_ney

COLUMNS = (
    ("order", "n", "{:d}"),
    ("unseen_tokens", "unseen tok", "{:.1%}"),
    ("unseen_types", "unseen types", "{:.1%}"),
    ("train_types", "train n-grams", "{:,d}"),
    ("possible", "|V|^n", "{:.3g}"),
    ("coverage", "coverage", "{:.2e}"),
    ("mle_zero", "MLE p=0", "{:.1%}"),
    ("ppl_mle", "PPL MLE", "{:.1f}"),
    ("ppl_addk", "PPL add-k", "{:.1f}"),
    ("ppl_kn", "PPL KN", "{:.1f}"),
)


def _ppl(log10probs: np.ndarray) -> float:
    nats = -float(np.mean(log10probs)) * math.log(10.0)
    return math.exp(nats) if nats < 709 else math.inf


def sparsity_report(train, heldout, max_order: int = 5, k: float = 1.0,
                    heldout_raw=None) -> list[dict]:
    """One row per order 1..``max_order`` (see the module docstring for the columns).

    ``train``/``heldout`` are token lines with OOV as ``<unk>``; ``heldout_raw`` (default
    ``heldout``) keeps the original words for the unseen shares.
    """
    max_order = check_order(max_order)
    heldout_raw = heldout if heldout_raw is None else heldout_raw
    # Unseen shares: one vocabulary over train and held-out words, so OOV words stay distinct.
    joint = Vocabulary.from_lines([*train, *heldout_raw])
    train_j = NgramCounts.from_stream(joint.encode(train), max_order, len(joint))
    held_stream = joint.encode(heldout_raw)
    held_ending = stream_type_ids(train_j.tables, held_stream, len(joint))
    held_counts = NgramCounts.from_stream(held_stream, max_order, len(joint))
    # Perplexities: the training vocabulary, OOV → <unk>.
    vocab = Vocabulary.from_lines(train)
    counts = NgramCounts.from_stream(vocab.encode(train), max_order, len(vocab))
    stream = vocab.encode(heldout)
    V = len(vocab) - 1  # predictable: all but <s>
    rows = []
    for n in range(1, max_order + 1):
        j = np.flatnonzero(held_stream.pos >= max(1, n - 1))
        seen_count = train_j.counts[n - 1]  # the unigram table lists every joint id
        e = held_ending[n - 1][j]
        unseen_tok = float(np.mean((e < 0) | (seen_count[np.maximum(e, 0)] == 0)))
        cols = word_ids(held_counts.tables, n)
        if n == 1:
            cols = cols[cols[:, 0] != 1]  # <s> is never predicted
        t = cols[:, 0]
        for m in range(2, n + 1):
            t = train_j.tables[m - 1].find(t, cols[:, m - 1], len(joint))
        unseen = (t < 0) | (seen_count[np.maximum(t, 0)] == 0)
        unseen_types = float(np.mean(unseen)) if t.size else 0.0
        sub = counts.truncate(n)
        mle = CountModel(sub, vocab, "mle").token_log10probs(stream)
        addk = CountModel(sub, vocab, "addk", k).token_log10probs(stream)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DiscountWarning)
            kn = kneser_ney(sub, vocab).token_log10probs(stream)
        possible = float(V) ** n
        train_types = len(sub.tables[n - 1]) - (1 if n == 1 else 0)  # no <s> unigram
        rows.append({
            "order": n,
            "unseen_tokens": unseen_tok,
            "unseen_types": unseen_types,
            "train_types": int(train_types),
            "possible": possible,
            "coverage": train_types / possible,
            "mle_zero": float(np.mean(np.isneginf(mle))),
            "ppl_mle": _ppl(mle),
            "ppl_addk": _ppl(addk),
            "ppl_kn": _ppl(kn),
        })
    return rows


def format_table(rows: list[dict], k: float = 1.0) -> str:
    """The rows as an aligned text table."""
    head = [h.replace("add-k", f"add-{k:g}") for _, h, _ in COLUMNS]
    body = [[fmt.format(r[key]) for key, _, fmt in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def to_json(rows: list[dict], **extra) -> str:
    """JSON text (``inf`` written as the string ``"inf"``)."""
    clean = [{k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()}
             for r in rows]
    return json.dumps({**extra, "orders": clean}, indent=2, default=str)


def plot(rows: list[dict], path: str, title: str = "") -> str:
    """Save a two-panel PNG: unseen shares and perplexity by order. Returns ``path``."""
    plt = pyplot("the sparsity plot")

    n = [r["order"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(n, [100 * r["unseen_tokens"] for r in rows], "o-", label="occurrences")
    a.plot(n, [100 * r["unseen_types"] for r in rows], "s--", label="distinct n-grams")
    a.set_xlabel("order n")
    a.set_ylabel("held-out n-grams unseen in train (%)")
    a.set_ylim(0, 100)
    a.legend()
    for key, label in (("ppl_addk", "add-k"), ("ppl_kn", "Kneser-Ney"), ("ppl_mle", "MLE")):
        ys = [r[key] for r in rows]
        finite = [(x, y) for x, y in zip(n, ys) if math.isfinite(y)]
        if finite:
            b.plot(*zip(*finite), "o-", label=label)
        elif key == "ppl_mle":
            b.plot([], [], " ", label="MLE: infinite at every order")
    b.set_yscale("log")
    b.set_xlabel("order n")
    b.set_ylabel("perplexity (log scale)")
    b.legend()
    fig.suptitle(title or "n-gram sparsity")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
