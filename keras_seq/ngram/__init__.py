"""N-gram language models in numpy: counting, MLE, add-k, KenLM-exact Kneser-Ney, ARPA.

Never imports TensorFlow. One job per module:

* :mod:`~keras_seq.ngram.counts` — vocabulary, token streams, vectorised counting;
* :mod:`~keras_seq.ngram.estimators` — MLE and add-k (:class:`CountModel`);
* :mod:`~keras_seq.ngram.kneser_ney` — interpolated modified Kneser-Ney as ``lmplz``;
* :mod:`~keras_seq.ngram.external` — the same in bounded memory (sorted runs on disk, merged);
* :mod:`~keras_seq.ngram.backoff` — the backoff (ARPA) model: scoring, top-k, sampling;
* :mod:`~keras_seq.ngram.arpa` — ARPA read/write;
* :mod:`~keras_seq.ngram.scorer` — cross-entropy and perplexity;
* :mod:`~keras_seq.ngram.sparsity` — the sparsity report (estimation speed and memory:
  :mod:`keras_seq.benchmarks.ngram`, ``keras-seq bench ngram``).

Example:

>>> from keras_seq.ngram import train_kneser_ney, evaluate
>>> model = train_kneser_ney([["a", "b", "a"], ["b", "a", "b"]] * 3, order=2,
...                         discount_fallback=True)
>>> evaluate(model, [["a", "b"]]).tokens
3
"""

from keras_seq.ngram.arpa import read_arpa, write_arpa
from keras_seq.ngram.backoff import BackoffModel
from keras_seq.ngram.counts import NgramCounts, TokenStream, Vocabulary
from keras_seq.ngram.estimators import CountModel
from keras_seq.ngram.external import train_kn_bounded
from keras_seq.ngram.kneser_ney import kneser_ney, train_kneser_ney
from keras_seq.ngram.scorer import evaluate

__all__ = [
    "BackoffModel",
    "CountModel",
    "NgramCounts",
    "TokenStream",
    "Vocabulary",
    "evaluate",
    "kneser_ney",
    "read_arpa",
    "train_kn_bounded",
    "train_kneser_ney",
    "write_arpa",
]
