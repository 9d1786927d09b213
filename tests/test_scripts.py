"""The scripts people copy (train/*.py, export/*.py): each answers --help in a subprocess,
trains or exports at a tiny size, and writes what the CLI reads back (`keras-seq eval …`).

The trainings and exports run inside this test process (:func:`run_script`: the script's
own file run as ``__main__`` with its argv; TensorFlow is already imported here), once for
all pytest-xdist workers (:func:`tests.shared_cache.once`). The slow tier runs the same
scripts as standalone subprocesses (:func:`test_scripts_run_standalone`).
"""

import ast
import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from keras_seq import __version__
from keras_seq.cli import main as cli_main
from keras_seq.data.corpus import load_corpus
from tests.shared_cache import once

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ["train/lm.py", "train/seq2seq.py", "train/classify.py", "export/tflite.py",
           "export/saved_model.py"]


def start(script: str, *args) -> subprocess.Popen:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(ROOT / script), *map(str, args)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def run_script(script: str, *args) -> tuple[int, str]:
    """``(exit status, output)`` of ``python SCRIPT ARGS…`` run in this process: the
    script's file executed as ``__main__`` with ``sys.argv`` set, its output captured."""
    path = str(ROOT / script)
    output = io.StringIO()
    code = 0
    with mock.patch.object(sys, "argv", [path, *map(str, args)]), \
            contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as done:  # sys.exit("error: …") prints the text, exits 1
            if isinstance(done.code, str):
                print(done.code, file=output)
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return code, output.getvalue()


def succeeded(result: list, what: str) -> str:
    code, output = result
    assert code == 0, f"{what} exited {code}:\n{output[-3000:]}"
    return output


def cli_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert cli_main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_show_the_keras_calls_and_import_only_public_names(script):
    """What the scripts teach stays on the page: no private module or name of the library,
    training scripts call compile and fit themselves, the TFLite script the converter."""
    tree = ast.parse((ROOT / script).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keras_seq"):
            private = [p for p in node.module.split(".") if p.startswith("_")]
            private += [a.name for a in node.names
                        if a.name.startswith("_") and not a.name.endswith("__")]
            assert not private, f"{script} imports {node.module}: {private}"
    calls = {n.func.attr for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    if script.startswith("train/"):
        assert {"compile", "fit", "from_script"} <= calls, script
    if script == "export/tflite.py":
        assert {"from_saved_model", "convert"} <= calls


def test_from_script_refuses_a_field_the_config_lacks(tmp_path):
    from dataclasses import dataclass

    from keras_seq.errors import KerasSeqError
    from keras_seq.tasks.lm.config import LMConfig
    from keras_seq.training.trainer import start_run

    @dataclass
    class Script:
        run_dir: str = "runs/x"
        unitz: int = 8

    with pytest.raises(KerasSeqError, match="unitz that LMConfig lacks"):
        LMConfig.from_script(Script())
    with pytest.raises(KerasSeqError, match="epochs must be"):
        LMConfig.from_script(Script(), ignore=("run_dir", "unitz"), epochs=0)
    run = start_run(tmp_path / "run", LMConfig(), {})
    with pytest.raises(KerasSeqError, match="already holds a run"):
        start_run(run, LMConfig(), {})


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    code, output = finish(start(script, "--help"), timeout=60)
    assert code == 0, output
    assert output.startswith("usage:") and "--run-dir" in output


def training_commands(tmp: Path) -> dict:
    """``{kind: (script, args)}``: the three training scripts at a tiny size."""
    corpus = tmp / "shakespeare.txt"  # a few thousand characters of the bundled corpus
    corpus.write_text(load_corpus("tinyshakespeare").text("train")[:4000], encoding="utf-8")
    return {
        "lm": ("train/lm.py", ["--run-dir", tmp / "lm", "--data", corpus, "--units", 16,
                               "--embed-dim", 8, "--bptt", 16, "--batch-size", 4, "--epochs", 1,
                               "--max-steps-per-epoch", 10]),
        "seq2seq": ("train/seq2seq.py", ["--run-dir", tmp / "seq2seq", "--train-size", 64,
                                         "--val-size", 16, "--test-size", 16, "--units", 8,
                                         "--embed-dim", 8, "--epochs", 1, "--batch-size", 32]),
        "classify": ("train/classify.py", ["--run-dir", tmp / "classify", "--train-size", 64,
                                           "--val-size", 16, "--test-size", 24, "--units", 8,
                                           "--embed-dim", 8, "--epochs", 1]),
    }


def export_commands(lm_run: Path, tmp: Path) -> dict:
    """``{name: (script, args)}``: the two export scripts on the tiny LM run, and one told
    to expect the impossible (float16 weights move the logits by ~1e-4: 1e-9 must fail)."""
    return {
        "tflite": ("export/tflite.py", ["--run-dir", lm_run, "--out", tmp / "tflite",
                                        "--variants", "float32,dynamic", "--prefix-tokens", 32]),
        "saved_model": ("export/saved_model.py", ["--run-dir", lm_run, "--out",
                                                  tmp / "saved_model", "--prefix-tokens", 32]),
        "too_strict": ("export/tflite.py", ["--run-dir", lm_run, "--out", tmp / "strict",
                                            "--variants", "float16",
                                            "--quantized-tolerance", 1e-9]),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Tiny runs of the three training scripts: ``({kind: run dir}, {kind: output})``."""
    def train_all(tmp):
        return {kind: run_script(script, *args)
                for kind, (script, args) in training_commands(tmp).items()}

    tmp, results = once(tmp_path_factory, "script-runs", train_all)
    return ({kind: tmp / kind for kind in results},
            {kind: succeeded(result, f"train/{kind}.py") for kind, result in results.items()})


def test_train_lm_writes_a_run_eval_lm_reads(runs, capsys):
    dirs, outputs = runs
    run = dirs["lm"]
    config = json.loads((run / "config.json").read_text())
    assert config["kind"] == "lm" and config["version"] == __version__
    assert config["units"] == 16 and config["bptt"] == 16 and config["batch_size"] == 4
    for name in ("tokenizer.json", "checkpoints/last.keras", "checkpoints/best.keras"):
        assert (run / name).is_file(), name
    assert json.loads((run / "state.json").read_text())["epochs_done"] == 1
    rows = (run / "metrics.csv").read_text().splitlines()
    assert len(rows) == 2 and "val_loss" in rows[0]
    result = cli_json(capsys, "eval", "lm", "--run-dir", str(run))
    tokenizer = json.loads((run / "tokenizer.json").read_text())
    assert result["fingerprint"]["tokenizer"] == tokenizer["fingerprint"]
    assert result["tokens"] > 100 and 1 < result["ppl"] < 2 * len(tokenizer["vocab"])
    # the script's own closing line is the same evaluation
    assert f"PPL {result['ppl']:.2f}" in outputs["lm"]


def test_train_seq2seq_writes_a_run_eval_seq2seq_reads(runs, capsys):
    dirs, outputs = runs
    run = dirs["seq2seq"]
    config = json.loads((run / "config.json").read_text())
    assert config["kind"] == "seq2seq" and config["attention"] == "bahdanau"
    assert (run / "source_tokenizer.json").is_file() and (run / "checkpoints/best.keras").is_file()
    result = cli_json(capsys, "eval", "seq2seq", "--run-dir", str(run))
    assert result["n"] == 16 and 0 <= result["exact_match"] <= 1
    assert f"over {result['n']} pairs" in outputs["seq2seq"]


def test_train_classify_writes_a_run_eval_classify_reads(runs, capsys):
    dirs, outputs = runs
    run = dirs["classify"]
    config = json.loads((run / "config.json").read_text())
    assert config["kind"] == "classify" and config["data"] == "reviews-negation"
    assert json.loads((run / "labels.json").read_text())["labels"] == ["neg", "pos"]
    result = cli_json(capsys, "eval", "classify", "--run-dir", str(run))
    assert result["n"] == 24 and 0 <= result["accuracy"] <= 1
    assert f"accuracy {100 * result['accuracy']:.2f}%" in outputs["classify"]


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory):
    """:func:`export_commands` run: ``(folder, {name: (exit code, output)})``."""
    def export_all(tmp: Path) -> dict:
        return {name: run_script(script, *args)
                for name, (script, args) in export_commands(runs[0]["lm"], tmp).items()}

    return once(tmp_path_factory, "script-exports", export_all)


def test_export_tflite_passes_its_parity_check(exports):
    tmp, results = exports
    code, output = results["tflite"]
    assert code == 0, output[-3000:]
    assert "parity ok: 2 step model(s)" in output
    for variant in ("float32", "dynamic"):
        assert (tmp / "tflite" / f"step_{variant}.tflite").is_file()
        assert f"step_{variant}" in output and "max|Δlogits|" in output


def test_export_tflite_fails_past_its_tolerance(exports):
    code, output = exports[1]["too_strict"]
    assert code == 1, output[-3000:]
    assert "past the tolerance" in output and "step_float16" in output


def test_export_saved_model_passes_its_parity_check(exports):
    tmp, results = exports
    code, output = results["saved_model"]
    assert code == 0, output[-3000:]
    assert "parity ok" in output and "step   max|Δlogits|" in output and "score" in output
    assert (tmp / "saved_model" / "saved_model.pb").is_file()


@pytest.mark.slow  # fast version: the tests above run the same scripts in this process
def test_scripts_run_standalone(tmp_path):
    """Each script as a user runs it: its own Python process, trainings side by side,
    then the exports of the LM run."""
    def side_by_side(commands):
        processes = {name: start(script, *args) for name, (script, args) in commands.items()}
        return {name: finish(p) for name, p in processes.items()}

    trained = side_by_side(training_commands(tmp_path))
    for kind, result in trained.items():
        succeeded(result, f"train/{kind}.py")
    exported = side_by_side(export_commands(tmp_path / "lm", tmp_path / "exports"))
    assert "parity ok: 2 step model(s)" in succeeded(exported["tflite"], "export/tflite.py")
    assert "parity ok" in succeeded(exported["saved_model"], "export/saved_model.py")
    assert exported["too_strict"][0] == 1 and "past the tolerance" in exported["too_strict"][1]
