"""`.keras` files and training across Keras backends (each backend in its own process).

Every installed backend is tried (JAX and PyTorch's CPU wheel are test dependencies; a
backend that is not installed is left out). The workers of a test run side by side.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.prereqs import skip_unless

WORKER = Path(__file__).parent / "backends" / "cross_worker.py"
BACKENDS = [b for b in ("tensorflow", "jax", "torch")
            if importlib.util.find_spec(b if b != "tensorflow" else "tensorflow")]


def start(backend, *args) -> subprocess.Popen:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3",
           "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    return subprocess.Popen([sys.executable, str(WORKER), *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_all(workers: list[subprocess.Popen]) -> None:
    """Wait for workers run side by side; each must exit 0."""
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err[-3000:]


@pytest.mark.slow  # fast version: test_backends_trainer's JAX checkpoints loading under TF
def test_keras_files_load_under_every_backend(tmp_path):
    """Each backend saves every model kind; every other backend loads them: same outputs."""
    if len(BACKENDS) < 2:
        skip_unless("jax", "torch")  # only TensorFlow is installed
    for writer in BACKENDS:
        (tmp_path / writer).mkdir()
    wait_all([start(writer, "save", tmp_path / writer) for writer in BACKENDS])
    readers = []
    for reader in BACKENDS:  # one process per reader loads every other backend's files
        pairs = []
        for writer in BACKENDS:
            if writer != reader:
                out = tmp_path / f"{writer}-read-by-{reader}"
                out.mkdir()
                pairs += [tmp_path / writer, out]
        readers.append(start(reader, "load", *pairs))
    wait_all(readers)
    for writer in BACKENDS:
        for reader in BACKENDS:
            if reader == writer:
                continue
            out = tmp_path / f"{writer}-read-by-{reader}"
            for expected in (tmp_path / writer).glob("*.npy"):
                np.testing.assert_allclose(np.load(out / expected.name), np.load(expected),
                                           atol=1e-5, rtol=1e-5,
                                           err_msg=f"{expected.stem}: {writer} -> {reader}")


# Slow (a process per backend). Fast version: tests/backends runs under each backend in
# make test, every layer (stateful included) equal to Keras's built-in with copied weights.
@pytest.mark.slow
def test_stateful_tbptt_losses_equal_across_backends(tmp_path):
    if len(BACKENDS) < 2:
        skip_unless("jax", "torch")  # only TensorFlow is installed
    import keras

    from keras_seq.models import RecurrentLM

    model = RecurrentLM(13, 6, 8, cell="lstm", stateful=True)
    model(np.zeros((2, 1), "int32"))
    np.savez(tmp_path / "w.npz", **{f"w{i}": w for i, w in enumerate(model.get_weights())})
    keras.backend.clear_session()
    wait_all([start(backend, "tbptt", tmp_path / "w.npz", tmp_path / f"{backend}.json")
              for backend in BACKENDS])
    losses = {backend: json.loads((tmp_path / f"{backend}.json").read_text())["losses"]
              for backend in BACKENDS}
    reference = losses["tensorflow"]
    assert len(reference) >= 3  # three or more TBPTT windows, the state carried across them
    assert reference[-1] < reference[0]  # it learns, so a dropped state would show
    for backend, values in losses.items():
        np.testing.assert_allclose(values, reference, rtol=1e-5, atol=1e-6, err_msg=backend)
