"""``keras-seq bench cells``: training speed of keras-seq's SimpleRNN/GRU/LSTM vs Keras's."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from keras_seq.commands._common import add_json_arg, number
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE

#: what each size flag of `bench cells` sets
SIZES = {"vocab": "vocabulary size of the LM", "embed": "embedding size",
         "units": "recurrent units", "seq_len": "tokens per sequence",
         "batch": "sequences per batch"}


def add_backend_args(p) -> None:
    """``--backend``, ``--device``, ``--mixed-precision``, ``--jit-compile`` (bench cells and
    bench lm): both implementations run under the same settings."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.backends import BACKENDS, DEVICES, PRECISIONS

    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="Keras backend to measure on (default: this process's, i.e. "
                        "$KERAS_BACKEND); another one runs in a worker process")
    p.add_argument("--device", choices=DEVICES, default=None,
                   help="cpu (hides a GPU) or gpu (an error without one); default: wherever "
                        "the backend puts it")
    p.add_argument("--mixed-precision", choices=PRECISIONS, default="off",
                   help="Keras dtype policy for both implementations (default off = float32)")
    p.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=False,
                   help="compile train steps with XLA (torch.compile on PyTorch; JAX always "
                        "compiles)")


def register(subparsers) -> None:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.cells import CELLS, DEFAULTS

    p = subparsers.add_parser(
        "cells",
        help="tokens/s of keras-seq vs built-in SimpleRNN/GRU/LSTM, relative speeds, params",
    )
    p.add_argument("--steps", type=number(int, AT_LEAST_1),
                   default=DEFAULTS["steps"], help="timed steps per run")
    p.add_argument(
        "--repeats",
        type=number(int, AT_LEAST_1),
        default=DEFAULTS["repeats"],
        help="runs per (cell, implementation), alternating; the best run is reported",
    )
    p.add_argument(
        "--chunk", type=number(int, AT_LEAST_1), default=10,
        help="steps per turn when interleaving (default 10)"
    )
    p.add_argument("--warmup", type=number(int, NON_NEGATIVE),
                   default=DEFAULTS["warmup"], help="untimed steps")
    p.add_argument("--cells", nargs="+", default=list(CELLS), choices=CELLS, help="cells measured")
    p.add_argument(
        "--head",
        choices=("softmax", "none"),
        default="softmax",
        help="softmax: full LM with a vocab-sized output layer; "
        "none: time the recurrent layer alone (loss = mean of its outputs)",
    )
    for name in ("vocab", "embed", "units", "seq_len", "batch"):
        p.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=number(int, AT_LEAST_1),
            default=DEFAULTS[name],
            help=SIZES[name],
        )
    add_backend_args(p)
    p.add_argument("--quick", action=argparse.BooleanOptionalAction, default=False,
                   help="smoke test: 2 steps, 1 repeat, tiny sizes")
    add_json_arg(p)
    p.set_defaults(func=run_cells)


def run_cells(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks import backends
    from keras_seq.benchmarks.cells import format_report, run_benchmark

    if backends.current_backend() == "tensorflow" and args.backend in (None, "tensorflow"):
        # lazy: keeps `keras-seq --help` fast (loads TensorFlow)
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")  # one train function per model is expected

    sizes = {k: getattr(args, k) for k in ("vocab", "embed", "units", "seq_len", "batch")}
    steps, repeats, warmup = args.steps, args.repeats, args.warmup
    if args.quick:
        sizes = {"vocab": 50, "embed": 8, "units": 8, "seq_len": 5, "batch": 4}
        steps, repeats, warmup = 2, 1, 2
    # Progress goes to stderr when stdout carries JSON.
    target = sys.stderr if args.json else sys.stdout
    with contextlib.redirect_stdout(target):
        report = run_benchmark(
            cells=tuple(args.cells),
            steps=steps,
            repeats=repeats,
            warmup=warmup,
            head=args.head,
            chunk=args.chunk,
            backend=args.backend,
            device=args.device,
            mixed_precision=args.mixed_precision,
            jit_compile=args.jit_compile,
            **sizes,
        )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0
