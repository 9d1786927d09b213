"""Load test of ``keras-seq serve`` over loopback HTTP: throughput and latency of
``next_tokens`` at 1 and 16 concurrent clients, and the server's memory.

The server runs as a ``keras-seq serve`` subprocess on a free port of 127.0.0.1 (nothing
else is contacted) with a copy of the SavedModel in a temporary model base. Each client is
a thread with its own keep-alive connection sending TF Serving-shaped requests
(``{"signature_name": "next_tokens", "inputs": {"text": [one text], "k": K}}``) back to
back for its share of ``seconds``. Reported per level: requests, errors, requests/s,
p50/p99 latency (ms, client side), the mean number of requests the server merged per
batch, and the server's RSS after the level; plus RSS before the first and after the last
level (psutil if installed, else ``/proc/PID/status``).

Use ``keras-seq bench serve --saved-model DIR`` (or ``--run-dir RUN`` to export first) or
:func:`run_serve_benchmark`.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from keras_seq.tables import print_table

TARGET_SPEEDUP = 4.0
PROMPTS = ("the cat sat on the", "a small dog ran", "the big red", "on a mat and",
           "the dog sat on a log and", "small cat", "a big", "the red dog ran on the mat")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` in bytes."""
    try:
        # lazy: an optional dependency
        import psutil

        return int(psutil.Process(pid).memory_info().rss)
    except ImportError:
        pass
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no VmRSS for process {pid}")


def _get_json(port: int, path: str, timeout: float = 5.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def _wait_healthy(proc, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"keras-seq serve exited with {proc.returncode} before it was "
                               "ready")
        try:
            if _get_json(port, "/healthz", 2.0)[0] == 200:
                return
        except (OSError, http.client.HTTPException, ValueError):
            pass
        time.sleep(0.25)
    raise TimeoutError(f"keras-seq serve was not healthy within {timeout:.0f} s")


def _client(port: int, model: str, k: int, deadline: float, offset: int, out: list,
            errors: list) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    path = f"/v1/models/{model}:predict"
    headers = {"Content-Type": "application/json"}
    i = offset
    try:
        while time.monotonic() < deadline:
            body = json.dumps({"signature_name": "next_tokens",
                               "inputs": {"text": [PROMPTS[i % len(PROMPTS)]], "k": k}})
            i += 1
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body, headers)
                resp = conn.getresponse()
                resp.read()
            except (OSError, http.client.HTTPException):
                errors.append("connection")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            if resp.status != 200:
                errors.append(resp.status)
                continue
            out.append(time.perf_counter() - t0)
    finally:
        conn.close()


def _level(port: int, model: str, clients: int, seconds: float, k: int) -> dict:
    latencies: list[list] = [[] for _ in range(clients)]
    errors: list = []
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=_client, args=(port, model, k, deadline, i * 3,
                                                      latencies[i], errors), daemon=True)
               for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    elapsed = time.monotonic() - t0
    lat = np.array([x for row in latencies for x in row]) * 1000.0
    return {"clients": clients, "requests": int(lat.size), "errors": len(errors),
            "req_per_s": float(lat.size / elapsed),
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
            "p99_ms": float(np.percentile(lat, 99)) if lat.size else None}


def run_serve_benchmark(saved_model=None, run_dir=None, seconds: float = 60.0,
                        clients=(1, 16), k: int = 5, max_batch_size: int = 32,
                        batch_timeout_ms: float = 2.0, num_batch_threads: int = 2,
                        warmup_s: float = 2.0, eager_batching: bool = False,
                        printer=print) -> dict:
    """Run the load test; ``seconds`` is the measured time, split evenly over ``clients``."""
    if (saved_model is None) == (run_dir is None):
        raise ValueError("give exactly one of saved_model (an exported SavedModel) or "
                         "run_dir (a `keras-seq train lm` run to export first)")
    if seconds <= 0 or not clients or min(clients) < 1:
        raise ValueError(f"seconds must be > 0 and clients ≥ 1, got {seconds}, {clients}")
    tmp = Path(tempfile.mkdtemp(prefix="keras_seq_bench_serve_"))
    proc = None
    try:
        if saved_model is None:
            # lazy: loads Keras, TensorFlow only when this runs
            from keras_seq.export.saved_model import export_saved_model

            saved_model = export_saved_model(run_dir, tmp / "export", printer=printer)
        # lazy: an optional dependency
        from keras_seq.serving.layout import publish_saved_model

        publish_saved_model(saved_model, tmp / "models", "lm", 1)
        port = _free_port()
        cmd = [sys.executable, "-m", "keras_seq.cli", "serve", "--model-base",
               str(tmp / "models"), "--model-name", "lm", "--host", "127.0.0.1", "--port",
               str(port), "--poll-interval", "0", "--max-batch-size", str(max_batch_size),
               "--batch-timeout-ms", str(batch_timeout_ms), "--num-batch-threads",
               str(num_batch_threads), "--max-instances", str(max(64, max_batch_size))]
        if eager_batching:
            cmd.append("--eager-batching")
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env.pop("KERAS_SEQ_SERVE_TOKEN", None)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        _wait_healthy(proc, port, timeout=180)
        if warmup_s > 0:
            _level(port, "lm", max(clients), warmup_s, k)
        rss_before = rss_bytes(proc.pid)
        rows = []
        share = seconds / len(clients)
        for n in clients:
            stats0 = _get_json(port, "/healthz")[1]["batching"]
            row = _level(port, "lm", n, share, k)
            stats1 = _get_json(port, "/healthz")[1]["batching"]
            batches = stats1["batches"] - stats0["batches"]
            merged = stats1["batched_requests"] - stats0["batched_requests"]
            row["mean_batch"] = merged / batches if batches else None
            row["rss_mib"] = rss_bytes(proc.pid) / 2**20
            rows.append(row)
            printer(f"bench serve: {n} client(s): {row['req_per_s']:.1f} req/s, p50 "
                    f"{_ms(row['p50_ms'])}, p99 {_ms(row['p99_ms'])}"
                    + (f", {row['errors']} error(s)" if row["errors"] else ""))
        rss_after = rss_bytes(proc.pid)
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    base, top = rows[0], rows[-1]
    speedup = top["req_per_s"] / base["req_per_s"] if base["req_per_s"] else None
    return {
        "signature": "next_tokens", "k": k, "seconds": seconds, "warmup_s": warmup_s,
        "max_batch_size": max_batch_size, "batch_timeout_ms": batch_timeout_ms,
        "num_batch_threads": num_batch_threads, "eager_batching": eager_batching,
        "cpu_count": os.cpu_count(),
        "rows": rows, "speedup": speedup, "target_speedup": TARGET_SPEEDUP,
        "meets_target": bool(speedup and speedup >= TARGET_SPEEDUP),
        "rss_before_mib": rss_before / 2**20, "rss_after_mib": rss_after / 2**20,
        "rss_growth_mib": (rss_after - rss_before) / 2**20,
        "server_exit_code": proc.returncode if proc is not None else None,
    }


def _ms(value) -> str:
    """A latency for the progress line; None when a level had no successful request."""
    return "n/a" if value is None else f"{value:.2f} ms"


def format_report(report: dict) -> str:
    buf = io.StringIO()
    cols = ["clients", "requests", "errors", "req_per_s", "p50_ms", "p99_ms", "mean_batch",
            "rss_mib"]
    print_table(report["rows"], cols, file=buf)
    speed = report["speedup"]  # None when the first level had no successful request
    speed = "n/a" if speed is None else f"{speed:.2f}x"
    buf.write(f"\nthroughput {report['rows'][-1]['clients']} vs {report['rows'][0]['clients']}"
              f" client(s): {speed} (target ≥ {report['target_speedup']:g}x: "
              f"{'met' if report['meets_target'] else 'NOT met'})\n")
    buf.write(f"server RSS: {report['rss_before_mib']:.1f} MiB before, "
              f"{report['rss_after_mib']:.1f} MiB after ({report['rss_growth_mib']:+.1f} MiB)"
              f"; {report['seconds']:g} s measured, batch ≤ {report['max_batch_size']}, "
              f"timeout {report['batch_timeout_ms']:g} ms"
              f"{' (eager start)' if report['eager_batching'] else ''}, "
              f"{report['num_batch_threads']} batch thread(s), {report['cpu_count']} CPU(s) "
              "shared by server and clients\n")
    return buf.getvalue()
