"""Shared test set-up: corpora from ../shared/data or the package's own copy (never downloaded),
TF logs quiet, and prerequisite skips that $KERAS_SEQ_REQUIRE turns into failures."""

import lzma
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.prereqs import PREFIX, required

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
BUNDLED = Path(__file__).resolve().parents[1] / "keras_seq" / "data" / "corpora"
if "KERAS_SEQ_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["KERAS_SEQ_DATA_DIR"] = str(_SHARED)


def pytest_configure(config):
    """One JAX compilation cache for this test run, shared by the xdist workers and the
    subprocesses they start (set before any of them imports JAX): a program compiled
    once (the same model, resumed; the same layer in two tests) is not compiled again.
    JAX keys each entry by the program's HLO, its version and flags; the folder is new
    for each run and removed after it."""
    if hasattr(config, "workerinput") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return  # an xdist worker inherits the controller's; a caller's own is kept
    config.jax_cache = tempfile.mkdtemp(prefix="keras-seq-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = config.jax_cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


def pytest_unconfigure(config):
    if getattr(config, "jax_cache", None):
        shutil.rmtree(config.jax_cache, ignore_errors=True)


@pytest.fixture(scope="session")
def shakespeare_available(tmp_path_factory):
    """tinyshakespeare.txt: from ``$KERAS_SEQ_DATA_DIR`` (../shared/data), else the copy
    the package ships (the same text, xz), unpacked once per test session and worker."""
    folder = os.environ.get("KERAS_SEQ_DATA_DIR")
    if folder and (Path(folder) / "tinyshakespeare.txt").is_file():
        return Path(folder) / "tinyshakespeare.txt"
    path = tmp_path_factory.mktemp("bundled") / "tinyshakespeare.txt"
    path.write_bytes(lzma.decompress((BUNDLED / "tinyshakespeare.txt.xz").read_bytes()))
    return path


@pytest.fixture
def tiny_text():
    return (
        "The cat sat on the mat.\n"
        "The dog sat on the log!\n"
        "\n"
        "Don't stop: the cat's hat, the dog's bone.\n"
    )


@pytest.fixture
def eager_tf_functions():
    """Run ``tf.function`` s eagerly for one test: tiny models then train without tracing,
    which is most of a tiny training run's time. For the fast versions of `slow` end-to-end
    tests; the slow versions keep graph mode."""
    import tensorflow as tf

    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip for a prerequisite that ``$KERAS_SEQ_REQUIRE`` names is a failure (CI sets
    it, so a machine meant to have everything cannot go green by skipping)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple):
        found = re.search(rf"{re.escape(PREFIX)} \[(\w+)\]", str(report.longrepr[2]))
        if found and found.group(1) in required():
            report.outcome = "failed"
            report.longrepr = (f"{report.longrepr[2]} (and $KERAS_SEQ_REQUIRE requires "
                               f"{found.group(1)})")


@pytest.fixture(params=["eager", pytest.param("graph", marks=pytest.mark.slow)])
def step_mode(request):
    """Each test that asks runs twice: with ``tf.function`` s run eagerly (the fast tier:
    a tiny model then trains without tracing, most of a tiny run's time) and in graph mode,
    as ``fit`` runs for users (the slow tier). For tests of the trainer's bookkeeping
    (resume), which both modes must pass alike, where eager is the faster: the seq2seq
    resume test takes 14 s eagerly, 37 s traced (the LM's, with more steps per run, is
    faster traced: 16 s against 23)."""
    import tensorflow as tf

    tf.config.run_functions_eagerly(request.param == "eager")
    try:
        yield request.param
    finally:
        tf.config.run_functions_eagerly(False)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (Debian's, through Playwright) for one test module's pages."""
    # lazy: Playwright loads only in the modules that ask for a browser
    from playwright.sync_api import sync_playwright

    from keras_seq.benchmarks.browser import launch_chromium

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()
