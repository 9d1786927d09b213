"""Reliability of the command line: bad command lines, typed as a new user would.

Every case runs :func:`keras_seq.cli.main` in this process with the work behind each
command replaced by a tripwire (:class:`Reached`): reading a corpus or an ARPA file,
selecting the Keras backend of a training run, loading a checkpoint, starting the server.
A bad flag must be refused *before* a tripwire, with exit status 2 and one line
``keras-seq: error: …`` on stderr (never a traceback); a good one must reach it.

- **known scenarios**: ``--split-ratio`` shares that do not add up, bad numbers (``--units
  -3``, NaN, inf, huge), ``--run-dir`` folders of the wrong kind (missing, empty, a file,
  an export, another kind of run), near misses (``--data tinyshakspeare``, ``trian``,
  ``--untis``) and a ``serve --model-base`` that does not exist or holds no model.
- **parser property test**: every sub-command of :func:`keras_seq.cli.build_parser`, every
  numeric and choice flag (and ``--split-ratio``, ``--data``), values drawn by Hypothesis:
  negative, zero, NaN, inf, huge, the wrong type, empty, unicode. Whether a value is valid
  is decided by the range the flag was declared with (``option(range=…)`` of its config
  field, or ``type=number(int, RANGE)`` beside its help) or by its choices.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tools.reliability import Row

#: commands whose own function runs (it checks flags before the tripwires); every other
#: command is replaced by a tripwire once its flags are parsed
CHECKED_IN_COMMAND = {
    "train lm", "train seq2seq", "train classify", "train tag", "train conditioned",
    "data stats", "data tokenize", "ngram train", "ngram sparsity", "ngram eval",
    "ngram generate", "ngram next", "serve",
}
#: the property test's draws per scale (the edge sweep below comes on top at full scale)
EXAMPLES = {"quick": 200, "full": 5000}
EDGE_VALUES = ("-3", "0", "-0", "nan", "-nan", "inf", "-inf", "1e400", "99999999999999999999",
               "2147483648", "4294967296", "1.5", "abc", "", " ", "٣", "１２", "−3", "0x10",
               "1_000", "🙂", "None")


class Reached(BaseException):  # noqa: N818 — a tripwire, not an error
    """The command got past its checks to real work (a BaseException, so no ``except
    Exception`` in the command swallows it)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


@dataclass
class Outcome:
    """What one command line did."""

    argv: list
    code: int | None  # the exit status (None: it reached a tripwire)
    reached: str | None  # which tripwire
    stderr: str
    stdout: str
    escaped: str | None = None  # an exception that escaped main()

    @property
    def refused(self) -> bool:
        return self.code == 2 and self.reached is None and self.escaped is None

    def problem(self) -> str | None:
        """What breaks the promise for a refusal (None: one clean error line)."""
        if self.escaped:
            return f"{self.escaped} escaped"
        if "Traceback" in self.stderr:
            return "a traceback"
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        if len(lines) != 1 or not lines[0].startswith("keras-seq: error: "):
            return f"stderr is not one error line: {self.stderr[:200]!r}"
        return None


def _tripwire(what: str):
    def trip(*args, **kwargs):
        raise Reached(what)
    return trip


def _after(function, what: str):
    """``function`` run, then a tripwire (its checks run, the work after it does not)."""
    def run(*args, **kwargs):
        function(*args, **kwargs)
        raise Reached(what)
    return run


@contextlib.contextmanager
def _patched(originals: dict):
    """Replace each original function by its replacement in every keras_seq module that
    holds it (``from x import f`` copies too), and put them all back afterwards."""
    undo = []
    try:
        for original, replacement in originals.items():
            for module in list(sys.modules.values()):
                if not getattr(module, "__name__", "").startswith("keras_seq"):
                    continue
                for name, value in list(vars(module).items()):
                    if value is original:
                        undo.append((module, name, value))
                        setattr(module, name, replacement)
        yield
    finally:
        for module, name, value in reversed(undo):
            setattr(module, name, value)


@contextlib.contextmanager
def guarded(parser=None):
    """Tripwires on the work behind every command (see the module docstring); with
    ``parser``, :func:`keras_seq.cli.main` uses it instead of building its own."""
    import keras_seq.cli as cli
    import keras_seq.commands._common as common
    import keras_seq.commands.serve as serve
    import keras_seq.data.corpus as corpus
    import keras_seq.models.loading as loading
    import keras_seq.ngram.arpa as arpa
    import keras_seq.ngram.data as ngram_data
    import keras_seq.serving.layout as layout

    wires = {
        corpus.load_corpus: _tripwire("load_corpus"),
        ngram_data.load_tokenized: _tripwire("load_tokenized"),
        arpa.read_arpa: _tripwire("read_arpa"),
        common.use_backend: _tripwire("use_backend"),
        loading.load_model: _tripwire("load_model"),
        layout.publish_saved_model: _tripwire("publish_saved_model"),
        serve._check_model_base: _after(serve._check_model_base, "serve"),
    }
    if parser is not None:
        wires[cli.build_parser] = lambda command=None: parser
    with _patched(wires):
        yield


def run_cli(argv) -> Outcome:
    """``keras-seq ARGV`` in this process (inside :func:`guarded`), its output captured."""
    from keras_seq.cli import main

    err, out = io.StringIO(), io.StringIO()
    code = reached = escaped = None
    backend = os.environ.get("KERAS_BACKEND")  # `train … --backend X` sets it
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main([str(a) for a in argv])
        except Reached as trip:
            reached = trip.what
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except Exception as exc:  # noqa: BLE001 — the promise is that nothing escapes
            escaped = f"{type(exc).__name__}: {exc}"
        finally:
            if backend is None:
                os.environ.pop("KERAS_BACKEND", None)
            else:
                os.environ["KERAS_BACKEND"] = backend
    return Outcome(list(argv), code, reached, err.getvalue(), out.getvalue(), escaped)


def harness_parser():
    """The real parser with every command outside :data:`CHECKED_IN_COMMAND` replaced by
    a tripwire once its flags are parsed."""
    from keras_seq.cli import build_parser

    parser = build_parser()
    for command, leaf in leaf_parsers(parser):
        if " ".join(command) not in CHECKED_IN_COMMAND:
            leaf.set_defaults(func=_tripwire(" ".join(command)))
    return parser


# ----------------------------------------------------------------------------------------
# Folders and files the cases point at


def make_fixtures(workdir: Path) -> dict:
    """Run directories of each kind (a config and an empty checkpoint: enough for the
    checks, never loaded), wrong folders, a model base; their paths by name."""
    from keras_seq import __version__, runs

    workdir = Path(workdir)
    paths = {}
    for kind in ("lm", "seq2seq", "classify", "tag", "conditioned"):
        run = workdir / f"{kind}-run"
        (run / runs.LAST).parent.mkdir(parents=True, exist_ok=True)
        (run / runs.CONFIG).write_text(json.dumps({"kind": kind, "version": __version__}))
        (run / runs.LAST).write_bytes(b"")
        paths[kind] = run
    paths["missing"] = workdir / "no-such-run"
    paths["empty"] = workdir / "empty-dir"
    paths["empty"].mkdir(exist_ok=True)
    paths["file"] = workdir / "a-file.txt"
    paths["file"].write_text("not a run\n")
    paths["export"] = workdir / "an-export"
    paths["export"].mkdir(exist_ok=True)
    (paths["export"] / "saved_model.pb").write_bytes(b"")
    paths["list-config"] = workdir / "list-config"
    paths["list-config"].mkdir(exist_ok=True)
    (paths["list-config"] / runs.CONFIG).write_text("[1, 2]")
    paths["no-kind"] = workdir / "no-kind"
    paths["no-kind"].mkdir(exist_ok=True)
    (paths["no-kind"] / runs.CONFIG).write_text(json.dumps({"version": __version__}))
    paths["no-checkpoint"] = workdir / "no-checkpoint"
    paths["no-checkpoint"].mkdir(exist_ok=True)
    (paths["no-checkpoint"] / runs.CONFIG).write_text(json.dumps({"kind": "lm",
                                                                  "version": __version__}))
    paths["base"] = workdir / "model-base"
    (paths["base"] / "m" / "1").mkdir(parents=True, exist_ok=True)
    (paths["base"] / "m" / "1" / "saved_model.pb").write_bytes(b"")
    paths["empty-base"] = workdir / "empty-base"
    paths["empty-base"].mkdir(exist_ok=True)
    return paths


def _row(scenario: str, checks: list[tuple[str, str | None]], notes: str) -> Row:
    """A row from ``(case, problem or None)`` pairs; the first failures go in the notes."""
    failed = [f"{case}: {problem}" for case, problem in checks if problem]
    if failed:
        notes = "; ".join(failed[:3]) + (f" (+{len(failed) - 3} more)" if len(failed) > 3
                                         else "")
    return Row(scenario, cases=len(checks), failures=len(failed), notes=notes)


def _refused(outcome: Outcome, *needles: str) -> str | None:
    """None when ``outcome`` is a clean refusal whose message holds every needle."""
    if outcome.reached:
        return f"went on to {outcome.reached}"
    if not outcome.refused:
        return f"exit {outcome.code}" + (f", {outcome.escaped}" if outcome.escaped else "")
    problem = outcome.problem()
    if problem:
        return problem
    missing = [n for n in needles if n not in outcome.stderr]
    return f"message lacks {missing}: {outcome.stderr.strip()[:160]!r}" if missing else None


# ----------------------------------------------------------------------------------------
# Known scenarios


SPLIT_COMMANDS = [
    ["data", "stats"], ["data", "tokenize"], ["train", "lm", "--run-dir", "{run}"],
    ["ngram", "train", "--data", "python-docs", "--out", "{out}"],
    ["ngram", "sparsity", "--data", "python-docs"], ["pipeline", "--out", "{out}"],
    ["bench", "lm"], ["bench", "ngram"], ["train", "tag", "--run-dir", "{run}"],
    ["train", "classify", "--run-dir", "{run}"],
]
BAD_SPLITS = ["50/60", "60/60/10", "0.5,0.6", "1/1/1", "nan/10", "90/-5/15", "inf/0",
              "90", "a/b"]
GOOD_SPLITS = ["80/10/10", "0.8,0.1,0.1"]


def _fill(argv, workdir: Path) -> list[str]:
    return [a.format(run=workdir / "new-run", out=workdir / "out") for a in argv]


def split_ratio_cases(workdir: Path) -> Row:
    checks = []
    for command in SPLIT_COMMANDS:
        argv = _fill(command, workdir)
        for spec in BAD_SPLITS:
            checks.append((f"{' '.join(command[:2])} --split-ratio {spec}",
                           _refused(run_cli([*argv, f"--split-ratio={spec}"]), "split")))
        for spec in GOOD_SPLITS:
            outcome = run_cli([*argv, f"--split-ratio={spec}"])
            checks.append((f"{' '.join(command[:2])} --split-ratio {spec}",
                           None if outcome.reached else f"refused: {outcome.stderr.strip()}"))
    return _row("--split-ratio whose shares do not sum to 100 (or 1)", checks,
                "refused with exit 2 before any corpus is read, by every command that "
                "takes the flag; 80/10/10 and 0.8,0.1,0.1 still run")


BAD_NUMBERS = [
    (["train", "lm", "--run-dir", "{run}"], "--units", ["-3", "0", "nan", "inf", "1e30",
                                                        "99999999999", "", "three"]),
    (["train", "lm", "--run-dir", "{run}"], "--dropout", ["1", "1.5", "-0.1", "nan"]),
    (["train", "lm", "--run-dir", "{run}"], "--lr", ["0", "-1", "nan", "inf"]),
    (["train", "lm", "--run-dir", "{run}"], "--bptt", ["0", "-35"]),
    (["train", "lm", "--run-dir", "{run}"], "--max-vocab", ["-3", "2"]),
    (["train", "lm", "--run-dir", "{run}", "--cell", "lstmp", "--units", "8"],
     "--proj-units", ["16"]),
    (["train", "seq2seq", "--run-dir", "{run}"], "--units", ["-3", "0", "nan"]),
    (["train", "seq2seq", "--run-dir", "{run}"], "--max-len", ["0", "-5"]),
    (["train", "classify", "--run-dir", "{run}"], "--units", ["-3", "0"]),
    (["train", "tag", "--run-dir", "{run}"], "--embed-dim", ["0", "-1"]),
    (["train", "conditioned", "--run-dir", "{run}"], "--num-layers", ["-1", "0"]),
    (["train", "conditioned", "--run-dir", "{run}"], "--seed", ["-1", "4294967296"]),
    (["data", "stats"], "--max-vocab", ["-3", "0"]),
    (["data", "stats"], "--min-count", ["0", "-2"]),
    (["ngram", "train", "--data", "python-docs", "--out", "{out}"], "--min-count", ["0"]),
    (["ngram", "train", "--data", "python-docs", "--out", "{out}"], "--order", ["0", "11"]),
    (["generate", "--run-dir", "{run}"], "--max-tokens", ["0", "-5"]),
    (["generate", "--run-dir", "{run}"], "--temperature", ["-1", "nan", "1e7"]),
    (["generate", "--run-dir", "{run}"], "--top-p", ["0", "1.5"]),
    (["serve", "--model-base", "{run}"], "--port", ["-1", "65536"]),
    (["serve", "--model-base", "{run}"], "--request-timeout", ["nan", "inf", "0"]),
]


def bad_number_cases(workdir: Path) -> Row:
    checks = []
    for command, flag, values in BAD_NUMBERS:
        argv = _fill(command, workdir)
        for value in values:
            outcome = run_cli([*argv, f"{flag}={value}"])
            problem = _refused(outcome)
            if problem is None and "note:" in outcome.stdout + outcome.stderr:
                problem = "printed a data note before refusing"
            checks.append((f"{' '.join(command[:2])} {flag} {value}", problem))
    return _row("bad numbers (--units -3, 0, NaN, inf, huge…) refused before any work", checks,
                "exit 2 and one line naming the flag, before the corpus is read or Keras "
                "is imported; no data note printed first")


RUN_DIR_COMMANDS = [  # (command line, the kind it takes)
    (["eval", "lm"], "lm"), (["eval", "seq2seq"], "seq2seq"),
    (["eval", "classify"], "classify"), (["eval", "tag"], "tag"),
    (["eval", "conditioned"], "conditioned"), (["translate", "some text"], "seq2seq"),
    (["predict", "some text"], "classify"), (["generate"], "lm"),
    (["export", "saved-model", "--out", "{out}"], "lm"),
    (["export", "tflite", "--out", "{out}"], "lm"),
    (["export", "seq2seq", "--out", "{out}"], "seq2seq"),
    (["export", "classifier", "--out", "{out}"], "classify"),
    (["export", "tagger", "--out", "{out}"], "tag"),
    (["bench", "fused"], "lm"), (["bench", "streaming"], "lm"), (["bench", "serve"], "lm"),
    (["compare"], "lm"),
]
#: folder → what the refusal must say
WRONG_FOLDERS = {"missing": "does not exist", "empty": "is empty", "file": "is a file",
                 "export": "SavedModel", "list-config": "JSON list", "no-kind": "no known kind",
                 "no-checkpoint": "no checkpoint"}


def run_dir_cases(workdir: Path, paths: dict) -> Row:
    checks = []
    for command, kind in RUN_DIR_COMMANDS:
        wrong = "seq2seq" if kind == "lm" else "lm"
        folders = {f"a {wrong} run": (paths[wrong], f"`keras-seq train {wrong}` run")}
        folders.update({name: (paths[name], text) for name, text in WRONG_FOLDERS.items()
                        if name != "no-checkpoint" or kind == "lm"})
        for name, (folder, needle) in folders.items():
            flag = "--runs" if command == ["compare"] else "--run-dir"
            argv = [*_fill(command, workdir), flag, str(folder)]
            outcome = run_cli(argv)
            problem = _refused(outcome, needle)
            if problem is None and "re-train" in outcome.stderr and name != "list-config":
                problem = f"asks to re-train: {outcome.stderr.strip()[:120]!r}"
            checks.append((f"{' '.join(command[:2])} on {name}", problem))
    for kind in ("lm", "seq2seq", "classify", "tag", "conditioned"):
        outcome = run_cli(["train", kind, "--run-dir", paths["file"]])
        checks.append((f"train {kind} into a file", _refused(outcome, "is a file")))
    return _row("--run-dir of the wrong kind, missing, empty, a file, an export…", checks,
                "every command that reads a run: exit 2, one line saying what the folder "
                "holds (and which commands read that kind), before Keras is imported")


NEAR_MISSES = [  # (command line, the suggestion it must make)
    (["data", "stats", "--data", "tinyshakspeare"], "tinyshakespeare"),
    (["train", "lm", "--run-dir", "{run}", "--data", "tiny-shakespeare"], "tinyshakespeare"),
    (["ngram", "train", "--data", "wikitext2", "--out", "{out}"], "wikitext-2"),
    (["bench", "lm", "--data", "pythondocs"], "python-docs"),
    (["gradients", "--data", "tinyshakespear"], "tinyshakespeare"),
    (["trian", "lm"], "train"), (["data", "stat"], "stats"), (["ngram", "trian"], "train"),
    (["export", "saved-modle"], "saved-model"), (["bench", "cels"], "cells"),
    (["train", "lm", "--run-dir", "{run}", "--cell", "lstn"], "lstm"),
    (["data", "stats", "--tokenizer", "wrod"], "word"),
    (["generate", "--run-dir", "{run}", "--sampler", "top_k"], "top-k"),
    (["train", "lm", "--run-dir", "{run}", "--untis", "3"], "--units"),
    (["train", "lm", "--run-dir", "{run}", "--batch-szie", "4"], "--batch-size"),
    (["generate", "--run-dir", "{run}", "--max-tokns", "5"], "--max-tokens"),
    (["train", "seq2seq", "--run-dir", "{run}", "--data", "datse"], "dates"),
    (["train", "classify", "--run-dir", "{run}", "--data", "reviews-negaton"],
     "reviews-negation"),
    (["train", "tag", "--run-dir", "{run}", "--data", "restore-punk"], "restore-punct"),
    (["train", "conditioned", "--run-dir", "{run}", "--data", "shape"], "shapes"),
    (["train", "lm", "--run-dir", "{run}", "--backend", "tensorflw"], "tensorflow"),
    (["bench", "lm", "--cells", "gru,lstn"], "lstm"),
]


def near_miss_cases(workdir: Path) -> Row:
    checks = []
    for argv, suggestion in NEAR_MISSES:
        outcome = run_cli(_fill(argv, workdir))
        checks.append((" ".join(argv[:4]), _refused(outcome, f"did you mean '{suggestion}'?")))
    return _row("near misses: registry names, sub-commands, choices, flags, tasks", checks,
                "exit 2 and one line with `did you mean 'x'?` (difflib) for --data, "
                "sub-commands, choices, unknown flags, task names and --backend")


def serve_base_cases(paths: dict) -> Row:
    checks = []
    for name, needle in (("missing", "does not exist"), ("file", "is a file")):
        outcome = run_cli(["serve", "--model-base", paths[name]])
        checks.append((f"serve --model-base {name}", _refused(outcome, needle)))
    outcome = run_cli(["serve", "--model-base", paths["empty-base"], "--poll-interval", "0"])
    checks.append(("empty base, --poll-interval 0", _refused(outcome, "nothing to serve")))
    for argv, needle in (
            ([], "warning: no servable model found under base path"),
            (["--model-name", "m"], "warning: no versions of servable m found")):
        outcome = run_cli(["serve", "--model-base", paths["empty-base"], *argv])
        ok = outcome.reached == "serve" and needle in outcome.stderr
        checks.append((f"empty base {' '.join(argv)}",
                       None if ok else f"no warning: {outcome.stderr.strip()[:120]!r}"))
    outcome = run_cli(["serve", "--model-base", paths["base"]])
    checks.append(("base with a version", None if outcome.reached == "serve" and
                   "warning" not in outcome.stderr else "refused or warned"))
    return _row("serve --model-base missing, a file, or without a servable version", checks,
                "a missing base or a file is refused in one line; an empty base warns "
                "as TF Serving logs (no versions of servable …) and serves once published")


# ----------------------------------------------------------------------------------------
# The parser property test


@dataclass
class Flag:
    """One flag of one command and the rule that says which values are valid."""

    command: tuple
    option: str
    kind: str  # "number", "choice", "split", "data"
    number_kind: type | None = None
    range: object = None  # keras_seq.commands._common.Range
    choices: tuple = ()

    def __str__(self) -> str:
        return f"{' '.join(self.command)} {self.option}"

    def valid(self, text: str) -> bool:
        """The oracle: Python's own int()/float() parse, then the flag's range."""
        if self.kind == "choice":
            return text in self.choices
        if self.kind == "split":
            return _valid_split(text)
        if self.kind == "data":
            from keras_seq.data.corpus import EMBEDDED, REGISTRY

            try:
                return text in (EMBEDDED, *REGISTRY) or (
                    bool(text.strip()) and Path(text).expanduser().exists())
            except (OSError, ValueError):
                return False
        try:
            value = self.number_kind(text)
        except (ValueError, OverflowError):
            return False
        if self.number_kind is float and not math.isfinite(value):
            return False
        if self.number_kind is int and (self.range is None or self.range.high is None):
            if abs(value) > 2**31 - 1:
                return False
        return self.range is None or value in self.range


def _valid_split(text: str) -> bool:
    """The rule of --split-ratio, written out on its own: 2 or 3 finite shares ≥ 0
    separated by / , or :, a positive train share, summing to 100 or to 1."""
    import re

    parts = [p for p in re.split(r"[/,:]", text) if p.strip()]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        return False
    if len(values) not in (2, 3) or any(not math.isfinite(v) or v < 0 for v in values):
        return False
    total = sum(values)
    return values[0] > 0 and (abs(total - 100) <= 1e-6 or abs(total - 1) <= 1e-9)


def leaf_parsers(parser, path=()):
    """``(command words, parser)`` of every sub-command that runs something."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaf_parsers(sub, (*path, name))


def flags_of(parser) -> list[Flag]:
    """Every numeric and choice flag of every command (and --split-ratio, --data)."""
    out = []
    for command, leaf in leaf_parsers(parser):
        for action in leaf._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            option = max(action.option_strings, key=len)
            number_kind = getattr(action.type, "kind", None)
            if action.choices:
                out.append(Flag(command, option, "choice", choices=tuple(action.choices)))
            elif number_kind in (int, float):
                out.append(Flag(command, option, "number", number_kind,
                                getattr(action.type, "range", None)))
            elif action.type in (int, float):  # a flag check_flags did not reach
                out.append(Flag(command, option, "number", action.type, None))
            elif action.dest == "split_ratio":
                out.append(Flag(command, option, "split"))
            elif action.dest == "data" and leaf.get_default("data_is_corpus") is not False:
                out.append(Flag(command, option, "data"))  # a corpus (train KIND: a task)
    return out


def _required_args(leaf, paths: dict, workdir: Path) -> list[str]:
    """Values for the required flags of a command (paths under ``workdir``)."""
    values = {"run_dir": paths["lm"], "runs": paths["lm"], "out": workdir / "out",
              "model": workdir / "model.arpa", "model_base": paths["base"],
              "data": "python-docs"}
    argv = []
    for action in leaf._actions:
        if action.required and action.option_strings:
            argv += [max(action.option_strings, key=len),
                     str(values.get(action.dest, workdir / action.dest))]
    for group in leaf._mutually_exclusive_groups:
        if group.required and not any(a.required for a in group._group_actions):
            action = next(a for a in group._group_actions if a.dest in values)
            argv += [max(action.option_strings, key=len), str(values[action.dest])]
    return argv


def _value_strategy(flag: Flag):
    from hypothesis import strategies as st

    junk = st.one_of(st.text(max_size=12), st.sampled_from(EDGE_VALUES))
    if flag.kind == "choice":
        names = [str(c) for c in flag.choices]
        mutated = st.sampled_from(names).flatmap(lambda c: st.sampled_from(
            [c.upper(), c[:-1], c + c[-1:], c.replace("-", "_"), f" {c}", c[1:]]))
        return st.one_of(st.sampled_from(names), mutated, junk)
    if flag.kind == "split":
        share = st.one_of(st.integers(-10, 120).map(str), st.floats(-1, 120).map(repr),
                          st.sampled_from(["nan", "inf", "", "x"]))
        built = st.tuples(st.lists(share, min_size=1, max_size=4),
                          st.sampled_from("/,:")).map(lambda t: t[1].join(t[0]))
        return st.one_of(st.sampled_from(["90/10", "80/10/10", "0.8,0.1,0.1", "50/60",
                                          "1/1/1", "100/0", "0/100"]), built, junk)
    if flag.kind == "data":
        from keras_seq.data.corpus import EMBEDDED, REGISTRY

        names = [EMBEDDED, *REGISTRY]
        mutated = st.sampled_from(names).flatmap(lambda c: st.sampled_from(
            [c[:-1], c.replace("-", ""), c.upper(), c + "s", f"./{c}.txt"]))
        return st.one_of(st.sampled_from(names), mutated, junk)
    low = -(2**70)
    return st.one_of(
        st.integers(-3, 12).map(str), st.integers(low, -low).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.floats(-2, 2).map(lambda x: f"{x:g}"), junk)


def check_case(flag: Flag, text: str, base_argv: list) -> str | None:
    """Run one case; None when the promise holds."""
    outcome = run_cli([*base_argv, f"{flag.option}={text}"])
    if outcome.escaped:
        return f"{text!r}: {outcome.escaped} escaped"
    if outcome.reached:
        return None if flag.valid(text) else f"{text!r} accepted (went on to {outcome.reached})"
    if outcome.code != 2:
        return f"{text!r}: exit {outcome.code} {outcome.stderr.strip()[-160:]!r}"
    problem = outcome.problem()
    if problem:
        return f"{text!r}: {problem}"
    if flag.valid(text) and (f"argument {flag.option}:" in outcome.stderr
                             or f"{flag.option} must be" in outcome.stderr):
        return f"{text!r} refused although valid: {outcome.stderr.strip()[:160]!r}"
    return None


def property_test(workdir: Path, paths: dict, examples: int, edges: bool,
                  printer=print) -> tuple[Row, Row]:
    """The Hypothesis property test over every flag of every command; with ``edges``,
    also every flag × :data:`EDGE_VALUES`. Returns the coverage and the property rows."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    parser = harness_parser()
    flags = flags_of(parser)
    leaves = dict(leaf_parsers(parser))
    bases = {c: [*c, *_required_args(leaf, paths, workdir)] for c, leaf in leaves.items()}
    numeric = [f for f in flags if f.kind == "number"]
    unranged = [str(f) for f in numeric if f.range is None]
    coverage = Row("every numeric flag has a declared range", cases=len(numeric),
                   failures=len(unranged),
                   notes=("no range: " + ", ".join(unranged[:6])) if unranged else
                   f"{len(numeric)} numeric flags in {len(leaves)} commands, each with a "
                   "range declared beside its help")
    failures, count = [], [0]

    def one(flag, text):
        count[0] += 1
        problem = check_case(flag, text, bases[flag.command])
        if problem:
            failures.append(f"{flag} {problem}")

    @settings(max_examples=examples, database=None, derandomize=True, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.data())
    def property_case(data):
        flag = data.draw(st.sampled_from(flags))
        one(flag, data.draw(_value_strategy(flag)))

    started = time.monotonic()
    with guarded(parser):
        property_case()
        if edges:
            for flag in flags:
                for text in EDGE_VALUES:
                    one(flag, text)
    seconds = time.monotonic() - started
    printer(f"cli: parser property test, {count[0]} cases in {seconds:.1f}s, "
            f"{len(failures)} failures")
    notes = "; ".join(failures[:3]) if failures else (
        f"{len(flags)} flags of {len(leaves)} commands, Hypothesis draws"
        f"{' + every flag × ' + str(len(EDGE_VALUES)) + ' edge values' if edges else ''}: "
        "invalid → exit 2 with one error line before any work, valid → reaches the work; "
        f"{seconds:.1f}s")
    row = Row("parser property test: numbers, choices, --split-ratio, --data", cases=count[0],
              failures=len(failures), notes=notes)
    return coverage, row


# ----------------------------------------------------------------------------------------


def run(scale: str, workdir, printer=print) -> list[Row]:
    """The cli area: the known scenarios, then the parser property test."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    paths = make_fixtures(workdir)
    from keras_seq.cli import build_parser

    rows = []
    with guarded(harness_parser()):
        rows += [split_ratio_cases(workdir), bad_number_cases(workdir),
                 near_miss_cases(workdir), serve_base_cases(paths)]
    with guarded(build_parser()):  # the commands themselves check --run-dir
        rows.insert(2, run_dir_cases(workdir, paths))
    for row in rows:
        printer(f"cli: {row.scenario}: {row.cases} cases, {row.failures} failures")
    rows += property_test(workdir, paths, EXAMPLES[scale], edges=scale == "full",
                          printer=printer)
    return rows
