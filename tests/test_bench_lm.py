import json

import pytest

from keras_seq.benchmarks.lm import (
    VERSUS_KN,
    format_bench,
    model_params,
    run_bench,
    units_for_budget,
)
from keras_seq.cli import main
from keras_seq.keyboard import LABELS, METRICS
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


def test_bench_smoke(tmp_path, capsys):
    out = run_bench(tmp_path, data="python-docs", split_ratio="90/5/5", cells=("rnn",),
                    minutes=0.01, embed_dim=8, num_layers=1, bptt=5, batch_size=4,
                    max_steps_per_epoch=2, kn_order=2, verbose=0, printer=lambda *a: None,
                    variational_dropout=True, embed_dropout=0.1, weight_dropout=0.2,
                    lr_decay=0.5, decay_start=1)
    assert [r["model"] for r in out["rows"]] == ["rnn", "KN2"]
    config = json.loads((tmp_path / "rnn" / "config.json").read_text())
    assert config["weight_dropout"] == 0.2 and config["variational_dropout"] is True
    assert "KN2" in format_bench(out)
    assert (tmp_path / "bench_lm.json").is_file()
    # Re-measure both rows independently, through the CLI: the KN row must be what
    # `keras-seq ngram train/eval` gives at the same order on the same tokens, the neural
    # row what `keras-seq eval lm` gives on its run directory, and × KN their ratio.
    arpa = str(tmp_path / "kn2.arpa")
    assert main(["ngram", "train", "--data", "python-docs", "--split-ratio", "90/5/5",
                 "--min-count", "2", "--order", "2", "--out", arpa]) == 0
    capsys.readouterr()
    assert main(["ngram", "eval", "--model", arpa, "--data", "python-docs", "--split", "val",
                 "--json"]) == 0
    kn = json.loads(capsys.readouterr().out)
    assert main(["eval", "lm", "--run-dir", str(tmp_path / "rnn"), "--split", "val",
                 "--json"]) == 0
    rnn = json.loads(capsys.readouterr().out)
    for key in ("tokenizer", "split", "corpus_sha256"):
        assert kn["fingerprint"][key] == rnn["fingerprint"][key], key
    assert kn["fingerprint"]["split_spec"] == rnn["fingerprint"]["split_ratio"] == "90/5/5"
    # The same tokens, except that the LM's stream has no context for its very first token
    # and does not score it, while KN scores it after <s>.
    assert kn["tokens"] == rnn["tokens"] + 1
    rnn_row, kn_row = out["rows"]
    # (the CLI reads the model back from ARPA text, whose numbers are rounded)
    assert kn_row["val_ppl"] == pytest.approx(kn["ppl"], rel=1e-6)
    assert kn_row["val_nats"] == pytest.approx(kn["nats"], rel=1e-6)
    assert rnn_row["val_ppl"] == pytest.approx(rnn["ppl"], rel=1e-6)
    assert rnn_row["ppl_vs_kn"] == pytest.approx(rnn["ppl"] / kn["ppl"], rel=1e-6)
    assert kn_row["ppl_vs_kn"] == pytest.approx(1.0)
    # The keyboard table: each row what `keras-seq compare` rates on the same positions, and
    # the neural row's difference from KN its compare difference, interval included.
    assert main(["compare", "--runs", str(tmp_path / "rnn"), "--ngram", arpa, "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)
    for row, shown in zip(out["rows"], compared["rows"]):
        for metric in METRICS:
            assert 100 * row["keyboard"][metric] == pytest.approx(shown[LABELS[metric]]), metric
    (difference,) = compared["keyboard_differences"]
    for metric in VERSUS_KN:
        d = rnn_row["vs_kn"][metric]
        assert difference[LABELS[metric]] == (f"{100 * d['diff']:+.2f} ({100 * d['low']:+.2f} "
                                              f"to {100 * d['high']:+.2f})")
    table = format_bench(out)
    assert "keyboard, %" in table and "top-1 in-vocab − KN" in table
    assert "keyboard" not in run_bench(tmp_path / "off", data="python-docs", cells=("rnn",),
                                       minutes=0.01, embed_dim=8, num_layers=1, bptt=5,
                                       batch_size=4, max_steps_per_epoch=1, kn_order=2,
                                       suggestions=None, verbose=0,
                                       printer=lambda *a: None)["rows"][0]
