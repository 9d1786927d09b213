"""`keras-seq train lm|seq2seq --strategy …` end to end (issue 16): two logical CPU
devices, two localhost workers, and a worker killed mid-epoch, each against one device."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.shared_cache import shared_folder

ARGS = ["--data", "python-docs", "--tokenizer", "char", "--cell", "lstm", "--units", "16",
        "--embed-dim", "8", "--batch-size", "4", "--bptt", "10", "--dropout", "0",
        "--lr", "0.01", "--quiet"]
# 99 training pairs in batches of 8: the last one (3 pairs) is padded to split over 2
# replicas; 24 validation pairs split evenly.
S2S_ARGS = ["--data", "reverse", "--train-size", "99", "--val-size", "24", "--test-size", "8",
            "--max-len", "8", "--units", "16", "--embed-dim", "8", "--batch-size", "8",
            "--eval-size", "4", "--lr", "0.01", "--dropout", "0",
            "--quiet"]
KERAS_SEQ = [sys.executable, "-m", "keras_seq.cli"]


def _env(**extra):
    return {**os.environ, "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "",
            "TF_CPP_MIN_LOG_LEVEL": "3", **extra}


def _train(run_dir, *extra, env=None, check=True, task="lm"):
    args = ARGS if task == "lm" else S2S_ARGS
    done = subprocess.run([*KERAS_SEQ, "train", task, "--run-dir", str(run_dir), *args,
                           *map(str, extra)], env=env or _env(), capture_output=True,
                          text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def _weights(run_dir):
    from keras_seq.models import loading

    return loading.load_model(run_dir, "last").get_weights()


def _logs(run_dir, column="loss"):
    lines = (Path(run_dir) / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    return [int(r["epoch"]) for r in rows], [float(r[column]) for r in rows]


def _same_run(a, b, columns=("loss",)):
    for column in columns:
        epochs_a, logs_a = _logs(a, column)
        epochs_b, logs_b = _logs(b, column)
        assert epochs_a == epochs_b  # no gap, no duplicate epoch
        np.testing.assert_allclose(logs_a, logs_b, rtol=1e-5, atol=_noise_floor(b, column),
                                   err_msg=column)
    weights_a, weights_b = _weights(a), _weights(b)
    assert len(weights_a) == len(weights_b)
    for x, y in zip(weights_a, weights_b):
        np.testing.assert_allclose(x, y, atol=1e-5)


def _noise_floor(run_dir, column):
    """How far apart two float32 runs may be in ``column`` without any relative bound: none
    for most columns; for one part's gradient norm, float32 rounding of the whole gradient
    (1e-6 of the global norm), since a part whose true gradient is about zero (a saturated
    attention: 5.6e-8 on one device, 0.0 summed over two replicas) has no relative
    precision at all."""
    if not column.startswith("grad_norm/"):
        return 0.0
    return 1e-6 * max(_logs(run_dir, "grad_norm")[1])


#: seq2seq logs that equal one device's though the last training batch is padded (the
#: epoch's mean training loss weighs that batch by its padded size: not compared)
S2S_EXACT = ("val_loss", "grad_norm", "grad_norm/encoder", "grad_norm/attention")


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The one-device reference, trained in this process (no strategy needs a fresh
    TensorFlow runtime), once for every xdist worker."""
    def build(folder):
        from keras_seq.cli import main

        argv = ["train", "lm", "--run-dir", str(folder / "run"), *ARGS, "--epochs", "3",
                "--max-steps-per-epoch", "24"]
        assert main(argv) == 0

    return shared_folder(tmp_path_factory, "distribute-cli-single", build) / "run"


def test_mirrored_on_two_logical_cpus_equals_one_device(single, tmp_path):
    run_dir = tmp_path / "mirrored"
    _train(run_dir, "--epochs", 3, "--max-steps-per-epoch", 24, "--strategy", "mirrored",
           "--devices", 2)
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["strategy"], config["replicas"]) == ("mirrored", 2)
    _same_run(run_dir, single)


def test_strategy_flags_are_checked_first(tmp_path, capsys):
    # --devices 3 makes logical CPU devices, which only a process whose TensorFlow runtime
    # has not started can do: a fresh one. The other checks need no device, so they run here.
    done = _train(tmp_path / "r", "--strategy", "mirrored", "--devices", 3, "--epochs", 1,
                  check=False)
    assert done.returncode == 2 and "multiple of 3" in done.stderr
    from keras_seq.cli import main

    run = ["--run-dir", str(tmp_path / "r")]
    cases = [(["train", "lm", *run, *ARGS, "--strategy", "one", "--devices", "2"],
              "devices is for --strategy mirrored"),
             (["train", "lm", *run, *ARGS, "--strategy", "multi-worker", "--max-minutes", "1"],
              "--max-minutes stops each worker"),
             (["train", "tag", *run, "--strategy", "mirrored"],
              "not available for `keras-seq train tag`")]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_scaling_bench_names_what_it_can_time():
    from keras_seq.benchmarks.scaling import run_scaling

    with pytest.raises(ValueError, match="one, mirrored, multi-worker"):
        run_scaling(["two-gpus"], [])


def _start_workers(folder, extra, task="lm"):
    from keras_seq.training.distribute import localhost_cluster, tf_config

    cluster = localhost_cluster(2)
    procs = []
    for index in range(2):
        procs.append(subprocess.Popen(
            [*KERAS_SEQ, "train", task, "--run-dir", str(folder / f"w{index}"),
             *(ARGS if task == "lm" else S2S_ARGS), "--strategy", "multi-worker",
             *map(str, extra)],
            env=_env(TF_CONFIG=tf_config(cluster, index)), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True))
    return procs


def _finish(procs, timeout=300):
    try:
        errors = [p.communicate(timeout=timeout)[1] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, err in zip(procs, errors):
        assert p.returncode == 0, err[-3000:]


def _epochs_done(run_dir):
    try:
        return json.loads((run_dir / "state.json").read_text())["epochs_done"]
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.slow  # its fast versions: the mirrored test, tests/test_distribute.py's workers
def test_two_workers_equal_one_device(single, tmp_path):
    _finish(_start_workers(tmp_path, ["--epochs", 3, "--max-steps-per-epoch", 24]))
    for index in range(2):
        _same_run(tmp_path / f"w{index}", single)


# Slow (4 TensorFlow processes). Its parts run in the fast tier: a run killed between a
# checkpoint and its commit resumes to the reference (tests/reliability/test_training.py),
# and two workers train as one device (tests/test_distribute.py's worker cluster).
@pytest.mark.slow
def test_killed_worker_resumes_to_the_same_weights(single, tmp_path):
    """SIGKILL one worker in epoch 2; the cluster, restarted with --resume, resumes from the
    last checkpoint (epoch boundaries: the stream's state is reset each epoch) and ends
    with the uninterrupted run's weights."""
    extra = ["--epochs", 3, "--max-steps-per-epoch", 24]
    procs = _start_workers(tmp_path, extra)
    deadline = time.monotonic() + 240
    while _epochs_done(tmp_path / "w1") < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    procs[1].send_signal(signal.SIGKILL)  # mid-epoch (2 of 3, or 3 on a slow poll)
    done = _epochs_done(tmp_path / "w1")
    while _epochs_done(tmp_path / "w0") < done and time.monotonic() < deadline:
        time.sleep(0.02)  # worker 0 checkpoints the epoch both finished
    time.sleep(0.5)
    procs[0].kill()  # blocked in a collective with the dead worker
    for p in procs:
        p.wait(timeout=60)
    assert 1 <= done < 3
    assert [_epochs_done(tmp_path / f"w{i}") for i in range(2)] == [done, done]
    _finish(_start_workers(tmp_path, [*extra, "--resume"]))
    for index in range(2):
        _same_run(tmp_path / f"w{index}", single)


#: 3 epochs of 5 of the 13 batches: all of pass 0 (the padded batch included), then pass 1
S2S_STEPS = ["--steps-per-epoch", 5, "--epochs", 3]


@pytest.fixture(scope="module")
def single_seq2seq(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("single-s2s") / "run"
    _train(run_dir, *S2S_STEPS, task="seq2seq")
    return run_dir


@pytest.mark.slow  # fast version: test_mirrored_on_two_logical_cpus_equals_one_device (LM)
def test_seq2seq_mirrored_and_resumed_mid_pass_equals_one_device(single_seq2seq, tmp_path):
    """Each replica trains on its share of every batch (the 3-pair one padded); stopped
    after 5 of the 13 batches and resumed mid-pass on 2 replicas, the run has one
    device's gradients, validation losses and final weights."""
    run_dir = tmp_path / "mirrored"
    strategy = ["--strategy", "mirrored", "--devices", 2, "--steps-per-epoch", 5]
    _train(run_dir, *strategy, "--epochs", 1, task="seq2seq")
    _train(run_dir, *strategy, "--epochs", 3, "--resume", task="seq2seq")
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["strategy"], config["replicas"]) == ("mirrored", 2)
    _same_run(run_dir, single_seq2seq, columns=S2S_EXACT)


@pytest.mark.slow  # the mirrored test above is its fast version
def test_seq2seq_two_workers_equal_one_device(single_seq2seq, tmp_path):
    _finish(_start_workers(tmp_path, S2S_STEPS, task="seq2seq"))
    for index in range(2):
        _same_run(tmp_path / f"w{index}", single_seq2seq, columns=S2S_EXACT)
