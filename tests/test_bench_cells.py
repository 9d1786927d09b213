"""keras-seq bench cells: the benchmark function and CLI at tiny sizes (a few seconds)."""

import argparse
import json

import pytest

from keras_seq.benchmarks.cells import format_report, run_benchmark
from keras_seq.commands import bench_cells

TINY = dict(vocab=20, embed=4, units=4, seq_len=3, batch=2, steps=2, repeats=1, warmup=1)


def test_run_benchmark_structure():
    report = run_benchmark(cells=("simple_rnn", "lstm"), head="none", progress=False, **TINY)
    assert report["config"]["units"] == 4 and report["config"]["head"] == "none"
    assert [row["cell"] for row in report["results"]] == ["simple_rnn", "lstm"]
    for row in report["results"]:
        assert row["keras_seq_tokens_per_s"] > 0 and row["builtin_tokens_per_s"] > 0
        assert row["best_ratio"] == pytest.approx(
            row["keras_seq_tokens_per_s"] / row["builtin_tokens_per_s"]
        )
        assert len(row["keras_seq_seconds"]) == 1
        assert row["ratio"] == pytest.approx(row["best_ratio"])  # one run: best = median
    # Recomputed from the raw run times: tokens/s of the best run, the paired ratio
    # (built-in time / keras-seq time of the same run) and speeds relative to SimpleRNN.
    tokens = TINY["steps"] * TINY["batch"] * TINY["seq_len"]
    speed = {}
    for row in report["results"]:
        for impl in ("keras_seq", "builtin"):
            seconds = row[f"{impl}_seconds"][0]
            speed[impl, row["cell"]] = row[f"{impl}_tokens_per_s"]
            assert row[f"{impl}_tokens_per_s"] == pytest.approx(tokens / seconds, rel=1e-3)
        paired = row["builtin_seconds"][0] / row["keras_seq_seconds"][0]
        assert row["paired_ratios"][0] == pytest.approx(paired, rel=1e-3, abs=1e-3)
    for impl in ("keras_seq", "builtin"):
        for cell in ("simple_rnn", "lstm"):
            assert report["relative_speed"][impl][cell] == pytest.approx(
                speed[impl, cell] / speed[impl, "simple_rnn"])
    # Parameters of one layer with 4 inputs and 4 units, by hand: SimpleRNN 4·4 + 4·4 + 4
    # = 36; GRU (reset_after: two biases) 3·(16 + 16) + 2·12 = 120; LSTM 4·36 = 144.
    params = report["params"][0]
    assert (params["rnn"], params["gru"], params["lstm"]) == (36, 120, 144)  # registry names
    text = format_report(report)
    assert "ours/built-in" in text and "recurrent weights" in text


def test_cli_quick_json(capsys):
    # The `bench` sub-parsers as keras_seq.cli builds them, without the other commands.
    parser = argparse.ArgumentParser()
    bench_cells.register(parser.add_subparsers())
    args = parser.parse_args(["cells", "--quick", "--json", "--cells", "gru"])
    assert args.func(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["cell"] for row in report["results"]] == ["gru"]
    assert report["config"]["steps"] == 2 and report["config"]["head"] == "softmax"


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="steps"):
        run_benchmark(steps=0, progress=False)
    with pytest.raises(ValueError, match="expected some of simple_rnn, gru, lstm"):
        run_benchmark(cells=("transformer",), progress=False)
