"""The package a user installs: pyproject.toml's dependency ranges admit the versions CI
locks (constraints.txt), and the built wheel declares them and carries its package data
(scripts/wheel_contents.py; make package-check installs it into clean venvs)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import wheel_contents  # noqa: E402  (a script beside the Makefile, not a package)


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _locked() -> dict:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _requirements():
    project = _project()
    yield from project["dependencies"]
    for extra in project["optional-dependencies"].values():
        yield from (r for r in extra if not r.startswith("keras-seq"))


def test_every_locked_version_is_inside_the_declared_range():
    locked = _locked()
    outside = []
    for text in _requirements():
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} is declared but not locked in constraints.txt"
        if not req.specifier.contains(locked[name], prereleases=True):
            outside.append(f"{req.name}=={locked[name]} not in {req.specifier}")
    assert not outside, outside


def test_the_core_dependencies_pin_only_what_the_code_depends_on():
    """Compatible ranges: an upper bound on every one that breaks across releases, an
    exact minor only for Keras (keras-seq calls Keras 3.15 internals)."""
    core = {canonicalize_name(Requirement(r).name): Requirement(r).specifier
            for r in _project()["dependencies"]}
    assert {"tensorflow", "keras", "numpy", "ai-edge-litert", "tqdm"} <= set(core)
    assert not any(s.operator == "==" for spec in core.values() for s in spec)
    assert str(core["keras"]) in ("<3.16,>=3.15.1", ">=3.15.1,<3.16")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return next(out.glob("keras_seq-*.whl"))


def test_the_wheel_declares_its_dependencies_and_carries_its_data(wheel):
    with zipfile.ZipFile(wheel) as whl:
        assert wheel_contents.problems(whl) == []
        meta = wheel_contents.metadata(whl)
    litert = wheel_contents.extra_requirements(meta, "litert")
    assert sorted(Requirement(r).name for r in litert) == ["ai-edge-litert", "numpy"]


def test_a_wheel_without_its_corpus_is_refused(wheel, tmp_path):
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as whl, zipfile.ZipFile(broken, "w") as out:
        for item in whl.infolist():
            if not item.filename.endswith(".xz"):
                out.writestr(item, whl.read(item))
    with zipfile.ZipFile(broken) as whl:
        assert wheel_contents.problems(whl) == [
            "keras_seq/data/corpora/tinyshakespeare.txt.xz is not in the wheel"]
