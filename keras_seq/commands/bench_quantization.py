"""``keras-seq bench quantization``: post-training quantization against quantization-aware
training (QAT) of one float run: size, perplexity, keyboard metrics and per-token time."""

from __future__ import annotations

from keras_seq.commands._common import add_json_arg, check_run_arg, number
from keras_seq.ranges import AT_LEAST_1, POSITIVE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "quantization", help="PTQ vs QAT of one float lm run: each variant's size, val PPL, "
        "top-1 and keystroke savings, µs per token (fine-tunes the QAT runs first)")
    p.add_argument("--run-dir", required=True, help="the float `keras-seq train lm` run")
    p.add_argument("--out", required=True,
                   help="folder for the QAT runs, the exports and quantization.json / .md")
    p.add_argument("--qat", nargs="+", default=["int8", "int4"], choices=("int8", "int4"),
                   help="QAT fine-tunes: int8 (weights and activations), int4 (weights)")
    p.add_argument("--qat-epochs", type=number(int, AT_LEAST_1), default=1,
                   help="epochs of each QAT fine-tune")
    p.add_argument("--qat-lr", type=number(float, POSITIVE), default=5e-4,
                   help="learning rate of the QAT fine-tunes")
    p.add_argument("--tokens", type=number(int, AT_LEAST_1), default=1000,
                   help="timed tokens per round")
    p.add_argument("--rounds", type=number(int, AT_LEAST_1), default=3,
                   help="rounds, models alternated")
    add_json_arg(p)
    p.set_defaults(func=run_quantization)


def run_quantization(args) -> int:
    check_run_arg(args.run_dir, "lm")
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.quantization import print_report, run_quantization_benchmark

    report = run_quantization_benchmark(
        args.run_dir, args.out, modes=tuple(args.qat), epochs=args.qat_epochs, lr=args.qat_lr,
        tokens=args.tokens, rounds=args.rounds,
        printer=lambda *a: None if args.json else print(*a, flush=True))
    print_report(report, args.json)
    return 0
