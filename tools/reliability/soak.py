"""Reliability area "soak": 16 clients keep a live ``keras-seq serve`` busy for minutes.

The server is a ``keras-seq serve`` subprocess on a free port of 127.0.0.1 (defaults but
the port: dynamic batching, polling the model base every second) serving the tiny model of
:mod:`tools.reliability.server`. Each client is a thread with its own keep-alive
connection sending a mix of real requests back to back: ``score``, ``next_tokens`` (row
and columnar), ``generate``, model status and metadata. After a warm-up the server's RSS is
sampled every second; the promises are no error response at all, RSS growth of at most 5%
from the start of the measured time to its end (each the median of the first or last
tenth of the samples, so one allocation burst does not decide), and a bounded p99 latency.

``scale`` sets the duration: ``"quick"`` 3 s (~9 s with the server's start), ``"full"``
10 minutes.

>>> SETTINGS["full"]["seconds"], SETTINGS["full"]["clients"]
(600.0, 16)
"""

from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
from pathlib import Path

from tools.reliability import Row
from tools.reliability.server import MIB, MODEL, ServerProcess, tiny_saved_model

#: per scale: clients, measured seconds, warm-up seconds, the RSS growth allowed (a
#: fraction of the start) and the p99 latency bound (ms; the machine is shared by the
#: server and its 16 clients)
SETTINGS = {
    "quick": {"clients": 16, "seconds": 3.0, "warmup": 1.0, "rss_growth": 0.05,
              "p99_ms": 2000.0},
    "full": {"clients": 16, "seconds": 600.0, "warmup": 30.0, "rss_growth": 0.05,
             "p99_ms": 1000.0},
}

_TEXTS = ("the cat sat on the", "a small dog ran", "the big red", "on a mat and",
          "the dog sat on a log and", "small cat", "a big", "the red dog ran on the mat")


def requests_mix(i: int, version: int = 1) -> tuple[str, str, dict | None]:
    """The ``i``-th request of a client: ``(method, path, JSON body or None)``; ``version``
    is the version being served.

    >>> requests_mix(0)[:2]
    ('POST', '/v1/models/lm:predict')
    """
    text = _TEXTS[i % len(_TEXTS)]
    predict = f"/v1/models/{MODEL}:predict"
    kind = i % 10
    if kind in (0, 1, 2):
        return "POST", predict, {"signature_name": "next_tokens",
                                 "inputs": {"text": [text], "k": 1 + i % 5}}
    if kind in (3, 4):
        return "POST", predict, {"signature_name": "score", "instances": [text, text[:5]]}
    if kind == 5:
        return "POST", predict, {"signature_name": "next_tokens",
                                 "instances": [{"text": text, "k": 3}]}
    if kind == 6:
        return "POST", predict, {"signature_name": "generate",
                                 "inputs": {"prompt": [text], "max_tokens": 4,
                                            "temperature": 0.8, "top_k": 5, "seed": i}}
    if kind == 7:
        return "GET", f"/v1/models/{MODEL}", None
    if kind == 8:
        return "GET", f"/v1/models/{MODEL}/metadata", None
    return "POST", f"/v1/models/{MODEL}/versions/{version}:predict", {"instances": [text]}


class _Clients:
    """``n`` client threads sending :func:`requests_mix` until stopped; latencies (s) of
    the answers and what went wrong."""

    def __init__(self, server: ServerProcess, n: int):
        self.port, self.latencies, self.errors = server.port, [[] for _ in range(n)], []
        self.headers = {"Content-Type": "application/json", **server.headers()}
        self.version = server.served_version()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True)
                         for i in range(n)]

    def run(self, seconds: float) -> None:
        for t in self._threads:
            t.start()
        self._stop.wait(seconds)
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def _client(self, k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = self.headers
        i = 7 * k
        while not self._stop.is_set():
            method, path, body = requests_mix(i, self.version)
            i += 1
            t0 = time.perf_counter()
            try:
                conn.request(method, path, json.dumps(body) if body else None, headers)
                resp = conn.getresponse()
                resp.read()
            except (OSError, http.client.HTTPException) as err:
                self.errors.append(f"{method} {path}: {type(err).__name__}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                continue
            if resp.status != 200:
                self.errors.append(f"{method} {path} ({body}): {resp.status}")
                continue
            self.latencies[k].append(time.perf_counter() - t0)
        conn.close()


def _percentile(sorted_values: list, q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def run(scale: str, workdir, printer=print, seconds: float | None = None,
        server: ServerProcess | None = None) -> list[Row]:
    """Soak a live server; ``seconds`` overrides the scale's measured duration. ``server``:
    a running :class:`ServerProcess` serving ``lm`` to use (and leave running) instead of
    starting one with the defaults."""
    s = dict(SETTINGS[scale])
    if seconds is not None:
        s["seconds"] = float(seconds)
    workdir = Path(workdir)
    own = server is None
    if own:
        from keras_seq.serving.layout import publish_saved_model

        publish_saved_model(tiny_saved_model(printer), workdir / "models", MODEL, 1,
                            check=False)
        server = ServerProcess(workdir / "models", log=workdir / "serve.log").__enter__()
    try:
        warm = _Clients(server, s["clients"])
        warm.run(s["warmup"])
        clients = _Clients(server, s["clients"])
        samples = []
        sampler_stop = threading.Event()

        def sample():
            while True:
                samples.append(server.rss())
                if sampler_stop.wait(1.0):
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        started = time.monotonic()
        sampler.start()
        clients.run(s["seconds"])
        elapsed = time.monotonic() - started
        sampler_stop.set()
        sampler.join(10)
        samples.append(server.rss())
        healthy = server.serves()
        errors = warm.errors + clients.errors
    finally:
        code = server.stop() if own else None
    lat = sorted(x for row in clients.latencies for x in row)
    tenth = max(1, len(samples) // 10)
    rss_start = statistics.median(samples[:tenth])
    rss_end = statistics.median(samples[-tenth:])
    growth = (rss_end - rss_start) / rss_start
    p50, p99 = _percentile(lat, 0.50) * 1000, _percentile(lat, 0.99) * 1000
    label = f"{s['clients']} clients for {s['seconds']:g} s (after {s['warmup']:g} s warm-up)"
    printer(f"  soak: {len(lat)} requests ({len(lat) / elapsed:.0f}/s), {len(errors)} errors, "
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, RSS {rss_start / MIB:.1f} → "
            f"{rss_end / MIB:.1f} MiB ({growth:+.1%}), peak {max(samples) / MIB:.1f} MiB")
    notes = (f"{len(lat)} requests ({len(lat) / elapsed:.0f}/s) of next_tokens, score, "
             f"generate, status and metadata")
    return [
        Row(f"soak: error responses, {label}", len(lat) + len(errors),
            len(errors) + (not healthy),
            notes=notes + (f"; FAILED: {errors[:3]}" if errors else "")
            + ("" if healthy else "; FAILED: the server no longer serves afterwards")),
        Row(f"soak: RSS growth ≤ {s['rss_growth']:.0%}, {label}", 1,
            int(growth > s["rss_growth"]),
            notes=f"RSS {rss_start / MIB:.1f} → {rss_end / MIB:.1f} MiB ({growth:+.2%}), "
            f"peak {max(samples) / MIB:.1f} MiB, {len(samples)} samples (median of the "
            f"first and last tenth)" + (f"; exit code {code} on SIGTERM" if own else "")),
        Row(f"soak: p99 latency ≤ {s['p99_ms']:g} ms, {label}", len(lat),
            int(not p99 <= s["p99_ms"]),
            notes=f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max "
            f"{(lat[-1] * 1000 if lat else float('nan')):.1f} ms"),
    ]
