"""``keras-seq bench streaming`` and the export CLI on the tiny run (few tokens)."""

import json

from test_export_common import exported, trained_run

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
    assert "met" in report["verdict"]
    assert plot.stat().st_size > 1000
