"""Vocabulary, token streams and vectorised n-gram counting (numpy only).

Every line becomes one sentence ``<s> w1 … wk </s>``. The ids of all sentences are laid
end to end in one int64 array; ``pos`` holds each token's position in its sentence, so the
n-gram *ending* at index ``j`` exists exactly when ``pos[j] >= n - 1`` (n-grams never cross
a line and ``<s>`` only ever starts one).

N-gram types are numbered order by order. An n-gram is the pair (type id of its first
n-1 words, last word), packed into one int64 key ``prefix * V + word``; ``np.unique`` over
those keys counts every order at once, and the sorted keys keep all the n-grams that share
a context next to each other. No Python loop runs per token or per n-gram.

Example:

>>> vocab = Vocabulary.from_lines([["a", "b"], ["a"]])
>>> counts = NgramCounts.from_stream(vocab.encode([["a", "b"], ["a"]]), order=2)
>>> counts.lookup(("<s>", "a"), vocab)
2
>>> counts.lookup(("a", "</s>"), vocab), counts.lookup(("b",), vocab)
(1, 1)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from keras_seq.errors import DataError

UNK_TOKEN, BOS_TOKEN, EOS_TOKEN = "<unk>", "<s>", "</s>"
SPECIALS = (UNK_TOKEN, BOS_TOKEN, EOS_TOKEN)
UNK, BOS, EOS = 0, 1, 2  # the same ids KenLM uses
MAX_ORDER = 10


def check_order(order: int) -> int:
    """Return ``order`` if it is an int in 1..10, else raise a ValueError that says so."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not (
        1 <= order <= MAX_ORDER
    ):
        raise DataError(f"n-gram order must be an integer from 1 to {MAX_ORDER}, got {order!r}")
    return int(order)


class Vocabulary:
    """Token strings ↔ ids, with ``<unk>``=0, ``<s>``=1, ``</s>``=2 first (KenLM's ids).

    Example:

    >>> v = Vocabulary(["the", "cat"])
    >>> v.words
    ['<unk>', '<s>', '</s>', 'the', 'cat']
    >>> v.encode([["the", "dog"]]).ids.tolist()
    [1, 3, 0, 2]
    """

    def __init__(self, words=()):
        extra = [w for w in dict.fromkeys(words) if w not in SPECIALS]
        self.words: list[str] = [*SPECIALS, *extra]
        self.index: dict[str, int] = {w: i for i, w in enumerate(self.words)}
        # Input text may not smuggle in sentence markers: they read as unknown words.
        self._input_index = dict(self.index)
        del self._input_index[BOS_TOKEN], self._input_index[EOS_TOKEN]

    @classmethod
    def from_lines(cls, lines) -> Vocabulary:
        """Every token of ``lines`` (lists of strings), in order of first appearance."""
        return cls(itertools.chain.from_iterable(lines))

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, lines) -> TokenStream:
        """Lay out ``lines`` (lists of token strings) as one stream of sentences."""
        lines = [line for line in lines if len(line)]
        if not lines:
            raise DataError("no tokens to encode: every line is empty")
        flat = list(itertools.chain.from_iterable(lines))
        get = self._input_index.get
        words = np.fromiter((get(t, UNK) for t in flat), dtype=np.int64, count=len(flat))
        n_unk_literal = sum(1 for t in flat if t == UNK_TOKEN)
        lens = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines)) + 2
        ends = np.cumsum(lens)
        starts = ends - lens
        ids = np.empty(int(ends[-1]), dtype=np.int64)
        inner = np.ones(ids.size, dtype=bool)
        inner[starts] = False
        inner[ends - 1] = False
        ids[inner] = words
        ids[starts] = BOS
        ids[ends - 1] = EOS
        pos = np.arange(ids.size, dtype=np.int64) - np.repeat(starts, lens)
        oov = int((words == UNK).sum()) - n_unk_literal
        return TokenStream(ids=ids, pos=pos, n_sentences=len(lines), n_oov=oov,
                           n_unk=int((words == UNK).sum()))


@dataclass
class TokenStream:
    """Sentences laid end to end: ``ids`` and the position of each id in its sentence.

    ``n_oov`` counts words that were not in the vocabulary; ``n_unk`` counts every
    ``<unk>`` (OOV words plus literal ``<unk>`` tokens from a tokenizer's mapping).
    """

    ids: np.ndarray
    pos: np.ndarray
    n_sentences: int
    n_oov: int = 0
    n_unk: int = 0

    @property
    def n_predicted(self) -> int:
        """Tokens a model predicts: every word plus one ``</s>`` per sentence."""
        return int(self.ids.size - self.n_sentences)


@dataclass
class NgramTable:
    """The n-gram types of one order, sorted by (context, last word).

    Attributes:
        order: n.
        keys: sorted int64 ``prefix * V + word`` (unique).
        prefix: type id of the first n-1 words in the order n-1 table (0 for unigrams).
        word: last word id.
    """

    order: int
    keys: np.ndarray
    prefix: np.ndarray
    word: np.ndarray

    def __len__(self) -> int:
        return int(self.keys.size)

    def find(self, prefix: np.ndarray, word: np.ndarray, vocab_size: int) -> np.ndarray:
        """Type ids of (prefix, word) pairs, -1 where absent (or where prefix is -1)."""
        prefix = np.asarray(prefix, dtype=np.int64)
        key = prefix * vocab_size + np.asarray(word, dtype=np.int64)
        if self.keys.size == 0:
            return np.full(key.shape, -1, dtype=np.int64)
        idx = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        hit = (self.keys[idx] == key) & (prefix >= 0)
        return np.where(hit, idx, -1)

    def context_slice(self, context_id: int) -> slice:
        """The contiguous rows whose first n-1 words are the type ``context_id``."""
        lo = int(np.searchsorted(self.prefix, context_id, side="left"))
        hi = int(np.searchsorted(self.prefix, context_id, side="right"))
        return slice(lo, hi)


def word_ids(tables: list[NgramTable], order: int) -> np.ndarray:
    """All word ids of every type of one order, shape ``(types, order)``."""
    cols = [tables[order - 1].word]
    t = tables[order - 1].prefix
    for n in range(order - 1, 0, -1):
        cols.append(tables[n - 1].word[t])
        t = tables[n - 1].prefix[t]
    return np.stack(cols[::-1], axis=1)


def unigram_table(vocab_size: int) -> NgramTable:
    """Order 1: one type per vocabulary id, so type id == word id."""
    ids = np.arange(vocab_size, dtype=np.int64)
    return NgramTable(1, ids, np.zeros(vocab_size, dtype=np.int64), ids)


def stream_type_ids(tables: list[NgramTable], stream: TokenStream, vocab_size: int):
    """For each order n, the type id of the n-gram ending at every stream index (-1: none)."""
    ids, pos = stream.ids, stream.pos
    out = [ids.copy()]  # order 1: type id == word id
    for n in range(2, len(tables) + 1):
        ending = np.full(ids.size, -1, dtype=np.int64)
        j = np.flatnonzero(pos >= n - 1)
        ending[j] = tables[n - 1].find(out[-1][j - 1], ids[j], vocab_size)
        out.append(ending)
    return out


class NgramCounts:
    """Raw counts of every n-gram of orders 1..N in a training stream.

    Attributes:
        vocab_size: V (the unigram table has one entry per vocabulary id).
        tables: one :class:`NgramTable` per order.
        counts: raw count of each type, per order (``<s>``'s unigram count is the number
            of sentences; ``<unk>`` may be 0).
        suffix: per order n ≥ 2, the type id (order n-1) of the last n-1 words.
        bos_first: per order, whether the n-gram starts with ``<s>``.
    """

    def __init__(self, vocab_size, tables, counts, suffix, bos_first, n_tokens):
        self.vocab_size = vocab_size
        self.tables = tables
        self.counts = counts
        self.suffix = suffix
        self.bos_first = bos_first
        self.n_tokens = n_tokens

    @property
    def order(self) -> int:
        return len(self.tables)

    @classmethod
    def from_stream(cls, stream: TokenStream, order: int, vocab_size: int | None = None):
        """Count orders 1..``order`` of ``stream`` (``vocab_size`` defaults to max id + 1)."""
        order = check_order(order)
        V = int(vocab_size if vocab_size is not None else max(int(stream.ids.max()) + 1, 3))
        ids, pos = stream.ids, stream.pos
        tables = [unigram_table(V)]
        counts = [np.bincount(ids, minlength=V).astype(np.int64)]
        suffix = [np.zeros(V, dtype=np.int64)]
        bos_first = [np.arange(V) == BOS]
        ending = ids  # type id of the (n-1)-gram ending at each index
        for n in range(2, order + 1):
            j = np.flatnonzero(pos >= n - 1)
            keys = ending[j - 1] * V + ids[j]
            uniq, first, inverse, cnt = np.unique(
                keys, return_index=True, return_inverse=True, return_counts=True
            )
            at = j[first]  # one occurrence of each type
            suffix.append(ending[at])  # (n-1)-gram ending at the same index
            bos_first.append(ids[at - n + 1] == BOS)
            new_ending = np.full(ids.size, -1, dtype=np.int64)
            new_ending[j] = inverse.reshape(-1)
            ending = new_ending
            tables.append(NgramTable(n, uniq, uniq // V, uniq % V))
            counts.append(cnt.astype(np.int64))
        n_tokens = int(stream.ids.size - stream.n_sentences)
        return cls(V, tables, counts, suffix, bos_first, n_tokens)

    def truncate(self, order: int) -> NgramCounts:
        """The counts of orders 1..``order`` only (shares the arrays; no recount)."""
        order = check_order(order)
        if order > self.order:
            raise DataError(f"counts go up to order {self.order}, asked for {order}")
        return NgramCounts(self.vocab_size, self.tables[:order], self.counts[:order],
                           self.suffix[:order], self.bos_first[:order], self.n_tokens)

    def lookup(self, words, vocab: Vocabulary | None = None) -> int:
        """Raw count of one n-gram given as a tuple of ids or (with ``vocab``) strings."""
        if vocab is None and words and isinstance(words[0], str):
            raise DataError("pass vocab= to look up n-grams given as strings")
        ids = [vocab.index[w] if isinstance(w, str) else int(w) for w in words] if vocab else [
            int(w) for w in words
        ]
        t = ids[0]
        for n, w in enumerate(ids[1:], start=2):
            t = int(self.tables[n - 1].find(np.array([t]), np.array([w]), self.vocab_size)[0])
            if t < 0:
                return 0
        return int(self.counts[len(ids) - 1][t])
