import math

import numpy as np
import pytest

from keras_seq.analysis import memory as M
from keras_seq.data.probes import make_task


@pytest.mark.parametrize(
    "solved, effective, largest",
    [
        ({5: True, 10: True, 20: True, 40: False, 80: False}, 20, 20),
        ({5: True, 10: True, 20: False, 40: True}, 10, 40),  # a fluke past a failure
        ({5: False, 10: True}, 0, 10),
        ({5: False, 10: False}, 0, 0),
        ({320: True, 5: True, 160: True, 10: True}, 320, 320),  # order of keys is irrelevant
        ({5: True, 10: True, 20: False, 40: None, 80: None}, 10, 10),  # skipped = not solved
    ],
)
def test_effective_memory_length_on_synthetic_tables(solved, effective, largest):
    assert M.effective_memory_length(solved) == {"effective": effective,
                                                 "largest_solved": largest}


def test_thresholds_from_accuracy_tables():
    # Synthetic accuracy table of one cell on distant negation.
    table = {5: 0.99, 10: 0.96, 20: 0.951, 40: 0.949, 80: 0.5}
    solved = {d: M.is_solved("negation", acc, 0.1, math.log(2)) for d, acc in table.items()}
    assert solved == {5: True, 10: True, 20: True, 40: False, 80: False}
    assert M.effective_memory_length(solved)["effective"] == 20
    # Adding: MSE ≤ 10 % of 1/6.
    assert M.is_solved("adding", None, 0.0166, 1 / 6)
    assert not M.is_solved("adding", None, 0.0168, 1 / 6)
    assert not M.is_solved("adding", None, float("nan"), 1 / 6)
    assert M.is_solved("copy", 0.95, 1.0, 0.5) and not M.is_solved("copy", 0.94, 0.0, 0.5)


def test_score_matches_the_baseline_for_the_memoryless_predictor():
    task = make_task("copy", 7)
    x, y = task.generate(64, seed=3)

    class Memoryless:
        def predict(self, x, batch_size=None, verbose=0):
            logits = np.full((len(x), task.length, 10), -1e9)
            logits[:, :-10, 0] = 0.0
            logits[:, -10:, 1:9] = 0.0
            return logits

    s = M.score(Memoryless(), task, x, y)
    assert s["loss"] == pytest.approx(task.baseline_loss, rel=1e-6)


@pytest.mark.parametrize("cell, task_name", [
    ("rnn", "adding"), ("gru", "copy"), ("lstm", "negation"),
    ("attn-gru", "adding"), ("attn-gru", "copy"), ("attn-gru", "negation"),
])
def test_models_build_and_train_a_step(cell, task_name):
    task = make_task(task_name, 3)
    row = M.train_on_task(cell, task, steps=1, batch=4, units=4, eval_every=0, num_eval=8)
    assert row["steps"] == 1 and row["cell"] == cell
    assert math.isfinite(row["test_loss"])
    assert isinstance(row["solved"], bool)


def test_sweep_skips_after_failures_and_plots(tmp_path):
    result = M.memory_sweep(tasks=("negation",), cells=("rnn",), distances=(3, 4, 6),
                            steps=1, batch=4, units=4, eval_every=0, num_eval=8,
                            stop_after_failures=1, progress=False)
    rows = result["rows"]
    assert [r["distance"] for r in rows] == [3, 4, 6]
    assert rows[0]["solved"] is False  # one step of training does not solve it
    assert rows[1]["skipped"] == rows[2]["skipped"] == "failed at shorter distances"
    assert result["memory"]["negation"]["rnn"] == {"effective": 0, "largest_solved": 0,
                                                   "truncated": False}
    table = M.memory_table(result)
    assert table[0]["cell"] == "SimpleRNN" and table[0]["seed 004 claim"] == 10
    M.plot_memory(result, str(tmp_path / "m.png"))
    assert (tmp_path / "m.png").stat().st_size > 1000


def test_sweep_time_budget_marks_lower_bounds():
    result = M.memory_sweep(tasks=("negation",), cells=("rnn",), distances=(3, 4),
                            steps=1, batch=4, units=4, eval_every=0, num_eval=8,
                            stop_after_failures=None, max_minutes=0.0, progress=False)
    assert [r["skipped"] for r in result["rows"]] == ["time budget"] * 2
    assert result["memory"]["negation"]["rnn"]["truncated"] is True
    assert M.memory_table(result)[0]["negation"] == "≥ 0 (time budget)"
