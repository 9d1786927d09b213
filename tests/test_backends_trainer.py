"""The trainers on every Keras backend.

Keras picks its backend once per process, so the JAX (and torch) runs are
``keras-seq train … --backend jax`` commands in one subprocess per module fixture (one
start-up for several commands). This pytest process runs TensorFlow: it checks the
mixed-precision and jit-compile flags, a JAX run resumed under TensorFlow, the JAX
checkpoints loaded here, and the errors for a missing backend package or a clash with the
Keras already imported.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_seq.backend as backend_mod
from keras_seq.cli import main
from keras_seq.errors import KerasSeqError
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.task import train_lm
from tests.prereqs import skip_unless

LM_TINY = ["--embed-dim", "8", "--units", "12", "--batch-size", "4", "--bptt", "6",
           "--max-steps-per-epoch", "6", "--sample-tokens", "8", "--log-every", "2",
           "--histogram-freq", "1", "--dropout", "0.2", "--state-reset-prob", "0.2",
           "--seed", "7", "--lr", "0.01", "--quiet"]
S2S_TINY = ["--data", "copy", "--min-len", "4", "--max-len", "4", "--train-size", "32",
            "--val-size", "8", "--test-size", "8", "--units", "8", "--embed-dim", "4",
            "--batch-size", "16", "--eval-size", "8", "--no-bidirectional", "--quiet"]

# Runs keras_seq.cli.main on each argument list in turn; prints "@@rc <i> <rc>" after each.
RUNNER = textwrap.dedent("""
    import json, sys
    from keras_seq.cli import main
    for i, args in enumerate(json.loads(sys.argv[1])):
        rc = main(args)
        sys.stdout.flush(); sys.stderr.flush()
        print(f"@@rc {i} {rc}", flush=True)
""")
# A sitecustomize that makes TensorFlow (and tensorflow-text) impossible to import.
NO_TENSORFLOW = textwrap.dedent("""
    import sys
    class _NoTensorFlow:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "tensorflow_text", "tf_keras"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None
    sys.meta_path.insert(0, _NoTensorFlow())
""")


def run_commands(commands, env_extra=None, timeout=600):
    """``(return codes, stdout, stderr)`` of the commands run by one Python subprocess."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env_extra or {})}
    env.pop("KERAS_BACKEND", None)  # --backend decides
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(commands)],
                          capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=Path(__file__).resolve().parents[1])
    rcs = [int(line.split()[2]) for line in proc.stdout.splitlines()
           if line.startswith("@@rc ")]
    assert len(rcs) == len(commands), f"the runner stopped early:\n{proc.stderr[-3000:]}"
    return rcs, proc.stdout, proc.stderr


def read_json(path):
    return json.loads(Path(path).read_text())


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    words = "the cat dog sat ran on a mat log and big small red".split()
    lines = [" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(300)]
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# The JAX runs (five trainings in one subprocess, ~25 s) are in the slow tier; the fast
# tier trains, resumes and evaluates on a non-TensorFlow backend with the torch runs below,
# and tests/backends runs every model under JAX.
@pytest.fixture(scope="module")
def jax_runs(tmp_path_factory, corpus):
    """LM: 2 epochs straight (``lm``), and 1 epoch then ``--resume`` to 2 (``lm_resumed``);
    seq2seq: 1 epoch then ``--resume`` to 2. All with ``--backend jax``."""
    skip_unless("jax")
    root = tmp_path_factory.mktemp("jax")
    lm = ["train", "lm", "--backend", "jax", "--data", corpus, *LM_TINY]
    s2s = ["train", "seq2seq", "--backend", "jax", *S2S_TINY]
    commands = [
        [*lm, "--run-dir", str(root / "lm"), "--epochs", "2"],
        [*lm, "--run-dir", str(root / "lm_resumed"), "--epochs", "1"],
        [*lm, "--run-dir", str(root / "lm_resumed"), "--epochs", "2", "--resume"],
        [*s2s, "--run-dir", str(root / "s2s"), "--epochs", "1"],
        [*s2s, "--run-dir", str(root / "s2s"), "--epochs", "2", "--resume"],
    ]
    rcs, out, err = run_commands(commands)
    assert rcs == [0] * len(commands), err[-3000:]
    return root, out


@pytest.mark.slow  # the JAX runs: see jax_runs
def test_jax_lm_run_records_backend_metrics_and_checkpoints(jax_runs):
    root, out = jax_runs
    run = root / "lm"
    config, metrics = read_json(run / "config.json"), read_json(run / "metrics.json")
    assert (config["backend"], config["jit_compile"], config["mixed_precision"]) == \
        ("jax", True, "off")  # JAX's fit always compiles
    assert (metrics["backend"], metrics["jit_compile"]) == ("jax", True)
    assert metrics["epochs_done"] == 2 and np.isfinite(metrics["val"]["ppl"])
    assert metrics["tokens_per_sec"] > 0
    assert read_json(run / "state.json")["epochs_done"] == 2
    assert (run / "checkpoints" / "last.keras").is_file()
    assert (run / "checkpoints" / "best.keras").is_file()
    rows = csv_rows(run / "metrics.csv")
    assert [r["epoch"] for r in rows] == ["0", "1"] and "grad_norm" in rows[0]
    logs = {p.name for p in (run / "tensorboard").iterdir()}  # TF is importable here
    assert {"train", "validation", "samples", "activations"} <= logs
    assert "backend      jax (mixed precision off, jit_compile True)" in out


@pytest.mark.slow  # the JAX runs: see jax_runs
def test_jax_lm_resume_is_exact_and_checkpoints_load_under_tensorflow(jax_runs):
    root, _ = jax_runs
    straight, resumed = (root / "lm" / "metrics.csv"), (root / "lm_resumed" / "metrics.csv")
    assert csv_rows(straight) == csv_rows(resumed)  # dropout and row-reset RNGs restored
    import keras_seq.models  # noqa: F401  (registers the model classes)

    a = keras.saving.load_model(root / "lm" / "checkpoints" / "last.keras")
    b = keras.saving.load_model(root / "lm_resumed" / "checkpoints" / "last.keras")
    for wa, wb in zip(a.get_weights(), b.get_weights(), strict=True):
        np.testing.assert_allclose(wa, wb, rtol=0, atol=1e-6)


@pytest.mark.slow  # the JAX runs: see jax_runs
def test_jax_run_resumes_under_tensorflow(jax_runs, tmp_path, capsys):
    root, _ = jax_runs
    run = tmp_path / "lm"
    shutil.copytree(root / "lm", run)
    assert main(["train", "lm", "--run-dir", str(run), "--epochs", "3", "--resume",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "started under the jax backend and continues under tensorflow" in out
    metrics = read_json(run / "metrics.json")
    assert (metrics["backend"], metrics["epochs_done"]) == ("tensorflow", 3)
    assert metrics["jit_compile"] is True  # the run's config: compiled, as under JAX
    assert any(d["kind"] == "backend-changed" for d in metrics["diagnostics"])
    assert read_json(run / "config.json")["backend"] == "jax"  # the backend that started it
    assert len(csv_rows(run / "metrics.csv")) == 3


@pytest.mark.slow  # the JAX runs: see jax_runs
def test_jax_seq2seq_trains_resumes_and_evaluates(jax_runs):
    root, _ = jax_runs
    run = root / "s2s"
    metrics = read_json(run / "metrics.json")
    assert (metrics["backend"], metrics["epochs_done"]) == ("jax", 2)
    assert metrics["test"]["n"] == 8 and 0 <= metrics["test"]["exact_match"] <= 1
    assert read_json(run / "config.json")["backend"] == "jax"
    rows = csv_rows(run / "metrics.csv")  # appended by the resumed session
    assert [r["epoch"] for r in rows] == ["0", "1"] and "val_exact_match" in rows[0]
    assert (run / "checkpoints" / "last.keras").is_file()
    assert (run / "tensorboard" / "attention").is_dir()


@pytest.fixture(scope="module")
def torch_runs(tmp_path_factory, corpus):
    """As ``jax_runs``, with ``--backend torch``: LM 2 epochs straight and 1 + ``--resume``
    to 2; seq2seq 1 + ``--resume`` to 2 (one subprocess)."""
    skip_unless("torch")
    root = tmp_path_factory.mktemp("torch")
    lm = ["train", "lm", "--backend", "torch", "--data", corpus, *LM_TINY]
    s2s = ["train", "seq2seq", "--backend", "torch", *S2S_TINY]
    commands = [
        [*lm, "--run-dir", str(root / "lm"), "--epochs", "2"],
        [*lm, "--run-dir", str(root / "lm_resumed"), "--epochs", "1"],
        [*lm, "--run-dir", str(root / "lm_resumed"), "--epochs", "2", "--resume"],
        [*s2s, "--run-dir", str(root / "s2s"), "--epochs", "1"],
        [*s2s, "--run-dir", str(root / "s2s"), "--epochs", "2", "--resume"],
    ]
    rcs, out, err = run_commands(commands)
    assert rcs == [0] * len(commands), err[-3000:]
    return root, out


def test_torch_lm_trains_and_resumes(torch_runs):
    root, out = torch_runs
    metrics = read_json(root / "lm" / "metrics.json")
    assert (metrics["backend"], metrics["epochs_done"]) == ("torch", 2)
    assert np.isfinite(metrics["val"]["ppl"]) and metrics["tokens_per_sec"] > 0
    straight, resumed = (root / "lm" / "metrics.csv"), (root / "lm_resumed" / "metrics.csv")
    assert [r["epoch"] for r in csv_rows(straight)] == ["0", "1"]
    assert [r["epoch"] for r in csv_rows(resumed)] == ["0", "1"]  # appended on resume
    assert csv_rows(straight)[0] == csv_rows(resumed)[0]  # same seed, same first epoch
    assert read_json(root / "lm_resumed" / "metrics.json")["epochs_done"] == 2
    assert "backend      torch" in out


def test_torch_lm_resume_is_exact(torch_runs):
    """Exact under torch too: every dropout SeedGenerator has an explicit seed
    (layers.seeds.explicit_seed), so Keras's torch dropout draws from the saved state, not
    torch's global generator."""
    root, _ = torch_runs
    straight, resumed = (root / "lm" / "metrics.csv"), (root / "lm_resumed" / "metrics.csv")
    assert csv_rows(straight) == csv_rows(resumed)  # dropout and row-reset RNGs restored
    import keras_seq.models  # noqa: F401  (registers the model classes)

    a = keras.saving.load_model(root / "lm" / "checkpoints" / "last.keras")
    b = keras.saving.load_model(root / "lm_resumed" / "checkpoints" / "last.keras")
    for wa, wb in zip(a.get_weights(), b.get_weights(), strict=True):
        np.testing.assert_allclose(wa, wb, rtol=0, atol=1e-6)


def test_torch_seq2seq_trains_resumes_and_evaluates(torch_runs):
    root, _ = torch_runs
    metrics = read_json(root / "s2s" / "metrics.json")
    assert (metrics["backend"], metrics["epochs_done"]) == ("torch", 2)
    assert metrics["test"]["n"] == 8 and 0 <= metrics["test"]["exact_match"] <= 1
    rows = csv_rows(root / "s2s" / "metrics.csv")  # appended by the resumed session
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert (root / "s2s" / "checkpoints" / "last.keras").is_file()


def test_without_tensorflow_training_goes_on_and_tf_features_say_so(tmp_path, corpus):
    """JAX training with TensorFlow unimportable: no TensorBoard (said once), everything
    else written; subword tokenization and export each fail with one line naming TF."""
    skip_unless("jax")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_TENSORFLOW)
    run = tmp_path / "lm"
    commands = [
        ["train", "lm", "--backend", "jax", "--data", corpus, *LM_TINY, "--run-dir",
         str(run), "--epochs", "1", "--histogram-freq", "0"],
        ["train", "lm", "--backend", "jax", "--data", corpus, *LM_TINY, "--run-dir",
         str(tmp_path / "subword"), "--tokenizer", "subword"],
        ["export", "saved-model", "--run-dir", str(run), "--out", str(tmp_path / "export")],
    ]
    rcs, out, err = run_commands(commands, {"PYTHONPATH": str(site)})
    assert rcs == [0, 2, 2], err[-3000:]
    assert "no TensorBoard logs are written" in out
    assert not (run / "tensorboard").exists()
    assert read_json(run / "metrics.json")["backend"] == "jax"
    errors = [line for line in err.splitlines() if line.startswith("keras-seq: error:")]
    assert len(errors) == 2
    assert "subword tokenization" in errors[0] and "pip install tensorflow" in errors[0]
    assert "export needs TensorFlow" in errors[1]


# ----------------------------------------------------------------------------------------
# TensorFlow, in this process


# slow (~14 s, two trainings with XLA); fast tier: test_mixed_float16_gets_loss_scaling and
# tests/test_xla.py's fit with jit_compile
@pytest.mark.slow
def test_mixed_precision_and_jit_compile_are_recorded_and_kept_on_resume(tmp_path, corpus):
    run = tmp_path / "bf16"
    args = ["train", "lm", "--data", corpus, *LM_TINY, "--run-dir", str(run),
            "--max-steps-per-epoch", "3", "--histogram-freq", "0", "--sample-tokens", "0"]
    assert main([*args, "--epochs", "1", "--backend", "tensorflow",
                 "--mixed-precision", "mixed_bfloat16", "--jit-compile"]) == 0
    config = read_json(run / "config.json")
    assert (config["backend"], config["mixed_precision"], config["jit_compile"]) == \
        ("tensorflow", "mixed_bfloat16", True)
    assert keras.mixed_precision.global_policy().name == "float32"  # put back
    assert main(["train", "lm", "--run-dir", str(run), "--epochs", "2", "--resume",
                 "--quiet"]) == 0
    metrics = read_json(run / "metrics.json")
    assert (metrics["mixed_precision"], metrics["jit_compile"], metrics["epochs_done"]) == \
        ("mixed_bfloat16", True, 2)
    model = keras.saving.load_model(run / "checkpoints" / "last.keras")
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert model.get_compile_config()["jit_compile"] is True


def test_mixed_float16_gets_loss_scaling(tmp_path, corpus):
    run = tmp_path / "fp16"
    config = LMConfig(data=corpus, embed_dim=8, units=12, batch_size=4, bptt=6, epochs=1,
                      max_steps_per_epoch=3, sample_tokens=0, histogram_freq=0,
                      mixed_precision="mixed_float16")
    results = train_lm(config, run, verbose=0)
    assert results["mixed_precision"] == "mixed_float16" and np.isfinite(results["val"]["ppl"])
    model = keras.saving.load_model(run / "checkpoints" / "last.keras")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


def test_config_checks_backend_fields():
    with pytest.raises(KerasSeqError, match="mixed_precision must be one of 'off', "
                                            "'mixed_float16', 'mixed_bfloat16' \\(got 'fp8'\\)"):
        LMConfig(mixed_precision="fp8").validate()
    with pytest.raises(KerasSeqError, match="backend must be one of 'tensorflow', 'jax', 'torch'"):
        LMConfig(backend="mxnet").validate()
    with pytest.raises(KerasSeqError, match="jit_compile must be true or false"):
        LMConfig(jit_compile="yes").validate()


def test_backend_clash_with_the_keras_already_imported(tmp_path, corpus, capsys):
    assert keras.backend.backend() == "tensorflow"
    assert main(["train", "lm", "--backend", "jax", "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "already imported in this process with the tensorflow backend" in err
    assert "set KERAS_BACKEND=jax before starting Python" in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(KerasSeqError, match="KERAS_BACKEND=jax"):
        train_lm(LMConfig(data=corpus, backend="jax"), tmp_path / "r2", verbose=0)
    assert not (tmp_path / "r2").exists()


def test_missing_backend_package_names_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(backend_mod, "installed", lambda name: name != "jax")
    assert main(["train", "seq2seq", "--backend", "jax", "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("keras-seq: error: the jax backend needs the 'jax' package, which is not "
                   "installed: pip install jax (or choose another --backend)")


def test_missing_torch_is_said_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(backend_mod, "installed", lambda name: name != "torch")
    assert main(["train", "lm", "--backend", "torch", "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("keras-seq: error: the torch backend needs") and \
        err.endswith("pip install torch (or choose another --backend)")


def test_backend_flags_on_every_train_command(capsys):
    for kind in ("lm", "seq2seq", "classify", "tag", "conditioned"):
        with pytest.raises(SystemExit):
            main(["train", kind, "--help"])
        help_text = capsys.readouterr().out
        for flag in ("--backend {tensorflow,jax,torch}",
                     "--mixed-precision {off,mixed_float16,mixed_bfloat16}", "--jit-compile"):
            assert flag in help_text, (kind, flag)
