"""Synthetic memory tasks: the adding problem, copy memory and distant negation.

Each generator is a pure function of its arguments and ``seed`` (NumPy's
``default_rng``), returns NumPy arrays and comes with the loss of the best
*input-blind* predictor, the baseline a model must beat to show it remembers:

==================  ==========================================  =========================
task                input → target                              baseline
==================  ==========================================  =========================
adding problem      ``(N, T, 2)`` floats → ``(N,)`` float sum   MSE ``1/6 ≈ 0.167``
                    (Hochreiter & Schmidhuber 1997)             (always answer 1)
copy memory         ``(N, T+20)`` ids → ``(N, T+20)`` ids       cross-entropy
                    (Arjovsky et al. 2016)                      ``10·ln 8 / (T + 20)``
distant negation    ``(N, L)`` ids → ``(N,)`` label 0/1         cross-entropy ``ln 2``,
                    ("not" … d tokens … "good"/"bad")           accuracy 0.5
==================  ==========================================  =========================

The *distance* ``d`` each task is parameterised by is the number of steps the
decisive information must be carried: the sequence length for the adding
problem (the first marked number sits in the first half), the blank gap for
the copy task, and the gap between "not" and the sentiment word for negation.

Example:

>>> task = make_task("negation", 10)
>>> x, y = task.generate(4, seed=0)
>>> x.shape[0], y.shape
(4, (4,))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from keras_seq.errors import KerasSeqError

TASKS = ("adding", "copy", "negation")

# -- adding problem --------------------------------------------------------------------

ADDING_BASELINE_MSE = 1.0 / 6.0  # Var(U1 + U2) = 2 · 1/12: the MSE of always answering 1


def _check_positive(name: str, value, minimum: int = 1) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise KerasSeqError(
            f"received {name}={value!r}; expected an integer ≥ {minimum}, "
            f"e.g. {name}={max(minimum, 10)}"
        )
    return int(value)


def adding_problem(num: int, length: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The adding problem: sum the two numbers whose marker is 1.

    Each step carries ``(value, marker)``: values uniform in [0, 1); exactly two
    markers are 1, one in the first half of the sequence and one in the second.
    The target is the sum of the two marked values.

    Args:
        num: number of sequences.
        length: sequence length ``T`` (≥ 2).
        seed: random seed; equal arguments give equal arrays.

    Returns:
        ``x`` float32 ``(num, T, 2)`` and ``y`` float32 ``(num,)``.
    """
    num, length = _check_positive("num", num), _check_positive("length", length, 2)
    rng = np.random.default_rng(seed)
    values = rng.random((num, length), dtype=np.float64)
    half = length // 2
    first = rng.integers(0, half, size=num)
    second = rng.integers(half, length, size=num)
    markers = np.zeros((num, length))
    rows = np.arange(num)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    x = np.stack([values, markers], axis=-1).astype(np.float32)  # (N, T, 2)
    y = (values[rows, first] + values[rows, second]).astype(np.float32)  # (N,)
    return x, y


# -- copy memory -----------------------------------------------------------------------

COPY_SYMBOLS = 8  # data symbols 1..8
COPY_LENGTH = 10  # symbols to remember
COPY_BLANK, COPY_DELIM = 0, 9
COPY_VOCAB = 10


def copy_baseline(gap: int) -> float:
    """Cross-entropy (nats/step) of the memoryless best guess: ``10·ln 8 / (T + 20)``.

    It predicts blank for the first ``T + 10`` steps (free) and a uniform guess over
    the 8 symbols for the last 10 steps.
    """
    gap = _check_positive("gap", gap)
    return COPY_LENGTH * math.log(COPY_SYMBOLS) / (gap + 2 * COPY_LENGTH)


def copy_memory(num: int, gap: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The copy-memory task: read 10 symbols, wait ``gap`` steps, write them back.

    Input (length ``gap + 20``): 10 symbols from 1..8, ``gap − 1`` blanks (0), the
    delimiter 9, then 10 blanks. Target: ``gap + 10`` blanks, then the 10 symbols.

    Returns:
        ``x`` and ``y``, int32 ``(num, gap + 20)``.
    """
    num, gap = _check_positive("num", num), _check_positive("gap", gap)
    rng = np.random.default_rng(seed)
    total = gap + 2 * COPY_LENGTH
    symbols = rng.integers(1, COPY_SYMBOLS + 1, size=(num, COPY_LENGTH))
    x = np.full((num, total), COPY_BLANK, np.int32)
    x[:, :COPY_LENGTH] = symbols
    x[:, gap + COPY_LENGTH - 1] = COPY_DELIM
    y = np.full((num, total), COPY_BLANK, np.int32)
    y[:, -COPY_LENGTH:] = symbols
    return x, y


# -- distant negation ------------------------------------------------------------------

NEGATION_VOCAB = ("<pad>", "not", "good", "bad", "the", "movie", "was", "plot", "actors",
                  "and", "a", "very", "story", "film", "it", "really", "quite", "is",
                  "this", "scene", "music", "i", "thought", "ending")
NOT_ID, GOOD_ID, BAD_ID = 1, 2, 3
_FILLER = np.arange(4, len(NEGATION_VOCAB))
NEGATION_BASELINE_CE = math.log(2.0)
NEGATION_PREFIX = 4  # "not" sits at a random position p in [0, 4)
NEGATION_SUFFIX = 4  # 0..3 filler tokens follow the sentiment word
# Share of reviews whose sentiment word is "good". With 1/2 the task is a pure XOR that
# gradient descent did not start to learn in 1000 steps (measured here); with 3/4 the
# labels stay balanced, the sentiment word alone still predicts nothing (50 %), and
# remembering "not" alone gives 75 %, so memory gets a first-order training signal.
NEGATION_GOOD_SHARE = 0.75


def negation_length(distance: int) -> int:
    """Sequence length of a distant-negation review at ``distance``."""
    return NEGATION_PREFIX + _check_positive("distance", distance) + NEGATION_SUFFIX


def distant_negation(num: int, distance: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic reviews where "not" at position ``p`` flips the word at ``p + distance``.

    Every review is filler words with one sentiment word at ``p + distance``
    ("good" in 3/4 of the reviews, else "bad"); in half of them (at random)
    position ``p`` holds "not" (else a filler word). Label 1 (positive) = "good"
    without "not" or "bad" with "not". Labels are balanced (chance accuracy 0.5,
    baseline cross-entropy ln 2) and the sentiment word alone predicts nothing;
    "not" alone gives 75 % (the plateau of seed 004's case study), and above that
    a model must carry "not" across ``distance`` steps (then ≤ 3 more to the end)
    and combine it with the sentiment word.

    Returns:
        ``x`` int32 ``(num, 4 + distance + 4)`` (0 = padding, never used), ``y``
        int32 ``(num,)``.
    """
    num, distance = _check_positive("num", num), _check_positive("distance", distance)
    rng = np.random.default_rng(seed)
    length = negation_length(distance)
    x = rng.choice(_FILLER, size=(num, length)).astype(np.int32)
    rows = np.arange(num)
    p = rng.integers(0, NEGATION_PREFIX, size=num)
    negated = rng.random(num) < 0.5
    good = rng.random(num) < NEGATION_GOOD_SHARE
    x[rows[negated], p[negated]] = NOT_ID
    x[rows, p + distance] = np.where(good, GOOD_ID, BAD_ID)
    y = (good ^ negated).astype(np.int32)
    return x, y


# -- one interface for the sweep -------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One task at one distance: how to generate it, shape its model and judge it.

    ``kind`` is ``"regression"`` (adding: one float), ``"sequence"`` (copy: a
    class per step) or ``"classification"`` (negation: one class).
    ``baseline_loss`` is the memoryless loss (formula above) and
    ``baseline_accuracy`` the memoryless accuracy (``None`` for regression).
    """

    name: str
    distance: int
    kind: str
    vocab: int | None  # token ids in 0..vocab-1; None for float inputs
    num_classes: int | None
    length: int
    baseline_loss: float
    baseline_accuracy: float | None

    def generate(self, num: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        if self.name == "adding":
            return adding_problem(num, self.distance, seed)
        if self.name == "copy":
            return copy_memory(num, self.distance, seed)
        return distant_negation(num, self.distance, seed)


def make_task(name: str, distance: int) -> Task:
    """The :class:`Task` ``name`` (``adding``, ``copy``, ``negation``) at ``distance``."""
    distance = _check_positive("distance", distance)
    if name == "adding":
        return Task("adding", _check_positive("distance", distance, 2), "regression", None, None,
                    distance, ADDING_BASELINE_MSE, None)
    if name == "copy":
        # Memoryless accuracy on the 10 recalled symbols: 1/8.
        return Task("copy", distance, "sequence", COPY_VOCAB, COPY_VOCAB,
                    distance + 2 * COPY_LENGTH, copy_baseline(distance), 1.0 / COPY_SYMBOLS)
    if name == "negation":
        return Task("negation", distance, "classification", len(NEGATION_VOCAB), 2,
                    negation_length(distance), NEGATION_BASELINE_CE, 0.5)
    raise KerasSeqError(
        f"unknown memory task {name!r}; expected one of {', '.join(TASKS)} "
        "(e.g. --tasks adding negation)"
    )
