"""What a keyboard user sees of a language model: next-word accuracy and keystroke savings.

The metrics are defined once, with their formulas and a worked example, in
docs/keyboard.md: top-1 / top-3 next-word accuracy over every position and over
in-vocabulary words, completion after 1 and 2 typed letters with ``k`` suggestions, and
keystroke savings (KSR). A position is each word of each non-blank line and the line's
end (:func:`positions`); at each, :class:`KeyboardScorer` takes the model's scores of
its whole vocabulary and the word that came. :func:`paired_bootstrap` gives the 95%
interval of the difference between two models rated on the same positions.

>>> scorer = KeyboardScorer(["<pad>", "<unk>", "<eos>", "the", "then"], blocked=[0, 1],
...                         end_of_line=2, k=2)
>>> scorer.add(np.log([1e-9, 1e-9, 0.1, 0.5, 0.4]), "then")
>>> round(scorer.outcomes().metrics()["ksr"], 3)
0.8
"""

from __future__ import annotations

import argparse
import bisect
import sys
from dataclasses import dataclass

import numpy as np

from keras_seq.errors import KerasSeqError
from keras_seq.ranges import AT_LEAST_1, Range, number

#: How many suggestions the browser page's strip shows (``export web --top``).
SUGGESTIONS = Range(1, 10)

#: a target that ends its line (what the models call ``<eos>`` or ``</s>``)
END_OF_LINE = None
#: kinds of position
LINE_END, IN_VOCAB, UNKNOWN = 0, 1, 2
#: every metric :meth:`KeyboardOutcomes.metrics` reports, in print order
METRICS = ("top1", "top3", "top1_iv", "top3_iv", "prefix1", "prefix2", "ksr")
LABELS = {"top1": "top-1", "top3": "top-3", "top1_iv": "top-1 in-vocab",
          "top3_iv": "top-3 in-vocab", "prefix1": "after 1 letter",
          "prefix2": "after 2 letters", "ksr": "keystrokes saved"}
#: a rank that is never a hit (a word outside the vocabulary)
NEVER = np.iinfo(np.int32).max


def positions(lines) -> list[str | None]:
    """The targets of a text given as word lines: each word, then :data:`END_OF_LINE`
    after each non-blank line (what an n-gram predicts from ``<s>`` on)."""
    out: list[str | None] = []
    for line in lines:
        if len(line):
            out.extend(line)
            out.append(END_OF_LINE)
    return out


def word_stream(tokenizer, text: str) -> tuple[np.ndarray, list]:
    """A word tokenizer's stream of ``text`` as a recurrent LM reads it for rating:
    ``(inputs (N,) int32, targets)``, where ``inputs[i]`` is read just before position
    ``i`` is predicted (the stream starts after an ``<eos>``) and ``targets[i]`` is the
    word that came there (unknown words as written) or :data:`END_OF_LINE`: the
    :func:`positions` of the text's lines (the tokenizer drops blank lines).

    >>> from keras_seq.data.tokenizers import WordTokenizer
    >>> tok = WordTokenizer().fit("a b\\n")
    >>> inputs, targets = word_stream(tok, "a c\\n\\nb")
    >>> tok.ids_to_tokens(inputs), targets
    (['<eos>', 'a', '<unk>', '<eos>', 'b'], ['a', 'c', None, 'b', None])
    """
    if tokenizer.kind != "word":
        raise KerasSeqError(f"keyboard metrics rate next words; this tokenizer is "
                            f"{tokenizer.kind!r}: train with --tokenizer word")
    eos = tokenizer.vocab[tokenizer.eos_id]
    tokens = tokenizer.tokens(text)
    if not tokens:
        raise KerasSeqError("no words to rate: the text is empty")
    if tokens[-1] != eos:
        tokens.append(eos)  # the last line ends too (an n-gram's </s>)
    ids = tokenizer.tokens_to_ids(tokens)
    inputs = np.concatenate([[tokenizer.eos_id], ids[:-1]]).astype(np.int32)
    targets = [END_OF_LINE if t == eos else t for t in tokens]
    return inputs, targets


def stream_outcomes(step, tokenizer, text: str, k: int = 3) -> KeyboardOutcomes:
    """Rate a streaming model that ``step(id)`` → scores ``(V,)`` of the next token (a
    LiteRT step model, reset first) on ``text``, read as :func:`word_stream` lays it out."""
    inputs, targets = word_stream(tokenizer, text)
    scorer = KeyboardScorer.for_tokenizer(tokenizer, k)
    for token, target in zip(inputs, targets):
        scorer.add(step(int(token)), target)
    return scorer.outcomes()


@dataclass
class KeyboardOutcomes:
    """Per-position outcomes of one model on one text (``N`` positions).

    ``kind``: :data:`LINE_END`, :data:`IN_VOCAB` or :data:`UNKNOWN`; ``rank``: the target's
    rank among all suggestions; ``prefix_rank[:, j]``: its rank among the words starting
    with its first ``j + 1`` letters (-1 where the word is not longer than that);
    ``typed`` / ``plain``: keystrokes with and without suggestions (0 at line ends)."""

    k: int
    kind: np.ndarray  # (N,) int8
    rank: np.ndarray  # (N,) int32
    prefix_rank: np.ndarray  # (N, 2) int32
    typed: np.ndarray  # (N,) int32
    plain: np.ndarray  # (N,) int32

    def parts(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(numerator, denominator)`` per position whose sums give metric ``name``."""
        words = self.kind == IN_VOCAB
        if name in ("top1", "top3", "top1_iv", "top3_iv"):
            hit = self.rank < (1 if name.startswith("top1") else 3)
            counted = words if name.endswith("_iv") else np.ones_like(words)
            return (hit & counted).astype(np.float64), counted.astype(np.float64)
        if name in ("prefix1", "prefix2"):
            ranks = self.prefix_rank[:, int(name[-1]) - 1]
            counted = words & (ranks >= 0)
            return (counted & (ranks < self.k)).astype(np.float64), counted.astype(np.float64)
        if name == "ksr":
            return (self.plain - self.typed).astype(np.float64), self.plain.astype(np.float64)
        raise KerasSeqError(f"unknown keyboard metric {name!r}; expected one of "
                            f"{', '.join(METRICS)}")

    def metrics(self) -> dict:
        """Every metric of :data:`METRICS` (fractions; NaN where nothing counts), the
        position counts and ``k``."""
        out = {}
        for name in METRICS:
            num, den = self.parts(name)
            out[name] = float(num.sum() / den.sum()) if den.sum() else float("nan")
        out.update(k=self.k, positions=int(self.kind.size),
                   in_vocab_words=int((self.kind == IN_VOCAB).sum()),
                   unknown_words=int((self.kind == UNKNOWN).sum()))
        return out


class KeyboardScorer:
    """Collects :class:`KeyboardOutcomes` from a model's next-token scores.

    Args:
        vocab: the model's token strings, by id.
        blocked: ids never suggested (padding, ``<unk>``, ``<s>``).
        end_of_line: the id of the end-of-line token (suggested like a word, but it has
            no letters, so no prefix brings it).
        k: the suggestion strip's size (prefix accuracy and keystroke savings use it).

    Feed it, position by position, the scores of every vocabulary id (log-probabilities
    or logits, any base: only their order counts) and the target (a word string, or
    :data:`END_OF_LINE`) with :meth:`add`; :meth:`outcomes` returns what it saw.
    """

    def __init__(self, vocab, blocked, end_of_line: int, k: int = 3):
        if k < 1:
            raise KerasSeqError(f"the suggestion strip needs k ≥ 1, got {k}")
        self.vocab, self.k, self.end_of_line = list(vocab), int(k), int(end_of_line)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        blocked = set(int(b) for b in blocked)
        self.suggestable = np.array([i for i in range(len(self.vocab)) if i not in blocked],
                                    np.int64)
        self._suggestable_set = set(self.suggestable.tolist())
        words = sorted((w, i) for i, w in enumerate(self.vocab)
                       if i not in blocked and i != self.end_of_line)
        self._sorted_words = [w for w, _ in words]  # lexicographic: a prefix is a range
        self._sorted_ids = np.array([i for _, i in words], np.int64)
        self._rows: list[tuple[int, int, int, int, int, int]] = []

    @classmethod
    def for_tokenizer(cls, tokenizer, k: int = 3) -> KeyboardScorer:
        """A scorer over a keras-seq tokenizer's vocabulary (``<pad>``, ``<unk>`` never
        suggested; ``<eos>`` ends the line)."""
        return cls(tokenizer.vocab, [tokenizer.pad_id, tokenizer.unk_id], tokenizer.eos_id, k)

    def _rank(self, scores: np.ndarray, ids: np.ndarray, target: int) -> int:
        """The target's rank among ``ids`` by score (ties: lower id first)."""
        s, mine = scores[ids], scores[target]
        return int(np.count_nonzero(s > mine) + np.count_nonzero((s == mine) & (ids < target)))

    def _prefix_ids(self, prefix: str) -> np.ndarray:
        lo = bisect.bisect_left(self._sorted_words, prefix)
        hi = bisect.bisect_left(self._sorted_words, prefix + "\U0010ffff", lo)
        return self._sorted_ids[lo:hi]

    def add(self, scores, target: str | None) -> None:
        """One position: ``scores`` ``(V,)`` of every id, then the word that came."""
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        if scores.size != len(self.vocab):
            raise KerasSeqError(f"scores of {scores.size} tokens for a vocabulary of "
                                f"{len(self.vocab)}: the scores come from another model")
        if target is END_OF_LINE:
            rank = self._rank(scores, self.suggestable, self.end_of_line)
            self._rows.append((LINE_END, rank, -1, -1, 0, 0))
            return
        plain = len(target) + 1
        tid = self.index.get(target)
        if tid is None or tid not in self._suggestable_set:
            self._rows.append((UNKNOWN, NEVER, -1, -1, plain, plain))
            return
        rank = self._rank(scores, self.suggestable, tid)
        prefix = [self._rank(scores, self._prefix_ids(target[:n]), tid)
                  if len(target) > n else -1 for n in (1, 2)]
        typed = plain
        for typed_letters in range(len(target)):
            r = rank if typed_letters == 0 else (
                prefix[typed_letters - 1] if typed_letters <= 2 else
                self._rank(scores, self._prefix_ids(target[:typed_letters]), tid))
            if r < self.k:
                typed = typed_letters + 1
                break
        self._rows.append((IN_VOCAB, rank, *prefix, typed, plain))

    def outcomes(self) -> KeyboardOutcomes:
        rows = np.array(self._rows, dtype=np.int64).reshape(-1, 6)
        return KeyboardOutcomes(k=self.k, kind=rows[:, 0].astype(np.int8),
                                rank=rows[:, 1].astype(np.int32),
                                prefix_rank=rows[:, 2:4].astype(np.int32),
                                typed=rows[:, 4].astype(np.int32),
                                plain=rows[:, 5].astype(np.int32))


def paired_bootstrap(a: KeyboardOutcomes, b: KeyboardOutcomes, names=METRICS,
                     block: int = 200, samples: int = 2000, seed: int = 0) -> dict:
    """``{name: {"diff", "low", "high"}}``: metric(a) − metric(b) and its 95% interval.

    Both must be scored on the same positions. The positions are cut into consecutive
    blocks of ``block``; each of ``samples`` resamples draws as many blocks with
    replacement (the same blocks for both models: paired) and recomputes both ratios
    from the drawn blocks' sums; the interval is the 2.5th and 97.5th percentile of the
    differences."""
    if a.kind.shape != b.kind.shape or not np.array_equal(a.kind == LINE_END,
                                                          b.kind == LINE_END):
        raise KerasSeqError(f"paired intervals need both models scored on the same positions; "
                            f"got {a.kind.size:,} and {b.kind.size:,} positions with other "
                            "line ends: score them on the same split of the same corpus")
    rng = np.random.default_rng(seed)
    starts = np.arange(0, a.kind.size, block)
    draws = rng.integers(0, len(starts), size=(samples, len(starts)))  # (S, blocks)
    out = {}
    for name in names:
        sums = []
        for outcome in (a, b):
            num, den = outcome.parts(name)
            sums.append((np.add.reduceat(num, starts), np.add.reduceat(den, starts)))
        (na, da), (nb, db) = sums
        if not da.sum() or not db.sum():
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            diffs = na[draws].sum(1) / da[draws].sum(1) - nb[draws].sum(1) / db[draws].sum(1)
        low, high = np.nanpercentile(diffs, [2.5, 97.5])
        out[name] = {"diff": float(na.sum() / da.sum() - nb.sum() / db.sum()),
                     "low": float(low), "high": float(high)}
    return out


def format_difference(d: dict, unit: str = "") -> str:
    """One :func:`paired_bootstrap` entry in points: ``"+1.56 (+0.99 to +2.15)"``.

    >>> format_difference({"diff": 0.0156, "low": 0.0099, "high": 0.0215}, " points")
    '+1.56 points (+0.99 to +2.15)'
    """
    return (f"{100 * d['diff']:+.2f}{unit} ({100 * d['low']:+.2f} to "
            f"{100 * d['high']:+.2f})")


def format_metrics(m: dict) -> str:
    """One line: every metric as a percentage, with the counts behind it."""
    parts = ", ".join(f"{LABELS[name]} {100 * m[name]:.2f}%" for name in METRICS)
    return (f"keyboard ({m['k']} suggestions; {m['positions']:,} positions, "
            f"{m['in_vocab_words']:,} in-vocab words, {m['unknown_words']:,} unknown): {parts}")


def add_keyboard_args(parser) -> None:
    """``--keyboard/--no-keyboard`` and ``--suggestions K`` (docs/keyboard.md)."""
    parser.add_argument("--keyboard", action=argparse.BooleanOptionalAction, default=None,
                        help="top-1/top-3 next-word accuracy, completion after 1 and 2 "
                             "letters and keystroke savings (docs/keyboard.md); default: "
                             "wherever the run's words allow (a word tokenizer on text)")
    parser.add_argument("--suggestions", type=number(int, AT_LEAST_1), default=3, metavar="K",
                        help="the suggestion strip's size for --keyboard (default: 3)")


def outcomes_or_note(wanted: bool | None, compute):
    """``compute()``'s :class:`KeyboardOutcomes`; None when ``wanted`` is False, or with a
    note on stderr where they cannot be measured and they were not asked for (``wanted``
    None; with True the error stands)."""
    if wanted is False:
        return None
    try:
        return compute()
    except KerasSeqError as error:
        if wanted:
            raise
        print(f"keyboard metrics skipped: {error}", file=sys.stderr)
        return None
