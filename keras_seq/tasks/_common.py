"""Pieces shared by the task modules (labels, padded example batches, epoch datasets).

* :class:`Labels` — a label vocabulary saved in the run directory (``labels.json``);
* :func:`example_batches` — length-bucketed, padded batches of ``(ids, target)`` examples
  with per-token weights for aligned targets;
* :func:`batches_dataset` — precomputed batches served to ``fit`` on any backend
  (a ``keras.utils.PyDataset``), their order reshuffled each pass from ``seed + pass``
  (so a resumed run sees the same order), or served to the replicas of a
  ``tf.distribute`` strategy (:func:`split_evenly` pads each batch to split evenly).

>>> labels = Labels(["neg", "pos"])
>>> labels.ids(["pos", "neg"]).tolist(), labels.names([1, 0])
([1, 0], ['pos', 'neg'])
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from keras_seq import runs
from keras_seq.atomic import write_json_atomic
from keras_seq.data.tokenizers import load_tokenizer
from keras_seq.errors import DataError, KerasSeqError

LABELS_FORMAT = "keras-seq-labels"
LABELS_FILE = "labels.json"


class Labels:
    """An ordered label vocabulary (class names of a classifier, tags of a tagger)."""

    def __init__(self, names):
        self.list = [str(n) for n in names]
        if len(set(self.list)) != len(self.list) or not self.list:
            raise DataError(f"labels must be distinct and non-empty, got {self.list!r}")
        self.index = {n: i for i, n in enumerate(self.list)}

    def __len__(self) -> int:
        return len(self.list)

    def ids(self, names, what: str = "label") -> np.ndarray:
        unknown = sorted({n for n in names if n not in self.index})
        if unknown:
            raise DataError(f"{what}(s) {', '.join(map(repr, unknown[:5]))} are not among the "
                            f"{len(self)} seen in training ({', '.join(self.list[:10])}"
                            f"{'…' if len(self) > 10 else ''}); add examples of them to the "
                            "training split")
        return np.array([self.index[n] for n in names], np.int32)

    def names(self, ids) -> list[str]:
        return [self.list[int(i)] for i in ids]

    def save(self, path: str | Path) -> None:
        write_json_atomic(path, {"format": LABELS_FORMAT, "labels": self.list})

    @classmethod
    def load(cls, path: str | Path) -> Labels:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise DataError(f"cannot read the label vocabulary {path}: {err}") from None
        if not isinstance(data, dict) or data.get("format") != LABELS_FORMAT:
            raise DataError(f"{path} is not a keras-seq label file (expected format "
                            f"{LABELS_FORMAT!r})")
        return cls(data["labels"])


def example_batches(inputs, targets, batch_size: int, seed: int | None = 0):
    """Padded batches ``(ids (B, T), target, weights)`` sorted into similar lengths.

    Args:
        inputs: list of 1-D int id arrays (none empty).
        targets: one int per input (classification: ``target`` is ``(B,)``) or one int
            array per input, aligned with it (tagging: ``target`` is ``(B, T)``).
        batch_size: examples per batch.
        seed: shuffles which examples share a length before batching (``None``: keep the
            order, for evaluation).

    Returns:
        a list of ``(ids, target, weights)``; ``weights`` is ``(B,)`` ones for
        classification and the ``(B, T)`` real-token mask for aligned targets.
    """
    order = np.arange(len(inputs))
    if seed is not None:
        np.random.default_rng(seed).shuffle(order)
    order = sorted(order, key=lambda i: len(inputs[i]))  # stable: random within a length
    aligned = len(targets) > 0 and np.ndim(targets[0]) == 1
    batches = []
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        width = max(len(inputs[i]) for i in idx)
        ids = np.zeros((len(idx), width), np.int32)
        for row, i in enumerate(idx):
            ids[row, :len(inputs[i])] = inputs[i]
        if aligned:
            target = np.zeros((len(idx), width), np.int32)
            for row, i in enumerate(idx):
                target[row, :len(targets[i])] = targets[i]
            weights = (ids != 0).astype(np.float32)
        else:
            target = np.asarray([targets[i] for i in idx], np.int32)
            weights = np.ones(len(idx), np.float32)
        batches.append((ids, target, weights))
    return batches


def split_evenly(batches, replicas: int):
    """Batches whose rows split evenly over ``replicas`` (``tf.distribute``).

    Each batch is ``(inputs, target, weights)`` (``inputs`` may be a tuple). One of ``n``
    rows, ``n`` not a multiple of ``replicas`` (the last, smaller batch), gets copies of
    its first rows with weight 0 up to ``m``, the next multiple; its real weights are
    scaled by ``m / n``. Keras divides a replica's weighted loss by its own number of
    targets, so each padded batch then gives the loss and gradient of its ``n`` real rows
    on one device, exactly. (Weighted metrics count that batch's targets ``m / n`` times,
    and the epoch's mean loss weighs it by ``m`` rows instead of ``n``: a small,
    reporting-only difference.)
    """
    # lazy: Keras is imported once the backend is chosen
    from keras import tree

    out = []
    for inputs, target, weights in batches:
        n = len(weights)
        m = -(-n // replicas) * replicas
        if m != n:
            pad = np.arange(m - n) % n

            def grow(a, pad=pad):
                return np.concatenate([a, a[pad]])

            inputs, target = tree.map_structure(grow, inputs), grow(target)
            weights = np.concatenate([weights * (m / n), np.zeros_like(weights[pad])])
            weights = weights.astype(np.float32)
        out.append((inputs, target, weights))
    return out


def batches_dataset(batches, seed: int, shuffle: bool = True, skip: int = 0, strategy=None):
    """Precomputed batches for ``fit`` on any backend, the order reshuffled every pass.

    A :class:`~keras_seq.data.pydatasets.ShuffledBatches` served without end (``fit``'s
    ``steps_per_epoch`` / ``validation_steps`` say how many make an epoch), passed
    through :func:`~keras_seq.data.pydatasets.fit_input`. ``skip`` leaves out the first
    batches of the first pass (a resumed run that stopped part-way through a pass goes on
    from there); ``shuffle=False`` keeps the given order on every pass (validation).
    With a ``tf.distribute`` ``strategy``, the batches are padded to split evenly
    (:func:`split_evenly`) and each replica gets its share of every one
    (:func:`keras_seq.training.distribute.example_dataset`): the same batches in the
    same order as on one device.
    """
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.data.pydatasets import ShuffledBatches, fit_input

    if strategy is None:
        return fit_input(ShuffledBatches(batches, seed, shuffle=shuffle, skip=skip))
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training.distribute import example_dataset

    batches = split_evenly(batches, strategy.num_replicas_in_sync)
    return example_dataset(ShuffledBatches(batches, seed, shuffle=shuffle, skip=skip),
                           strategy)


def passes_done(initial_epoch: int, steps_per_epoch: int, num_batches: int,
                start_batch: int = 0) -> int:
    """Full passes over the batches before ``initial_epoch`` (and ``start_batch`` batches
    into it): where a resumed run goes on."""
    return (initial_epoch * steps_per_epoch + start_batch) // max(num_batches, 1)


def fit_kwargs(train_batches, val_batches, seed: int, initial_epoch: int,
               steps: int | None = None, strategy=None, start_batch: int = 0) -> dict:
    """``model.fit`` arguments for precomputed batches: the training order reshuffled every
    pass (continuing where a resumed run left off, ``start_batch`` batches into
    ``initial_epoch`` for a mid-epoch stop), validation over ``val_batches``;
    on a ``tf.distribute`` ``strategy`` if one is given (:func:`batches_dataset`)."""
    steps = steps or len(train_batches)
    done = passes_done(initial_epoch, steps, len(train_batches), start_batch)
    # Where an uninterrupted run would be: pass `done`, `skip` batches into it.
    skip = (initial_epoch * steps + start_batch) % max(len(train_batches), 1)
    kwargs = {"x": batches_dataset(train_batches, seed + done, skip=skip, strategy=strategy),
              "steps_per_epoch": steps, "shuffle": False, "validation_data": None}
    if val_batches:
        kwargs["validation_data"] = batches_dataset(val_batches, seed, shuffle=False,
                                                    strategy=strategy)
        kwargs["validation_steps"] = len(val_batches)
    return kwargs


def adam(config):
    """Adam at ``config.lr`` with global-norm clipping at ``config.clip_norm`` (if set)."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    clip = {"global_clipnorm": config.clip_norm} if config.clip_norm else {}
    return keras.optimizers.Adam(config.lr, **clip)


def compile_options(config) -> dict:
    """``model.compile`` keywords shared by every task: ``jit_compile`` from the config
    (the trainer sets it to True under JAX, whose ``fit`` always compiles). A
    ``mixed_float16`` model gets loss scaling from ``compile`` itself
    (``auto_scale_loss``)."""
    return {"jit_compile": bool(getattr(config, "jit_compile", False))}


def compile_for_labels(model, config, metric):
    """Compile with Adam (:func:`adam`) and sparse cross-entropy on logits; ``metric`` is
    reported over the weighted (real) targets."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    model.compile(optimizer=adam(config),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[metric], **compile_options(config))
    return model


def load_labelled_run(run_dir, kind: str, config_cls, which: str = "best"):
    """``(config, tokenizer, labels, model)`` of a run whose labels are in ``labels.json``."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.models import loading

    run_dir = runs.check_run_dir(run_dir, kind)
    config = config_cls.load(run_dir / runs.CONFIG)
    return (config, load_tokenizer(run_dir), Labels.load(run_dir / LABELS_FILE),
            loading.load_model(run_dir, which))


def texts_or_stdin(texts, what: str) -> list[str]:
    """``texts`` (a use command's arguments), else the non-blank lines of stdin; refused
    when both are empty, ``what`` saying what to pass (``"nothing to predict; pass texts
    as arguments or on stdin"``)."""
    # lazy: stdin is read only by the commands that take texts
    import sys

    texts = list(texts) or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise KerasSeqError(what)
    return texts
