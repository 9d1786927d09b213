"""``keras-seq bench web``: per-token and per-keystroke latency of every step variant in
headless Chromium (LiteRT.js Wasm, 1 and more threads, WebGPU where offered) beside native
LiteRT."""

from __future__ import annotations

import argparse
from pathlib import Path

from keras_seq.commands._common import add_json_arg, number
from keras_seq.data.corpus import decode_text
from keras_seq.errors import KerasSeqError
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "web", help="per-token and keystroke-path latency of each step variant in a browser "
        "(LiteRT.js) vs native LiteRT, and which variants LiteRT.js cannot run")
    p.add_argument("--tflite-dir", required=True,
                   help="a `keras-seq export tflite` folder (its step_*.tflite are measured)")
    p.add_argument("--steps", type=number(int, AT_LEAST_1),
                   default=200, help="timed tokens per cell and round")
    p.add_argument("--warmup", type=number(int, NON_NEGATIVE),
                   default=30, help="untimed tokens first")
    p.add_argument("--rounds", type=number(int, AT_LEAST_1),
                   default=3, help="rounds (variants alternated)")
    p.add_argument("--threads", type=number(int, AT_LEAST_1), nargs="+", default=[1, 2],
                   help="thread counts, in the browser and natively")
    p.add_argument("--models", nargs="+", default=None, metavar="NAME",
                   help="only these step models (file stems, e.g. step_dynamic)")
    p.add_argument("--webgpu", action=argparse.BooleanOptionalAction, default=True,
                   help="also try WebGPU")
    p.add_argument("--text", default=None, metavar="FILE",
                   help="a UTF-8 text the keystroke path types word by word (default: the "
                   "bundled tinyshakespeare's validation split)")
    p.add_argument("--plot", default=None, help="write a PNG bar chart here")
    p.add_argument("--screenshot", default=None, metavar="PNG",
                   help="also save the page (default model) after typing a prefix")
    add_json_arg(p)
    p.set_defaults(func=run_web)


def run_web(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    import json
    import sys

    from keras_seq.benchmarks.web import format_web_report, plot_web_report, run_web_benchmark

    text = None
    if args.text:
        path = Path(args.text)
        if not path.is_file():
            raise KerasSeqError(f"--text {args.text}: no such file; give a UTF-8 text to type")
        text, _, _ = decode_text(path.read_bytes(), str(path))
    report = run_web_benchmark(args.tflite_dir, steps=args.steps, warmup=args.warmup,
                               rounds=args.rounds, threads=tuple(args.threads),
                               webgpu=args.webgpu, names=args.models,
                               screenshot=args.screenshot, text=text,
                               printer=lambda m: print(m, file=sys.stderr, flush=True))
    if args.plot:
        plot_web_report(report, args.plot)
        report["plot"] = args.plot
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_web_report(report))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
