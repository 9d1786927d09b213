"""`keras-seq serve` as a real subprocess: publish into the layout, token from the
environment, version pick-up, graceful shutdown on SIGTERM; `keras-seq bench serve`."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from keras_seq.cli import main
from keras_seq.serving.layout import list_versions
from tests.fixtures.serving import ROOT, http, saved_model, serve_subprocess, stop


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
                                 "--batch-timeout-ms", "500",
                                 env={"KERAS_SEQ_SERVE_TOKEN": "tok"})
    port = int(url.rsplit(":", 1)[1])
    try:
        auth = {"Authorization": "Bearer tok"}
        assert http.get(url + "/v1/models/lm").status_code == 401
        assert http.get(url + "/v1/models/lm", headers=auth).status_code == 200
        # a new version written while running is served without a restart
        assert main(["serve", "--model-base", str(base), "--model-name", "lm",
                     "--publish", str(sm)]) == 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = http.get(url + "/v1/models/lm", headers=auth).json()
            if status["model_version_status"][0]["state"] == "AVAILABLE" and \
                    status["model_version_status"][0]["version"] == "2":
                break
            time.sleep(0.2)
        assert status["model_version_status"][0]["version"] == "2", status
        # SIGTERM while a request is in flight. No sleeps: the request's handler is
        # provably running (it asked for the body: "100 Continue"), and the body is sent
        # only once the server provably began shutting down (it refuses new connections).
        # The request then still waits its 0.5 s in the batcher and gets its answer.
        body = json.dumps({"instances": ["the cat sat"]}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(b"POST /v1/models/lm:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Authorization: Bearer tok\r\nContent-Type: application/json\r\n"
                         b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
            interim = _read_until(conn, b"\r\n\r\n")
            assert interim.startswith(b"HTTP/1.1 100 "), interim
            proc.terminate()
            _wait_refusing(port, proc)
            conn.sendall(body)
            raw = _read_until(conn, None)  # the server closes the connection after it
        head, _, payload = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), raw[:500]
        assert json.loads(payload)["predictions"][0]["lengths"] == 3
        # uvicorn finishes the shutdown, then re-raises SIGTERM: a clean exit by signal
        assert proc.wait(30) in (0, -signal.SIGTERM)
        assert "Traceback" not in proc.stdout.read()
    finally:
        stop(proc)


def _read_until(conn, marker, limit=1 << 20) -> bytes:
    """Bytes from ``conn`` up to and including ``marker`` (None: until the peer closes)."""
    data = b""
    while marker is None or marker not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        assert len(data) < limit
    return data


def _wait_refusing(port, proc, timeout=60.0) -> None:
    """Until the server stops accepting connections (its shutdown began). The deadline
    only bounds a broken server."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except ConnectionRefusedError:
            return
        if proc.poll() is not None:
            raise AssertionError(f"server exited ({proc.returncode}) with a request in flight")
        time.sleep(0.02)
    raise AssertionError("the server still accepts connections after SIGTERM")


@pytest.fixture
def bind_calls(monkeypatch):
    """Where `keras-seq serve` would listen: uvicorn's Server.run records its host and
    port instead of serving."""
    import uvicorn

    calls = []
    monkeypatch.setattr(uvicorn.Server, "run",
                        lambda self, sockets=None: calls.append((self.config.host,
                                                                 self.config.port)))
    monkeypatch.delenv("KERAS_SEQ_SERVE_TOKEN", raising=False)
    # uvicorn's Config sets up logging with handlers bound to the sys.stderr of the moment:
    # pytest's capture of this test, closed once it ends, which a later test's logging set-up
    # then flushes ("I/O operation on closed file" in every later test of the worker).
    monkeypatch.setattr(uvicorn.Config, "configure_logging", lambda self: None)
    return calls


def test_binds_loopback_by_default(tmp_path, bind_calls, capsys):
    from keras_seq.cli import build_parser
    from keras_seq.serving.app import ServeConfig

    assert ServeConfig(str(tmp_path)).host == "127.0.0.1"
    assert build_parser().parse_args(["serve", "--model-base", "m"]).host == "127.0.0.1"
    assert main(["serve", "--model-base", str(tmp_path)]) == 0
    assert bind_calls == [("127.0.0.1", 8501)]  # what uvicorn was told to bind
    out = capsys.readouterr().out
    assert "WARNING" not in out and "http://127.0.0.1:8501/v1/models/" in out
    for host in ("localhost", "::1", "127.0.0.2"):  # other loopback names: no warning
        assert main(["serve", "--model-base", str(tmp_path), "--host", host]) == 0
        assert "WARNING" not in capsys.readouterr().out, host
    assert [h for h, _ in bind_calls[1:]] == ["localhost", "::1", "127.0.0.2"]


def test_non_loopback_host_warns_and_says_when_there_is_no_token(tmp_path, bind_calls,
                                                                 capsys, monkeypatch):
    assert main(["serve", "--model-base", str(tmp_path), "--host", "0.0.0.0"]) == 0
    assert bind_calls[-1][0] == "0.0.0.0"
    out = capsys.readouterr().out
    assert "serve: WARNING: listening on 0.0.0.0, reachable from other machines without a " \
        "token (--token)" in out
    assert main(["serve", "--model-base", str(tmp_path), "--host", "0.0.0.0", "--token",
                 "t"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: listening on 0.0.0.0, reachable from other machines" in out
    assert "without a token" not in out
    monkeypatch.setenv("KERAS_SEQ_SERVE_TOKEN", "from-env")  # the environment's token counts
    assert main(["serve", "--model-base", str(tmp_path), "--host", "10.1.2.3"]) == 0
    out = capsys.readouterr().out
    assert "listening on 10.1.2.3" in out and "without a token" not in out


def test_bench_serve_tiny(tmp_path_factory, capsys):
    # The fast version of the smoke test below: the same command and load test on a real
    # `keras-seq serve` subprocess, at a tiny budget (no warm-up, 0.6 s over two levels).
    from keras_seq.benchmarks.serve import format_report

    assert main(["bench", "serve", "--saved-model", str(saved_model(tmp_path_factory)),
                 "--seconds", "0.6", "--clients", "1", "2", "--warmup", "0", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert [r["clients"] for r in report["rows"]] == [1, 2]
    assert all(r["requests"] > 0 and r["errors"] == 0 for r in report["rows"]), report
    assert all(r["mean_batch"] >= 1 and r["rss_mib"] > 0 for r in report["rows"])
    assert report["rss_before_mib"] > 0 and report["rss_after_mib"] > 0
    assert report["server_exit_code"] in (0, -signal.SIGTERM)
    assert "bench serve: 1 client(s): " in err and "bench serve: 2 client(s): " in err
    assert "throughput 2 vs 1 client(s): " in format_report(report)


def test_bench_serve_report_when_no_request_succeeded():
    # A level without one answered request has no latency and no speedup: the report says
    # so (it used to stop on a TypeError formatting None).
    from keras_seq.benchmarks.serve import format_report

    row = {"clients": 1, "requests": 0, "errors": 7, "req_per_s": 0.0, "p50_ms": None,
           "p99_ms": None, "mean_batch": None, "rss_mib": 500.0}
    text = format_report({
        "rows": [row, {**row, "clients": 2}], "speedup": None, "target_speedup": 4.0,
        "meets_target": False, "rss_before_mib": 500.0, "rss_after_mib": 500.0,
        "rss_growth_mib": 0.0, "seconds": 1.0, "max_batch_size": 32, "batch_timeout_ms": 2.0,
        "eager_batching": False, "num_batch_threads": 2, "cpu_count": 2})
    assert "throughput 2 vs 1 client(s): n/a (target ≥ 4x: NOT met)" in text


@pytest.mark.slow  # a subprocess, 4 s measured after a warm-up; the fast version is above
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
