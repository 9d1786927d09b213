"""Quantization-aware training from the command line: a fine-tune of a float run
(``train lm --init-from RUN --qat MODE``), its config checks, resume, export and the
``bench quantization`` table at toy size."""

from __future__ import annotations

import json

import pytest

from keras_seq.cli import main
from keras_seq.errors import KerasSeqError
from keras_seq.tasks.lm.config import LMConfig
from tests.fixtures.lm_runs import trained_run

TINY = ["--epochs", "1", "--max-steps-per-epoch", "4", "--lr", "1e-3", "--quiet"]


@pytest.fixture(scope="module")
def float_run(tmp_path_factory):
    return trained_run(tmp_path_factory, cell="gru")


def test_a_qat_fine_tune_keeps_the_float_runs_model_and_tokenizer(float_run, tmp_path, capsys):
    run = tmp_path / "q4"
    assert main(["train", "lm", "--run-dir", str(run), "--init-from", str(float_run),
                 "--qat", "int4", *TINY]) == 0
    base, config = (json.loads((d / "config.json").read_text()) for d in (float_run, run))
    assert config["qat"] == "int4" and config["init_from"] == str(float_run)
    for field in ("cell", "units", "embed_dim", "data", "tokenizer", "batch_size", "bptt"):
        assert config[field] == base[field], field
    assert (run / "tokenizer.json").read_text() == (float_run / "tokenizer.json").read_text()
    out = tmp_path / "x"
    assert main(["export", "tflite", "--run-dir", str(run), "--out", str(out),
                 "--variants", "int4", "--graphs", "step"]) == 0
    assert (out / "step_int4.tflite").is_file()
    capsys.readouterr()
    assert main(["export", "tflite", "--run-dir", str(run), "--out", str(out),
                 "--variants", "dynamic", "--graphs", "step"]) != 0
    err = capsys.readouterr().err
    assert "trained with qat='int4'" in err and "Traceback" not in err


@pytest.mark.slow  # the ranges' save and load: tests/backends/test_qat.py (every backend)
def test_a_full_integer_qat_run_resumes_with_its_ranges(float_run, tmp_path):
    run = tmp_path / "q8"
    assert main(["train", "lm", "--run-dir", str(run), "--init-from", str(float_run),
                 "--qat", "int8", *TINY]) == 0
    assert main(["train", "lm", "--run-dir", str(run), "--epochs", "2", "--resume",
                 "--quiet"]) == 0
    # lazy: loads Keras
    from keras_seq.models import loading

    model = loading.load_model(run)
    ranges = model.rnns[0].cell.activation_ranges.variable.numpy()
    assert model.qat == "int8" and (ranges[:, 0] <= 0).all() and (ranges[:, 1] > 0).all()
    assert (ranges[:, 1] - ranges[:, 0]).min() > 0.01  # tracked, not the [-1, 1] start


def test_init_from_a_model_of_another_shape_is_refused(float_run, tmp_path, capsys):
    code = main(["train", "lm", "--run-dir", str(tmp_path / "bad"), "--init-from",
                 str(float_run), "--qat", "int4", "--units", "7", *TINY])
    assert code != 0
    err = capsys.readouterr().err
    assert "--init-from" in err and "shapes" in err and "Traceback" not in err


def test_qat_config_checks_and_older_configs():
    for bad, words in ((dict(qat="int4", mixed_precision="mixed_bfloat16"), "mixed precision"),
                       (dict(qat="int8", softmax="adaptive", cutoffs="5"), "adaptive"),
                       (dict(qat="int4", cell="keras-gru"), "keras-seq's recurrent cells")):
        with pytest.raises(KerasSeqError, match=words):
            LMConfig(**bad).validate()
    old = {k: v for k, v in LMConfig().to_dict().items() if k not in ("qat", "init_from")}
    again = LMConfig.from_dict({"kind": "lm", **old})  # written before wave 5
    assert again.qat is None and again.init_from is None


def test_bench_quantization_table_from_measurements():
    """The report's rows and table from measured parts (the full run at toy size: the slow
    test below)."""
    from keras_seq.benchmarks.quantization import _rows, format_report

    entries = {label: {"file": f"{label}.tflite", "size_bytes": size, "keras_val_ppl": ppl,
                       "parity": {"val_ppl": ppl, "top1_agreement": 1.0}}
               for label, size, ppl in (("float32", 4000, 60.0),
                                        ("float32 fine-tuned alike", 4000, 58.0),
                                        ("QAT int4", 600, 58.58))}
    keyboard = {label: {"top1_iv": 0.2, "ksr": 0.4} for label in entries}
    timings = {label: {"step": [10.0, 11.0, 12.0], "keyboard": [20.0, 21.0, 25.0]}
               for label in entries}
    rows = {r["model"]: r for r in _rows(entries, keyboard, timings)}
    assert rows["QAT int4"]["ppl_vs_control_pct"] == pytest.approx(1.0)
    assert rows["QAT int4"]["ppl_vs_float_pct"] == pytest.approx(100 * (58.58 / 60 - 1))
    assert rows["QAT int4"]["step_us"] == 11.0 and rows["QAT int4"]["keyboard_us"] == 21.0
    table = format_report({"machine": {"cpu": "X", "cores": 2}, "qat_epochs": 1,
                           "qat_lr": 5e-4, "rounds": 3, "tokens": 10,
                           "load_1min": {"start": 0.1, "timing": 0.2, "end": 0.3},
                           "rows": list(rows.values())})
    assert "| QAT int4 | 1 | 58.58 | -2.37% | +1.00% |" in table and "CPU: X (2 cores)" in table


@pytest.mark.slow  # fine-tunes, exports and times for real (the table: the test above)
def test_bench_quantization_at_toy_size(float_run, tmp_path, monkeypatch):
    from keras_seq.benchmarks import quantization
    from keras_seq.benchmarks.quantization import format_report, run_quantization_benchmark

    monkeypatch.setattr(quantization, "SETTLE_SECONDS", 0)  # no waiting for a quiet machine

    said = []
    report = run_quantization_benchmark(float_run, tmp_path, modes=("int4",), epochs=1,
                                        lr=1e-3, tokens=20, warmup=5, rounds=1,
                                        printer=said.append)
    labels = [r["model"] for r in report["rows"]]
    assert labels == ["float32", "float32 fine-tuned alike", "PTQ dynamic", "PTQ full int8",
                      "PTQ int4", "PTQ dynamic_shared", "QAT int4"]
    rows = {r["model"]: r for r in report["rows"]}
    assert rows["float32"]["ppl_vs_float_pct"] == 0.0
    assert rows["float32 fine-tuned alike"]["ppl_vs_control_pct"] == 0.0
    assert rows["QAT int4"]["size_bytes"] == rows["PTQ int4"]["size_bytes"]
    assert all(r["step_us"] > 0 and r["keyboard_us"] > r["step_us"] * 0.5 for r in rows.values())
    table = format_report(report)
    assert "CPU:" in table and "| QAT int4 |" in table and "load (1 min)" in table
    assert json.loads((tmp_path / "quantization.json").read_text())["rows"][0]["model"] == \
        "float32"
