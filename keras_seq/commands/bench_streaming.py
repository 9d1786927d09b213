"""``keras-seq bench streaming``: per-token latency of Keras, tf.function, SavedModel and
TFLite variants (1 and 2 threads), with size and PPL change."""

from __future__ import annotations

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import check_run_arg, number
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE

OPTIONS = (
    Option("--run-dir", required=True, help="the lm run whose model is measured"),
    Option("--tokens", number(int, AT_LEAST_1), 1000, "timed tokens per runtime"),
    Option("--warmup", number(int, NON_NEGATIVE), 50, "untimed tokens per runtime first"),
    Option("--threads", number(int, AT_LEAST_1), [1, 2], "interpreter thread counts measured",
           nargs="+"),
    Option("--export-dir",
           help="reuse a `keras-seq export tflite` folder (else export to a temp dir)"),
    Option("--saved-model", help="reuse an exported SavedModel"),
    Option("--skip", None, [], "runtimes left out (default: none)", nargs="*",
           choices=("keras-eager", "tf-function", "saved-model")),
)


def run_streaming(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.export.streaming import format_report, plot_report, run_streaming_benchmark

    report = run_streaming_benchmark(args.run_dir, tokens=args.tokens, warmup=args.warmup,
                                     threads=tuple(args.threads), export_dir=args.export_dir,
                                     saved_model_dir=args.saved_model, skip=tuple(args.skip))
    if args.plot:
        plot_report(report, args.plot)
    return report, format_report


register = BenchCommand(
    "streaming", "per-token streaming latency p50/p95/p99 across runtimes and TFLite "
    "variants, tokens/s, size, PPL delta", run_streaming, OPTIONS,
    check=lambda args: check_run_arg(args.run_dir, "lm"), plot=True).register
