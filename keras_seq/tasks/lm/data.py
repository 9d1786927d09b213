"""Language-model data: the corpus of a config, token windows and batches (no TensorFlow).

* :func:`corpus_for` — the :class:`~keras_seq.data.corpus.Corpus` of ``config.data``, cut
  by ``config.split_ratio`` (:func:`keras_seq.data.splits.split_text`);
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
from keras_seq.tasks.lm.config import LMConfig


def corpus_for(config: LMConfig) -> Corpus:
    """The corpus a run trains and is measured on: ``config.data`` at ``config.split_ratio``."""
    return load_corpus(config.data, data_dir=config.data_dir, split=config.split_ratio)


def unseen_unk_warning(train_ids, val_ids, unk_id: int, threshold: float = 0.005) -> str | None:
    """A note when validation has ``<unk>`` tokens but training has none.

    A neural LM then learns to give ``<unk>`` almost no probability, and every unknown
    word in validation costs many nats (on tinyshakespeare words with ``min_count=1``,
    about 16.6 nats each: 13% of the whole validation loss).
    """
    if len(val_ids) == 0 or np.any(train_ids == unk_id):
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
