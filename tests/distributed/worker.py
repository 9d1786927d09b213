"""Worker for tests/test_distribute.py.

``python worker.py OUT.json``: with two logical CPUs, trains the same stateful LSTM LM from
the same weights on the same token stream twice — one device with the global batch of B
rows, and ``MirroredStrategy`` over the two devices with B/2 rows each — and writes both
runs' per-window losses, final weights and final states (each replica's) as JSON.

``python worker.py OUT.json multi-worker`` (with ``TF_CONFIG`` set): the same training as
one worker of a ``MultiWorkerMirroredStrategy`` cluster; writes its losses, weights, its
replicas' states and the stream rows each of its replicas read.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

MULTI_WORKER = sys.argv[2:] == ["multi-worker"]
if not MULTI_WORKER:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_seq.data.batching import stream_arrays  # noqa: E402
from keras_seq.models import RecurrentLM, train_step  # noqa: E402
from keras_seq.training import distribute  # noqa: E402

VOCAB, B, T = 17, 4, 6


def run(strategy, weights):
    with strategy.scope():
        model = RecurrentLM(VOCAB, 8, 8, cell="lstm", stateful=True)
        model(np.zeros((B // strategy.num_replicas_in_sync, 1), "int32"))
        model.set_weights(weights)
        model.compile(keras.optimizers.SGD(0.5))
    model.reset_state()
    stream = (np.arange(200) * 5 + np.arange(200) // 7) % (VOCAB - 1) + 1
    x, y = stream_arrays(stream, batch_size=B, bptt=T)
    rows = distribute.ReplicaRows(x, y, B, strategy)
    read = {rid: [rows.rows(rid).start, rows.rows(rid).stop]
            for rid in distribute.local_replica_ids(strategy)}
    step = distribute.make_train_window(model, strategy, global_tokens=B * T)
    losses = [float(step(rows.window(k))) for k in range(rows.num_windows)]
    states = distribute.replica_states(model, strategy)
    saved = {rid: [s.copy() for s in replica] for rid, replica in states.items()}
    model.reset_state()
    distribute.restore_replica_states(model, strategy, saved)
    restored = distribute.replica_states(model, strategy)
    return {"losses": losses,
            "weights": [w.tolist() for w in model.get_weights()],
            "states": {rid: [s.tolist() for s in replica] for rid, replica in states.items()},
            "restored": {rid: [s.tolist() for s in r] for rid, r in restored.items()},
            "replicas": strategy.num_replicas_in_sync,
            "rows_read": read}


def run_fit(strategy, weights, clip=None):
    """The same training through ``model.fit`` on :func:`distribute.stream_dataset`
    (``clip``: the optimizer's ``global_clipnorm``)."""
    with strategy.scope():
        model = RecurrentLM(VOCAB, 8, 8, cell="lstm", stateful=True)
        model(np.zeros((B // strategy.num_replicas_in_sync, 1), "int32"))
        model.set_weights(weights)
        model.compile(keras.optimizers.SGD(0.5, global_clipnorm=clip),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.reset_state()
    stream = (np.arange(200) * 5 + np.arange(200) // 7) % (VOCAB - 1) + 1
    x, y = stream_arrays(stream, batch_size=B, bptt=T)
    data = distribute.stream_dataset(x, y, B, strategy)
    losses, norms = [], []

    def record(batch, logs):
        losses.append(float(logs["loss"]))
        norms.append(float(logs["grad_norm"]))

    callback = keras.callbacks.LambdaCallback(on_train_batch_end=record)
    with distribute.fit_workarounds(strategy):
        model.fit(data, epochs=1, steps_per_epoch=len(x) // B, shuffle=False, verbose=0,
                  callbacks=[callback])
    states = distribute.replica_states(model, strategy)
    return {"losses": losses, "grad_norms": norms,
            "weights": [w.tolist() for w in model.get_weights()],
            "states": {rid: [s.tolist() for s in replica] for rid, replica in states.items()}}


def fit_states_with_dropout(strategy):
    """Both replicas get the same rows; a mirrored fit with dropout: their states differ
    only if each replica draws its own masks."""
    with strategy.scope():
        model = RecurrentLM(VOCAB, 8, 8, cell="lstm", stateful=True, dropout=0.5)
        model(np.zeros((1, 1), "int32"))
        model.compile(keras.optimizers.SGD(0.1),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.reset_state()
    row = (np.arange(T + 1) * 3) % (VOCAB - 1) + 1
    x = np.stack([row[:-1]] * 2)  # window 0, rows 0 and 1 identical
    y = np.stack([row[1:]] * 2)
    model.fit(distribute.stream_dataset(x, y, 2, strategy), steps_per_epoch=1, verbose=0)
    states = distribute.replica_states(model, strategy)
    return {rid: [s.tolist() for s in replica] for rid, replica in states.items()}


def dropout_masks(strategy, own_masks: bool):
    """Each replica's dropout mask on ones, and each replica's seed state after the draw."""
    from keras_seq.layers.seeds import seed_generators

    with strategy.scope():
        model = keras.Sequential([keras.Input((16,)), keras.layers.Dropout(0.5, seed=1)])
        model(np.ones((1, 16), "float32"))

    def draw():
        return model(tf.ones((1, 16)), training=True)

    @tf.function
    def step():
        return strategy.run(lambda: train_step.replica_seeds(model, draw) if own_masks
                            else draw())

    masks = [m.numpy().ravel().tolist() for m in strategy.experimental_local_results(step())]
    (generator,) = seed_generators(model)
    seeds = [s.numpy().tolist() for s in strategy.experimental_local_results(
        generator.state.value)]
    return {"masks": masks, "seeds": seeds}


def main(out):
    strategy = distribute.make_strategy("multi-worker") if MULTI_WORKER else None
    keras.utils.set_random_seed(0)
    probe = RecurrentLM(VOCAB, 8, 8, cell="lstm")
    probe(np.zeros((1, 1), "int32"))
    weights = probe.get_weights()
    if MULTI_WORKER:
        with open(out, "w") as f:
            json.dump({**run(strategy, weights), "fit": run_fit(strategy, weights)}, f)
        return
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    mirrored = distribute.make_strategy("mirrored", devices)
    result = {"one": run(distribute.make_strategy("one"), weights),
              "mirrored": run(mirrored, weights),
              "fit_one": run_fit(distribute.make_strategy("one"), weights),
              "fit_mirrored": run_fit(mirrored, weights),
              "fit_one_clipped": run_fit(distribute.make_strategy("one"), weights, clip=0.05),
              "fit_mirrored_clipped": run_fit(mirrored, weights, clip=0.05),
              "dropout": dropout_masks(mirrored, own_masks=True),
              "fit_dropout_states": fit_states_with_dropout(mirrored),
              "shared_dropout": dropout_masks(mirrored, own_masks=False)}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
