"""``keras-seq pipeline``: train an LSTM LM and a KN n-gram, compare, export SavedModel and
TFLite variants, benchmark streaming, and leave a demo model ready."""

from __future__ import annotations

from keras_seq.commands._common import add_data_args


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pipeline", help="end to end in ~10 min on CPU: LSTM vs n-gram PPL, SavedModel + "
        "TFLite export, streaming benchmark, demo model")
    add_data_args(p)
    p.add_argument("--out", required=True, help="output folder (run/, tflite/, demo/, …)")
    p.add_argument("--minutes", type=float, default=10.0,
                   help="overall time budget; training gets ~45%% of it (default 10)")
    p.add_argument("--tokens", type=int, default=1000,
                   help="timed tokens per runtime in the streaming benchmark")
    p.set_defaults(func=cmd_pipeline)


def cmd_pipeline(args) -> int:
    from keras_seq.pipeline import run_pipeline

    if args.minutes <= 0:
        raise ValueError(f"--minutes must be > 0, got {args.minutes}")
    run_pipeline(args.data, args.out, minutes=args.minutes, bench_tokens=args.tokens,
                 data_dir=args.data_dir, split_ratio=args.split_ratio)
    return 0
