"""A live server survives generated and hostile requests, slow clients, floods, bad tokens,
broken publishes and a soak (the "server" and "soak" reliability areas).

The quick campaigns run once each against `keras-seq serve` subprocesses; the fixes behind
them are tested on their own: the read timeout and connection cap (an in-process uvicorn
with no model), the constant-time token check, publish's load check, and the registry's
handling of half-copied and broken versions."""

import asyncio
import hmac
import secrets
import shutil
import socket
import threading
import time

import pytest

from keras_seq.errors import KerasSeqError
from keras_seq.serving.app import ServeConfig, create_app, uvicorn_config
from keras_seq.serving.layout import publish_saved_model
from keras_seq.serving.registry import ModelRegistry
from tools.reliability import server as server_area


def _check(rows):
    for row in rows:
        print(row)
    assert rows and all(row.ok for row in rows), [r for r in rows if not r.ok]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One campaign server for both quick areas (each server start imports TensorFlow:
    seconds; `python -m tools.reliability` gives each area its own)."""
    with server_area.campaign_server("quick", tmp_path_factory.mktemp("live")) as srv:
        yield srv


@pytest.mark.slow  # ~40 s with its server; fast versions: the guard, token, publish and
def test_quick_server_campaign(live, tmp_path):  # registry tests below, in process
    rows = server_area.run("quick", tmp_path, print, server=live)
    assert len(rows) == 7
    _check(rows)


def test_the_range_scenario_covers_every_numeric_request_field():
    """Each numeric input of next_tokens/generate in the server's declared table gets a
    case past its range and a bound, so a field added to the table without a case fails."""
    from keras_seq.serving.codec import Limits, request_fields

    numeric = {name for name, field in request_fields(Limits()).items()
               if field.dtype != "string" and name not in ("token", "tokens")}  # step: unit tests
    cases = server_area.range_cases()
    past = {field for _, _, field in cases if field is not None}
    bounds = {key for _, body, field in cases if field is None for key in body["inputs"]}
    assert numeric <= past and numeric <= bounds


@pytest.mark.slow  # shares the campaign's server (its start is most of the cost)
def test_quick_soak(live, tmp_path):
    from tools.reliability import soak

    rows = soak.run("quick", tmp_path, print, server=live)
    _check(rows)
    assert rows[0].cases > 100  # requests answered


# -- the read timeout and the connection cap ---------------------------------------------------
class _Bare:
    """uvicorn with the server's configuration (:func:`uvicorn_config`) around an app with
    no model, in a thread; the app's log lines in ``messages``."""

    def __init__(self, tmp_path, **config):
        import uvicorn

        self.messages = []
        self.config = ServeConfig(str(tmp_path), poll_interval=0,
                                  port=server_area.free_port(), **config)
        app = create_app(self.config, ModelRegistry(tmp_path, poll_interval=0),
                         printer=self.messages.append)
        self.server = uvicorn.Server(uvicorn_config(app, self.config))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.config.port), timeout=5)
        return sock

    def healthz(self) -> int:
        with self.connect() as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return int(sock.recv(100).split()[1])


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (data before that is read)."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if sock.recv(4096) == b"":
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return False


def test_slow_and_idle_connections_are_cut_after_the_read_timeout(tmp_path):
    with _Bare(tmp_path, read_timeout_s=0.5) as srv:
        idle, headers, body = (srv.connect() for _ in range(3))
        headers.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never ends its headers
        body.sendall(b"POST /v1/models/lm:predict HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"instances\"")  # nor its body
        started = time.monotonic()
        assert _closed_within(idle, 3) and _closed_within(headers, 3)
        assert _closed_within(body, 3)
        assert time.monotonic() - started < 3
        # a request that arrives in time is answered, and its connection kept alive
        done = srv.connect()
        done.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert done.recv(100).startswith(b"HTTP/1.1 200")
        assert srv.healthz() == 200
        for sock in (idle, headers, body, done):
            sock.close()
    # cut mid-body, the request is a client's failure, not a server error
    assert not [m for m in srv.messages if "internal error" in m], srv.messages


def test_past_the_connection_cap_the_longest_waiting_connection_is_closed(tmp_path):
    with _Bare(tmp_path, read_timeout_s=30, max_connections=5) as srv:
        held = [srv.connect() for _ in range(10)]
        time.sleep(0.3)
        assert srv.healthz() == 200  # served at once, not after the 30 s read timeout
        closed = [_closed_within(sock, 0.5 if i < 5 else 0.05) for i, sock in enumerate(held)]
        assert all(closed[:5]) and not any(closed[-4:]), closed  # the oldest went first
        for sock in held:
            sock.close()


def test_client_leaving_mid_body_is_not_an_internal_error(tmp_path):
    with _Bare(tmp_path, read_timeout_s=30) as srv:
        with srv.connect() as sock:
            sock.sendall(b"POST /v1/models/lm:predict HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"instances\"")
            time.sleep(0.2)
        time.sleep(0.5)
        assert srv.healthz() == 200
    assert not [m for m in srv.messages if "internal error" in m], srv.messages


# -- the bearer token ------------------------------------------------------------------------
def test_bearer_token_is_compared_in_constant_time(tmp_path, monkeypatch):
    """Fails if the server goes back to comparing tokens with ``==``."""
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    monkeypatch.setattr(secrets, "compare_digest", spy)
    app = create_app(ServeConfig(str(tmp_path), poll_interval=0, token="s3cret"),
                     ModelRegistry(tmp_path, poll_interval=0), printer=lambda m: None)
    for token, status in (("s3cret", 404), ("s3creT", 401), ("s3cret!", 401), ("x", 401)):
        before = len(calls)
        got = asyncio.run(server_area.asgi_status(app, "GET", "/v1/models/lm",
                                                  {"Authorization": f"Bearer {token}"}))
        assert got == status, token
        assert len(calls) == before + 1, f"token {token!r} was not checked by compare_digest"
    assert asyncio.run(server_area.asgi_status(app, "GET", "/v1/models/lm", {})) == 401
    assert server_area.uses_compare_digest()


# -- publish and the registry ------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved():
    return server_area.tiny_saved_model()


@pytest.mark.parametrize("how", ["no variables", "truncated weights", "garbage saved_model.pb"])
def test_publish_refuses_a_saved_model_that_does_not_load(tmp_path, saved, how):
    base = tmp_path / "models"
    publish_saved_model(saved, base, "lm", 1)
    broken = server_area._break(saved, tmp_path / "broken", how)
    with pytest.raises(KerasSeqError, match="nothing was published"):
        publish_saved_model(broken, base, "lm")
    assert sorted(p.name for p in (base / "lm").iterdir()) == ["1"]  # no 2, no temp folder


def test_registry_serves_the_newest_version_that_loads_and_retries_a_finished_copy(
        tmp_path, saved):
    base = tmp_path / "models"
    publish_saved_model(saved, base, "lm", 1)
    half = base / "lm" / "2"
    half.mkdir()
    shutil.copy2(saved / "saved_model.pb", half / "saved_model.pb")  # a copy half-way
    messages = []
    registry = ModelRegistry(base, poll_interval=0, printer=messages.append)
    registry.start()  # (a restart over it)
    assert registry.healthy() == {"lm": 1}
    assert any("could not load lm version 2" in m and "no version of it" in m
               for m in messages), messages
    status = {s["version"]: s for s in registry.status("lm")["model_version_status"]}
    assert status["2"]["state"] == "END" and status["2"]["status"]["error_code"] != "OK"
    registry.scan()
    assert registry.healthy() == {"lm": 1}  # the same files: not tried again
    shutil.copytree(saved / "variables", half / "variables")  # the copy finishes
    registry.scan()
    assert registry.healthy() == {"lm": 1}  # files just changed: wait for them to settle
    registry.scan()
    assert registry.healthy() == {"lm": 2}


def test_registry_keeps_serving_when_a_newer_version_is_broken(tmp_path, saved):
    base = tmp_path / "models"
    publish_saved_model(saved, base, "lm", 1)
    messages = []
    registry = ModelRegistry(base, poll_interval=0, printer=messages.append)
    registry.start()
    server_area._break(saved, base / "lm" / "2", "bit-flipped weights")
    registry.scan()
    registry.scan()
    assert registry.healthy() == {"lm": 1}
    assert any("still serving version 1" in m for m in messages), messages
