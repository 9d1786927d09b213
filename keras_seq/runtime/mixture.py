"""A keyboard's next word from three sources: the neural step model, a small n-gram and a
cache of what this user has typed, mixed linearly (docs/export-and-on-device.md, "The
keyboard on the test split: neural + n-gram + cache").

At every position the mixture gives each vocabulary word

    p(w) = λ_neural · p_neural(w) + λ_ngram · p_ngram(w) + λ_cache · p_cache(w)

``p_ngram`` is a compact Kneser-Ney n-gram streamed beside the model (its words mapped onto
the model's ids, renormalised over them); ``p_cache`` counts the words typed so far, each
count fading with a half-life in words, so recent words weigh more. The weights are fitted
on validation text by EM (:func:`fit_weights`: the mixture's likelihood is concave in them,
so EM finds the best ones), the half-life picked from :data:`HALF_LIVES` by the same
likelihood. The cache survives :meth:`MixedLM.reset` (a new sentence, the same user) and
empties with :meth:`MixedLM.forget`.

:class:`MixedLM` is a :class:`~keras_seq.runtime.litert.LiteRTLM` whose ``logits`` are the
mixture's log-probabilities, so suggestions, completions and sampling read it unchanged.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from keras_seq.errors import KerasSeqError
from keras_seq.keyboard import KeyboardScorer, word_stream
from keras_seq.ngram.compact import NgramStream, read_compact
from keras_seq.ngram.counts import BOS_TOKEN, EOS_TOKEN, UNK_TOKEN
from keras_seq.runtime.litert import LiteRTLM, largest

#: the mixture's sources, in the order of every weight vector
SOURCES = ("neural", "ngram", "cache")
#: the cache half-lives (in words) fitting tries; None: no fading (the whole history)
HALF_LIVES = (20, 50, 200, 1000, None)
#: what a ``mix.json`` declares (its ``format``)
MIX_FORMAT = "keras-seq-mix/1"
_LN10 = math.log(10.0)


@dataclass
class MixSpec:
    """What to mix, as saved in ``mix.json`` beside the model (paths relative to it).

    ``weights``: λ per source of :data:`SOURCES` (≥ 0, summing to 1; a source at 0 is not
    run); ``ngram``: the compact n-gram's file (None without one); ``half_life``: the
    cache's, in words (None: every word typed counts alike).

    >>> spec = MixSpec({"neural": 0.8, "ngram": 0.15, "cache": 0.05}, ngram="kn3.q8.bin",
    ...                half_life=50)
    >>> spec.weights
    {'neural': 0.8, 'ngram': 0.15, 'cache': 0.05}
    >>> MixSpec({"neural": 0.9, "cache": 0.2})
    Traceback (most recent call last):
    ...
    keras_seq.errors.KerasSeqError: mixture weights must be ≥ 0 and sum to 1, got {...}
    """

    weights: dict
    ngram: str | None = None
    half_life: float | None = None
    fitted: dict = field(default_factory=dict)  # how the weights were chosen, for the record

    def __post_init__(self):
        unknown = set(self.weights) - set(SOURCES)
        if unknown:
            raise KerasSeqError(f"mixture weights for {sorted(unknown)}: the sources are "
                                f"{', '.join(SOURCES)}")
        try:
            w = np.array([float(self.weights.get(s, 0.0)) for s in SOURCES])
        except (TypeError, ValueError, AttributeError):
            raise KerasSeqError(f"mixture weights must be numbers by source, e.g. "
                                f'{{"neural": 0.8, "ngram": 0.2}}; got {self.weights!r}') from None
        if (w < 0).any() or not math.isclose(w.sum(), 1.0, abs_tol=1e-6):
            raise KerasSeqError(f"mixture weights must be ≥ 0 and sum to 1, got "
                                f"{dict(zip(SOURCES, w.round(6).tolist()))}")
        if w[1] > 0 and not self.ngram:
            raise KerasSeqError("the mixture gives the n-gram a weight but names no n-gram "
                                "file ('ngram' in mix.json)")
        if self.half_life is not None and self.half_life <= 0:
            raise KerasSeqError(f"the cache half-life must be > 0 words, got {self.half_life}")
        self.weights = dict(zip(SOURCES, w.tolist()))

    def save(self, path) -> None:
        Path(path).write_text(json.dumps({"format": MIX_FORMAT, **asdict(self)}, indent=2))

    @classmethod
    def load(cls, path) -> MixSpec:
        path = Path(path)
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise KerasSeqError(f"cannot read the mixture {path}: {err}") from None
        if not isinstance(raw, dict) or raw.pop("format", None) != MIX_FORMAT:
            raise KerasSeqError(f"{path} is not a keras-seq mixture (format {MIX_FORMAT!r}); "
                                "the pipeline writes one as demo/mix.json")
        known = {f.name for f in fields(cls)}
        if set(raw) - known or "weights" not in raw:
            raise KerasSeqError(f"{path}: fields {sorted(raw)}; a mixture has 'weights' and "
                                f"may have {', '.join(sorted(known - {'weights'}))}")
        return cls(**raw)


class WordCache:
    """Counts of the words typed so far over ``V`` ids, each fading by half every
    ``half_life`` words (None: no fading). Constant time per word: later words are added
    with a growing weight instead of every count shrinking."""

    def __init__(self, V: int, half_life: float | None, ignored=()):
        self.V, self.half_life = V, half_life
        self._growth = 1.0 if half_life is None else 2.0 ** (1.0 / half_life)
        self._ignored = frozenset(int(i) for i in ignored)
        self.forget()

    def forget(self) -> None:
        self.counts = np.zeros(self.V, np.float32)  # float32: the mixture's arithmetic
        self.total, self._weight, self.words = 0.0, 1.0, 0

    def add(self, token: int) -> None:
        if token in self._ignored:
            return
        self.counts[token] += self._weight
        self.total += self._weight
        self.words += 1
        self._weight *= self._growth
        if self._weight > 1e30:  # rescale long before float32 runs out; ratios unchanged
            self.counts /= self._weight
            self.total /= self._weight
            self._weight = 1.0

    def prob(self, token: int) -> float:
        return float(self.counts[token]) / self.total if self.total else 0.0

    def probs(self) -> np.ndarray:
        return self.counts / np.float32(self.total) if self.total else self.counts


class NgramOnModelVocab:
    """A compact n-gram streamed on a word model's ids: ``step(model id)`` moves it,
    :meth:`probs` gives p(next) over the model's ``V`` ids (the model's ``<eos>`` is the
    n-gram's ``</s>``, its ``<unk>`` the n-gram's; ``<pad>`` and words the n-gram lacks get
    0, and the rest is renormalised to sum to 1).

    The unigram probabilities are laid out in the model's order once; each step then
    scales them by the history's backoff and overwrites the few words the history has
    seen (:meth:`NgramStream.sparse_distribution`), instead of building the n-gram's whole
    distribution and gathering it (28 against ~8 µs at V = 6,476)."""

    def __init__(self, ngram, tokenizer, index: str = "trie"):
        self.stream = NgramStream(ngram, index=index)
        words = ngram.vocab.index
        specials = {tokenizer.eos_id: EOS_TOKEN, tokenizer.unk_id: UNK_TOKEN}
        vocab = tokenizer.vocab
        to_ngram = np.array([words.get(specials.get(i, vocab[i]), -1)
                             for i in range(len(vocab))], np.int64)
        to_ngram[tokenizer.pad_id] = -1
        known = to_ngram >= 0
        if known.sum() < 0.5 * len(vocab):
            raise KerasSeqError(
                f"the n-gram knows {int(known.sum()):,} of the model's {len(vocab):,} "
                "tokens: it was trained on another vocabulary; mix the n-gram the pipeline "
                "trained on the model's tokens")
        self._step_id = np.where(known, to_ngram, words[UNK_TOKEN])
        self._to_model = np.full(len(ngram.vocab), -1, np.int64)  # n-gram id → model id
        self._to_model[to_ngram[known]] = np.flatnonzero(known)
        self._to_model[words[BOS_TOKEN]] = -1  # never predicted
        unigram = np.asarray(self.stream._unigram, np.float64)
        self._unigram = np.zeros(len(vocab), np.float32)  # p(w), in the model's order
        self._unigram[known] = 10.0 ** unigram[to_ngram[known]]
        self._strict = self.stream._strict

    def reset(self) -> None:
        self.stream.reset()

    def step(self, token: int) -> None:
        self.stream.step(int(self._step_id[token]))

    def probs(self, scale: float = 1.0) -> np.ndarray:
        """p(next) over the model's ids times ``scale`` (float32, a fresh array)."""
        if self._strict:  # unseen words are impossible: no shared unigram layout
            p = np.zeros_like(self._unigram)
            dist = self.stream.distribution()
            seen = np.flatnonzero(self._to_model >= 0)
            p[self._to_model[seen]] = 10.0 ** dist[seen]
        else:
            offset, pairs = self.stream.sparse_distribution()
            p = self._unigram * np.float32(10.0 ** offset)
            for ids, values in pairs:
                where = self._to_model[ids]
                if where.min() < 0:  # words the model lacks (or <s>)
                    keep = where >= 0
                    where, values = where[keep], values[keep]
                p[where] = np.exp(values * _LN10)
        p *= np.float32(scale / p.sum())
        return p


class MixedLM(LiteRTLM):
    """A LiteRT step model mixed with a compact n-gram and a cache of typed words.

    Args:
        model_path: the step model (``.tflite``, with its tokenizer: a word tokenizer).
        spec: a :class:`MixSpec`, or the path of a ``mix.json`` (its ``ngram`` path is read
            relative to it).
        ngram: the n-gram (a ``CompactNgram`` or ``BackoffModel``, or a path), overriding
            ``spec.ngram``.
        **kwargs: the :class:`LiteRTLM` arguments.

    ``step(id)`` returns, and ``logits`` holds, the mixture's natural-log probabilities
    (float32); ``parts`` the three sources' probabilities at this position. A keyboard
    needs no logarithm: :meth:`advance` mixes without taking it, and :meth:`suggest` ranks
    the probabilities themselves (the log is taken when ``logits`` is first read).

    Example (an untrained model and a tiny n-gram, mixed half and half):

    >>> import tempfile, keras
    >>> from keras_seq.data import make_tokenizer
    >>> from keras_seq.export import export_tflite
    >>> from keras_seq.layers import GRU
    >>> from keras_seq.ngram.kneser_ney import train_kneser_ney
    >>> text = "the cat sat on the mat\\n" * 3
    >>> tokenizer = make_tokenizer("word").fit(text)
    >>> V = tokenizer.vocab_size
    >>> model = keras.Sequential([keras.Input((None,), dtype="int32"),
    ...                           keras.layers.Embedding(V, 4), GRU(6, return_sequences=True),
    ...                           keras.layers.Dense(V)])
    >>> out = tempfile.mkdtemp()
    >>> _ = export_tflite(model, out, variants=["float32"], graphs=["step"],
    ...                   tokenizer=tokenizer, check_parity=False, printer=lambda *a: None)
    >>> ngram = train_kneser_ney([line.split() for line in text.splitlines()], order=2,
    ...                          discount_fallback=True)
    >>> lm = MixedLM(f"{out}/step_float32.tflite",
    ...              MixSpec({"neural": 0.5, "ngram": 0.5}, ngram="unused"), ngram=ngram)
    >>> _ = lm.feed_text("the cat")
    >>> lm.suggest(1)[0][0]     # the n-gram's half knows what follows "cat"
    'sat'
    """

    def __init__(self, model_path, spec, ngram=None, **kwargs):
        if not isinstance(spec, MixSpec):
            spec_path = Path(spec)
            spec = MixSpec.load(spec_path)
            if ngram is None and spec.ngram:
                ngram = spec_path.parent / spec.ngram
        self.spec = spec
        self._ngram: NgramOnModelVocab | None = None
        self._cache: WordCache | None = None
        self._mixed: np.ndarray | None = None
        super().__init__(model_path, **kwargs)
        tok = self._text_tokenizer("mixing with an n-gram")
        if tok.kind != "word":
            raise KerasSeqError(f"the mixture works on words; {self.path.name} reads "
                                f"{tok.kind} tokens")
        self._w = np.array([spec.weights[s] for s in SOURCES])
        if self._w[1] > 0:
            if ngram is None:
                raise KerasSeqError("the mixture weighs an n-gram but none was given")
            if isinstance(ngram, (str, Path)):
                ngram = read_compact(ngram)
            self._ngram = NgramOnModelVocab(ngram, tok)
        self._cache = WordCache(self.vocab_size, spec.half_life,
                                ignored=(tok.pad_id, tok.unk_id, tok.eos_id))
        self.reset()

    # ``logits`` is the log of the mixture, taken when first read after a step
    @property
    def logits(self) -> np.ndarray | None:
        if self._logits is None and self._mixed is not None:
            with np.errstate(divide="ignore"):
                self._logits = np.log(self._mixed)
        return self._logits

    @logits.setter
    def logits(self, value) -> None:
        self._logits, self._mixed = value, None

    def reset(self) -> None:
        """A new stream (zero state, the n-gram at ``<s>``); the cache keeps its words."""
        super().reset()
        if self._ngram is not None:
            self._ngram.reset()
        self._parts: tuple | None = None

    @property
    def parts(self) -> tuple | None:
        """``(neural, ngram, cache)``: each source's probabilities of the next token at this
        position (float32 ``(V,)``; the n-gram's 0.0 without one); None before a step or
        unless :attr:`keep_parts` is on."""
        if self._parts is None:
            return None
        (neural, w0), (ngram, w1) = self._parts
        return (neural / np.float32(w0) if w0 else neural,
                ngram / np.float32(w1) if w1 else ngram, self._cache.probs())

    def forget(self) -> None:
        """Empty the cache of typed words (a new user)."""
        if self._cache is not None:
            self._cache.forget()

    def step(self, token_id: int) -> np.ndarray:
        """Feed one token id; returns the mixture's log-probabilities of the next ``(V,)``."""
        self.advance(token_id)
        return self.logits

    def advance(self, token_id: int) -> None:
        """Feed one token id and mix the next token's probabilities (no logarithm: what a
        keyboard's suggestions need)."""
        raw = LiteRTLM.step(self, token_id)  # also checks the id
        if self._ngram is not None:
            self._ngram.step(token_id)
        cache = self._cache
        cache.add(int(token_id))  # <eos>, <unk> and <pad> are not counted
        w = self._w
        if not cache.total:  # nothing typed yet: the cache's share goes to the rest
            w = w.copy()
            w[2] = 0.0
            w = w / w.sum()
        # float32 throughout: numpy's exp runs on SIMD there; each source's weight is
        # folded into its normalisation, so the sum below is the mixture
        mixed = np.exp(raw - raw.max())
        mixed *= np.float32(w[0] / mixed.sum())
        neural = mixed.copy() if self.keep_parts else mixed
        ngram = self._ngram.probs(w[1]) if self._ngram is not None and w[1] else 0.0
        if w[1]:
            mixed += ngram
        if w[2]:
            mixed += cache.counts * np.float32(w[2] / cache.total)
        self._parts = ((neural, w[0]), (ngram, w[1])) if self.keep_parts else None
        self.logits = None  # also drops _mixed: set it after
        self._mixed = mixed

    #: keep each source's probabilities for :attr:`parts` (a copy per step: for fitting
    #: and checking, not for the keyboard)
    keep_parts = False

    def _top_k(self, k: int, skip: set) -> list[tuple[str, float]]:
        """The ``k`` likeliest words from the mixture's probabilities (no logarithm, no
        normaliser: they sum to 1), ties to the lower id as :class:`LiteRTLM`'s."""
        if self._mixed is None:
            return super()._top_k(k, skip)
        vocab = self.tokenizer.vocab
        return [(vocab[i], float(p)) for i, p in largest(self._mixed, k, skip, -1.0)]


def source_probs(lm: MixedLM, ids, targets) -> np.ndarray:
    """``(N, 2 + len(HALF_LIVES))``: the probability of ``targets[i]`` after reading
    ``ids[i]`` (in order, from ``lm``'s current state) from the neural model, the n-gram
    (0 without one) and a cache of the words read so far for each half-life of
    :data:`HALF_LIVES`: the columns :func:`fit_weights` weighs."""
    tok = lm.tokenizer
    caches = [WordCache(lm.vocab_size, h, ignored=(tok.pad_id, tok.unk_id, tok.eos_id))
              for h in HALF_LIVES]
    out = np.zeros((len(ids), 2 + len(caches)))
    lm.keep_parts = True
    for i, (token, target) in enumerate(zip(ids, targets)):
        lm.step(int(token))
        for cache in caches:
            cache.add(int(token))
        neural, ngram, _ = lm.parts
        out[i, 0] = neural[target]
        out[i, 1] = ngram[target] if lm._ngram is not None else 0.0
        out[i, 2:] = [c.prob(int(target)) for c in caches]
    return out


def fit_weights(probs: np.ndarray, iterations: int = 200) -> tuple[np.ndarray, float]:
    """The mixture weights (one per column of ``probs``, ``(N, S)``: each source's
    probability of what came) that maximise the likelihood, by EM, and the mixture's
    perplexity with them. Rows where a source gave nothing (an empty cache) still count.

    >>> p = np.array([[0.5, 0.1], [0.1, 0.5], [0.4, 0.4]])
    >>> w, ppl = fit_weights(p)
    >>> w.round(3).tolist(), round(ppl, 3)
    ([0.5, 0.5], 3.029)
    """
    probs = np.asarray(probs, np.float64)
    w = np.full(probs.shape[1], 1.0 / probs.shape[1])
    for _ in range(iterations):
        mixed = probs @ w
        mixed = np.maximum(mixed, 1e-300)
        new = w * (probs / mixed[:, None]).mean(0)
        new /= new.sum()
        if np.abs(new - w).max() < 1e-7:
            w = new
            break
        w = new
    mixed = np.maximum(probs @ w, 1e-300)
    return w, float(np.exp(-np.log(mixed).mean()))


def stream_targets(tokenizer, text: str) -> tuple[np.ndarray, np.ndarray, list]:
    """``(inputs, target ids, targets)`` of :func:`keras_seq.keyboard.word_stream`: the
    target ids are the next inputs (an unknown word's is ``<unk>``)."""
    inputs, targets = word_stream(tokenizer, text)
    target_ids = np.append(inputs[1:], tokenizer.eos_id).astype(np.int64)
    return inputs, target_ids, targets


def fit_mixture(model_path, ngram, text: str, ngram_file: str | None,
                sources=SOURCES, printer=print) -> MixSpec:
    """The :class:`MixSpec` of ``sources`` that gives ``text`` (validation text, read in
    order with the cache growing from empty) the lowest perplexity: weights by EM, the
    cache's half-life by trying :data:`HALF_LIVES`. ``spec.fitted`` records the perplexity
    of each source alone and of each mixture tried, and the best weights without the
    cache (``weights_without_cache``: what the cache's gain is measured against)."""
    unknown = set(sources) - set(SOURCES) or ({"neural"} - set(sources))
    if unknown:
        raise KerasSeqError(f"a mixture takes the neural model and any of ngram, cache; got "
                            f"{sorted(sources)}")
    use_ngram = "ngram" in sources
    probe = MixSpec({"neural": 0.5, "ngram": 0.5}, ngram=ngram_file or "-") if use_ngram \
        else MixSpec({"neural": 1.0})
    lm = MixedLM(model_path, probe, ngram=ngram if use_ngram else None)
    inputs, target_ids, _ = stream_targets(lm.tokenizer, text)
    probs = source_probs(lm, inputs, target_ids)  # (N, 2 + len(HALF_LIVES))
    fitted = {"positions": int(len(target_ids)), "ppl_neural": _ppl(probs[:, 0])}
    if use_ngram:
        fitted["ppl_ngram"] = _ppl(probs[:, 1])
        w, fitted["ppl_neural_ngram"] = fit_weights(probs[:, :2])
        best = (fitted["ppl_neural_ngram"], {"neural": w[0], "ngram": w[1]}, None)
    else:
        best = (fitted["ppl_neural"], {"neural": 1.0}, None)
    fitted["weights_without_cache"] = {s: float(v) for s, v in best[1].items()}
    if "cache" in sources:
        for j, half_life in enumerate(HALF_LIVES):
            columns = [0, 1, 2 + j] if use_ngram else [0, 2 + j]
            w, ppl = fit_weights(probs[:, columns])
            fitted[f"ppl_with_cache_half_life_{half_life or 'none'}"] = ppl
            if ppl < best[0]:
                weights = dict(zip(["neural", "ngram", "cache"] if use_ngram
                                   else ["neural", "cache"], w))
                best = (ppl, weights, half_life)
    fitted["ppl"] = best[0]
    spec = MixSpec({s: float(v) for s, v in best[1].items()},
                   ngram=ngram_file if best[1].get("ngram", 0) > 0 else None,
                   half_life=best[2], fitted=fitted)
    printer(f"  mixture fitted on {fitted['positions']:,} positions: "
            + ", ".join(f"{s} {v:.3f}" for s, v in spec.weights.items() if v > 0)
            + (f", cache half-life {spec.half_life} words" if spec.weights["cache"] > 0
               and spec.half_life else "")
            + f"; PPL {fitted['ppl']:.2f} (neural alone {fitted['ppl_neural']:.2f})")
    return spec


def mixture_outcomes(lm: MixedLM, text: str, k: int = 3):
    """``(KeyboardOutcomes, perplexity)`` of ``lm`` typing ``text`` in order (its state
    and cache as they are: reset and forget first for a fresh user)."""
    inputs, target_ids, targets = stream_targets(lm.tokenizer, text)
    scorer = KeyboardScorer.for_tokenizer(lm.tokenizer, k)
    logp = np.empty(len(inputs))
    for i, (token, target) in enumerate(zip(inputs, targets)):
        scores = lm.step(int(token))
        logp[i] = scores[target_ids[i]]
        scorer.add(scores, target)
    return scorer.outcomes(), float(np.exp(-logp.mean()))


def _ppl(p: np.ndarray) -> float:
    return float(np.exp(-np.log(np.maximum(p, 1e-300)).mean()))
