"""``keras-seq bench cells``: training speed of keras-seq's SimpleRNN/GRU/LSTM vs Keras's."""

from __future__ import annotations

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import number
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE

#: what each size flag of `bench cells` sets
SIZES = {"vocab": "vocabulary size of the LM", "embed": "embedding size",
         "units": "recurrent units", "seq_len": "tokens per sequence",
         "batch": "sequences per batch"}


def backend_options() -> list[Option]:
    """``--backend``, ``--device``, ``--mixed-precision``, ``--jit-compile`` (bench cells and
    bench lm): both implementations run under the same settings."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.backends import BACKENDS, DEVICES, PRECISIONS

    return [
        Option("--backend", choices=BACKENDS,
               help="Keras backend to measure on (default: this process's, i.e. "
                    "$KERAS_BACKEND); another one runs in a worker process"),
        Option("--device", choices=DEVICES,
               help="cpu (hides a GPU) or gpu (an error without one); default: wherever the "
                    "backend puts it"),
        Option("--mixed-precision", None, "off", choices=PRECISIONS,
               help="Keras dtype policy for both implementations (default off = float32)"),
        Option("--jit-compile", None, False,
               "compile train steps with XLA (torch.compile on PyTorch; JAX always compiles)"),
    ]


def options() -> list[Option]:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.cells import CELLS, DEFAULTS

    return [
        Option("--steps", number(int, AT_LEAST_1), DEFAULTS["steps"], "timed steps per run"),
        Option("--repeats", number(int, AT_LEAST_1), DEFAULTS["repeats"],
               "runs per (cell, implementation), alternating; the best run is reported"),
        Option("--chunk", number(int, AT_LEAST_1), 10,
               "steps per turn when interleaving (default 10)"),
        Option("--warmup", number(int, NON_NEGATIVE), DEFAULTS["warmup"], "untimed steps"),
        Option("--cells", None, list(CELLS), "cells measured", nargs="+", choices=CELLS),
        Option("--head", None, "softmax", "softmax: full LM with a vocab-sized output layer; "
               "none: time the recurrent layer alone (loss = mean of its outputs)",
               choices=("softmax", "none")),
        *(Option(f"--{name.replace('_', '-')}", number(int, AT_LEAST_1), DEFAULTS[name],
                 SIZES[name], dest=name) for name in SIZES),
        *backend_options(),
    ]


def run_cells(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks import backends
    from keras_seq.benchmarks.cells import format_report, run_benchmark

    if backends.current_backend() == "tensorflow" and args.backend in (None, "tensorflow"):
        # lazy: keeps `keras-seq --help` fast (loads TensorFlow)
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")  # one train function per model is expected

    sizes = {k: getattr(args, k) for k in SIZES}
    steps, repeats, warmup = args.steps, args.repeats, args.warmup
    if args.quick:
        sizes = {"vocab": 50, "embed": 8, "units": 8, "seq_len": 5, "batch": 4}
        steps, repeats, warmup = 2, 1, 2
    report = run_benchmark(
        cells=tuple(args.cells), steps=steps, repeats=repeats, warmup=warmup, head=args.head,
        chunk=args.chunk, backend=args.backend, device=args.device,
        mixed_precision=args.mixed_precision, jit_compile=args.jit_compile, **sizes)
    return report, format_report


register = BenchCommand(
    "cells", "tokens/s of keras-seq vs built-in SimpleRNN/GRU/LSTM, relative speeds, params",
    run_cells, options, quick="smoke test: 2 steps, 1 repeat, tiny sizes").register
