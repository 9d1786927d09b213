"""The task protocol (issue 37 part 1): every registered shape provides every protocol
name in the same files, the CLI branches on no kind and no data-set name, and a toy shape
(tests/parity_shape/: one folder) added by one row of the table trains, evaluates,
predicts and exports through ``keras-seq``."""

import importlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from keras_seq.cli import main
from keras_seq.commands import tasks
from keras_seq.tasks import protocol

ROOT = Path(__file__).resolve().parents[1]
FILES = ("config.py", "data.py", "task.py", "shape.py")


@pytest.mark.parametrize("name", list(tasks.SHAPES))
def test_every_registered_shape_provides_every_protocol_name(name):
    shape = tasks.shapes()[name]
    assert shape.missing() == []
    folder = ROOT / "keras_seq" / "tasks" / name
    assert [f for f in FILES if not (folder / f).is_file()] == []
    module = shape.task_module()
    assert module.TASK.name == name and module.TASK.config_cls is shape.config_cls
    data = importlib.import_module(f"keras_seq.tasks.{name}.data")
    assert callable(data.task_data)


def test_a_missing_protocol_name_is_named(monkeypatch):
    shape = tasks.shapes()["tag"]
    monkeypatch.delattr(shape.task_module(), "eval_lines")
    monkeypatch.delattr(shape.task_module(), "predict")
    assert shape.missing() == ["keras_seq.tasks.tag.task.eval_lines",
                               "keras_seq.tasks.tag.task.predict"]
    broken = protocol.TaskShape("x", object, "", "", "keras_seq.tasks.tag.task",
                                exports=(protocol.Command("y", "", run="nowhere"),))
    assert "export y: nowhere" in broken.missing()


def test_a_row_must_name_its_shape(monkeypatch):
    monkeypatch.setitem(tasks.SHAPES, "tagger", "keras_seq.tasks.tag.shape")
    with pytest.raises(ValueError, match="row 'tagger' of SHAPES names .*'tag'"):
        tasks.shapes()
    with pytest.raises(TypeError, match="expected a TaskShape"):
        protocol.load_shape("keras_seq.tasks.protocol")


def test_the_commands_branch_on_no_kind_and_no_data_set():
    """The issue's done-when: `grep -rn 'kind ==\\|startswith("restore' keras_seq/commands`
    finds nothing."""
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for path in sorted((ROOT / "keras_seq" / "commands").rglob("*.py"))
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r'kind ==|startswith\("restore', line)]
    assert found == []


def test_a_toy_shape_added_by_one_row_trains_evaluates_predicts_and_exports(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(tasks.SHAPES, "parity", "parity_shape.shape")  # the one row
    run = str(tmp_path / "run")
    assert main(["train", "parity", "--run-dir", run, "--epochs", "2", "--lr", "0.01",
                 "--train-size", "256", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "val          accuracy" in out and "trained      2 epoch(s)" in out
    assert json.loads((tmp_path / "run" / "config.json").read_text())["kind"] == "parity"

    assert main(["eval", "parity", "--run-dir", run]) == 0
    assert re.match(r"test \(128 sequences\): accuracy \d+\.\d%", capsys.readouterr().out)
    assert main(["eval", "parity", "--run-dir", run, "--split", "val", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["split"] == "val" and 0 <= result["accuracy"] <= 1

    assert main(["predict", "--run-dir", run, "--json", "0110", "1110"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["text"] for r in rows] == ["0110", "1110"]
    assert all(r["parity"] in (0, 1) for r in rows)

    assert main(["export", "parity", "--run-dir", run, "--out", str(tmp_path / "x")]) == 0
    weights = np.load(tmp_path / "x" / "weights.npz")
    assert len(weights.files) == 5  # GRU kernel, recurrent kernel, bias; Dense kernel, bias

    # the other shapes' commands refuse the run, naming the commands that take it
    assert main(["translate", "--run-dir", run, "01"]) == 2
    assert "seq2seq" in capsys.readouterr().err
    assert main(["generate", "--run-dir", run]) == 2
    err = capsys.readouterr().err
    assert "generate takes lm or conditioned runs" in err and "predict for" in err
    assert "parity" in err
