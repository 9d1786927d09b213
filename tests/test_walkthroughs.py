"""docs/architecture.md's walk-throughs, run as written: each ```python block after a
``<!-- walkthrough: NAME -->`` marker is executed in order in one namespace per
walk-through, then what the page promises is checked (a toy task shape trains and
resumes through the shared trainer; a new cell's fast loop equals Keras's generic loop,
and its model saves and loads)."""

import json
import re
from pathlib import Path

import numpy as np

PAGE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
BLOCK = re.compile(r"<!-- walkthrough: ([\w-]+) -->\s*```python\n(.*?)```", re.S)


def blocks() -> dict:
    found = dict(BLOCK.findall(PAGE.read_text(encoding="utf-8")))
    assert set(found) == {"task", "task-train", "task-cli", "cell", "cell-check", "cell-row"}, \
        sorted(found)
    return found


def run(names, **given) -> dict:
    namespace = {"__name__": "walkthrough", **given}
    for name in names:
        exec(compile(blocks()[name], f"{PAGE.name}:{name}", "exec"), namespace)
    return namespace


def test_adding_a_task_shape(tmp_path):
    run_dir = tmp_path / "parity"
    ns = run(["task", "task-train"], run_dir=run_dir)
    assert ns["results"]["epochs_done"] == 2 and ns["more"]["epochs_done"] == 3
    assert 0.0 <= ns["results"]["val_accuracy"] <= 1.0
    assert json.loads((run_dir / "config.json").read_text())["kind"] == "parity"
    for name in ("metrics.csv", "metrics.json", "state.json", "checkpoints/last.keras"):
        assert (run_dir / name).is_file(), name
    problems = ns["ParityConfig"](length=0).problems()
    assert problems == ["length must be ≥ 1 (got 0)"]


def test_adding_a_task_shape_to_the_cli(tmp_path, monkeypatch, capsys):
    """One folder (tests/parity_shape/) and one row: train, eval, predict and export."""
    from keras_seq.commands import tasks

    monkeypatch.setattr(tasks, "SHAPES", dict(tasks.SHAPES))  # the page adds its row here
    run(["task-cli"], run_dir=tmp_path / "parity")
    out = capsys.readouterr().out
    assert "test (128 sequences): accuracy" in out
    assert "\t0110" in out and "\t1011" in out
    assert (tmp_path / "parity-cli" / "export" / "weights.npz").is_file()


def test_adding_a_cell(tmp_path):
    path = tmp_path / "leaky.keras"
    ns = run(["cell", "cell-check"], path=path)
    assert ns["gap"] < 1e-6
    x = ns["x"]
    np.testing.assert_allclose(ns["reloaded"](x), ns["model"](x), atol=1e-6)
    assert type(ns["reloaded"].layers[0]).__name__ == "LeakyRNN"
    config = ns["fast"].get_config()
    assert config["leak"] == 0.3 and config["units"] == 4 and "cell" not in config
    again = ns["LeakyRNN"].from_config(config)
    assert again.cell.leak == 0.3
    # the page's formula, two steps by hand: h_t = (1 − a)·h_{t−1} + a·tanh(x W + h R + b)
    kernel, recurrent, bias = (np.asarray(w) for w in ns["fast"].get_weights())
    h = np.zeros((2, 4))
    for t in range(2):
        h = 0.7 * h + 0.3 * np.tanh(x[:, t] @ kernel + h @ recurrent + bias)
    np.testing.assert_allclose(np.asarray(ns["fast"](x[:, :2]))[:, -1], h, atol=1e-5)


def test_adding_a_cell_row():
    """One row in the registry: the page's leaky RNN trains in a RecurrentLM and is a
    config choice."""
    from keras_seq import cells as registry

    try:
        ns = run(["cell", "cell-row"])
        assert np.isfinite(ns["history"].history["loss"]).all()
        assert type(ns["lm"].rnns[0]).__name__ == "LeakyRNN"
        assert ns["problems"] == []
    finally:
        registry.CELLS.pop("leaky", None)
    assert "leaky" not in registry.cells_for("lm")
