"""``keras-seq bench fused``: the fused TFLite LSTM op against the explicit step and window
graphs, scoring the same tokens, XNNPACK on and off."""

from __future__ import annotations

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import check_run_arg, number
from keras_seq.ranges import AT_LEAST_1

OPTIONS = (
    Option("--run-dir", required=True, help="a `keras-seq train lm` LSTM run"),
    Option("--seq-length", number(int, AT_LEAST_1), 32, "window of the sequence models"),
    Option("--tokens", number(int, AT_LEAST_1), 2000, "validation tokens scored"),
    Option("--rounds", number(int, AT_LEAST_1), 3, "rounds, models alternated"),
    Option("--out", help="keep the exported models here"),
)


def run_fused(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.fused import format_report, run_fused_benchmark

    report = run_fused_benchmark(args.run_dir, out_dir=args.out, seq_length=args.seq_length,
                                 tokens=args.tokens, rounds=args.rounds,
                                 printer=lambda *a: None if args.json else print(*a))
    return report, format_report


register = BenchCommand(
    "fused", "fused UNIDIRECTIONAL_SEQUENCE_LSTM vs the explicit graph: µs per scored token, "
    "step and window models, XNNPACK on/off", run_fused, OPTIONS,
    check=lambda args: check_run_arg(args.run_dir, "lm")).register
