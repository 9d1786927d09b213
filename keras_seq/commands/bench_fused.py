"""``keras-seq bench fused``: the fused TFLite LSTM op against the explicit step and window
graphs, scoring the same tokens, XNNPACK on and off."""

from __future__ import annotations

from keras_seq.commands._common import add_json_arg, number
from keras_seq.ranges import AT_LEAST_1


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fused", help="fused UNIDIRECTIONAL_SEQUENCE_LSTM vs the explicit graph: µs per "
        "scored token, step and window models, XNNPACK on/off")
    p.add_argument("--run-dir", required=True, help="a `keras-seq train lm` LSTM run")
    p.add_argument("--seq-length", type=number(int, AT_LEAST_1),
                   default=32, help="window of the sequence models")
    p.add_argument("--tokens", type=number(int, AT_LEAST_1),
                   default=2000, help="validation tokens scored")
    p.add_argument("--rounds", type=number(int, AT_LEAST_1),
                   default=3, help="rounds, models alternated")
    p.add_argument("--out", default=None, help="keep the exported models here")
    add_json_arg(p)
    p.set_defaults(func=run_fused)


def run_fused(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    import json

    from keras_seq.commands._common import check_run_arg

    check_run_arg(args.run_dir, "lm")
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.fused import format_report, run_fused_benchmark

    for flag, value in (("--seq-length", args.seq_length), ("--tokens", args.tokens),
                        ("--rounds", args.rounds)):
        if value < 1:
            raise ValueError(f"{flag} must be ≥ 1, got {value}")
    report = run_fused_benchmark(args.run_dir, out_dir=args.out, seq_length=args.seq_length,
                                 tokens=args.tokens, rounds=args.rounds,
                                 printer=lambda *a: None if args.json else print(*a))
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
