import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from keras_seq.cli import main
from tests.shared_cache import shared_folder

TINY = ["--data", "reverse", "--max-len", "5", "--train-size", "64", "--val-size", "8",
        "--test-size", "16", "--units", "8", "--embed-dim", "4", "--steps-per-epoch", "2",
        "--eval-size", "8", "--batch-size", "16", "--quiet"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One tiny trained run, built once per test run (by one xdist worker) and read by every
    test here: read-only (a test that trains on copies it). Trained with tf.functions run
    eagerly (a tiny model then trains without tracing, most of its time): the tests here
    read the run directory, which graph mode writes alike (test_scripts trains seq2seq in
    graph mode)."""
    import tensorflow as tf

    def build(folder):
        tf.config.run_functions_eagerly(True)
        try:
            assert main(["train", "seq2seq", "--run-dir", str(folder / "run"), "--epochs", "1",
                         *TINY]) == 0
        finally:
            tf.config.run_functions_eagerly(False)

    return shared_folder(tmp_path_factory, "seq2seq-cli-run", build) / "run"


def test_train_writes_the_run_directory(run_dir):
    for name in ("config.json", "source_tokenizer.json", "target_tokenizer.json",
                 "metrics.csv", "metrics.json", "state.json", "checkpoints/last.keras"):
        assert (run_dir / name).is_file(), name
    assert any((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    config = json.loads((run_dir / "config.json").read_text())
    assert config["attention"] == "bahdanau" and config["max_source_len"] == 5
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test"]["n"] == 16 and "val_exact_match" in (run_dir / "metrics.csv").read_text()


def test_resume_continues(run_dir, tmp_path, capsys, step_mode):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)  # the shared run stays as trained
    assert main(["train", "seq2seq", "--run-dir", str(run), "--resume", "--epochs", "2",
                 "--quiet"]) == 0
    assert json.loads((run / "state.json").read_text())["epochs_done"] == 2
    assert main(["train", "seq2seq", "--run-dir", str(run), "--epochs", "1", *TINY]) == 2
    assert "--resume" in capsys.readouterr().err


def test_resume_ends_with_the_same_weights(tmp_path, step_mode):
    import keras
    import numpy as np

    # 3 batches per pass and 2 steps per epoch: epoch 2 starts part-way through the first
    # pass and runs on into the second (reshuffled), which the resumed run must pick up
    # exactly (and the dropout masks too). Each eager step is ~0.5 s: 4 steps, not 6.
    common = [*TINY, "--train-size", "48", "--steps-per-epoch", "2", "--dropout", "0.2"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(["train", "seq2seq", "--run-dir", str(straight), "--epochs", "2", *common]) == 0
    assert main(["train", "seq2seq", "--run-dir", str(resumed), "--epochs", "1", *common]) == 0
    assert main(["train", "seq2seq", "--run-dir", str(resumed), "--resume", "--epochs", "2",
                 "--quiet"]) == 0
    a = keras.saving.load_model(straight / "checkpoints/last.keras").get_weights()
    b = keras.saving.load_model(resumed / "checkpoints/last.keras").get_weights()
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)


def test_eval_json_and_plots(run_dir, tmp_path, capsys):
    assert main(["eval", "seq2seq", "--run-dir", str(run_dir), "--json",
                 "--plot", str(tmp_path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n"] == 16 and 0 <= result["exact_match"] <= 1 and "bleu" in result
    assert [r["bucket"] for r in result["by_length"]][-1] == "5-5"
    assert (tmp_path / "attention_heatmap.png").stat().st_size > 1000
    assert (tmp_path / "length_curve.png").stat().st_size > 1000
    assert main(["eval", "seq2seq", "--run-dir", str(run_dir), "--beam", "2",
                 "--limit", "4"]) == 0
    assert "exact match" in capsys.readouterr().out


def test_translate_and_bad_input(run_dir, tmp_path, capsys):
    assert main(["translate", "--run-dir", str(run_dir), "abc", "--beam", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(["translate", "--run-dir", str(run_dir), "abcdefgh"]) == 2
    assert "maximum of 5" in capsys.readouterr().err
    assert main(["translate", "--run-dir", str(run_dir), ""]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["translate", "--run-dir", str(run_dir), "ab1"]) == 0
    assert "outside the vocabulary" in capsys.readouterr().err
    assert main(["translate", "--run-dir", str(tmp_path), "abc"]) == 2
    err = capsys.readouterr().err
    assert "not a keras-seq run directory" in err and "`keras-seq train seq2seq`" in err


def test_translate_export_round_trip(run_dir, tmp_path, capsys):
    assert main(["translate", "--run-dir", str(run_dir), "abc", "dcba"]) == 0
    expected = capsys.readouterr().out
    assert main(["translate", "--run-dir", str(run_dir), "--export", str(tmp_path / "sm"),
                 "abc", "dcba"]) == 0
    assert capsys.readouterr().out == expected
    assert (tmp_path / "sm" / "saved_model.pb").is_file()


def test_train_script_help():
    script = Path(__file__).resolve().parents[1] / "train" / "seq2seq.py"
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--attention" in out and "--data" in out


def test_bench_rejects_unknown_tasks(capsys):
    assert main(["bench", "seq2seq", "--tasks", "sorting"]) == 2
    assert "expected reverse, dates" in capsys.readouterr().err


def _bench_tiny(tmp_path, capsys, minutes):
    args = ["bench", "seq2seq", "--tasks", "reverse", "--out", str(tmp_path), "--max-len", "6",
            "--train-size", "64", "--test-size", "16", "--units", "8", "--embed-dim", "4",
            "--minutes", minutes, "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)["reverse"]
    assert len(out["by_length"]) == 6 and out["params"]["none"]["attention"] == 0
    assert out["params"]["bahdanau"]["attention"] > 0
    assert (tmp_path / "length_curve.png").is_file()
    assert (tmp_path / "attention_heatmap.png").is_file()
    assert main(args) == 0  # finished runs with the same settings are reused
    assert "reusing finished run" in capsys.readouterr().err


def test_bench_tiny_fast(tmp_path, capsys, eager_tf_functions):
    # The fast version of the test below: the same bench and checks, with the two models
    # trained eagerly (no tracing, most of a tiny run's time) for a 0.06 s budget each.
    _bench_tiny(tmp_path, capsys, "0.001")


@pytest.mark.slow  # trains two tiny models in graph mode; the fast version above runs eagerly
def test_bench_tiny(tmp_path, capsys):
    _bench_tiny(tmp_path, capsys, "0.01")
