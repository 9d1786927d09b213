"""``keras-seq bench streaming``: per-token latency of Keras, tf.function, SavedModel and
TFLite variants (1 and 2 threads), with size and PPL change."""

from __future__ import annotations

from keras_seq.commands._common import add_json_arg, number
from keras_seq.extras import pyplot
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "streaming", help="per-token streaming latency p50/p95/p99 across runtimes and "
        "TFLite variants, tokens/s, size, PPL delta")
    p.add_argument("--run-dir", required=True, help="the lm run whose model is measured")
    p.add_argument("--tokens", type=number(int, AT_LEAST_1),
                   default=1000, help="timed tokens per runtime")
    p.add_argument("--warmup", type=number(int, NON_NEGATIVE),
                   default=50, help="untimed tokens per runtime first")
    p.add_argument("--threads", type=number(int, AT_LEAST_1), nargs="+", default=[1, 2],
                   help="interpreter thread counts measured")
    p.add_argument("--export-dir", default=None,
                   help="reuse a `keras-seq export tflite` folder (else export to a temp dir)")
    p.add_argument("--saved-model", default=None, help="reuse an exported SavedModel")
    p.add_argument("--skip", nargs="*", default=[],
                   choices=("keras-eager", "tf-function", "saved-model"),
                   help="runtimes left out (default: none)")
    p.add_argument("--plot", default=None, help="write a PNG bar chart here")
    add_json_arg(p)
    p.set_defaults(func=run_streaming)


def run_streaming(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    import json

    from keras_seq.commands._common import check_run_arg

    check_run_arg(args.run_dir, "lm")
    if args.plot:
        pyplot("the streaming plot (--plot)")  # said before the benchmark, not after it
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.export.streaming import format_report, plot_report, run_streaming_benchmark

    if args.tokens < 1:
        raise ValueError(f"--tokens must be ≥ 1, got {args.tokens}")
    report = run_streaming_benchmark(args.run_dir, tokens=args.tokens, warmup=args.warmup,
                                     threads=tuple(args.threads), export_dir=args.export_dir,
                                     saved_model_dir=args.saved_model, skip=tuple(args.skip))
    if args.plot:
        plot_report(report, args.plot)
        report["plot"] = args.plot
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
