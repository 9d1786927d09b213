"""Interpolated modified Kneser-Ney, computed the way KenLM's ``lmplz`` does.

The steps follow ``lm/builder`` of KenLM:

1. **Adjusted counts** (``adjust_counts.cc``): the highest order and every n-gram that
   starts with ``<s>`` keep their raw counts; any other lower-order n-gram counts the
   distinct words seen to its left (its continuation count). The unigram ``<s>`` gets 0,
   and so does ``<unk>`` when the training text has none.
2. **Discounts** per order from the counts-of-counts n_k of adjusted counts (Chen &
   Goodman eq. 26): ``Y = n1 / (n1 + 2 n2)``, ``D_k = k − (k+1) Y n_{k+1} / n_k`` for
   k = 1, 2, 3+ (computed in float32 like lmplz). When some n_k (k ≤ 3) is 0 or a D_k
   falls outside [0, k], lmplz stops; with ``discount_fallback`` (lmplz's
   ``--discount_fallback``) we warn and use D = 0.5, 1.0, 1.5 for that order instead.
3. **Initial probabilities** (``initial_probabilities.cc``): per context,
   ``u(w|h) = (a(hw) − D(a)) / Σ_w a(hw)`` and the left-over mass
   ``γ(h) = Σ_k D_k N_k(h·) / Σ_w a(hw)``.
4. **Interpolation** (``interpolate.cc``): ``p(w|h) = u(w|h) + γ(h) p(w|h⁻)`` down to the
   uniform ``1/|V|``, |V| counting ``<unk>`` and ``</s>`` but not ``<s>``. So ``<unk>``
   (count 0) gets γ(ε)/|V|. ``<s>`` gets probability 0 (``-99`` in ARPA, SRILM's
   convention); lmplz gives it probability 1 (``0`` in ARPA). ``<s>`` is only ever a
   context, never predicted, so no score depends on which.
5. **Backoff form**: the ARPA backoff of context h is γ(h), which reproduces the
   interpolated probabilities exactly (an unseen ``w`` gets ``γ(h) p(w|h⁻)``).

Differences from lmplz: a ``<unk>`` that occurs in the training text (a capped
vocabulary) is counted like any word, where lmplz refuses such text; arithmetic after
the discounts is float64 (lmplz: float32), so log10 values agree to about 1e-6.

Example:

>>> model = train_kneser_ney([["a", "b", "a"], ["b", "a"]], order=2, discount_fallback=True)
>>> model.metadata["discounts"][1]  # [D0, D1, D2, D3+]: the fallback (tiny text)
[0.0, 0.5, 1.0, 1.5]
"""

from __future__ import annotations

import warnings

import numpy as np

from keras_seq.errors import DataError
from keras_seq.ngram.backoff import BackoffModel
from keras_seq.ngram.counts import BOS, NgramCounts, Vocabulary, check_order

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


class DiscountWarning(UserWarning):
    """Counts-of-counts too degenerate for Kneser-Ney discounts; fallback values used."""


def adjusted_counts(counts: NgramCounts) -> list[np.ndarray]:
    """Kneser-Ney adjusted counts per order (see step 1 of the module docstring)."""
    N = counts.order
    out = []
    for n in range(1, N + 1):
        raw = counts.counts[n - 1]
        if n == N:
            a = raw.copy()
        else:
            left = np.bincount(counts.suffix[n], minlength=raw.size).astype(np.int64)
            a = np.where(counts.bos_first[n - 1], raw, left)
        if n == 1:
            a[BOS] = 0
        out.append(a)
    return out


def discounts_for(adjusted: np.ndarray, order: int, fallback: bool = True) -> list[float]:
    """``[D0=0, D1, D2, D3+]`` from counts-of-counts, as lmplz computes them (float32)."""
    n = [int((adjusted == k).sum()) for k in range(5)]
    return discounts_from_counts_of_counts(n, order, fallback)


def discounts_from_counts_of_counts(n: list[int], order: int, fallback: bool = True):
    """``[D0=0, D1, D2, D3+]`` from ``n = [n0, n1, n2, n3, n4]`` (see :func:`discounts_for`)."""
    problem = None
    if min(n[1:4]) == 0:
        k = n.index(0, 1)
        problem = (
            f"no {order}-grams with adjusted count {k} (counts-of-counts n1..n4 = {n[1:]})"
        )
    else:
        f = np.float32
        y = f(n[1]) / f(n[1] + 2.0 * n[2])
        d = [0.0] + [float(f(k) - f(k + 1) * y * f(n[k + 1]) / f(n[k])) for k in (1, 2, 3)]
        bad = [k for k in (1, 2, 3) if not 0.0 <= d[k] <= k]
        if not bad:
            return d
        problem = f"{order}-gram discount D{bad[0]}={d[bad[0]]:.4g} is outside [0, {bad[0]}]"
    if not fallback:
        raise DataError(
            f"cannot estimate Kneser-Ney discounts: {problem}. The training text is too small "
            "or artificial; use more text, a lower order, or allow the fallback discounts"
        )
    warnings.warn(
        f"{problem}; using fallback discounts D1={FALLBACK_DISCOUNTS[0]} "
        f"D2={FALLBACK_DISCOUNTS[1]} D3+={FALLBACK_DISCOUNTS[2]} for order {order} "
        "(lmplz --discount_fallback)",
        DiscountWarning,
        stacklevel=3,
    )
    return [0.0, *FALLBACK_DISCOUNTS]


def kneser_ney(counts: NgramCounts, vocab: Vocabulary, discount_fallback: bool = True,
               metadata: dict | None = None) -> BackoffModel:
    """Estimate interpolated modified Kneser-Ney from counts; returns the backoff form."""
    N = counts.order
    adj = adjusted_counts(counts)
    discounts = [discounts_for(adj[n - 1], n, discount_fallback) for n in range(1, N + 1)]
    uniform = 1.0 / (len(vocab) - 1)  # <unk> and </s> included, <s> excluded
    probs, gammas = [], []
    for n in range(1, N + 1):
        a = adj[n - 1].astype(np.float64)
        group = counts.tables[n - 1].prefix  # context type id (0 for unigrams)
        d = np.asarray(discounts[n - 1])[np.minimum(adj[n - 1], 3)]
        denom = np.bincount(group, weights=a)
        gamma = np.bincount(group, weights=d) / np.where(denom > 0, denom, 1.0)
        u = (a - d) / denom[group]
        lower = uniform if n == 1 else probs[-1][counts.suffix[n - 1]]
        probs.append(u + gamma[group] * lower)
        gammas.append(gamma)
    log10_prob, log10_backoff = [], []
    with np.errstate(divide="ignore"):
        for n in range(1, N + 1):
            p = probs[n - 1].copy()
            if n == 1:
                p[BOS] = 0.0
            log10_prob.append(np.minimum(0.0, np.log10(p)))
            bo = np.zeros(len(counts.tables[n - 1]))
            if n < N:
                ctx = np.unique(counts.tables[n].prefix)
                bo[ctx] = np.log10(gammas[n][ctx])
            log10_backoff.append(bo)
    meta = {"smoothing": "kn", "order": N, "discounts": {n + 1: discounts[n] for n in range(N)}}
    meta.update(metadata or {})
    return BackoffModel(vocab, counts.tables, log10_prob, log10_backoff, meta)


def train_kneser_ney(lines, order: int, discount_fallback: bool = True,
                     metadata: dict | None = None) -> BackoffModel:
    """Count ``lines`` (lists of token strings) and estimate KN of ``order``.

    Example:

    >>> m = train_kneser_ney([["x", "y"]] * 3 + [["y", "x"]], order=1, discount_fallback=True)
    >>> m.order, m.counts
    (1, [5])
    """
    order = check_order(order)
    vocab = Vocabulary.from_lines(lines)
    stream = vocab.encode(lines)
    counts = NgramCounts.from_stream(stream, order, len(vocab))
    return kneser_ney(counts, vocab, discount_fallback, metadata)
