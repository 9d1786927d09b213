"""`keras-seq serve` as a real subprocess: publish into the layout, token from the
environment, version pick-up, graceful shutdown on SIGTERM; `keras-seq bench serve`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from test_serving_common import ROOT, saved_model, serve_subprocess, stop

from keras_seq.cli import main
from keras_seq.serving.layout import list_versions


def test_publish_flag_writes_next_version(tmp_path_factory, tmp_path, capsys):
    sm = saved_model(tmp_path_factory)
    base = tmp_path / "models"
    assert main(["serve", "--model-base", str(base), "--model-name", "lm",
                 "--publish", str(sm)]) == 0
    assert main(["serve", "--model-base", str(base), "--model-name", "lm",
                 "--publish", str(sm)]) == 0
    assert list_versions(base / "lm") == [1, 2]
    assert "published" in capsys.readouterr().out
    assert main(["serve", "--model-base", str(base), "--model-name", "lm", "--publish",
                 str(sm), "--version", "2"]) == 2  # refuses to overwrite
    assert main(["serve", "--model-base", str(base), "--model-name", "../x", "--publish",
                 str(sm)]) == 2  # no path tricks in names
    assert not any(p.name.startswith(".tmp") for p in (base / "lm").iterdir())


def test_subprocess_token_env_pickup_and_graceful_shutdown(tmp_path_factory, tmp_path):
    sm = saved_model(tmp_path_factory)
    base = tmp_path / "models"
    assert main(["serve", "--model-base", str(base), "--model-name", "lm",
                 "--publish", str(sm)]) == 0
    proc, url = serve_subprocess(base, "--model-name", "lm", "--poll-interval", "0.3",
                                 "--batch-timeout-ms", "1500",
                                 env={"KERAS_SEQ_SERVE_TOKEN": "tok"})
    try:
        auth = {"Authorization": "Bearer tok"}
        assert httpx.get(url + "/v1/models/lm").status_code == 401
        assert httpx.get(url + "/v1/models/lm", headers=auth).status_code == 200
        # a new version written while running is served without a restart
        assert main(["serve", "--model-base", str(base), "--model-name", "lm",
                     "--publish", str(sm)]) == 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = httpx.get(url + "/v1/models/lm", headers=auth).json()
            if status["model_version_status"][0]["state"] == "AVAILABLE" and \
                    status["model_version_status"][0]["version"] == "2":
                break
            time.sleep(0.2)
        assert status["model_version_status"][0]["version"] == "2", status
        # SIGTERM while a request waits 1.5 s in the batcher: it still gets its answer
        result = {}

        def slow():
            result["r"] = httpx.post(url + "/v1/models/lm:predict", headers=auth, timeout=30,
                                     json={"instances": ["the cat sat"]})

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.5)
        proc.terminate()
        t.join(30)
        assert result["r"].status_code == 200, result["r"].text
        assert result["r"].json()["predictions"][0]["lengths"] == 3
        # uvicorn finishes the shutdown, then re-raises SIGTERM: a clean exit by signal
        assert proc.wait(30) in (0, -signal.SIGTERM)
        assert "Traceback" not in proc.stdout.read()
    finally:
        stop(proc)


@pytest.mark.slow
def test_bench_serve_smoke(tmp_path_factory):
    sm = saved_model(tmp_path_factory)
    out = subprocess.run(
        [sys.executable, "-m", "keras_seq.cli", "bench", "serve", "--saved-model", str(sm),
         "--seconds", "4", "--clients", "1", "4", "--warmup", "0.5", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert [r["clients"] for r in report["rows"]] == [1, 4]
    assert all(r["requests"] > 0 and r["errors"] == 0 for r in report["rows"])
    assert report["rss_before_mib"] > 0 and report["rss_after_mib"] > 0
    assert report["server_exit_code"] in (0, -signal.SIGTERM)
