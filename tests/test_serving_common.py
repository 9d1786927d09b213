"""Shared helpers for the serving tests: a tiny SavedModel (made once) and the real server
on a free loopback port, in a thread (uvicorn) or as a `keras-seq serve` subprocess.

Not a conftest: the serving test modules import what they need from here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from test_export_common import trained_run

from tests.shared_cache import shared_folder

ROOT = Path(__file__).resolve().parents[1]
# One client for every request the serving tests send: httpx.get and httpx.post build a new
# client per call, and with it a TLS context that loads the system's CA bundle (50 ms of
# CPU; 361 calls took 18 s). No keep-alive and no pool limit: each request still opens its
# own connection, as httpx.get and httpx.post do.
http = httpx.Client(limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))


def saved_model(tmp_path_factory):
    """The tiny LSTM run exported as a SavedModel (once per test run)."""
    def build(folder):
        from keras_seq.export.saved_model import export_saved_model

        export_saved_model(trained_run(tmp_path_factory), folder / "sm",
                           printer=lambda *a: None)

    return shared_folder(tmp_path_factory, "serving_saved", build) / "sm"


def model_base(tmp_path_factory, names=("lm",)):
    """A fresh model base with each name published as version 1."""
    from keras_seq.serving.layout import publish_saved_model

    base = tmp_path_factory.mktemp("models")
    for name in names:
        publish_saved_model(saved_model(tmp_path_factory), base, name, 1)
    return base


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadServer:
    """uvicorn serving :func:`create_app` in a background thread of this process."""

    def __init__(self, config):
        import uvicorn

        from keras_seq.serving.app import create_app, uvicorn_config

        config.port = config.port if config.port != 8501 else free_port()
        config.graceful_timeout_s = 5
        self.config = config
        self.url = f"http://127.0.0.1:{config.port}"
        self.app = create_app(config, printer=lambda *a: None)
        self.server = uvicorn.Server(uvicorn_config(self.app, config))  # as `keras-seq serve`
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        wait_healthy(self.url, timeout=60)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=15)


def wait_healthy(url: str, timeout: float = 60, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: "
                               f"{proc.stdout.read() if proc.stdout else ''}")
        try:
            if http.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not become healthy within {timeout} s")


def serve_subprocess(base, *extra, port=None, env=None):
    """`keras-seq serve` as a subprocess on a free loopback port; returns (proc, url)."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "keras_seq.cli", "serve", "--model-base", str(base),
           "--port", str(port), *map(str, extra)]
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=90, proc=proc)
    except Exception:
        proc.kill()
        proc.wait(10)
        raise
    return proc, url


def stop(proc, timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode
