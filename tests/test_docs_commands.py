"""The pages say what the code and the recorded runs say (issue 57, "docs that stay true").

tests/test_docs.py parses every ``keras-seq …`` line of the pages' shell blocks; this file
adds what it leaves out:

* every ``keras-seq …`` named in a code span of README.md or docs/*.md (a table's command
  column, a sentence) uses flags the CLI has, with values it accepts. In a sentence a span
  names a command, it need not be a whole command line: flags the CLI requires may be left
  out. A span that is a table cell of its own and has no ``…`` is a whole command line (the
  README's results table: "the command behind each"), so its required flags are checked
  too. ``…`` stands for a value, ``[--flag a|b]`` for an optional flag (the first choice
  is parsed). Spans with a placeholder for the command itself are listed in
  :data:`PLACEHOLDER_SPANS`;
* every Markdown table has rows with its header's cell count (a bare ``|`` inside a cell,
  even in backticks, splits the row on GitHub);
* the README's sentence on the package's layers gives the order tests/test_architecture.py
  enforces;
* the export page's verdicts on the recorded ``make demo`` runs are the ones
  docs/results.json holds.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import io
import json
import re
from pathlib import Path

import pytest

from keras_seq.cli import build_parser
from tests.fixtures.doc_pages import DOC_FILES, ROOT, DocCommand, keras_seq_argv, split_commands

# A code span outside fenced blocks: `…` (not ``…``).
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
ELLIPSES = {"…", "..."}
BARE_PIPE = re.compile(r"(?<!\\)\|")  # a cell boundary (``\|`` is a pipe inside a cell)
# Spans whose command word is itself a placeholder ("keras-seq COMMAND --help"): nothing
# to parse. Listed by page and text so that a new one is seen here.
PLACEHOLDER_SPANS = {
    ("README.md", "keras-seq COMMAND --help"),
    ("docs/api.md", "keras-seq COMMAND --help"),
    ("docs/runs.md", "keras-seq train KIND"),
    ("docs/task-shapes.md", "keras-seq train KIND"),
    ("docs/task-shapes.md", "keras-seq eval KIND"),
}


def _outside_fences(text: str):
    """(line number, line) of a page's lines outside fenced code blocks."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line


def _normalise(span: str) -> str:
    """A span as a command line: ``\\|`` (a table's escape) read as ``|``, an optional
    ``[--flag a|b]`` as ``--flag a``."""
    span = span.replace("\\|", "|")
    return re.sub(r"\[(--[\w-]+)(?: ([^\]|]+)(?:\|[^\]]*)?)?\]",
                  lambda m: " ".join(filter(None, (m.group(1), m.group(2)))), span)


def _fill_ellipses(words: list[str]) -> list[str]:
    """``--flag …`` → ``--flag VALUE``; a ``…`` standing alone (more flags) dropped."""
    out = []
    for word in words:
        if word in ELLIPSES:
            if out and out[-1].startswith("--"):
                out.append("VALUE")
            continue
        out.append(word)
    return out


def _whole_line(line: str, match: re.Match) -> bool:
    """Whether the span ``match`` is a whole command line: a table cell of its own (alone,
    or followed by a parenthesised link: the page that holds it), with no ``…`` in it."""
    if not line.lstrip().startswith("|") or any(e in match.group(1) for e in ELLIPSES):
        return False
    before = line[:match.start()].rstrip()
    after = BARE_PIPE.split(line[match.end():], maxsplit=1)[0].strip()
    return before.endswith("|") and not before.endswith("\\|") and \
        (not after or after.startswith("(["))


def span_commands(path: Path, text: str | None = None) -> list[tuple[DocCommand, bool]]:
    """``(command, whole line?)`` for every ``keras-seq`` command named in a code span of
    ``path`` (or of ``text``, read as that page's)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    found = []
    for number, line in _outside_fences(text):
        for match in SPAN.finditer(line):
            span = _normalise(match.group(1))
            if "keras-seq" not in span:
                continue
            for words in split_commands(span):
                argv = keras_seq_argv(_fill_ellipses(words))
                if argv is not None:
                    found.append((DocCommand(path, number, span, argv),
                                  _whole_line(line, match)))
    return found


def _relaxed(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A copy of the CLI's parser in which no flag is required (a span names a command;
    its value checks, choices and flag names stay)."""
    parser = copy.deepcopy(parser)
    stack = [parser]
    while stack:
        current = stack.pop()
        for action in current._actions:
            if action.option_strings:
                action.required = False
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
        for group in current._mutually_exclusive_groups:
            group.required = False
    return parser


_PARSERS: dict[bool, argparse.ArgumentParser] = {}


def span_problem(command: DocCommand, whole: bool = False) -> str | None:
    """None when the CLI accepts ``command``: its flags and values, and where it is a
    ``whole`` command line, its required flags too."""
    if whole not in _PARSERS:
        _PARSERS[whole] = build_parser() if whole else _relaxed(build_parser())
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            _PARSERS[whole].parse_args(list(command.argv))
    except SystemExit as stop:
        if stop.code not in (0, None):
            return (f"{command.where}: `{command.text}`: "
                    f"{' '.join(err.getvalue().split()) or stop.code}")
    return None


def _page(path: Path) -> str:
    return str(path.relative_to(ROOT))


ALL_SPANS = [found for path in DOC_FILES for found in span_commands(path)]
SPANS = [(c, whole) for c, whole in ALL_SPANS
         if (_page(c.path), c.text) not in PLACEHOLDER_SPANS]


def test_the_pages_name_commands_in_code_spans():
    assert len(SPANS) >= 50, [c.where for c, _ in SPANS]
    assert sum(whole for _, whole in SPANS) >= 5, "no whole command line in a table cell"
    skipped = {(_page(c.path), c.text) for c, _ in ALL_SPANS} & PLACEHOLDER_SPANS
    assert skipped == PLACEHOLDER_SPANS, (
        f"no longer on their pages, drop them from PLACEHOLDER_SPANS: "
        f"{sorted(PLACEHOLDER_SPANS - skipped)}")


@pytest.mark.parametrize("command, whole", SPANS,
                         ids=[f"{c.where} {c.text[:40]}" for c, _ in SPANS])
def test_a_command_named_in_a_span_parses(command, whole):
    problem = span_problem(command, whole)
    assert problem is None, problem


def test_the_span_reader_catches_a_wrong_flag_and_reads_the_shorthands():
    page = ROOT / "x.md"
    text = ("| a | `keras-seq bench cells --head none [--backend jax\\|torch]` |\n"
            "| b | `keras-seq bench scaling --rounds 3 --lmplz PATH` ([scaling](s.md)) |\n"
            "| c | `keras-seq serve` (the REST server) |\n"
            "`keras-seq bench quantization --run-dir … --out …` and "
            "`keras-seq pipeline --cell/--units` and `keras-seq bench scaling --out D "
            "--rounds three` and `keras-seq bench scaling --rounds 3`\n")
    found = span_commands(page, text)
    assert [(c.argv, whole) for c, whole in found] == [
        (("bench", "cells", "--head", "none", "--backend", "jax"), True),
        (("bench", "scaling", "--rounds", "3", "--lmplz", "PATH"), True),
        (("serve",), False),
        (("bench", "quantization", "--run-dir", "VALUE", "--out", "VALUE"), False),
        (("pipeline", "--cell/--units"), False),
        (("bench", "scaling", "--out", "D", "--rounds", "three"), False),
        (("bench", "scaling", "--rounds", "3"), False)]
    problems = [span_problem(c, whole) for c, whole in found]
    assert [problems[i] for i in (0, 2, 3, 6)] == [None] * 4
    assert "the following arguments are required: --out" in problems[1]
    assert "unrecognized arguments: --cell/--units" in problems[4]
    assert "--rounds" in problems[5] and "three" in problems[5]


# ----------------------------------------------------------------------------------------
# Tables


def ragged_rows(path: Path, text: str | None = None) -> list[str]:
    """``page:line`` of every table row whose cell count differs from its header's."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    ragged, header, in_fence = [], None, False
    for number, line in enumerate(lines, 1):
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
        if in_fence or not line.lstrip().startswith("|"):
            header = None
            continue
        cells = len(BARE_PIPE.findall(line))
        if header is None:
            header = cells
        elif cells != header:
            ragged.append(f"{path.name}:{number}: {cells - 1} cells, the header "
                          f"{header - 1}: {line[:70]}")
    return ragged


@pytest.mark.parametrize("path", DOC_FILES, ids=_page)
def test_every_table_row_has_its_headers_cells(path):
    ragged = ragged_rows(path)
    assert not ragged, "\n".join(ragged)


def test_a_bare_pipe_in_a_cell_is_caught():
    table = "| what | command |\n|---|---|\n| a | `x \\| y` |\n| b | `x | y` |\n"
    assert ragged_rows(Path("t.md"), table) == [
        "t.md:4: 3 cells, the header 2: | b | `x | y` |"]


# ----------------------------------------------------------------------------------------
# The README's layer order


def readme_layer_order() -> list[set[str]]:
    """The README's "Each part imports only from the parts below it (A < B, C < …: the
    order tests/test_architecture.py enforces)" as a list of sets of module names."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    match = re.search(r"Each part imports only from the parts below it \((.*?): the order "
                      r"tests/test_architecture\.py enforces\)", text)
    assert match, "README.md no longer states the layer order"
    return [{name.strip() for name in re.split(r"[,/]", level)}
            for level in match.group(1).split("<")]


def architecture_layers() -> dict[str, int]:
    """tests/test_architecture.py's ``LAYERS``, read from its source (a test module does
    not import another)."""
    tree = ast.parse((ROOT / "tests" / "test_architecture.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "LAYERS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("tests/test_architecture.py has no LAYERS")


def architecture_order() -> list[set[str]]:
    by_level: dict[int, set[str]] = {}
    for module, level in architecture_layers().items():
        if module != "keras_seq":
            by_level.setdefault(level, set()).add(module.removeprefix("keras_seq."))
    return [by_level[level] for level in sorted(by_level)]


def test_the_readme_gives_the_layer_order_the_architecture_test_enforces():
    assert readme_layer_order() == architecture_order()


# ----------------------------------------------------------------------------------------
# The recorded make demo runs on the export page

VERDICTS = re.compile(r"The model and its metrics are the same in all three \(the seed "
                      r"fixes them\): (.*?)\. The README's block")


def page_verdicts(text: str) -> dict[str, bool]:
    """``{"(a)": False, …}`` from the export page's sentence on the recorded runs."""
    match = VERDICTS.search(" ".join(text.split()))
    assert match, "docs/export-and-on-device.md no longer sums up the recorded runs"
    verdicts = {}
    for part in re.split(r", (?=\([a-g]\))", match.group(1)):
        letter = part[:3]
        assert part.endswith((" yes", " no", "yes", "no")), part
        verdicts[letter] = part.endswith("yes")
    return verdicts


def test_the_export_page_gives_the_recorded_runs_verdicts():
    runs = json.loads((ROOT / "docs" / "results.json").read_text())["main_job"]["runs"]
    page = (ROOT / "docs" / "export-and-on-device.md").read_text(encoding="utf-8")
    said = page_verdicts(page)
    for run in runs:
        recorded = {check["target"][:3]: check["met"] for check in run["checks"]}
        assert said == recorded, f"the page says {said}, results.json {recorded}"
    assert f"from fresh clones of {runs[0]['commit']}" in " ".join(page.split())


def test_a_changed_verdict_is_caught():
    text = ("The model and its metrics are the same in all three (the seed fixes them): "
            "(a) 0.622× no, (b) yes, (c) 3.86× no. The README's block")
    assert page_verdicts(text) == {"(a)": False, "(b)": True, "(c)": False}
    assert page_verdicts(text.replace("(b) yes", "(b) no")) == {
        "(a)": False, "(b)": False, "(c)": False}
