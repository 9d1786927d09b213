"""The ``keras-seq`` command line.

Each module in :mod:`keras_seq.commands` adds its own sub-commands through a
``register(subparsers)`` function; modules named ``bench_*`` register under
``keras-seq bench``. Command modules import TensorFlow only inside the functions
that run a command, so ``keras-seq --help`` and ``keras-seq ngram ...`` start fast, and
``keras-seq train … --backend NAME`` is read from ``argv`` before anything imports Keras.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from keras_seq import __version__


def _command_modules():
    import keras_seq.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            yield info.name, importlib.import_module(f"keras_seq.commands.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="keras-seq",
        description="Recurrent sequence models on TensorFlow/Keras: data, n-grams, "
        "RNN/GRU/LSTM language models, attention, export and streaming.",
    )
    parser.add_argument("--version", action="version", version=f"keras-seq {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks instead of one-line errors"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench = subparsers.add_parser("bench", help="benchmarks that print a table (and --json)")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    bench.set_defaults(func=lambda args: bench.print_help() or 2)
    for name, module in _command_modules():
        module.register(bench_sub if name.startswith("bench_") else subparsers)
    return parser


def _preselect_backend(argv: list[str]) -> str | None:
    """Act on ``--backend`` of ``keras-seq train …`` before any command module imports
    Keras (Keras reads ``KERAS_BACKEND`` once, at its first import). Returns an error
    message, or None. (``bench`` commands run another backend in a worker process.)"""
    from keras_seq.backend import requested_backend, select_backend
    from keras_seq.errors import KerasSeqError

    command = next((arg for arg in argv if not arg.startswith("-")), None)
    name = requested_backend(argv) if command == "train" else None
    if name is None:
        return None
    try:
        select_backend(name)
    except KerasSeqError as err:
        if "--debug" in argv:
            raise
        return str(err)
    return None


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = sys.argv[1:] if argv is None else list(argv)
    problem = _preselect_backend(argv)
    if problem:
        print(f"keras-seq: error: {problem}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        result = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except (ValueError, OSError, ImportError, RuntimeError) as err:  # user-facing errors
        if args.debug:
            raise
        print(f"keras-seq: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
