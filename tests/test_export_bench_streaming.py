"""``keras-seq bench streaming`` and the export CLI on the tiny run (few tokens); the
benchmark's verdict (quantized ≥ 3× faster than fp32 TFLite within +1.5% PPL) on
hand-made rows."""

import json

import numpy as np
import pytest
from test_export_common import exported, trained_run

from keras_seq.benchmarks.streaming import (
    PPL_TOLERANCE_PCT,
    TARGET_SPEEDUP,
    _row,
    format_report,
    score_rows,
    streamed_models,
)
from keras_seq.cli import main


def test_export_cli(tmp_path_factory, tmp_path, capsys):
    run = trained_run(tmp_path_factory)
    assert main(["export", "tflite", "--run-dir", str(run), "--out", str(tmp_path / "t"),
                 "--variants", "float32", "--graphs", "step", "--no-parity", "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in manifest["models"]] == ["step_float32"]
    assert (tmp_path / "t" / "step_float32.json").is_file()
    assert main(["export", "saved-model", "--run-dir", str(run), "--out",
                 str(tmp_path / "sm")]) == 0
    assert (tmp_path / "sm" / "saved_model.pb").is_file()
    assert main(["export", "tflite", "--run-dir", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "x")]) == 2
    assert "not a keras-seq run directory" in capsys.readouterr().err


def test_bench_streaming_json_and_plot(tmp_path_factory, tmp_path, capsys):
    run = trained_run(tmp_path_factory)
    out, _ = exported(tmp_path_factory)
    plot = tmp_path / "s.png"
    assert main(["bench", "streaming", "--run-dir", str(run), "--tokens", "20", "--warmup",
                 "3", "--export-dir", str(out), "--threads", "1", "--json",
                 "--plot", str(plot)]) == 0
    report = json.loads(capsys.readouterr().out)
    runtimes = [r["runtime"] for r in report["rows"]]
    assert runtimes[:3] == ["keras-eager", "tf-function", "saved-model"]
    assert "tflite step_float32" in runtimes and "tflite step_fused_float32" in runtimes
    for r in report["rows"]:
        assert r["p50_us"] <= r["p95_us"] <= r["p99_us"] and r["tokens_per_s"] > 0
    # the report's verdict is the verdict of its own rows
    assert report["verdict"] == score_rows([dict(r) for r in report["rows"]])
    assert isinstance(report["verdict"]["met"], bool)
    assert plot.stat().st_size > 1000


# ----------------------------------------------------------------------------------------
# The verdict


def _rows(*specs):
    """Benchmark rows from ``(runtime, threads, p50 µs, PPL Δ%)``; the fp32 TFLite
    baseline (1 thread, 300 µs) comes first."""
    specs = (("tflite step_float32", 1, 300.0, 0.0),) + specs
    return [_row(name, threads, np.full(20, p50), 4096, delta)
            for name, threads, p50, delta in specs]


def test_the_target_is_three_times_within_one_and_a_half_percent():
    assert (TARGET_SPEEDUP, PPL_TOLERANCE_PCT) == (3.0, 1.5)


@pytest.mark.parametrize("p50,delta,met", [
    (100.0, 1.5, True),  # exactly 3×, exactly +1.5%: both bounds inclusive
    (99.0, 1.49, True),  # just faster, just inside
    (101.0, 0.0, False),  # just slower than 3× (2.97×)
    (50.0, -3.0, True),  # better PPL than Keras is fine
])
def test_speed_decides_among_models_within_the_ppl_tolerance(p50, delta, met):
    rows = _rows(("tflite step_int8", 1, p50, delta), ("tflite step_dynamic", 1, 150.0, 0.1))
    verdict = score_rows(rows)
    assert verdict["met"] is met
    assert verdict["best"] == "tflite step_int8"
    assert verdict["speedup"] == pytest.approx(300.0 / p50)
    assert verdict["ppl_delta_pct"] == delta
    assert [r["speedup_vs_tflite_fp32"] for r in rows] == pytest.approx([1.0, 300 / p50, 2.0])


def test_a_model_just_outside_the_ppl_tolerance_does_not_count():
    verdict = score_rows(_rows(("tflite step_int8", 1, 50.0, 1.51)))
    assert verdict == {"met": False, "reason": "no quantized model within the PPL tolerance"}
    # the best model within the tolerance is then judged, even if slower
    verdict = score_rows(_rows(("tflite step_int8", 1, 50.0, 1.51),
                               ("tflite step_dynamic", 1, 120.0, 0.2)))
    assert (verdict["met"], verdict["best"]) == (False, "tflite step_dynamic")
    assert verdict["speedup"] == pytest.approx(2.5)


def test_only_quantized_models_on_one_thread_count():
    verdict = score_rows(_rows(("tflite step_fused_float32", 1, 50.0, 0.0),  # not quantized
                               ("tflite step_int8", 2, 50.0, 0.3),  # two threads
                               ("tflite step_int8", 1, 200.0, 0.3),
                               ("tflite step_dynamic", 1, 80.0, None)))  # PPL not measured
    assert (verdict["met"], verdict["best"]) == (False, "tflite step_int8")
    assert verdict["speedup"] == pytest.approx(1.5)


def test_no_baseline_no_verdict():
    rows = _rows(("tflite step_int8", 1, 50.0, 0.3))[1:]
    assert score_rows(rows) == {"met": False, "reason": "no fp32 TFLite baseline"}
    assert rows[0]["speedup_vs_tflite_fp32"] is None


def test_a_variant_that_failed_to_export_is_not_benchmarked():
    manifest = {"models": [
        {"name": "step_float32", "graph": "step", "variant": "float32"},
        {"name": "step_int8", "graph": "step", "variant": "int8", "error": "no kernel"},
        {"name": "step_fused_dynamic", "graph": "step_fused", "variant": "dynamic"},
        {"name": "sequence_dynamic", "graph": "sequence", "variant": "dynamic"}]}
    assert [m["name"] for m in streamed_models(manifest)] == ["step_float32",
                                                            "step_fused_dynamic"]
    # so the failed fast variant cannot meet the target for the others
    verdict = score_rows(_rows(("tflite step_fused_dynamic", 1, 150.0, 0.1)))
    assert (verdict["met"], verdict["best"]) == (False, "tflite step_fused_dynamic")


def test_the_verdict_is_printed():
    rows = _rows(("tflite step_int8", 1, 99.0, 0.4))
    report = {"model": {"cell": "lstm", "num_layers": 1, "units": 8, "embed_dim": 8,
                        "vocab_size": 20}, "tokens": 20, "warmup": 3, "keras_val_ppl": 9.0,
              "rows": rows, "verdict": score_rows(rows)}
    assert "MET — best tflite step_int8 3.03× at +0.40% PPL" in format_report(report)
    rows = _rows(("tflite step_int8", 1, 99.0, 2.0))
    report.update(rows=rows, verdict=score_rows(rows))
    assert "target: MISSED (no quantized model within the PPL tolerance)" in \
        format_report(report)
