"""Run every ``>>>`` example in the ``keras_seq`` package, so the docstrings cannot rot.

One case per module that has examples (the module name is the case id). A module that cannot
be imported fails ``test_every_module_imports`` with its traceback: nothing is skipped silently.
"""

import doctest
import importlib
import io
import pkgutil
import traceback

import pytest

import keras_seq

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _discover():
    """Return ``({module: [DocTest, ...]}, {module: import error})`` for the whole package."""
    broken = {}

    def onerror(name):  # a sub-package failed to import while walking
        broken[name] = traceback.format_exc()

    names = ["keras_seq"] + [
        info.name for info in pkgutil.walk_packages(keras_seq.__path__, "keras_seq.", onerror)
    ]
    finder = doctest.DocTestFinder()
    tests = {}
    for name in sorted(set(names)):
        if name in broken:
            continue
        try:
            module = importlib.import_module(name)
        except Exception:  # reported by test_every_module_imports
            broken[name] = traceback.format_exc()
            continue
        found = [t for t in finder.find(module, name) if t.examples]
        if found:
            tests[name] = sorted(found, key=lambda t: (t.lineno or 0, t.name))
    return tests, broken


TESTS, BROKEN = _discover()


# The n-gram examples train on a few words with ``discount_fallback=True`` on purpose.
@pytest.mark.filterwarnings("ignore::keras_seq.ngram.kneser_ney.DiscountWarning")
@pytest.mark.parametrize("name", sorted(TESTS))
def test_docstring_examples(name):
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report = io.StringIO()
    failed = attempted = 0
    for test in TESTS[name]:
        result = runner.run(test, out=report.write)
        failed += result.failed
        attempted += result.attempted
    if failed:
        pytest.fail(
            f"{failed} of {attempted} examples failed in {name}:\n{report.getvalue()}",
            pytrace=False,
        )


def test_every_module_imports():
    """Every module must import here, or its examples would go unchecked."""
    if BROKEN:
        pytest.fail(
            "cannot import, so their examples cannot run:\n"
            + "\n".join(f"{name}:\n{error}" for name, error in sorted(BROKEN.items())),
            pytrace=False,
        )


def test_examples_were_found():
    assert sum(len(t.examples) for tests in TESTS.values() for t in tests) > 100
