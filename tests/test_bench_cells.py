"""keras-seq bench cells: the benchmark function and CLI at tiny sizes (a few seconds)."""

import argparse
import json

import pytest

from keras_seq.benchmarks.cells import CELLS, format_report, run_benchmark
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
    assert report["relative_speed"]["keras_seq"]["simple_rnn"] == pytest.approx(1.0)
    assert report["params"][0]["lstm"] == 4 * report["params"][0]["simple_rnn"]
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
    with pytest.raises(ValueError, match="cells"):
        run_benchmark(cells=("transformer",), progress=False)
    assert set(CELLS) == {"simple_rnn", "gru", "lstm"}
