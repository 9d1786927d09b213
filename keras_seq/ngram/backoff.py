"""A language model in backoff (ARPA) form, and vectorised scoring with it.

For the word ``w`` after history ``h`` (at most N-1 words, never crossing ``<s>``):

    log10 p(w | h) = log10 p(h' w) + Σ log10 bo(g)   for the suffixes g of h longer than h'

where ``h' w`` is the longest n-gram in the model that ends the history. This is how
KenLM, SRILM and every ARPA reader score; the interpolated Kneser-Ney model is written
so that this gives back its interpolated probabilities exactly.

Probabilities are stored as log10; ``-inf`` stands for probability 0 (ARPA files write it
as ``-99``, the common convention). A ``strict`` model (MLE) gives ``-inf`` to any token
whose full-order n-gram it has not seen instead of backing off.

Example:

>>> from keras_seq.ngram.kneser_ney import train_kneser_ney
>>> model = train_kneser_ney([["a", "b"], ["a", "c"]], order=2, discount_fallback=True)
>>> round(sum(10 ** v for v in model.next_token_log10probs(["a"]).values()), 6)
1.0
"""

from __future__ import annotations

import math

import numpy as np

from keras_seq.errors import DataError
from keras_seq.ngram.counts import (
    BOS,
    BOS_TOKEN,
    EOS,
    NgramTable,
    TokenStream,
    Vocabulary,
    stream_type_ids,
)

LN10 = math.log(10.0)


def backoff_log10probs(ending, pos, order: int, strict: bool, prob, backoff) -> np.ndarray:
    """The backoff rule, vectorised over a stream: log10 p of every token at ``pos ≥ 1``.

    ``ending[n - 1]``: the row of the n-gram ending at each position (``-1``: not in the
    model); ``prob(n, rows)`` / ``backoff(k, rows)``: log10 values of order-n rows. Each
    token takes its longest matched n-gram's probability plus the backoffs of the longer
    contexts that were not matched; ``strict`` makes a token with no full-length match
    impossible.
    """
    N = order
    j = np.flatnonzero(pos >= 1)
    avail = np.minimum(N, pos[j] + 1)  # longest n-gram that fits the history
    longest = np.zeros(j.size, dtype=np.int64)
    for n in range(1, N + 1):
        longest = np.where((ending[n - 1][j] >= 0) & (n <= avail), n, longest)
    out = np.empty(j.size, dtype=np.float64)
    for n in range(1, N + 1):
        sel = longest == n
        out[sel] = prob(n, ending[n - 1][j[sel]])
    for k in range(1, N):  # backoffs of contexts longer than the matched one
        ctx = ending[k - 1][j - 1]
        use = (k >= longest) & (k <= avail - 1) & (ctx >= 0)
        out[use] += backoff(k, ctx[use])
    if strict:
        out[longest < avail] = -np.inf
    return out


class BackoffModel:
    """N-gram log10 probabilities and backoff weights, one table per order.

    Args:
        vocab: the :class:`~keras_seq.ngram.counts.Vocabulary` (unigram type id == word id).
        tables: one :class:`~keras_seq.ngram.counts.NgramTable` per order 1..N.
        log10_prob: per order, log10 p of each type (``-inf`` for zero).
        log10_backoff: per order, log10 backoff of each type (0 where not a context).
        metadata: free-form provenance written as comments in the ARPA header.
        strict: score unseen full-order n-grams as ``-inf`` (maximum likelihood).
    """

    def __init__(self, vocab, tables, log10_prob, log10_backoff, metadata=None, strict=False):
        self.vocab: Vocabulary = vocab
        self.tables: list[NgramTable] = tables
        self.log10_prob = [np.asarray(p, dtype=np.float64) for p in log10_prob]
        self.log10_backoff = [np.asarray(b, dtype=np.float64) for b in log10_backoff]
        self.metadata = dict(metadata or {})
        self.strict = bool(strict)

    @property
    def order(self) -> int:
        return len(self.tables)

    @property
    def counts(self) -> list[int]:
        """Number of n-grams per order (the ARPA ``\\data\\`` header)."""
        return [len(t) for t in self.tables]

    def token_log10probs(self, stream: TokenStream) -> np.ndarray:
        """log10 p of every predicted token of ``stream`` (all ids except each ``<s>``)."""
        ending = stream_type_ids(self.tables, stream, len(self.vocab))
        return backoff_log10probs(ending, stream.pos, self.order, self.strict,
                                  lambda n, rows: self.log10_prob[n - 1][rows],
                                  lambda k, rows: self.log10_backoff[k - 1][rows])

    def _context_ids(self, context: list[int]) -> list[int]:
        """Type ids of the context's suffixes of length 1, 2, … (stops at the first miss)."""
        V = len(self.vocab)
        ids = []
        for k in range(1, min(len(context), self.order - 1) + 1):
            words = context[-k:]
            t = words[0]
            for n, w in enumerate(words[1:], start=2):
                t = int(self.tables[n - 1].find(np.array([t]), np.array([w]), V)[0])
                if t < 0:
                    return ids
            ids.append(t)
        return ids

    def distribution(self, context) -> np.ndarray:
        """log10 p(w | context) for every vocabulary id ``w`` (``<s>`` gets ``-inf``).

        ``context`` is a list of token strings (or ids); a leading ``<s>`` marks a
        sentence start, and anything before a ``<s>`` is ignored.
        """
        ids = [self.vocab.index.get(w, 0) if isinstance(w, str) else int(w) for w in context]
        if BOS in ids:
            ids = ids[len(ids) - 1 - ids[::-1].index(BOS):]
        V = len(self.vocab)
        dist = self.log10_prob[0][:V].copy()
        ctx_ids = self._context_ids(ids)
        exact = np.zeros(V, dtype=bool)  # words seen after the longest context so far
        for k, c in enumerate(ctx_ids, start=1):
            dist += self.log10_backoff[k - 1][c]
            rows = self.tables[k].context_slice(c)
            words = self.tables[k].word[rows]
            dist[words] = self.log10_prob[k][rows]
            exact[:] = False
            exact[words] = True
        if self.strict and len(ids) > 0:
            need = min(len(ids), self.order - 1)
            if len(ctx_ids) < need:
                exact[:] = False
            dist[~exact] = -np.inf
        dist[BOS] = -np.inf
        return dist

    def next_token_log10probs(self, context) -> dict[str, float]:
        """``{word: log10 p(word | context)}`` over the whole vocabulary (``<s>`` left out)."""
        dist = self.distribution(context)
        return {w: float(dist[i]) for i, w in enumerate(self.vocab.words) if w != BOS_TOKEN}

    def top_k(self, context, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` most likely next tokens as ``(token, probability)``, best first."""
        if k < 1:
            raise DataError(f"top-k needs k >= 1, got {k}")
        dist = self.distribution(context)
        best = np.argsort(-dist, kind="stable")[:k]
        return [(self.vocab.words[i], float(10.0 ** dist[i])) for i in best]

    def sample(self, max_tokens: int = 50, seed: int = 0, context=None) -> list[list[str]]:
        """Sample up to ``max_tokens`` words (seeded); returns one token list per sentence."""
        rng = np.random.default_rng(seed)
        history = [BOS] + [self.vocab.index.get(w, 0) for w in (context or [])]
        lines, line = [], list(context or [])
        for _ in range(max_tokens):
            dist = self.distribution(history[-(self.order - 1):] if self.order > 1 else [])
            p = np.power(10.0, dist)
            if p.sum() <= 0:
                break
            w = int(rng.choice(p.size, p=p / p.sum()))
            if w == EOS:
                lines.append(line)
                line, history = [], [BOS]
                continue
            line.append(self.vocab.words[w])
            history.append(w)
        if line:
            lines.append(line)
        return lines
