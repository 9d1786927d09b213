"""docs/api.md from the package itself: every public name (each package's ``__all__``) with
its one-line purpose and a link to its docstring (where its example is).

    python -m tools.api_page            # rewrites docs/api.md
    python -m tools.api_page --check    # exit 1 if docs/api.md differs (tests/test_api_page.py)

The page is generated so that it cannot drift: tests/test_api_page.py fails when a public
name is missing from it, when it names one that does not exist, or when a purpose or a
source file changed (line anchors may lag; regenerate to refresh them).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "api.md"

#: the packages a script imports from, in the order of a script: data, layers and models,
#: training, export, the on-device runtime, n-grams
PACKAGES = ("keras_seq.data", "keras_seq.layers", "keras_seq.models", "keras_seq.tasks.lm",
            "keras_seq.training", "keras_seq.export", "keras_seq.runtime", "keras_seq.ngram")

HEADER = """# Python API

Every public name of keras-seq, by the package a script imports it from
(`from keras_seq.layers import LSTM`). Each links to its docstring, which says what it takes
and returns; the last column says where a runnable example is: `yes` in that docstring,
`module` in the docstring at the top of its module (the examples run in `make test`:
tests/test_docstrings.py). A script that trains its own model with
`model.fit` and ships it to a device uses these names from top to bottom:
[keras-seq in your own fit script](fit-script.md). The command line is documented in the
[README](../README.md) and `keras-seq COMMAND --help`.

Importing `keras_seq.training` or `keras_seq.export` loads no TensorFlow: their names load
on first use. `keras_seq.runtime` never imports TensorFlow (the on-device path: LiteRT and
numpy only).

This page is generated from the package (`python -m tools.api_page`);
tests/test_api_page.py fails when it and the package disagree.
"""


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return text.replace("|", "\\|")


def _example(obj, name: str) -> str:
    """``yes`` when ``obj``'s docstring has a ``>>>`` example, ``module`` when the docstring
    of the module defining it has one that uses ``name``, else ``—``."""
    if ">>>" in (inspect.getdoc(obj) or ""):
        return "yes"
    module = inspect.getmodule(inspect.unwrap(obj))
    doc = inspect.getdoc(module) or ""
    if any(name in line for line in doc.splitlines() if line.lstrip().startswith(">>>")):
        return "module"
    return "—"


def _where(obj) -> str:
    """``path#Lline`` of ``obj``'s definition, relative to docs/."""
    target = inspect.unwrap(obj)
    path = Path(inspect.getsourcefile(target)).resolve().relative_to(ROOT)
    try:
        line = inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        line = 1
    return f"../{path.as_posix()}#L{line}"


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "constant"


def public_names() -> dict[str, list[str]]:
    """``{package: sorted __all__}``."""
    return {name: sorted(importlib.import_module(name).__all__) for name in PACKAGES}


def render() -> str:
    lines = [HEADER]
    for package, names in public_names().items():
        module = importlib.import_module(package)
        lines += [f"## `{package}`", "", _first_line(module), "",
                  "| name | kind | what it is | example |", "|---|---|---|---|"]
        for name in names:
            obj = getattr(module, name)
            if _kind(obj) == "constant":
                where, purpose = f"../{package.replace('.', '/')}/__init__.py", \
                    f"constant: {type(obj).__name__}"
            else:
                where, purpose = _where(obj), _first_line(obj)
            example = _example(obj, name) if _kind(obj) != "constant" else "—"
            lines.append(f"| [`{name}`]({where}) | {_kind(obj)} | {purpose} | {example} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def without_anchors(text: str) -> str:
    """The page with its line anchors dropped (they move with every edit above a name)."""
    return re.sub(r"#L\d+\)", ")", text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with docs/api.md instead of writing it")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if without_anchors(text) != without_anchors(PAGE.read_text(encoding="utf-8")):
            print("docs/api.md is out of date: run python -m tools.api_page", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
