"""Language-model data: the corpus of a config, token windows and batches (no TensorFlow).

* :func:`corpus_for` — the :class:`~keras_seq.data.corpus.Corpus` of ``config.data``, cut
  by ``config.split_ratio`` (:func:`keras_seq.data.splits.split_text`), or the
  :class:`~keras_seq.data.prepared.PreparedCorpus` when ``config.data`` is a directory
  ``keras-seq data prepare`` wrote;
* :func:`lm_tokenizer`, :func:`split_ids` — a run's tokenizer and the ids of a split, for
  either kind of corpus (a prepared corpus's ids stay memory-mapped);
* :func:`unseen_unk_warning` — a note when validation has ``<unk>`` but training none;
* :func:`nplm_windows`, :func:`window_batches` — the NPLM's fixed windows;
* :func:`full_bptt_batches` — whole lines, padded, for stateless full BPTT.

The truncated-BPTT stream layout is :mod:`keras_seq.data.batching`.

Example:

>>> import numpy as np
>>> nplm_windows(np.array([5, 6, 7]), 2).tolist()
[[0, 5], [5, 6]]
"""

from __future__ import annotations

import numpy as np

from keras_seq.data.batching import padded_batches
from keras_seq.data.corpus import Corpus, load_corpus
from keras_seq.data.prepared import PreparedCorpus, is_prepared, read_chunks
from keras_seq.data.tokenizers import Tokenizer, load_tokenizer, make_tokenizer
from keras_seq.errors import DataError
from keras_seq.tasks.lm.config import LMConfig


def task_data(config: LMConfig) -> Corpus | PreparedCorpus:
    """The task a run trains on: for a language model, its corpus (:func:`corpus_for`)."""
    return corpus_for(config)


def corpus_for(config: LMConfig) -> Corpus | PreparedCorpus:
    """The corpus a run trains and is measured on: ``config.data`` at ``config.split_ratio``
    (a prepared directory: opened, after checking that the config asks for its tokenizer
    and split)."""
    if is_prepared(config.data):
        corpus = PreparedCorpus(config.data)
        corpus.check_request(tokenizer=config.tokenizer, split_ratio=config.split_ratio,
                             max_vocab=config.max_vocab, min_count=config.min_count,
                             lower=config.lower, vocab_size=config.vocab_size)
        return corpus
    return load_corpus(config.data, data_dir=config.data_dir, split=config.split_ratio)


def lm_tokenizer(config: LMConfig, corpus, run_dir=None) -> Tokenizer:
    """The tokenizer of a run: the saved one when resuming from ``run_dir``, a prepared
    corpus's own, or a new one fitted on the train split."""
    if run_dir is not None:
        tokenizer = load_tokenizer(run_dir)
        prepared = corpus.tokenizer if isinstance(corpus, PreparedCorpus) else None
        if prepared is not None and tokenizer.fingerprint != prepared.fingerprint:
            raise DataError(f"the run in {run_dir} has tokenizer {tokenizer.fingerprint}, but the "
                            f"prepared corpus {corpus.path} holds ids of "
                            f"{corpus.tokenizer.fingerprint}: resume on the data it started on")
        return tokenizer
    if isinstance(corpus, PreparedCorpus):
        return corpus.tokenizer
    return make_tokenizer(
        config.tokenizer, max_vocab=config.max_vocab, min_count=config.min_count,
        vocab_size=config.vocab_size, lower=config.lower,
    ).fit(corpus.text("train"))


def split_ids(corpus, tokenizer: Tokenizer, split: str) -> np.ndarray:
    """The ids of ``split`` (empty when it has no non-blank text): ``tokenizer.encode`` of
    the text (int32); from a prepared corpus, the train split as its memory map
    (uint16/uint32: the stream batches read it piece by piece) and val/test read into an
    int32 array (they are the small parts)."""
    if isinstance(corpus, PreparedCorpus):
        if not corpus.has_text(split):
            return np.array([], np.int32)
        ids = corpus.split(split)
        if split == "train":
            return ids
        return np.concatenate([np.zeros(0, np.int32), *read_chunks(ids)]).astype(np.int32)
    text = corpus.text(split)
    return tokenizer.encode(text) if text.strip() else np.array([], np.int32)


def has_text(corpus, split: str) -> bool:
    """Whether ``split`` of either kind of corpus holds any non-blank text."""
    if isinstance(corpus, PreparedCorpus):
        return corpus.has_text(split)
    return bool(corpus.text(split).strip())


def unseen_unk_warning(train_ids, val_ids, unk_id: int, threshold: float = 0.005) -> str | None:
    """A note when validation has ``<unk>`` tokens but training has none.

    A neural LM then learns to give ``<unk>`` almost no probability, and every unknown
    word in validation costs many nats (on tinyshakespeare words with ``min_count=1``,
    about 16.6 nats each: 13% of the whole validation loss).
    """
    if len(val_ids) == 0 or any(np.any(block == unk_id) for block in read_chunks(train_ids)):
        return None
    share = float(np.mean(val_ids == unk_id))
    if share < threshold:
        return None
    return (f"note: {share:.1%} of the validation tokens are <unk> but the training stream "
            "has none, so the model will learn to give <unk> almost no probability and "
            "each one will cost many nats. Use --min-count 2 (words seen once in training "
            "become <unk>) or --max-vocab so that <unk> occurs in training.")


def nplm_windows(ids, context: int) -> np.ndarray:
    """The ``context`` tokens before each of ``ids[1:]``, ``<pad>`` (0) before the start.

    >>> nplm_windows(np.array([5, 6, 7]), 2).tolist()
    [[0, 5], [5, 6]]
    """
    padded = np.concatenate([np.zeros(context, np.int32), np.asarray(ids, np.int32)])
    return np.lib.stride_tricks.sliding_window_view(padded, context)[1:len(ids)]


def window_batches(ids, context: int, batch_size: int, seed: int | None):
    """NPLM training batches ``(windows (B, context), targets (B,))`` in a seeded order."""
    x, y = nplm_windows(ids, context), np.asarray(ids[1:], np.int32)
    order = np.arange(len(y))
    if seed is not None:
        np.random.default_rng(seed).shuffle(order)
    return [(x[order[i:i + batch_size]], y[order[i:i + batch_size]])
            for i in range(0, len(order), batch_size)]


def full_bptt_batches(ids: np.ndarray, eos_id: int, batch_size: int, bptt_cap: int = 400):
    """Whole lines (at most ``bptt_cap`` + 1 tokens each) as padded batches for stateless
    full BPTT: lists of ``x``, ``y`` and ``sample_weight`` arrays, one entry per batch."""
    cuts = np.flatnonzero(ids == eos_id) + 1
    lines = [line for line in np.split(ids, cuts) if len(line) >= 2]
    lines = [line[: bptt_cap + 1] for line in lines]
    xs, ys, ws = [], [], []
    for batch, mask in padded_batches(lines, batch_size, pad_id=0, bucket=True, seed=0):
        xs.append(batch[:, :-1])
        ys.append(batch[:, 1:])
        ws.append(mask[:, 1:].astype("float32"))
    return xs, ys, ws
