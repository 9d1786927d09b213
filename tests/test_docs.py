"""The documentation stays in step with the code.

Every ``keras-seq …`` command shown in a shell code block of README.md or docs/*.md must
parse with the real CLI parser (a flag the CLI refuses fails the test, naming the file,
the line and argparse's message); a few cheap ones run for real; and every relative link
in those files points to a file that exists.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from keras_seq.cli import build_parser
from tests.fixtures.doc_pages import (
    DOC_FILES,
    ROOT,
    DocCommand,
    doc_commands,
)

_PARSER = None


def parse_problem(command: DocCommand) -> str | None:
    """None when the CLI parser accepts ``command`` (``--help`` exiting 0 included),
    else a message naming the doc, the line and argparse's complaint."""
    global _PARSER
    if _PARSER is None:
        _PARSER = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            _PARSER.parse_args(list(command.argv))
    except SystemExit as stop:
        if stop.code not in (0, None):
            message = " ".join(err.getvalue().split()) or f"exit status {stop.code}"
            return f"{command.where}: `keras-seq {' '.join(command.argv)}`: {message}"
    return None


ALL_COMMANDS = [command for path in DOC_FILES for command in doc_commands(path)]


def test_the_docs_show_commands():
    # If the extractor broke (or the docs lost their commands), the parse test below
    # would pass vacuously.
    assert len(ALL_COMMANDS) >= 50, [c.where for c in ALL_COMMANDS]
    readme = [c for c in ALL_COMMANDS if c.path.name == "README.md"]
    assert readme, "README.md shows no keras-seq command in a shell block"


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=lambda c: c.where)
def test_doc_command_parses(command):
    problem = parse_problem(command)
    assert problem is None, problem


def test_extractor_handles_shell_forms():
    markdown = "\n".join([
        "text",
        "```sh",
        "$ keras-seq data stats --data tinyshakespeare \\",
        "    --tokenizer char   # a comment",
        "KERAS_SEQ_DATA_DIR=../shared/data keras-seq ngram train --order 3 --out kn3.arpa",
        "printf 'x\\n' | .venv/bin/keras-seq demo --model RUN/model.tflite --lines",
        "keras-seq train lm ... --jit-compile && echo done",
        "keras-seq data tokenize --data python-docs --out <FILE> 2>&1 > log.txt",
        "ls runs",
        "```",
        "```yaml",
        "args: keras-seq train lm --no-such-flag",
        "```",
        "```python",
        "keras-seq --ignored-in-python",
        "```",
    ])
    found = doc_commands(Path("x.md"), markdown)
    assert [(c.line, c.argv) for c in found] == [
        (3, ("data", "stats", "--data", "tinyshakespeare", "--tokenizer", "char")),
        (5, ("ngram", "train", "--order", "3", "--out", "kn3.arpa")),
        (6, ("demo", "--model", "RUN/model.tflite", "--lines")),
        (7, ("train", "lm", "--jit-compile")),
        (8, ("data", "tokenize", "--data", "python-docs", "--out", "FILE")),
    ]


def test_a_flag_the_cli_refuses_fails_naming_file_line_and_reason():
    markdown = "intro\n\n```sh\nkeras-seq data stats --data python-docs --no-such-flag 3\n```\n"
    [command] = doc_commands(Path("docs/x.md"), markdown)
    problem = parse_problem(command)
    assert problem is not None
    assert problem.startswith("docs/x.md:4: `keras-seq data stats")
    assert "unrecognized arguments: --no-such-flag" in problem
    help_command = doc_commands(Path("y.md"), "```sh\nkeras-seq train lm --help\n```\n")[0]
    assert parse_problem(help_command) is None


def _cheap(command: DocCommand) -> bool:
    """Commands the docs show that finish in seconds without TensorFlow."""
    argv = command.argv
    if argv == ("--help",):
        return True
    return argv[:2] == ("data", "stats") and "--tokenizer" in argv and \
        argv[argv.index("--tokenizer") + 1] == "char"


CHEAP_COMMANDS = [command for command in ALL_COMMANDS if _cheap(command)]


def test_some_doc_commands_are_run_for_real():
    assert {c.argv[0] for c in CHEAP_COMMANDS} >= {"--help", "data"}, \
        "the docs no longer show `keras-seq --help` and a char-level `data stats`"


@pytest.mark.parametrize("command", CHEAP_COMMANDS, ids=lambda c: c.where)
def test_cheap_doc_command_runs(command):
    result = subprocess.run(
        [sys.executable, "-m", "keras_seq.cli", *command.argv],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, f"{command.where}: {result.stderr.strip()[-2000:]}"
    if "--json" in command.argv:
        stats = json.loads(result.stdout)
        assert stats, f"{command.where}: empty JSON"
    elif command.argv == ("--help",):
        assert "train" in result.stdout and "export" in result.stdout
    else:
        assert "token" in result.stdout.lower(), result.stdout


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative_links(path: Path):
    """(line number, target) of each relative link outside code blocks and code spans."""
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http(s)://, mailto:
            yield number, target


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation
    dropped, spaces as hyphens, ``-1``, ``-2`` … for repeats."""
    anchors, in_fence = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
        heading = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            anchor, n = slug, 0
            while anchor in anchors:
                n += 1
                anchor = f"{slug}-{n}"
            anchors.add(anchor)
    return anchors


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``path`` to a missing file, or to a missing heading of a
    markdown file (``page.md#anchor``)."""
    broken = []
    for number, target in relative_links(path):
        file, _, anchor = target.partition("#")
        linked = (path.parent / file) if file else path
        if not linked.exists():
            broken.append(f"{path.relative_to(root)}:{number}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
            broken.append(f"{path.relative_to(root)}:{number}: {target} (no such heading)")
    return broken


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files(path):
    broken = broken_links(path)
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_heading_anchors_follow_github(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# The main job (`make demo`), measured\n## Encoder–decoder\n"
                    "## Data\n## Data\n```sh\n# not a heading\n```\n"
                    "[ok](#data-1) [bad](#nope) [gone](missing.md)\n", encoding="utf-8")
    assert heading_anchors(page) == {"the-main-job-make-demo-measured", "encoderdecoder",
                                     "data", "data-1"}
    assert broken_links(page, root=tmp_path) == ["page.md:8: #nope (no such heading)",
                                                 "page.md:8: missing.md (no such file)"]
