"""What a test needs beyond the Python packages keras-seq declares, and why it skips.

Each prerequisite that a machine may lack (a C++ compiler for KenLM's module, npm for
LiteRT.js, Chromium, the JAX and torch wheels) has one reason here, and tests skip with
``needs(...)``. Where ``$KERAS_SEQ_REQUIRE`` names a prerequisite (comma-separated, as
``.ci/run`` sets it), a skip for it is a failure instead (tests/conftest.py), so a machine
that should have everything cannot pass by skipping.

>>> needs("jax").name
'skipif'
"""

from __future__ import annotations

import importlib.util
import os

import pytest

KNOWN = ("kenlm", "chromium", "litertjs", "jax", "torch")
PREFIX = "prerequisite missing"


def _module(name: str, how: str) -> str | None:
    return None if importlib.util.find_spec(name) is not None else \
        f"the {name} module is not installed ({how})"


def missing(name: str) -> str | None:
    """Why prerequisite ``name`` (one of :data:`KNOWN`) is not usable here, or None."""
    if name == "kenlm":
        return _module("kenlm", "KenLM's Python module builds from source and needs a C++ "
                       "compiler; `make venv` says whether it found one")
    if name in ("jax", "torch"):
        return _module(name, f"pip install -c constraints.txt '.[{name}]'")
    if name == "chromium":
        # lazy: the browser helpers are only needed where a test asks
        from keras_seq.benchmarks.browser import browser_missing

        return browser_missing()
    if name == "litertjs":
        from keras_seq.errors import KerasSeqError
        from keras_seq.export.web import find_litert_js

        try:
            find_litert_js()
        except KerasSeqError as err:
            return str(err)
        return None
    raise ValueError(f"unknown prerequisite {name!r}; expected one of {', '.join(KNOWN)}")


def required() -> set[str]:
    """The prerequisites ``$KERAS_SEQ_REQUIRE`` says must be present."""
    return {n.strip() for n in os.environ.get("KERAS_SEQ_REQUIRE", "").split(",") if n.strip()}


def reason(*names: str) -> str | None:
    """The skip reason for the first missing one of ``names`` (None: all present)."""
    for name in names:
        why = missing(name)
        if why:
            return f"{PREFIX} [{name}]: {why}"
    return None


def needs(*names: str):
    """A ``skipif`` mark: skip (or, where required, fail) unless every one is present."""
    why = reason(*names)
    return pytest.mark.skipif(why is not None, reason=why or "")


def skip_unless(*names: str) -> None:
    """Inside a fixture or test: skip (or, where required, fail) unless all are present."""
    why = reason(*names)
    if why:
        pytest.skip(why)
