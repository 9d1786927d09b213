"""Stateful TBPTT on tf.distribute (issue 16, first part): two logical CPU devices under
MirroredStrategy equal one device with the same global batch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).parent / "distributed" / "worker.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "runs.json"
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(WORKER), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_two_replicas_give_the_single_device_losses_and_weights(runs):
    one, mirrored = runs["one"], runs["mirrored"]
    assert (one["replicas"], mirrored["replicas"]) == (1, 2)
    assert len(one["losses"]) >= 3  # several TBPTT windows: a wrong state carry would show
    np.testing.assert_allclose(mirrored["losses"], one["losses"], rtol=1e-5)
    for a, b in zip(mirrored["weights"], one["weights"]):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_each_replica_keeps_its_own_rows_state(runs):
    """Replica r's state is the single-device state of rows [r·b, (r+1)·b): the rows each
    replica owns are fixed and contiguous, and every replica's copy is read."""
    one, mirrored = runs["one"]["states"]["0"], runs["mirrored"]["states"]
    mirrored = [mirrored["0"], mirrored["1"]]
    for i, state in enumerate(one):
        joined = np.concatenate([mirrored[0][i], mirrored[1][i]])
        np.testing.assert_allclose(joined, state, atol=1e-5)
    assert not np.allclose(mirrored[0][0], mirrored[1][0])  # the replicas really differ


def test_every_replica_state_restores(runs):
    saved, restored = runs["mirrored"]["states"], runs["mirrored"]["restored"]
    assert saved.keys() == restored.keys() == {"0", "1"}
    for rid in saved:
        for a, b in zip(saved[rid], restored[rid]):
            np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """Two worker processes of one MultiWorkerMirroredStrategy cluster on localhost."""
    folder = tmp_path_factory.mktemp("workers")
    from keras_seq.training.distribute import localhost_cluster, tf_config

    cluster = localhost_cluster(2)
    procs = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": tf_config(cluster, index), "KERAS_BACKEND": "tensorflow",
               "CUDA_VISIBLE_DEVICES": ""}
        procs.append(subprocess.Popen(
            [sys.executable, str(WORKER), str(folder / f"w{index}.json"), "multi-worker"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    try:
        errors = [p.communicate(timeout=300)[1] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, err in zip(procs, errors):
        assert p.returncode == 0, err[-3000:]
    return [json.loads((folder / f"w{i}.json").read_text()) for i in range(2)]


@pytest.mark.slow  # two worker processes; fast tier: the in-process two-replica tests
def test_two_workers_give_the_single_process_losses_and_weights(runs, workers):
    one = runs["one"]
    for worker in workers:
        assert worker["replicas"] == 2
        np.testing.assert_allclose(worker["losses"], one["losses"], rtol=1e-5)
        for a, b in zip(worker["weights"], one["weights"]):
            np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow  # two worker processes; fast tier: the in-process two-replica tests
def test_workers_read_every_row_once_and_keep_their_state(runs, workers):
    read = {int(rid): span for w in workers for rid, span in w["rows_read"].items()}
    assert sorted(read) == [0, 1]
    rows = sorted(r for span in read.values() for r in range(*span))
    assert rows == list(range(4))  # every stream row of a window, none twice
    one = runs["one"]["states"]["0"]
    for worker in workers:
        (rid, states), = worker["states"].items()
        for state, full in zip(states, one):
            np.testing.assert_allclose(state, np.asarray(full)[slice(*read[int(rid)])],
                                       atol=1e-5)


def test_each_replica_draws_its_own_dropout_masks(runs):
    own, shared = runs["dropout"], runs["shared_dropout"]
    assert shared["masks"][0] == shared["masks"][1]  # Keras's mirrored seeds: one mask
    assert own["masks"][0] != own["masks"][1]
    assert own["seeds"][0] == own["seeds"][1]  # the seed states stay in step


@pytest.mark.parametrize("clipped", [False, True])
def test_fit_on_two_replicas_equals_one_device(runs, clipped):
    """model.fit on the explicit-rows dataset: the same running losses, weights and
    per-row states as one device; with global_clipnorm active too (Keras clips each
    replica's local gradient; keras-seq clips the summed one, as one device does)."""
    suffix = "_clipped" if clipped else ""
    one, mirrored = runs["fit_one" + suffix], runs["fit_mirrored" + suffix]
    assert len(one["losses"]) >= 3
    np.testing.assert_allclose(mirrored["losses"], one["losses"], rtol=1e-5)
    for a, b in zip(mirrored["weights"], one["weights"]):
        np.testing.assert_allclose(a, b, atol=1e-5)
    if clipped:  # the logged norm is the summed gradient's, before clipping
        np.testing.assert_allclose(mirrored["grad_norms"], one["grad_norms"], rtol=1e-5)
        assert max(one["grad_norms"]) > 0.05  # the clip (0.05) was active
    joined = [np.concatenate([mirrored["states"]["0"][i], mirrored["states"]["1"][i]])
              for i in range(2)]
    for a, b in zip(joined, one["states"]["0"]):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow  # two worker processes; fast tier: the in-process two-replica tests
def test_fit_on_two_workers_equals_one_device(runs, workers):
    """model.fit under MultiWorkerMirroredStrategy (with distribute.fit_workarounds for
    keras-team/keras#20585) gives the single-process run."""
    one = runs["fit_one"]
    for worker in workers:
        np.testing.assert_allclose(worker["fit"]["losses"], one["losses"], rtol=1e-5)
        for a, b in zip(worker["fit"]["weights"], one["weights"]):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_fit_gives_each_replica_its_own_dropout_masks(runs):
    """Both replicas read identical rows; with dropout their states differ only if each
    draws its own masks (Keras's mirrored seeds would give one mask to both)."""
    states = runs["fit_dropout_states"]
    assert not np.allclose(states["0"][0], states["1"][0])


def test_split_evenly_pads_a_batch_so_replica_losses_sum_to_one_devices():
    """A 3-row batch over 2 replicas: padded to 4 rows (the pad weightless) and its real
    weights rescaled, Keras's per-replica mean losses (each over its own targets, divided
    by the replica count) add up to the one-device loss of the 3 rows."""
    import keras

    from keras_seq.tasks._common import split_evenly

    rng = np.random.default_rng(0)
    src, target = rng.integers(1, 9, (3, 5)), rng.integers(1, 6, (3, 4))
    weights = (rng.random((3, 4)) > 0.3).astype(np.float32)
    logits = rng.normal(size=(4, 4, 6)).astype(np.float32)  # a model's output per row
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    (padded_src, padded_target, padded_weights), = split_evenly([(src, target, weights)], 2)
    assert padded_src.shape == (4, 5) and padded_target.shape == (4, 4)
    np.testing.assert_array_equal(padded_src[3], src[0])  # a copy of a real row…
    np.testing.assert_array_equal(padded_weights[3], 0)  # …that weighs nothing
    rows = np.r_[0:3, 0]  # the padded batch's rows are real rows 0, 1, 2 and 0 again
    one_device = float(loss(target, logits[:3], sample_weight=weights))
    replicas = sum(float(loss(padded_target[r], logits[rows][r], sample_weight=padded_weights[r]))
                   for r in (slice(0, 2), slice(2, 4))) / 2
    np.testing.assert_allclose(replicas, one_device, rtol=1e-6)
    even = [(src[:2], target[:2], weights[:2])]
    assert split_evenly(even, 2)[0][2] is even[0][2]  # a batch that splits is left alone
