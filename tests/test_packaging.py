"""The package a user installs: pyproject.toml's dependency ranges admit the versions CI
locks (constraints.txt), the core leaves out what only an extra's features need (and runs
without it), README lists every extra, and the built wheel declares them and carries its
package data (scripts/wheel_contents.py; make package-check installs it into clean venvs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from keras_seq.errors import KerasSeqError
from keras_seq.extras import require
from keras_seq.tasks.seq2seq.metrics import corpus_bleu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import wheel_contents  # noqa: E402  (a script beside the Makefile, not a package)

# The packages only a feature needs, each in its extra (not in the core dependencies).
EXTRAS_ONLY = {"matplotlib": "plot", "sacrebleu": "seq2seq", "conllu": "conllu",
               "tensorboard": "tensorboard", "tensorflow-text": "subword"}
MODULES = ("matplotlib", "sacrebleu", "conllu", "tensorboard", "tensorflow_text")
# A Python process in which those packages are not installed (importing one raises
# ImportError) that runs keras_seq.cli.main on each argument list of argv[1] in turn and
# prints "@@rc <rc>" after each.
WITHOUT_EXTRAS = textwrap.dedent(f"""
    import json, sys
    sys.modules.update(dict.fromkeys({MODULES!r}))
    from keras_seq.cli import main
    def run_commands():
        for args in json.loads(sys.argv[1]):
            print("@@rc", main(args), flush=True)
""")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _locked() -> dict:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _extra(name: str) -> set[str]:
    """The packages ``pip install 'keras-seq[name]'`` adds, through ``keras-seq[...]``."""
    found = set()
    for text in _project()["optional-dependencies"][name]:
        req = Requirement(text)
        if canonicalize_name(req.name) == "keras-seq":
            found |= set().union(*(_extra(e) for e in req.extras))
        else:
            found.add(canonicalize_name(req.name))
    return found


def _readme_extras() -> dict[str, str]:
    """``{extra: what it is for}`` from the table in README's "## Install" section."""
    section = (ROOT / "README.md").read_text().split("\n## Install\n", 1)[1].split("\n## ")[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    return {extra: what.strip() for names, what in rows
            for extra in re.findall(r"`([^`]+)`", names)}


def _run_without_extras(code: str, *argv, timeout=300) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS + textwrap.dedent(code),
                           *map(str, argv)], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)


def _tiny_corpus(folder: Path) -> Path:
    words = "the cat dog sat ran on a mat log and big small red".split()
    path = folder / "tiny.txt"
    path.write_text("".join(" ".join(words[(i + j) % len(words)] for j in range(3 + i % 5))
                            + "\n" for i in range(300)))
    return path


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
    assert set(core) == {"tensorflow", "keras", "numpy", "ai-edge-litert", "tqdm"}
    assert not any(s.operator == "==" for spec in core.values() for s in spec)
    assert str(core["keras"]) in ("<3.16,>=3.15.1", ">=3.15.1,<3.16")


def test_the_core_leaves_out_what_only_a_feature_needs():
    """Plots, BLEU, CoNLL-U, TensorBoard logs and subword tokens are extras, each named;
    ``all`` and ``dev`` (what make test installs) still have every one."""
    core = {canonicalize_name(Requirement(r).name) for r in _project()["dependencies"]}
    assert not core & set(EXTRAS_ONLY)
    assert set(EXTRAS_ONLY) == set(wheel_contents.NOT_CORE)
    for package, extra in EXTRAS_ONLY.items():
        assert package in _extra(extra), f"{package} is not in the {extra!r} extra"
    assert set(EXTRAS_ONLY) <= _extra("all") <= _extra("dev")


def test_the_readme_lists_every_extra_and_what_it_is_for():
    listed, declared = _readme_extras(), set(_project()["optional-dependencies"])
    assert set(listed) == declared, (f"only in README: {sorted(set(listed) - declared)}; "
                                     f"only in pyproject.toml: {sorted(declared - set(listed))}")
    assert all(listed.values()), listed


def test_a_missing_extra_is_one_line_naming_it_and_a_broken_one_is_not_hidden(
        tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sacrebleu", None)  # as if not installed
    with pytest.raises(KerasSeqError) as err:
        corpus_bleu(["a b"], ["a b"])
    assert str(err.value) == ("the BLEU score needs sacrebleu, which is not installed: "
                              "pip install 'keras-seq[seq2seq]'")
    (tmp_path / "half_installed.py").write_text("import its_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="its_missing_dependency"):
        require("half_installed", "plot", "a plot")


def test_without_the_extras_every_module_imports_and_a_feature_names_its_extra(tmp_path):
    """With the extras' packages not importable, every keras_seq module imports (but the
    seq2seq plots, imported lazily by their callers), TensorBoard logging is off with a
    note naming its extra, and a command that needs one stops with one line naming it."""
    done = _run_without_extras("""
        import importlib, pkgutil
        import keras_seq
        from keras_seq.training.summaries import SummaryWriter, tensorboard_missing
        failed = {}
        for module in pkgutil.walk_packages(keras_seq.__path__, "keras_seq."):
            try:
                importlib.import_module(module.name)
            except Exception as err:
                failed[module.name] = f"{type(err).__name__}: {err}"
        print("@@failed", json.dumps(failed))
        print("@@tensorboard", tensorboard_missing(), SummaryWriter(sys.argv[2]).enabled)
        run_commands()
    """, json.dumps([["ngram", "sparsity", "--data", str(_tiny_corpus(tmp_path)), "--tokenizer",
                      "word", "--plot", str(tmp_path / "sparsity.png")]]), tmp_path / "tb")
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines()
             if line.startswith("@@")}
    assert "@@rc" in lines, done.stderr[-3000:]
    assert json.loads(lines["@@failed"]) == {"keras_seq.tasks.seq2seq.plots": (
        "KerasSeqError: drawing attention heatmaps and length curves needs matplotlib, which "
        "is not installed: pip install 'keras-seq[plot]'")}
    assert lines["@@tensorboard"].endswith(
        "TensorBoard logging needs tensorboard, which is not installed: "
        "pip install 'keras-seq[tensorboard]' False")
    assert lines["@@rc"] == "2"
    assert [line for line in done.stderr.splitlines() if "keras-seq: " in line] == [
        "keras-seq: error: the sparsity plot needs matplotlib, which is not installed: "
        "pip install 'keras-seq[plot]'"]
    assert not (tmp_path / "sparsity.png").exists() and not (tmp_path / "tb").exists()


@pytest.mark.slow
def test_without_the_extras_train_lm_and_export_tflite_run(tmp_path):
    """A tiny train lm -> export tflite with the extras' packages not importable: no
    TensorBoard logs, said once. (~15 s: slow; the fast tier has the test above, and make
    package-check runs train/eval/export/demo in a venv without the extras.)"""
    run = tmp_path / "run"
    done = _run_without_extras("run_commands()", json.dumps([
        ["train", "lm", "--run-dir", str(run), "--data", str(_tiny_corpus(tmp_path)),
         "--tokenizer", "word", "--units", "8", "--embed-dim", "8", "--batch-size", "4",
         "--bptt", "6", "--epochs", "1", "--max-steps-per-epoch", "3", "--sample-tokens", "0",
         "--quiet"],
        ["export", "tflite", "--run-dir", str(run), "--out", str(tmp_path / "tflite"),
         "--variants", "float32", "--graphs", "step"],
    ]))
    assert [line for line in done.stdout.splitlines() if line.startswith("@@rc")] == \
        ["@@rc 0", "@@rc 0"], done.stderr[-3000:]
    notes = [line for line in done.stdout.splitlines() if "TensorBoard" in line]
    assert len(notes) == 1 and notes[0].endswith("pip install 'keras-seq[tensorboard]'")
    assert not (run / "tensorboard").exists()
    assert (tmp_path / "tflite" / "step_float32.tflite").stat().st_size > 1000


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


def test_a_wheel_whose_core_needs_an_extras_package_is_refused(wheel, tmp_path):
    heavier = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as whl, zipfile.ZipFile(heavier, "w") as out:
        for item in whl.infolist():
            data = whl.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = data.replace(b"Requires-Dist: tqdm>=4.60\n",
                                    b"Requires-Dist: tqdm>=4.60\nRequires-Dist: matplotlib>=3.8\n")
            out.writestr(item, data)
    with zipfile.ZipFile(heavier) as whl:
        assert wheel_contents.problems(whl) == [
            "matplotlib is a core dependency (it belongs in an extra)"]


# What `make demo`'s environment must never pull in: the backends it does not train on, the
# browser driver, the test tools (issue 57: a first run installs what it runs).
NOT_FOR_THE_DEMO = {"torch", "jax", "jaxlib", "playwright", "pytest", "schemathesis"}


def _demo_extras() -> set[str]:
    """The extras the Makefile's `make demo` install names (``-e ".[a,b]"`` in the
    ``$(DEMO_STAMP)`` recipe)."""
    rule = (ROOT / "Makefile").read_text().split("\n$(DEMO_STAMP):", 1)[1].split("\n\n")[0]
    found = re.findall(r'-e "\.\[([a-z,]+)\]"', rule)
    assert len(found) == 1, f"the $(DEMO_STAMP) recipe names no one editable install: {rule}"
    return set(found[0].split(","))


def test_make_demo_installs_only_what_the_main_job_runs():
    extras = _demo_extras()
    assert extras == {"plot", "quantize"}, extras
    pulled = set().union(*(_extra(e) for e in extras))
    assert not pulled & NOT_FOR_THE_DEMO, pulled & NOT_FOR_THE_DEMO
    demo = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n", 1)[0]
    assert "$(DEMO_STAMP)" in demo and "$(STAMP)" not in demo, demo


def test_make_test_asks_for_the_cpu_build_of_torch():
    """PyPI has no ``+cpu`` local version: asking for it can only install the CPU build."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_CPU = torch==.*\+cpu$", makefile, re.M), "TORCH_CPU is gone"
    stamp = makefile.split("\n$(STAMP):", 1)[1].split("\n\n")[0]
    assert stamp.index('"$(TORCH_CPU)"') < stamp.index("-r requirements.txt"), stamp


def test_the_quick_start_runs_in_the_demo_venv_with_min_count_2():
    """Quick start activates the venv `make demo` built, and every command that tokenizes
    words keeps the vocabulary the docs recommend (``--min-count 2``)."""
    section = (ROOT / "README.md").read_text().split("\n## Quick start\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert lines[0].startswith("source .venv/bin/activate"), lines[0]
    tokenizing = [line for line in lines if line.startswith(
        ("keras-seq data stats", "keras-seq data prepare", "keras-seq ngram train",
         "keras-seq train lm")) and "--init-from" not in line]
    assert len(tokenizing) >= 4, tokenizing
    for line in tokenizing:
        assert "--min-count 2" in line, line
