"""Cross-entropy and perplexity, with the fingerprint that makes two numbers comparable.

Perplexity is ``exp`` of the mean negative log-probability per real token:
``PPL = exp(−(1/N) Σ log p(w_t | w_<t))`` where N counts only unmasked tokens (padding
never counts). This module is plain numpy; the Keras metric for ``fit`` is
:class:`keras_seq.models.perplexity.Perplexity`.

Example (a four-token sentence whose tokens got probabilities 0.5, 0.25, 0.4 and 0.1):

>>> round(perplexity_from_probs([0.5, 0.25, 0.4, 0.1]), 2)
3.76
>>> round(cross_entropy(np.log([0.5, 0.25, 0.4, 0.1])), 3)
1.325
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from keras_seq.errors import NotComparableError

LN2 = math.log(2.0)


def _masked(values, mask) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if mask is None:
        return values.reshape(-1)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != values.shape:
        raise ValueError(
            f"mask shape {mask.shape} does not match log-prob shape {values.shape}; "
            "pass one mask entry per token"
        )
    return values[mask]


def cross_entropy(log_probs, mask=None, base: str | int | float = "e") -> float:
    """Mean negative log-probability over the real tokens.

    Args:
        log_probs: natural-log probabilities of the correct tokens, any shape.
        mask: same shape, True on real tokens (padding excluded); ``None`` = all real.
        base: ``"e"`` for nats (default) or ``2`` for bits.
    """
    values = _masked(log_probs, mask)
    if values.size == 0:
        raise ValueError("cross-entropy of zero tokens is undefined; the mask selects nothing")
    nats = float(-values.mean())
    if base in ("e", math.e):
        return nats
    if base in (2, "2", "bits"):
        return nats / LN2
    raise ValueError(f"base must be 'e' or 2, got {base!r}")


def perplexity_from_log_probs(log_probs, mask=None) -> float:
    """``exp`` of the masked mean negative log-probability (``inf`` if any p is 0)."""
    nats = cross_entropy(log_probs, mask)
    return math.exp(nats) if nats < 709 else math.inf


def perplexity_from_probs(probs, mask=None) -> float:
    """Perplexity from the probabilities a model gave the correct tokens.

    The geometric mean of ``1/p``; the textbook arithmetic:

    >>> round(perplexity_from_probs([0.5, 0.25, 0.4]), 2)
    2.71
    """
    probs = np.asarray(probs, dtype=np.float64)
    if (probs < 0).any() or (probs > 1).any():
        raise ValueError("probabilities must lie in [0, 1]")
    with np.errstate(divide="ignore"):
        return perplexity_from_log_probs(np.log(probs), mask)


@dataclass
class PerplexityResult:
    """One measured perplexity and what it was measured on.

    ``fingerprint`` holds at least ``tokenizer`` (the tokenizer fingerprint), ``split``
    and ``corpus_sha256``; two results are comparable only when these agree.
    """

    tokens: int
    nats: float
    ppl: float
    fingerprint: dict = field(default_factory=dict)
    oov: int = 0
    model: str = ""

    @property
    def bits(self) -> float:
        return self.nats / LN2

    @classmethod
    def from_log_probs(cls, log_probs, mask=None, *, fingerprint=None, oov=0, model=""):
        values = _masked(log_probs, mask)
        nats = cross_entropy(values)
        ppl = math.exp(nats) if nats < 709 else math.inf
        return cls(int(values.size), nats, ppl, dict(fingerprint or {}), int(oov), model)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["bits"] = self.bits
        return out

    def check_comparable(self, other: PerplexityResult) -> None:
        check_comparable(self, other)


COMPARABILITY_KEYS = ("tokenizer", "split", "corpus_sha256")


def check_comparable(*results: PerplexityResult) -> None:
    """Raise :class:`NotComparableError` unless all results share tokens, split and corpus.

    Perplexities measured with different vocabularies, tokenizations, splits or corpora
    are different quantities, so comparing them would be misleading.
    """
    if len(results) < 2:
        return
    first = results[0]
    for other in results[1:]:
        for key in COMPARABILITY_KEYS:
            a, b = first.fingerprint.get(key), other.fingerprint.get(key)
            if a is None or b is None or a != b:
                what = {
                    "tokenizer": "they were tokenized differently (tokenizer kind, options or "
                    "vocabulary differ), so they count different tokens",
                    "split": "they were measured on different splits",
                    "corpus_sha256": "they were measured on different corpora",
                }[key]
                raise NotComparableError(
                    f"perplexities of {first.model or 'result 1'} and "
                    f"{other.model or 'result 2'} are not comparable: {what} "
                    f"({key}: {a!r} vs {b!r}). Re-evaluate both on the same corpus, split "
                    "and tokenizer."
                )
