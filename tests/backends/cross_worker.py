"""Worker for the cross-backend tests: run as ``KERAS_BACKEND=… python cross_worker.py CMD``.

Commands (paths are files the parent test owns):

- ``save DIR``: build a small model of each kind in ``KINDS``, save it to
  ``DIR/<kind>.keras`` and its outputs on fixed inputs to ``DIR/<kind>.npy``;
- ``load DIR OUT [DIR OUT …]``: load each ``DIR/<kind>.keras`` and write its outputs on
  the same inputs to ``OUT/<kind>.npy`` (several pairs: one process reads them all);
- ``tbptt WEIGHTS OUT``: a stateful LSTM LM starts from ``WEIGHTS`` (.npz) and trains by
  truncated BPTT over a fixed token stream with SGD; the per-step losses go to ``OUT`` (.json).
"""

from __future__ import annotations

import json
import sys

import keras
import numpy as np

from keras_seq.data.batching import stream_arrays
from keras_seq.models import RecurrentLM
from keras_seq.models.seq2seq import Seq2Seq

BATCH, BPTT, VOCAB = 2, 5, 13
KINDS = ("lstm", "gru", "rnn", "lstmp", "seq2seq")


def inputs(kind):
    rng = np.random.default_rng(7)
    if kind == "seq2seq":
        return (rng.integers(1, 11, (2, 4)).astype("int32"),
                rng.integers(1, 12, (2, 5)).astype("int32"))
    return rng.integers(1, VOCAB, (2, 6)).astype("int32")


def build(kind):
    keras.utils.set_random_seed(3)
    if kind == "seq2seq":
        model = Seq2Seq(11, 12, embed_dim=5, units=6, cell="lstm")
    else:
        model = RecurrentLM(VOCAB, 6, 8, cell=kind, num_layers=2,
                            proj_units=4 if kind == "lstmp" else None)
    model(inputs(kind))
    return model


def outputs(model, kind):
    return keras.ops.convert_to_numpy(model(inputs(kind)))


def tbptt(weights_path, out_path):
    model = RecurrentLM(VOCAB, 6, 8, cell="lstm", stateful=True)
    model(np.zeros((BATCH, 1), "int32"))
    with np.load(weights_path) as saved:
        model.set_weights([saved[f"w{i}"] for i in range(len(saved.files))])
    model.reset_state()
    model.compile(keras.optimizers.SGD(0.5),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    stream = (np.arange(60) * 7 + np.arange(60) // 5) % (VOCAB - 1) + 1
    x, y = stream_arrays(stream, batch_size=BATCH, bptt=BPTT)  # ≥ 3 windows, in order
    losses = []
    for k in range(0, len(x), BATCH):  # the state carries from one window to the next
        logs = model.train_on_batch(x[k:k + BATCH], y[k:k + BATCH], return_dict=True)
        losses.append(float(logs["loss"]))
    with open(out_path, "w") as f:
        json.dump({"backend": keras.backend.backend(), "losses": losses}, f)


def main(argv):
    command = argv[0]
    if command == "tbptt":
        tbptt(*argv[1:])
        return
    if command == "save":
        folder = argv[1]
        for kind in KINDS:
            model = build(kind)
            model.save(f"{folder}/{kind}.keras")
            np.save(f"{folder}/{kind}.npy", outputs(model, kind))
        return
    pairs = argv[1:]
    for folder, out in zip(pairs[0::2], pairs[1::2]):
        for kind in KINDS:
            model = keras.saving.load_model(f"{folder}/{kind}.keras")
            np.save(f"{out}/{kind}.npy", outputs(model, kind))


if __name__ == "__main__":
    main(sys.argv[1:])
