"""Score text with an n-gram model: per-token log-probs, cross-entropy, perplexity.

Works with any model that has ``vocab`` and ``token_log10probs(stream)``
(:class:`~keras_seq.ngram.backoff.BackoffModel`,
:class:`~keras_seq.ngram.estimators.CountModel`). Every word is predicted, plus one
``</s>`` per line; ``<s>`` is context only (the KenLM/SRILM convention).

Example:

>>> from keras_seq.ngram.kneser_ney import train_kneser_ney
>>> model = train_kneser_ney([["a", "b"], ["b", "a"]], order=2, discount_fallback=True)
>>> result = evaluate(model, [["a", "b"]])
>>> result.tokens, result.oov, result.ppl > 1
(3, 0, True)
"""

from __future__ import annotations

import math

import numpy as np

from keras_seq.errors import DataError
from keras_seq.metrics import PerplexityResult

LN10 = math.log(10.0)


def token_log10probs(model, lines) -> tuple[np.ndarray, object]:
    """log10 p of every predicted token of ``lines`` and the encoded stream."""
    stream = model.vocab.encode(lines)
    return model.token_log10probs(stream), stream


def sentence_log10probs(model, lines) -> np.ndarray:
    """Total log10 p of each non-empty line (``<s>`` … ``</s>``), like ``kenlm.Model.score``."""
    lp, stream = token_log10probs(model, lines)
    sentence = np.cumsum(stream.pos == 0)[stream.pos >= 1] - 1
    return np.bincount(sentence, weights=lp, minlength=stream.n_sentences)


def evaluate(model, lines, fingerprint: dict | None = None, name: str = "") -> PerplexityResult:
    """Cross-entropy and perplexity of ``model`` on ``lines`` (lists of token strings).

    Raises:
        DataError: no tokens, or every word is out of the model's vocabulary.
    """
    lines = [line for line in lines if len(line)]
    if not lines:
        raise DataError("nothing to evaluate: the split has no tokens")
    lp, stream = token_log10probs(model, lines)
    words = stream.n_predicted - stream.n_sentences
    if stream.n_unk == words:
        raise DataError(
            f"every one of the {words} words in the evaluation text is out of the model's "
            "vocabulary (<unk>); was the model trained on a different corpus or tokenizer?"
        )
    return PerplexityResult.from_log_probs(
        lp * LN10, fingerprint=fingerprint, oov=stream.n_unk, model=name
    )


def zero_prob_tokens(model, lines) -> int:
    """How many tokens of ``lines`` get probability 0 (these make the perplexity infinite)."""
    lp, _ = token_log10probs(model, lines)
    return int(np.isneginf(lp).sum())


def keyboard_outcomes(model, raw_lines, k: int = 3):
    """:class:`~keras_seq.keyboard.KeyboardOutcomes` of an n-gram on word lines (unknown
    words kept as they are, so keystroke savings type them in full): at each position the
    whole vocabulary is scored from the history (:meth:`NgramStream.distribution`), the
    target read, then stepped."""
    # lazy: the compact module builds the stream's indexes; scoring needs none of it
    from keras_seq.keyboard import KeyboardScorer, positions
    from keras_seq.ngram.compact import NgramStream

    vocab = model.vocab
    bos = vocab.index["<s>"]
    scorer = KeyboardScorer(vocab.words, blocked=[vocab.index["<unk>"], bos],
                            end_of_line=vocab.index["</s>"], k=k)
    stream = NgramStream(model)
    targets = iter(positions(raw_lines))
    for token in vocab.encode(raw_lines).ids:  # <s> w … </s> per line: <s> only resets
        if token != bos:
            scorer.add(stream.distribution(), next(targets))
        stream.step(int(token))
    return scorer.outcomes()
