import json

import pytest

from keras_seq.benchmarks.lm import format_bench, model_params, run_bench, units_for_budget
from keras_seq.models import RecurrentLM


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_model_params_matches_keras(cell):
    lm = RecurrentLM(30, embed_dim=6, units=7, num_layers=2, cell=cell)
    lm(__import__("numpy").zeros((1, 3), "int32"))
    assert lm.count_params() == model_params(cell, 30, 6, 7, 2, tie=False)


def test_equal_budget_gives_rnn_more_units():
    budget = model_params("lstm", 1000, 64, 64, 2, tie=False)
    units = {c: units_for_budget(c, 1000, 64, 2, budget, tie=False) for c in ("rnn", "gru", "lstm")}
    assert units["lstm"] == 64 and units["rnn"] > units["gru"] > units["lstm"]
    for cell, u in units.items():
        assert model_params(cell, 1000, 64, u, 2, False) <= budget
        assert model_params(cell, 1000, 64, u + 1, 2, False) > budget


def test_bench_smoke(tmp_path):
    out = run_bench(tmp_path, data="python-docs", split_ratio="90/5/5", cells=("rnn",),
                    minutes=0.01, embed_dim=8, num_layers=1, bptt=5, batch_size=4,
                    max_steps_per_epoch=2, kn_order=2, verbose=0, printer=lambda *a: None,
                    variational_dropout=True, embed_dropout=0.1, weight_dropout=0.2,
                    lr_decay=0.5, decay_start=1)
    assert [r["model"] for r in out["rows"]] == ["rnn", "KN2"]
    config = json.loads((tmp_path / "rnn" / "config.json").read_text())
    assert config["weight_dropout"] == 0.2 and config["variational_dropout"] is True
    assert out["rows"][-1]["ppl_vs_kn"] == 1.0
    assert "KN2" in format_bench(out)
    assert (tmp_path / "bench_lm.json").is_file()
