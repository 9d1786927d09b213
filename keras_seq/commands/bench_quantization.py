"""``keras-seq bench quantization``: post-training quantization against quantization-aware
training (QAT) of one float run: size, perplexity, keyboard metrics and per-token time."""

from __future__ import annotations

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import check_run_arg, number
from keras_seq.ranges import AT_LEAST_1, POSITIVE

OPTIONS = (
    Option("--run-dir", required=True, help="the float `keras-seq train lm` run"),
    Option("--out", required=True,
           help="folder for the QAT runs, the exports and quantization.json / .md"),
    Option("--qat", None, ["int8", "int4"],
           "QAT fine-tunes: int8 (weights and activations), int4 (weights)", nargs="+",
           choices=("int8", "int4")),
    Option("--qat-epochs", number(int, AT_LEAST_1), 1, "epochs of each QAT fine-tune"),
    Option("--qat-lr", number(float, POSITIVE), 5e-4, "learning rate of the QAT fine-tunes"),
    Option("--tokens", number(int, AT_LEAST_1), 1000, "timed tokens per round"),
    Option("--rounds", number(int, AT_LEAST_1), 3, "rounds, models alternated"),
)


def run_quantization(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.quantization import format_report, run_quantization_benchmark

    report = run_quantization_benchmark(
        args.run_dir, args.out, modes=tuple(args.qat), epochs=args.qat_epochs, lr=args.qat_lr,
        tokens=args.tokens, rounds=args.rounds,
        printer=lambda *a: None if args.json else print(*a, flush=True))
    return report, format_report


register = BenchCommand(
    "quantization", "PTQ vs QAT of one float lm run: each variant's size, val PPL, top-1 and "
    "keystroke savings, µs per token (fine-tunes the QAT runs first)", run_quantization,
    OPTIONS, check=lambda args: check_run_arg(args.run_dir, "lm")).register
