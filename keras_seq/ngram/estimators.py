"""Maximum likelihood and add-k estimators, scored exactly from counts.

For history ``h`` (the last ``min(N-1, words since <s>)`` tokens) and |V| the predictable
vocabulary (every id except ``<s>``):

* MLE:    ``p(w|h) = c(h w) / c(h)``; 0 whenever ``h w`` was never seen, which makes the
  perplexity infinite on any text with one unseen n-gram (the zero-probability problem).
* add-k:  ``p(w|h) = (c(h w) + k) / (c(h) + k |V|)`` (Laplace at k = 1).

:meth:`CountModel.to_backoff` writes either as a backoff (ARPA) model: every seen n-gram
keeps its exact probability and each context keeps its exact unseen mass, which the
backoff weight hands to the next lower order. For MLE that mass is 0 (backoff ``-99``)
and the model is marked strict, so ARPA scoring stays exact. For add-k the unseen mass
is spread by the lower order instead of evenly, so ARPA scores of add-k are close to but
not the same as :meth:`CountModel.token_log10probs` (which is exact).

Example:

>>> from keras_seq.ngram.counts import Vocabulary, NgramCounts
>>> lines = [["a", "b"], ["a", "a"]]
>>> vocab = Vocabulary.from_lines(lines)
>>> counts = NgramCounts.from_stream(vocab.encode(lines), 2, len(vocab))
>>> mle = CountModel(counts, vocab, "mle")
>>> [round(float(10 ** x), 4) for x in mle.token_log10probs(vocab.encode([["a", "b"]]))]
[1.0, 0.3333, 1.0]
"""

from __future__ import annotations

import numpy as np

from keras_seq.errors import DataError
from keras_seq.ngram.backoff import BackoffModel
from keras_seq.ngram.counts import BOS, NgramCounts, TokenStream, Vocabulary, stream_type_ids


class CountModel:
    """MLE or add-k n-gram model over raw counts.

    Args:
        counts: :class:`~keras_seq.ngram.counts.NgramCounts` of the training text.
        vocab: its :class:`~keras_seq.ngram.counts.Vocabulary`.
        smoothing: ``"mle"`` or ``"addk"``.
        k: the pseudo-count for add-k (1.0 = Laplace).
    """

    def __init__(self, counts: NgramCounts, vocab: Vocabulary, smoothing: str = "addk",
                 k: float = 1.0):
        if smoothing not in ("mle", "addk"):
            raise DataError(f"smoothing must be 'mle' or 'addk' here, got {smoothing!r}")
        if smoothing == "addk" and not k > 0:
            raise DataError(f"add-k needs k > 0, got k={k}")
        self.counts, self.vocab, self.smoothing = counts, vocab, smoothing
        self.k = float(k) if smoothing == "addk" else 0.0
        self.n_predictable = len(vocab) - 1  # every id but <s>
        self.total = counts.n_tokens  # unigram context count: all predicted tokens

    @property
    def order(self) -> int:
        return self.counts.order

    def _prob(self, c_hw: np.ndarray, c_h: np.ndarray) -> np.ndarray:
        num = c_hw + self.k
        den = c_h + self.k * self.n_predictable
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        return p

    def token_log10probs(self, stream: TokenStream) -> np.ndarray:
        """Exact log10 p of every predicted token of ``stream`` (``-inf`` for zero)."""
        c = self.counts
        ending = stream_type_ids(c.tables, stream, c.vocab_size)
        j = np.flatnonzero(stream.pos >= 1)
        full = np.minimum(self.order, stream.pos[j] + 1)  # order of the n-gram to use
        c_hw = np.zeros(j.size)
        c_h = np.zeros(j.size)
        for n in range(1, self.order + 1):
            sel = full == n
            t = ending[n - 1][j[sel]]
            c_hw[sel] = np.where(t >= 0, c.counts[n - 1][np.maximum(t, 0)], 0)
            if n == 1:
                c_h[sel] = self.total
            else:
                h = ending[n - 2][j[sel] - 1]
                c_h[sel] = np.where(h >= 0, c.counts[n - 2][np.maximum(h, 0)], 0)
        with np.errstate(divide="ignore"):
            return np.log10(self._prob(c_hw, c_h))

    def to_backoff(self, metadata: dict | None = None) -> BackoffModel:
        """The backoff (ARPA) form; see the module docstring for what stays exact."""
        c, N = self.counts, self.order
        probs = []
        for n in range(1, N + 1):
            c_hw = c.counts[n - 1].astype(np.float64)
            if n == 1:
                c_h = np.full(c_hw.size, float(self.total))
            else:
                c_h = c.counts[n - 2][c.tables[n - 1].prefix].astype(np.float64)
            p = self._prob(c_hw, c_h)
            if n == 1:
                p[BOS] = 0.0
            probs.append(p)
        log10_prob, log10_backoff = [], []
        with np.errstate(divide="ignore"):
            for n in range(1, N + 1):
                log10_prob.append(np.log10(probs[n - 1]))
                bo = np.zeros(len(c.tables[n - 1]))
                if n < N:
                    group = c.tables[n].prefix
                    seen_hi = np.bincount(group, weights=probs[n], minlength=bo.size)
                    seen_lo = np.bincount(group, weights=probs[n - 1][c.suffix[n]],
                                          minlength=bo.size)
                    ctx = np.unique(group)
                    left = np.maximum(1.0 - seen_hi[ctx], 0.0)
                    room = np.maximum(1.0 - seen_lo[ctx], 1e-300)
                    bo[ctx] = np.log10(np.where(left > 1e-12, left / room, 0.0))
                log10_backoff.append(bo)
        meta = {"smoothing": self.smoothing, "order": N}
        if self.smoothing == "addk":
            meta["k"] = self.k
        meta.update(metadata or {})
        return BackoffModel(self.vocab, c.tables, log10_prob, log10_backoff, meta,
                            strict=self.smoothing == "mle")
