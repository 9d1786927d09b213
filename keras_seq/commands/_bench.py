"""The one way a ``keras-seq bench …`` command is declared: a :class:`BenchCommand` names the
benchmark, declares its own flags once (:class:`Option`, each number with its range:
``Option("--steps", number(int, AT_LEAST_1), 20, "timed steps")``) and gives the function
that measures; the template adds what every benchmark shares:

* ``--json`` (stdout is then the report's JSON alone: whatever the run prints goes to
  stderr), else the report as text from the function the run returns with it;
* the machine and its load when the run starts (:func:`keras_seq.machine.describe`): a
  header line above the table, ``"machine"`` in the JSON;
* ``--plot PNG`` with ``plot=True`` (the run draws it; matplotlib is checked first and the
  path is recorded and named), ``--quick`` with ``quick="its help"`` (the run reads it).

A new benchmark is one module::

    def run(args):
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.benchmarks.toy import format_report, run_toy

        return run_toy(steps=args.steps), format_report

    register = BenchCommand("toy", "what it measures", run, options=(
        Option("--steps", number(int, AT_LEAST_1), 20, "timed steps"),
    )).register
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from keras_seq.extras import pyplot
from keras_seq.machine import describe
from keras_seq.tables import add_json_arg, print_json


class Option:
    """One flag as ``parser.add_argument(flag, type=…, default=…, help=…, **more)`` takes
    it; a ``True``/``False`` default without a type makes a ``--x/--no-x`` switch."""

    def __init__(self, flag: str, type=None, default=None, help: str | None = None, **more):
        if type is None and isinstance(default, bool):
            more.setdefault("action", argparse.BooleanOptionalAction)
        given = {"type": type, "help": help, **more}
        self.flag = flag
        self.kwargs = {"default": default, **{k: v for k, v in given.items() if v is not None}}

    def add_to(self, parser) -> None:
        parser.add_argument(self.flag, **self.kwargs)


class Group:
    """Options listed under their own title in ``--help`` (``exclusive``: at most one of
    them; with ``required``, exactly one)."""

    def __init__(self, title: str | None, description: str | None, *options: Option,
                 exclusive: bool = False, required: bool = False):
        self.title, self.description, self.options = title, description, options
        self.exclusive, self.required = exclusive, required

    def add_to(self, parser) -> None:
        group = parser.add_mutually_exclusive_group(required=self.required) if self.exclusive \
            else parser.add_argument_group(self.title, self.description)
        for option in self.options:
            option.add_to(group)


def _same(report):
    return report


def _always(report) -> bool:
    return True


@dataclass(frozen=True)
class BenchCommand:
    """``keras-seq bench NAME``.

    Args:
        name, help: the sub-command and its one-line help.
        run: ``run(args) -> (report, text)``: measures and returns the report (a dict) with
            the function that formats it as text (the run imports both lazily).
        options: the command's own flags, in ``--help`` order: :class:`Option`,
            :class:`Group`, or a function that adds flags to the parser (a shared adder such
            as ``add_keyboard_args``); or a function returning them, called when the parser
            is built (for defaults read from a benchmark module, imported there lazily).
        check: ``check(args)``: refuses bad input before the header and the run.
        plot: adds ``--plot PNG``.
        quick: adds ``--quick`` with this help.
        to_json: the report as JSON prints it (default: as it is).
        ok: whether the report is a success (exit status 0, else 1).
    """

    name: str
    help: str
    run: Callable
    options: Sequence | Callable = ()
    check: Callable | None = None
    plot: bool = False
    quick: str | None = None
    to_json: Callable = _same
    ok: Callable = _always

    def register(self, subparsers) -> argparse.ArgumentParser:
        p = subparsers.add_parser(self.name, help=self.help)
        for option in self.options() if callable(self.options) else self.options:
            option.add_to(p) if hasattr(option, "add_to") else option(p)
        if self.plot:
            p.add_argument("--plot", default=None, help="write a PNG bar chart here")
        if self.quick:
            p.add_argument("--quick", action=argparse.BooleanOptionalAction, default=False,
                           help=self.quick)
        add_json_arg(p)
        p.set_defaults(func=self.run_bench)
        return p

    def run_bench(self, args) -> int:
        """Check, say the machine, measure, print the report; the exit status."""
        if self.check:
            self.check(args)
        plot = getattr(args, "plot", None) if self.plot else None
        if plot:
            pyplot(f"the {self.name} plot (--plot)")  # said before the benchmark, not after
        machine = describe()
        with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
            print(f"bench {self.name}: CPU {machine['cpu']} ({machine['cores']} cores), load "
                  f"(1 min) {machine['load_1min']} at the start", flush=True)
            report, text = self.run(args)
        if plot:
            report["plot"] = str(plot)
        if args.json:
            report.setdefault("machine", machine)
            print_json(self.to_json(report))
        else:
            print(text(report).rstrip("\n"))
            if plot:
                print(f"plot: {plot}")
        return 0 if self.ok(report) else 1
