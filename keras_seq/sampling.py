"""Next-token samplers: small objects that turn one logit vector into one token id.

Plain numpy, so the TensorFlow-free LiteRT runtime uses the same samplers as Keras.

Example:

>>> import numpy as np
>>> logits = np.array([2.0, 1.0, 0.1, -3.0])
>>> GreedySampler()(logits)
0
>>> rng = np.random.default_rng(0)
>>> TopKSampler(k=2)(logits, rng) in (0, 1)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from keras_seq.options import option
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE, OPEN_SHARE, SEED, Range

#: The samplers :func:`make_sampler` builds, by the name ``keras-seq generate --sampler`` takes.
SAMPLERS = ("greedy", "temperature", "top-k", "top-p")

#: Temperatures a generator takes: 0 is the limit T → 0 (always the likeliest token);
#: the top keeps ``logits / T`` finite in float32.
TEMPERATURE = Range(0, 1e6)


@dataclass(frozen=True)
class SamplingOptions:
    """How text is generated: the one declaration of ``keras-seq generate``'s flags and of
    the REST ``generate`` signature's inputs (``keras_seq.serving.codec``), with their
    ranges (the server caps ``max_tokens`` and ``top_k`` at its limits, and ``seed`` at
    int32).

    >>> from keras_seq.options import declared_problems
    >>> declared_problems(SamplingOptions(temperature=-1.0, top_k=0))
    ['temperature must be from 0 to 1000000 (got -1.0)']
    """

    max_tokens: int = option(50, "tokens generated", range=AT_LEAST_1)
    temperature: float = option(1.0, "divide the logits by this before sampling (< 1: safer, "
                                "> 1: wilder; 0: always the likeliest token)",
                                range=TEMPERATURE)
    top_k: int = option(10, "top-k: sample among the k likeliest (0: the whole vocabulary)",
                        range=NON_NEGATIVE)
    top_p: float = option(0.9, "top-p: sample among the likeliest tokens holding this "
                          "probability", range=OPEN_SHARE)
    seed: int | None = option(None, "random seed of the sampler: the same seed and prompt "
                              "give the same text", range=SEED,
                              default_help="a new one each run")


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max()
    e = np.exp(z)
    return e / e.sum()


def special_ids(tokenizer) -> list[int]:
    """Ids a generator must never produce: ``<pad>`` and ``<unk>`` (when the vocabulary
    has them). ``<eos>`` stays: it is a line break."""
    ids = (getattr(tokenizer, "pad_id", None), getattr(tokenizer, "unk_id", None))
    return sorted({int(i) for i in ids if i is not None})


def without_ids(logits: np.ndarray, ids) -> np.ndarray:
    """A copy of ``logits`` in which ``ids`` get (finite) logits so low that no sampler picks
    them while another token has any probability.

    >>> int(without_ids(np.array([5.0, 1.0, 0.0]), [0]).argmax())
    1
    """
    out = np.array(logits, dtype=np.float64).reshape(-1)
    if len(ids):
        finite = out[np.isfinite(out)]
        floor = (finite.min() if finite.size else 0.0) - 1e4
        out[list(ids)] = floor
    return out


class Sampler:
    """Base class: ``sampler(logits, rng) -> id``. Subclasses override :meth:`probabilities`."""

    def __init__(self, temperature: float = 1.0):
        if not temperature > 0:
            raise ValueError(
                f"temperature must be > 0, got {temperature!r}; use GreedySampler for argmax"
            )
        self.temperature = float(temperature)

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        logits = np.asarray(logits, dtype=np.float64).reshape(-1)
        if not np.isfinite(logits).all():
            raise ValueError("the model produced NaN/Inf logits; its weights have diverged "
                             "(retrain with a lower learning rate or gradient clipping)")
        return _softmax(logits / self.temperature)

    def __call__(self, logits, rng: np.random.Generator | None = None) -> int:
        probs = self.probabilities(logits)
        rng = rng if rng is not None else np.random.default_rng()
        return int(rng.choice(probs.size, p=probs))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class GreedySampler(Sampler):
    """Always the most likely token."""

    def __init__(self):
        super().__init__(1.0)

    def __call__(self, logits, rng=None) -> int:
        return int(np.argmax(np.asarray(logits).reshape(-1)))


class TemperatureSampler(Sampler):
    """Sample from ``softmax(logits / temperature)``."""


class TopKSampler(Sampler):
    """Sample among the ``k`` most likely tokens."""

    def __init__(self, k: int = 10, temperature: float = 1.0):
        super().__init__(temperature)
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"top-k needs an integer k ≥ 1, got {k!r}")
        self.k = int(k)

    def probabilities(self, logits):
        probs = super().probabilities(logits)
        if self.k < probs.size:
            cutoff = np.partition(probs, -self.k)[-self.k]
            probs = np.where(probs >= cutoff, probs, 0.0)
        return probs / probs.sum()


class TopPSampler(Sampler):
    """Nucleus sampling: the smallest set of tokens whose probability reaches ``p``."""

    def __init__(self, p: float = 0.9, temperature: float = 1.0):
        super().__init__(temperature)
        if not 0 < p <= 1:
            raise ValueError(f"top-p needs 0 < p ≤ 1, got {p!r}")
        self.p = float(p)

    def probabilities(self, logits):
        probs = super().probabilities(logits)
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cumulative, self.p - 1e-9) + 1)]
        out = np.zeros_like(probs)
        out[keep] = probs[keep]
        return out / out.sum()


def make_sampler(name: str = "top-k", temperature: float = 1.0, top_k: int = 10,
                 top_p: float = 0.9) -> Sampler:
    """A sampler by CLI name: ``greedy``, ``temperature``, ``top-k`` or ``top-p``.
    As in the REST ``generate`` signature, temperature 0 is greedy and ``top_k`` 0 keeps
    the whole vocabulary (:class:`SamplingOptions`).

    >>> type(make_sampler("top-p", temperature=0)).__name__
    'GreedySampler'
    """
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; expected one of {', '.join(SAMPLERS)}")
    if name == "greedy" or temperature == 0:
        return GreedySampler()
    if name == "temperature" or (name == "top-k" and top_k == 0):
        return TemperatureSampler(temperature)
    if name == "top-k":
        return TopKSampler(top_k, temperature)
    return TopPSampler(top_p, temperature)


def repetition_score(tokens: list, n: int = 4) -> float:
    """Share of the ``n``-grams in ``tokens`` that repeat an earlier one (0 = no repeats).

    Text that has collapsed into a loop scores close to 1.
    """
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)
