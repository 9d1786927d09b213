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
import pkgutil
import re
import sys
import textwrap

from keras_seq import __version__


def _command_modules(only: str | None = None):
    """(name, module) of every command module, or of module ``only`` alone."""
    # lazy: keeps `keras-seq --help` fast
    import keras_seq.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_") and only in (None, info.name):
            yield info.name, importlib.import_module(f"keras_seq.commands.{info.name}")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, wrapping lines at spaces only (never inside ``ptb-small`` or
    ``--proj-units``)."""

    def _split_lines(self, text, width):
        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width,
                             break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line errors (``keras-seq: error: …``, exit status 2) that
    name the nearest match when a sub-command, a choice or a flag is misspelt
    (``keras-seq trian`` → did you mean 'train'?). Sub-parsers are of this class."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        # "argument --bptt: must be ≥ 1 (got 0)" → "--bptt must be ≥ 1 (got 0)"
        message = re.sub(r"^argument (--[\w-]+)(?:/\S+)?: (must be )", r"\1 \2", message)
        hint = "" if "choose from" in message else f" (`{self.prog} --help` lists what it takes)"
        self.exit(2, f"keras-seq: error: {_one_line(message)}{hint}\n")

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            # lazy: keeps `keras-seq --help` fast
            from keras_seq.commands._common import did_you_mean

            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}"
                                         f"{did_you_mean(value, action.choices)} (choose from "
                                         f"{choices})")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if not hasattr(namespace, "_keras_seq_parser"):  # the innermost sub-parser wins
            namespace._keras_seq_parser = self
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.commands._common import did_you_mean

        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            inner = getattr(namespace, "_keras_seq_parser", self)
            flags = list(inner._option_string_actions)
            shown = [f"{arg}{did_you_mean(arg.split('=')[0], flags)}"
                     if arg.startswith("--") else arg for arg in extras]
            inner.error(f"unrecognized arguments: {' '.join(shown)}")
        return namespace


#: The order ``keras-seq --help`` lists the commands in: a newcomer's path (the main job,
#: data, models, use, ship), then the measurements. A command missing here goes last.
HELP_ORDER = ("pipeline", "data", "ngram", "train", "eval", "generate", "translate",
              "predict", "compare", "export", "serve", "demo", "bench", "report", "memory",
              "gradients")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole ``keras-seq`` parser; or, given a ``command`` that a command module of the
    same name registers (``ngram``, ``data``, …), a parser with that command alone: the
    other modules are not imported (0.13 s of a 1 s ``ngram train`` on tinyshakespeare).
    Any other command (``train``, ``bench``, a typo) gets the whole parser."""
    if command and not command.startswith(("_", "bench_")):
        parser = _build_parser(command)
        if command in _subcommands(parser):
            return parser
    return _build_parser(None)


def _subcommands(parser) -> list[str]:
    return [name for action in parser._subparsers._group_actions for name in action.choices]


def _build_parser(only: str | None) -> argparse.ArgumentParser:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.commands._common import check_flags

    parser = Parser(
        prog="keras-seq",
        description="Recurrent sequence models on TensorFlow/Keras: data, n-grams, "
        "RNN/GRU/LSTM language models, attention, export and streaming.",
    )
    parser.add_argument("--version", action="version", version=f"keras-seq {__version__}")
    parser.add_argument(
        "--debug", action=argparse.BooleanOptionalAction, default=False,
        help="show full tracebacks instead of one-line errors"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench_sub = None if only else _add_bench(subparsers)  # `only` is never a bench_ module
    for name, module in _command_modules(only):
        module.register(bench_sub if name.startswith("bench_") else subparsers)
    # argparse lists sub-commands in the order they were added (its _choices_actions)
    subparsers._choices_actions.sort(
        key=lambda action: HELP_ORDER.index(action.dest) if action.dest in HELP_ORDER
        else len(HELP_ORDER))
    return check_flags(parser)


def _add_bench(subparsers):
    """``keras-seq bench``; returns the sub-parsers its benchmarks register under."""
    bench = subparsers.add_parser("bench", help="benchmarks that print a table (and --json)")
    bench.set_defaults(func=lambda args: bench.print_help() or 2)
    return bench.add_subparsers(dest="bench_command", metavar="BENCHMARK")


def _preselect_backend(argv: list[str]) -> str | None:
    """Act on ``--backend`` of ``keras-seq train …`` before any command module imports
    Keras (Keras reads ``KERAS_BACKEND`` once, at its first import). Returns an error
    message, or None. (``bench`` commands run another backend in a worker process.)"""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.backend import requested_backend, select_backend
    from keras_seq.errors import KerasSeqError

    name = requested_backend(argv) if _command_of(argv) == "train" else None
    if name is None:
        return None
    try:
        select_backend(name)
    except KerasSeqError as err:
        if "--debug" in argv:
            raise
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.backend import BACKENDS
        from keras_seq.commands._common import did_you_mean

        return str(err) + ("" if name in BACKENDS else did_you_mean(name, BACKENDS))
    return None


def _command_of(argv: list[str]) -> str | None:
    """The sub-command ``argv`` names: its first word that is not a flag (the top-level
    flags, ``--debug`` and ``--version``, take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _one_line(err) -> str:
    """``err`` as one line (a message that spans lines is joined with spaces)."""
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or \
        type(err).__name__


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--debug" not in argv:  # before anything imports TensorFlow
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.commands._startup import quiet_tensorflow_startup

        quiet_tensorflow_startup()
    problem = _preselect_backend(argv)
    if problem:
        print(f"keras-seq: error: {problem}", file=sys.stderr)
        return 2
    parser = build_parser(_command_of(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help and --version exit 0; a usage error was printed
        if stop.code == 2:
            return 2
        raise
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.commands._common import check_corpus_arg

        check_corpus_arg(args)
        result = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except (ValueError, OSError, ImportError, RuntimeError) as err:  # user-facing errors
        if args.debug:
            raise
        print(f"keras-seq: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:  # a bug: still one line, the traceback behind --debug
        if args.debug:
            raise
        print(f"keras-seq: error: unexpected {type(err).__name__}: {_one_line(err)} (a bug in "
              "keras-seq; `keras-seq --debug …` shows the traceback)", file=sys.stderr)
        return 1
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
