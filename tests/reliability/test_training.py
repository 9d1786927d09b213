"""Runs survive kill -9, damaged checkpoints and full or read-only disks (issue 17).

The quick campaign (real `keras-seq train` subprocesses killed with SIGKILL, then
--resume) runs once; the commit protocol's pieces are tested in-process."""

import errno
import json
import os

import keras
import numpy as np
import pytest

from keras_seq import atomic, runs
from keras_seq.errors import KerasSeqError, RunWriteError
from keras_seq.training import checkpoints
from keras_seq.training.callbacks import MetricsCSV


@pytest.mark.slow  # fast versions: the commit protocol's pieces, tested in process below
def test_quick_campaign_loses_nothing(tmp_path):
    from tools.reliability import training

    rows = training.run("quick", tmp_path, print)
    assert len(rows) >= 3  # a kill, a damaged checkpoint, the disk (one row where not run)
    for row in rows:
        assert row.ok, row


@pytest.mark.slow  # 34-55 s (three TensorFlow processes); fast versions: the commit pieces
def test_a_kill_between_a_checkpoint_and_its_commit_resumes_to_the_reference(tmp_path):
    """The quick campaign's kill trial: `train lm` killed with SIGKILL after its epoch-2
    state.json is written but before it is renamed, then --resume: the reference's
    weights, every epoch once, no temporary file. The reference trains in this process
    (the same command), the killed run and its resume in subprocesses."""
    from keras_seq.cli import main
    from tools.reliability import training

    reference = tmp_path / "lm-reference"
    assert main(training.command_args("lm", reference)) == 0
    what, problems = training.kill_trial("lm", tmp_path, reference,
                                         "state.json:2:before-rename", 0.0)
    assert (what, problems) == ("killed", [])


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile("adam", "mse")
    return model


def _commit(model, run_dir, epochs, val_loss=None):
    return checkpoints.commit_epoch(model, run_dir, epochs, val_loss, val_loss is not None,
                                    {"rng_states": [[epochs, 0]], "last_logs": {"loss": 1.0}})


def test_each_commit_names_its_checkpoint_and_keeps_the_previous(tmp_path):
    model = _model()
    for epoch in (1, 2, 3):
        state = _commit(model, tmp_path, epoch)
    assert state["checkpoint"] == "epoch-0003.keras"
    assert state["previous"]["checkpoint"] == "epoch-0002.keras"
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["epoch-0002.keras", "epoch-0003.keras", "last.keras"]
    assert os.path.samefile(tmp_path / runs.LAST, tmp_path / "checkpoints/epoch-0003.keras")
    point = checkpoints.resume_point(tmp_path)
    assert (point.epochs_done, point.rng_states, point.notes) == (3, [[3, 0]], [])


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_a_damaged_checkpoint_is_named_and_the_previous_one_used(tmp_path, damage):
    model = _model()
    for epoch in (1, 2):
        _commit(model, tmp_path, epoch)
    newest = tmp_path / "checkpoints" / "epoch-0002.keras"
    data = bytearray(newest.read_bytes())
    if damage == "truncate":
        newest.write_bytes(data[:100])
    elif damage == "flip":
        data[len(data) // 2] ^= 1
        newest.write_bytes(bytes(data))
    else:
        newest.unlink()
    point = checkpoints.resume_point(tmp_path)
    assert point.epochs_done == 1 and point.checkpoint.name == "epoch-0001.keras"
    assert point.rng_states == [[1, 0]]
    assert str(newest) in point.notes[0]
    checkpoints.point_last_at(tmp_path, point)
    assert os.path.samefile(tmp_path / runs.LAST, point.checkpoint)
    keras.saving.load_model(point.checkpoint)  # the one used is whole


def test_no_intact_checkpoint_left_is_refused_with_the_reason(tmp_path):
    _commit(_model(), tmp_path, 1)
    (tmp_path / "checkpoints" / "epoch-0001.keras").write_bytes(b"PK")
    with pytest.raises(KerasSeqError, match="no intact checkpoint left.*truncated"):
        checkpoints.resume_point(tmp_path)


def test_a_garbled_state_falls_back_to_the_newest_readable_checkpoint(tmp_path):
    model = _model()
    for epoch in (1, 2):
        _commit(model, tmp_path, epoch)
    (tmp_path / "state.json").write_text('{"epochs_done": 2, "chec')
    (tmp_path / "checkpoints" / "epoch-0002.keras").write_bytes(b"not a zip")
    point = checkpoints.resume_point(tmp_path)
    assert point.epochs_done == 1 and point.rng_states is None
    assert "state.json is damaged" in point.notes[0] and "RNG" in point.notes[0]
    assert checkpoints.resume_point(tmp_path / "nothing-here") is None


def test_metrics_csv_keeps_committed_epochs_once_and_puts_back_a_lost_row(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,loss\n0,3.0\n1,2.5\n1,2.4\n2,2.0\n3,1.")  # 2 uncommitted, 3 cut
    columns, rows, dropped = checkpoints.committed_rows(path, 2)
    assert columns == ["epoch", "loss"] and dropped == 3
    assert [(r["epoch"], r["loss"]) for r in rows] == [("0", "3.0"), ("1", "2.4")]
    csv = MetricsCSV(path, epochs_done=3, last_logs={"loss": 2.0})  # epoch 2's row lost
    csv.on_train_begin()
    assert path.read_text() == "epoch,loss\n0,3.0\n1,2.4\n2,2.0\n"
    csv.on_epoch_end(3, {"loss": np.float32(1.5)})
    assert path.read_text().endswith("3,1.5\n")


def test_a_full_disk_names_the_file_and_changes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    atomic.write_json_atomic(path, {"epochs_done": 1})
    real_open = open

    def full_disk(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if "w" in mode:
            def write(_):
                raise OSError(errno.ENOSPC, "No space left on device")
            handle.write = write
        return handle

    monkeypatch.setattr("builtins.open", full_disk)
    with pytest.raises(RunWriteError, match=r"cannot write .*state.json: No space left"):
        atomic.write_json_atomic(path, {"epochs_done": 2})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"epochs_done": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temp file


def test_the_kill_hook_fires_only_on_the_named_write(monkeypatch):
    monkeypatch.setenv(atomic.KILL_AT_ENV, "state.json:2:before-rename")
    monkeypatch.setattr(atomic, "_writes_seen", {})
    assert atomic.crash_phase("a/config.json") is None
    assert atomic.crash_phase("a/state.json") is None
    assert atomic.crash_phase("b/state.json") == "before-rename"
    assert atomic.crash_phase("a/state.json") is None
    monkeypatch.delenv(atomic.KILL_AT_ENV)
    assert atomic.crash_phase("a/state.json") is None
