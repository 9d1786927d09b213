"""``keras-seq bench web``: per-token and per-keystroke latency of every step variant in
headless Chromium (LiteRT.js Wasm, 1 and more threads, WebGPU where offered) beside native
LiteRT."""

from __future__ import annotations

import sys
from pathlib import Path

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import number
from keras_seq.data.corpus import decode_text
from keras_seq.errors import KerasSeqError
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE

OPTIONS = (
    Option("--tflite-dir", required=True,
           help="a `keras-seq export tflite` folder (its step_*.tflite are measured)"),
    Option("--steps", number(int, AT_LEAST_1), 200, "timed tokens per cell and round"),
    Option("--warmup", number(int, NON_NEGATIVE), 30, "untimed tokens first"),
    Option("--rounds", number(int, AT_LEAST_1), 3, "rounds (variants alternated)"),
    Option("--threads", number(int, AT_LEAST_1), [1, 2],
           "thread counts, in the browser and natively", nargs="+"),
    Option("--models", nargs="+", metavar="NAME",
           help="only these step models (file stems, e.g. step_dynamic)"),
    Option("--webgpu", None, True, "also try WebGPU"),
    Option("--text", metavar="FILE",
           help="a UTF-8 text the keystroke path types word by word (default: the bundled "
                "tinyshakespeare's validation split)"),
    Option("--screenshot", metavar="PNG",
           help="also save the page (default model) after typing a prefix"),
)


def check_text(args) -> None:
    if args.text and not Path(args.text).is_file():
        raise KerasSeqError(f"--text {args.text}: no such file; give a UTF-8 text to type")


def run_web(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.web import format_web_report, plot_web_report, run_web_benchmark

    text = None
    if args.text:
        text, _, _ = decode_text(Path(args.text).read_bytes(), str(Path(args.text)))
    report = run_web_benchmark(args.tflite_dir, steps=args.steps, warmup=args.warmup,
                               rounds=args.rounds, threads=tuple(args.threads),
                               webgpu=args.webgpu, names=args.models,
                               screenshot=args.screenshot, text=text,
                               printer=lambda m: print(m, file=sys.stderr, flush=True))
    if args.plot:
        plot_web_report(report, args.plot)
    return report, format_web_report


register = BenchCommand(
    "web", "per-token and keystroke-path latency of each step variant in a browser "
    "(LiteRT.js) vs native LiteRT, and which variants LiteRT.js cannot run", run_web, OPTIONS,
    check=check_text, plot=True).register
