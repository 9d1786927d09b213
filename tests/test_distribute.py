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
    one, mirrored = runs["one"]["states"][0], runs["mirrored"]["states"]
    assert len(mirrored) == 2
    for i, state in enumerate(one):
        joined = np.concatenate([mirrored[0][i], mirrored[1][i]])
        np.testing.assert_allclose(joined, state, atol=1e-5)
    assert not np.allclose(mirrored[0][0], mirrored[1][0])  # the replicas really differ


def test_every_replica_state_restores(runs):
    for saved, restored in zip(runs["mirrored"]["states"], runs["mirrored"]["restored"]):
        for a, b in zip(saved, restored):
            np.testing.assert_array_equal(a, b)
