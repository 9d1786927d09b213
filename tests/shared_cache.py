"""Test fixtures built once per test run, shared by every pytest-xdist worker.

pytest-xdist builds a module or session fixture once per worker: a trained run or an
export that two workers need is made twice. :func:`once` is pytest-xdist's documented
recipe for doing it once: the folder lives under the run's base temp folder (above each
worker's own, so nothing outlives the test session) and a file lock makes the other
workers wait for the first one and read what it wrote.

``work(folder)`` builds into ``folder`` and returns JSON-able results; users must treat
the folder as read-only (copy it to change it), since other tests read it too.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock


def run_folder(tmp_path_factory) -> Path:
    """This test run's folder, shared by its xdist workers (each worker's own one without
    xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory, name: str, work: Callable[[Path], object]) -> tuple[Path, object]:
    """``(folder, work(folder))``, computed by one worker of the test run; the others wait
    on a lock and read the results. A build that raised is redone by the next caller."""
    base = run_folder(tmp_path_factory)
    folder = base / name
    done = base / f"{name}.results.json"
    with FileLock(str(base / f"{name}.lock")):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            results = work(folder)
            done.write_text(json.dumps(results))
    return folder, json.loads(done.read_text())


def shared_folder(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """``folder``, built once per test run by ``build(folder)`` (see :func:`once`)."""
    folder, _ = once(tmp_path_factory, name, lambda f: build(f) and None)
    return folder
