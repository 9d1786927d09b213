"""Reliability area "server": a live ``keras-seq serve`` under attack.

Every scenario runs against a real server, a ``keras-seq serve`` subprocess on a free port
of 127.0.0.1 (nothing else is contacted), serving a tiny language model exported for the
purpose (:func:`tiny_saved_model`):

* generated requests: schemathesis draws valid and schema-violating cases for every
  operation of the server's own OpenAPI spec; none may get a 5xx;
* hostile requests written by hand (:func:`hostile_cases`): deep JSON nesting, 50 MB
  bodies, NaN/Infinity, invalid UTF-8, path traversal in model names and versions, huge
  ``k`` / ``max_tokens``, wrong methods, content types and empty bodies, broken HTTP;
* slow clients (slowloris) and a connection flood: the server's memory and open files
  stay bounded, every slow connection is cut after ``--read-timeout``, and a normal client
  is served within a bound while the attack runs;
* the bearer token: wrong tokens get 401s, and the server compares tokens in constant time;
* ``--publish`` of broken SavedModels and half-copied version folders: the version being
  served is never replaced by one that does not load.

After each scenario the server must still answer ``/healthz`` and a real prediction.

>>> [case.name for case in hostile_cases("t") if case.name.startswith("traversal")][:2]
['traversal: dot segments in the name', 'traversal: %2e%2e in the name']
"""

from __future__ import annotations

import atexit
import hmac
import http.client
import json
import os
import random
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from keras_seq.benchmarks.serve import rss_bytes
from keras_seq.serving.app import LISTEN_BACKLOG
from tools.reliability import Row

MIB = 2**20
MODEL = "lm"
PREDICT = f"/v1/models/{MODEL}:predict"
TOKEN = "reliability-" + "x" * 20  # the token the campaign's server requires

#: per scale: generated requests, hostile rounds, slow clients and seconds, flood size,
#: the server's --read-timeout and --max-connections, and how fast a normal client must be
#: served during an attack (seconds; generous: the machine is shared with the attackers)
SETTINGS = {
    "quick": {"generated": 60, "hostile_rounds": 1, "slow": 20, "slow_s": 2.0,
              "flood": 400, "read_timeout": 0.8, "max_connections": 150,
              "served_within_s": 5.0},
    "full": {"generated": 10_000, "hostile_rounds": 3, "slow": 400, "slow_s": 30.0,
             "flood": 3000, "read_timeout": 10.0, "max_connections": 1000,
             "served_within_s": 5.0},
}

_CACHE: dict = {}
_WORDS = "the cat dog sat ran on a mat log and big small red".split()


# -- the model and the server ----------------------------------------------------------------
def tiny_saved_model(printer=print) -> Path:
    """A tiny word LSTM (untrained: the server's promises do not depend on the weights)
    exported as a SavedModel with every serving signature; made once per process, in a
    temporary folder removed when the process exits."""
    if "saved" in _CACHE and (_CACHE["saved"] / "saved_model.pb").is_file():
        return _CACHE["saved"]
    from keras_seq.data.tokenizers import make_tokenizer
    from keras_seq.export.saved_model import export_saved_model
    from keras_seq.tasks.lm.config import LMConfig
    from keras_seq.tasks.lm.task import build_model

    root = Path(tempfile.mkdtemp(prefix="keras-seq-reliability-model-"))
    atexit.register(shutil.rmtree, root, True)
    printer("  exporting a tiny language model …")
    tokenizer = make_tokenizer("word").fit(" ".join(_WORDS) + "\n")
    model = build_model(LMConfig(embed_dim=8, units=12, batch_size=1, bptt=6, seed=3),
                        tokenizer.vocab_size)
    _CACHE["saved"] = export_saved_model("(untrained, tools.reliability.server)",
                                         root / "saved_model", printer=lambda *a: None,
                                         model=model, tokenizer=tokenizer)
    return _CACHE["saved"]


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (now).

    >>> 1024 <= free_port() < 65536
    True
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``keras-seq serve`` as a subprocess on a free port of 127.0.0.1, its output in
    ``log``; a context manager that waits until the server is healthy and stops it
    (SIGTERM, then SIGKILL) on exit.

    >>> server = ServerProcess("models", "--poll-interval", "0", log="serve.log")
    >>> server.command[-2:], server.url.startswith("http://127.0.0.1:")
    (['--poll-interval', '0'], True)
    """

    def __init__(self, model_base, *args, token: str | None = None, log="serve.log"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.model_base = Path(model_base)
        self.token = token
        self.log_path = Path(log)
        self.command = [sys.executable, "-m", "keras_seq.cli", "serve", "--model-base",
                        str(model_base), "--host", "127.0.0.1", "--port", str(self.port),
                        *map(str, args)]
        self.proc: subprocess.Popen | None = None

    def __enter__(self):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env.pop("KERAS_SEQ_SERVE_TOKEN", None)
        if self.token:
            env["KERAS_SEQ_SERVE_TOKEN"] = self.token
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while not self.healthy(timeout=2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"keras-seq serve did not become healthy (exit code "
                                   f"{self.proc.returncode}); its log: {self.log()[-1500:]}")
            time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss(self) -> int:
        """The server's resident memory in bytes."""
        return rss_bytes(self.pid)

    def fds(self) -> int:
        """How many files (sockets included) the server has open."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def headers(self, token: bool = True) -> dict:
        return {"Authorization": f"Bearer {self.token}"} if token and self.token else {}

    def get(self, path: str, timeout: float = 10.0):
        """``(status, JSON)`` of a GET (with the token)."""
        return _call(self.port, "GET", path, headers=self.headers(), timeout=timeout)

    def healthy(self, timeout: float = 10.0) -> bool:
        try:
            return self.get("/healthz", timeout)[0] == 200
        except (OSError, http.client.HTTPException, ValueError):
            return False

    def serves(self) -> bool:
        """Healthy, and a real prediction answers correctly."""
        body = {"signature_name": "next_tokens", "inputs": {"text": ["the cat"], "k": 2}}
        try:
            status, out = _call(self.port, "POST", PREDICT, body, self.headers())
        except (OSError, http.client.HTTPException, ValueError):
            return False
        return self.healthy() and status == 200 and len(out["outputs"]["ids"][0]) == 2

    def served_version(self):
        try:
            return self.get("/healthz")[1]["models"].get(MODEL)
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
            return None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def _call(port: int, method: str, path: str, body=None, headers=None, timeout: float = 10.0):
    """``(status, JSON or None)`` of one request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body) if body is not None else None
        conn.request(method, path, data, {"Content-Type": "application/json",
                                          **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, None
    finally:
        conn.close()


def _exchange(port: int, data: bytes, timeout: float = 15.0, head: bool = False):
    """Send ``data`` as is on a fresh connection; the response's status, or None when the
    server closed the connection without one."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            for i in range(0, len(data), 1 << 16):
                sock.sendall(data[i:i + (1 << 16)])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered (and closed) before reading everything
        resp = http.client.HTTPResponse(sock, method="HEAD" if head else "GET")
        try:
            resp.begin()
            resp.read()
        except (http.client.RemoteDisconnected, http.client.IncompleteRead,
                ConnectionResetError, BrokenPipeError):
            return None
        return resp.status


def http_bytes(method: str, path: str, body: bytes = b"", headers=None,
               token: str | None = TOKEN, length: bool = True) -> bytes:
    """An HTTP/1.1 request as bytes (``Connection: close``; the token unless None).

    >>> http_bytes("GET", "/healthz", token=None)
    b'GET /healthz HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n'
    """
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    if length and (body or method in ("POST", "PUT", "PATCH")):
        head.append(f"Content-Length: {len(body)}")
    head += list(headers or [])
    return "\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body


# -- hostile requests ---------------------------------------------------------------------------
@dataclass
class Hostile:
    """A hand-written request (raw bytes) and what must come back: ``"4xx"`` (a client
    error), ``"4xx/close"`` (a client error, or the connection closed without an answer),
    ``"200"``, or ``"not 5xx"`` (anything but a server error or a hang)."""

    name: str
    data: bytes
    expect: str = "4xx"
    head: bool = False

    def judge(self, status) -> bool:
        if status is None:
            return self.expect == "4xx/close"
        if self.expect == "200":
            return status == 200
        if self.expect == "not 5xx":
            return status < 500
        return 400 <= status < 500


def _post(path_or_body, body=None, **kw) -> bytes:
    if body is None:
        path_or_body, body = PREDICT, path_or_body
    if isinstance(body, str):
        body = body.encode("utf-8")
    return http_bytes("POST", path_or_body, body, **kw)


def hostile_cases(token: str = TOKEN) -> list[Hostile]:
    """The hand-written hostile requests (raw HTTP bytes) for a server requiring ``token``."""
    P = lambda body, **kw: _post(body, token=token, **kw)  # noqa: E731
    G = lambda path, **kw: http_bytes("GET", path, token=token, **kw)  # noqa: E731
    cases = []
    add = lambda name, data, expect="4xx", head=False: cases.append(  # noqa: E731
        Hostile(name, data, expect, head))

    # controls: real requests succeed
    add("control: score", P('{"signature_name": "score", "instances": ["the cat sat"]}'), "200")
    add("control: next_tokens", P('{"signature_name": "next_tokens", "inputs": {"text": '
                                  '["the"], "k": 3}}'), "200")
    add("control: generate", P('{"signature_name": "generate", "inputs": {"prompt": ["a"], '
                               '"max_tokens": 4, "temperature": 1.0, "top_k": 3, '
                               '"seed": 1}}'), "200")
    add("control: status", G(f"/v1/models/{MODEL}"), "200")
    # deep nesting, within the 1 MiB body limit
    for depth in (33, 65, 1000, 10_000, 100_000, 400_000):
        add(f"nesting: {depth} lists", P('{"instances": ' + "[" * depth + "]" * depth + "}"))
        add(f"nesting: {depth} objects in inputs",
            P('{"inputs": ' + '{"a": ' * depth + "1" + "}" * depth + "}"))
    add("nesting: 1000 lists in text", P('{"signature_name": "score", "inputs": {"text": '
                                         + "[" * 1000 + '"a"' + "]" * 1000 + "}}"))
    # big bodies: 50 MB declared, sent, streamed chunked, and a body of many small rows
    big = b'{"instances": ["' + b"a" * (50 * 10**6) + b'"]}'
    add("50 MB body", P(big))
    add("50 MB body, chunked", _chunked(PREDICT, big, token), "4xx/close")
    add("50 MB declared, 10 bytes sent", http_bytes(
        "POST", PREDICT, b'{"instan', token=token, length=False,
        headers=["Content-Length: 50000000"]), "4xx/close")
    add("100,000 rows", P(json.dumps({"instances": ["a"] * 100_000})))
    add("a 5,000-character text", P(json.dumps({"instances": ["cat " * 1250]})))
    # NaN, Infinity and out-of-range numbers
    for lit in ("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 400):
        add(f"{lit[:12]} as k", P('{"signature_name": "next_tokens", "inputs": {"text": '
                                  f'["the"], "k": {lit}}}}}'))
        add(f"{lit[:12]} as temperature", P(
            '{"signature_name": "generate", "inputs": {"prompt": ["a"], "max_tokens": 2, '
            f'"temperature": {lit}, "top_k": 1, "seed": 1}}}}'))
        add(f"{lit[:12]} as a text", P(f'{{"instances": [{lit}]}}'))
    add("1e39 temperature (float32 overflow)", P(
        '{"signature_name": "generate", "inputs": {"prompt": ["a"], "max_tokens": 2, '
        '"temperature": 1e39, "top_k": 1, "seed": 1}}'))
    # invalid UTF-8 and odd text
    for name, raw in (("0xff 0xfe", b"\xff\xfe"), ("overlong '/'", b"\xc0\xaf"),
                      ("truncated 3-byte", b"\xe2\x82")):
        add(f"invalid UTF-8: {name}", P(b'{"instances": ["' + raw + b'"]}'))
    # accepted as Python's json does (surrogatepass, UTF-16/32 by their BOM): no 5xx
    add("invalid UTF-8: CESU surrogate", P(b'{"instances": ["\xed\xa0\x80"]}'), "not 5xx")
    add("UTF-16 body with a BOM", P('{"instances": ["a"]}'.encode("utf-16")), "not 5xx")
    add("UTF-8 BOM before the JSON", P(b"\xef\xbb\xbf" + b'{"instances": ["a"]}'), "not 5xx")
    add("lone surrogate escape", P('{"instances": ["\\ud800"]}'), "not 5xx")
    add("NUL in a text", P('{"instances": ["the\\u0000cat"]}'), "not 5xx")
    add("invalid UTF-8 in the URL", G("/v1/models/%ff%fe/metadata"))
    add("invalid UTF-8 in a header", G(f"/v1/models/{MODEL}", headers=["X-A: \xff\xfe"]),
        "not 5xx")
    # path traversal in model names and versions
    for name, path in (
            ("dot segments in the name", "/v1/models/../../../../etc/passwd"),
            ("%2e%2e in the name", "/v1/models/%2e%2e/metadata"),
            ("%2F in the name", "/v1/models/..%2F..%2F..%2Fetc%2Fpasswd/metadata"),
            ("absolute path as the name", "/v1/models//etc/passwd/metadata"),
            ("%2Fetc as the name", "/v1/models/%2Fetc%2Fpasswd:predict"),
            ("backslashes in the name", "/v1/models/..\\..\\etc\\passwd/metadata"),
            ("%00 in the name", f"/v1/models/{MODEL}%00/metadata"),
            ("%00.. in the name", f"/v1/models/{MODEL}%00..%2F..%2Fetc:predict"),
            ("dot segments in the version", f"/v1/models/{MODEL}/versions/../../1/metadata"),
            ("%2e%2e as the version", f"/v1/models/{MODEL}/versions/%2e%2e/metadata"),
            ("%2F in the version", f"/v1/models/{MODEL}/versions/1%2F..%2F..%2F2:predict"),
            ("absolute path as the version", f"/v1/models/{MODEL}/versions//etc/passwd"),
            ("%00 in the version", f"/v1/models/{MODEL}/versions/1%00/metadata"),
            ("negative version", f"/v1/models/{MODEL}/versions/-1"),
            ("version 1e3", f"/v1/models/{MODEL}/versions/1e3/metadata"),
            ("version of 25 digits", f"/v1/models/{MODEL}/versions/{'9' * 25}:predict"),
            ("full-width digits", f"/v1/models/{MODEL}/versions/%EF%BC%91/metadata"),
            ("the model base's parent", "/v1/models/../metadata"),
            ("absolute-form target", f"http://evil.example/v1/models/{MODEL}/metadata")):
        method = "POST" if path.endswith(":predict") else "GET"
        add(f"traversal: {name}", http_bytes(method, path, b'{"instances": ["a"]}'
                                             if method == "POST" else b"", token=token),
            "4xx" if "absolute-form" not in name else "not 5xx")
    add("traversal: raw NUL byte in the target",
        f"GET /v1/models/{MODEL}\x00/metadata HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
        "4xx/close")
    # huge k / max_tokens / top_k / seed
    for k in (1001, 2**31 - 1, 2**31, 2**63, 10**30):
        add(f"k = {k}", P(json.dumps({"signature_name": "next_tokens",
                                      "inputs": {"text": ["the"], "k": k}})))
    for n in (0, -1, 257, 2**31 - 1, 2**31, 10**12):
        add(f"max_tokens = {n}", P(json.dumps({
            "signature_name": "generate", "inputs": {"prompt": ["a"], "max_tokens": n,
                                                     "temperature": 1.0, "top_k": 1,
                                                     "seed": 1}})))
    add("k = -1", P(json.dumps({"signature_name": "next_tokens",
                                "inputs": {"text": ["the"], "k": -1}})))
    for top_k in (-(2**31), 2**31 - 1):
        add(f"top_k = {top_k}", P(json.dumps({
            "signature_name": "generate", "inputs": {"prompt": ["a"], "max_tokens": 3,
                                                     "temperature": 1.0, "top_k": top_k,
                                                     "seed": 2**31 - 1}})))
    add("k as a string", P('{"signature_name": "next_tokens", "inputs": {"text": ["a"], '
                           '"k": "3"}}'))
    add("k as a list", P('{"signature_name": "next_tokens", "inputs": {"text": ["a"], '
                         '"k": [3, 4]}}'))
    # wrong methods
    for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO", "post"):
        add(f"{method} on :predict", http_bytes(method, PREDICT, token=token))
    add("HEAD on :predict", http_bytes("HEAD", PREDICT, token=token), head=True)
    for method in ("POST", "DELETE"):
        add(f"{method} on the status", http_bytes(method, f"/v1/models/{MODEL}",
                                                  b"{}", token=token))
    add("CONNECT", b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n", "4xx/close")
    add("a 10,000-character method", f"{'A' * 10_000} / HTTP/1.1\r\n\r\n".encode(), "4xx/close")
    # wrong content types
    body = '{"instances": ["the cat"]}'
    for ctype, data in (("text/plain", body), ("application/xml", "<instances>a</instances>"),
                        ("application/x-www-form-urlencoded", "instances=a&k=3"),
                        ("multipart/form-data; boundary=xx",
                         '--xx\r\nContent-Disposition: form-data; name="instances"\r\n\r\n'
                         'a\r\n--xx--\r\n'),
                        ("application/json; charset=latin-1", body.encode("latin-1")),
                        ("application/octet-stream", bytes(range(256)))):
        ok = "not 5xx" if data in (body, body.encode("latin-1")) else "4xx"
        add(f"Content-Type {ctype.split(';')[0]}", P(data, headers=[f"Content-Type: {ctype}"]),
            ok)
    add("no Content-Type", P(body), "not 5xx")
    add("Content-Type with control characters", P(body, headers=["Content-Type: \x01\x02"]),
        "not 5xx")
    # empty and degenerate bodies
    for data in ("", " ", "\r\n", "{}", "[]", "null", '""', "0", "true", '{"instances": []}',
                 '{"inputs": {}}', '{"instances": null}', '{"inputs": null}',
                 '{"signature_name": "nope", "instances": ["a"]}',
                 '{"instances": ["a"], "inputs": {"text": ["a"]}}', '{"instances": ["a"]',
                 '{"instances": [{"text": "a"}, "b"]}', '{"instances": [{}]}',
                 '{"instances": [["a"], "b"]}'):
        add(f"body {data!r}", P(data))
    add("POST without a body or length", http_bytes("POST", PREDICT, token=token,
                                                     length=False))
    add(":classify on a language model", _post(f"/v1/models/{MODEL}:classify",
                                                '{"examples": [{"inputs": "a"}]}',
                                                token=token))
    add(":classify without examples", _post(f"/v1/models/{MODEL}:classify", "{}",
                                            token=token))
    # broken HTTP
    add("bad Content-Length", P(body, length=False, headers=["Content-Length: abc"]),
        "4xx/close")
    add("negative Content-Length", P(body, length=False, headers=["Content-Length: -1"]),
        "4xx/close")
    add("two Content-Lengths", P(body, headers=["Content-Length: 3"]), "4xx/close")
    add("Content-Length and chunked", P(body, headers=["Transfer-Encoding: chunked"]),
        "4xx/close")
    add("bad chunk size", http_bytes("POST", PREDICT, b"zz\r\nabc\r\n0\r\n\r\n", token=token,
                                     length=False, headers=["Transfer-Encoding: chunked"]),
        "4xx/close")
    add("a 64 KiB header", G(f"/v1/models/{MODEL}", headers=["X-Big: " + "a" * 65536]),
        "4xx/close")
    add("1,000 headers", G(f"/v1/models/{MODEL}", headers=[f"X-{i}: {i}" for i in range(1000)]),
        "not 5xx")
    add("a 100 KiB URL", G(f"/v1/models/{'a' * 102400}"), "4xx/close")
    add("HTTP/1.0", f"GET /v1/models/{MODEL} HTTP/1.0\r\nAuthorization: Bearer {token}\r\n\r\n"
        .encode(), "200")
    add("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "4xx/close")
    add("a TLS ClientHello", bytes.fromhex("16030100a5010000a10303") + os.urandom(160),
        "4xx/close")
    add("no HTTP version", b"GET /healthz\r\n\r\n", "4xx/close")
    add("random bytes", random.Random(7).randbytes(4096), "4xx/close")
    # the bearer token
    for name, value in (("no token", None), ("wrong token", "nope"), ("empty token", ""),
                        ("token prefix", token[:-1]), ("token + 1 char", token + "x"),
                        ("token in upper case", token.upper()),
                        ("an 8 KiB token", "t" * 8192), ("latin-1 token", token[:-1] + "\xff")):
        add(f"auth: {name}", http_bytes("GET", f"/v1/models/{MODEL}", token=value))
    add("auth: Basic scheme", http_bytes("GET", f"/v1/models/{MODEL}", token=None,
                                         headers=["Authorization: Basic dXNlcjpwYXNz"]))
    add("auth: token on a predict", _post('{"instances": ["a"]}', token="nope"))
    return cases


def _chunked(path: str, body: bytes, token: str) -> bytes:
    size = 1 << 20
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size])
                      for i in range(0, len(body), size))
    return http_bytes("POST", path, chunks + b"0\r\n\r\n", token=token, length=False,
                      headers=["Transfer-Encoding: chunked"])


# -- the scenarios ------------------------------------------------------------------------------
def _generated(server: ServerProcess, n: int, printer) -> Row:
    """``n`` schemathesis cases (valid and schema-violating) spread over the operations."""
    try:
        import requests
        import schemathesis
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hypothesis_seed
        from hypothesis import strategies as st
        from schemathesis import GenerationMode
    except ImportError as err:
        return Row("generated requests (schemathesis, OpenAPI spec)", 0, 1,
                   notes=f"not run: {err}; install the development requirements "
                   "(pip install -r requirements.txt)")
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    statuses: Counter = Counter()
    bad: list = []
    session = requests.Session()
    headers = server.headers()

    for round_ in range(20):  # a round can fall short: small operations run out of cases
        left = n - sum(statuses.values())
        if left <= 0:
            break
        per_op = -(-left // len(operations))
        for i, op in enumerate(operations):
            strategy = st.one_of(op.as_strategy(GenerationMode.POSITIVE),
                                 op.as_strategy(GenerationMode.NEGATIVE))

            @hypothesis_seed(1000 * round_ + i)
            @settings(max_examples=per_op, deadline=None, database=None,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
            @given(case=strategy)
            def check(case):
                count = sum(statuses.values())
                if count >= n:
                    return
                if count % 2 and case.path_parameters:  # half of them reach the model
                    case.path_parameters = {**case.path_parameters, "model_name": MODEL}
                    if "version" in case.path_parameters and count % 4 == 1:
                        case.path_parameters["version"] = "1"
                try:  # (schemathesis's negative cases may still drop the token: 401s)
                    r = case.call(base_url=server.url, session=session, headers=headers,
                                  timeout=30)
                except requests.RequestException as err:
                    statuses["no answer"] += 1
                    bad.append(f"{case.method} {case.formatted_path}: {type(err).__name__}")
                    return
                statuses[r.status_code] += 1
                if r.status_code >= 500:
                    bad.append(f"{case.method} {case.formatted_path} → {r.status_code} "
                               f"{r.text[:120]}")

            check()
    session.close()
    done = sum(statuses.values())
    printer(f"  generated: {done} requests, statuses {dict(sorted(statuses.items(), key=str))}")
    return _after(server, Row("generated requests (schemathesis: valid and schema-violating "
                              "cases of every OpenAPI operation)", done, len(bad),
                              notes=f"statuses {_counts(statuses)}" + _first(bad)))


def range_cases(max_k: int = 1000, max_tokens: int = 32) -> list[tuple[str, dict, str | None]]:
    """``(name, body, field)``: a request with one value past its declared range (``field``
    must be named in the 400's error) or at a bound (``field`` None: a 200), for every
    numeric input of next_tokens and generate (``keras_seq.serving.codec.request_fields``)."""
    def nt(k):
        return {"signature_name": "next_tokens", "inputs": {"text": ["the"], "k": k}}

    def gen(**over):
        inputs = {"prompt": ["a"], "max_tokens": 3, "temperature": 1.0, "top_k": 1, "seed": 1}
        return {"signature_name": "generate", "inputs": {**inputs, **over}}

    cases = [(f"k = {k}", nt(k), "k") for k in (0, -1, max_k + 1)]
    cases += [(f"k = {k!r}", nt(k), "k") for k in ("3", None, True, 2.5)]
    cases += [(f"max_tokens = {n}", gen(max_tokens=n), "max_tokens") for n in (0, max_tokens + 1)]
    cases += [(f"temperature = {t!r}", gen(temperature=t), "temperature")
              for t in (-1.0, 1e7, "hot")]
    cases += [(f"top_k = {t}", gen(top_k=t), "top_k") for t in (-1, max_k + 1)]
    cases += [(f"seed = {n}", gen(seed=n), "seed") for n in (-1, 2**31)]
    cases += [("bound: k = 1", nt(1), None), (f"bound: k = {max_k}", nt(max_k), None),
              ("bound: max_tokens = 1", gen(max_tokens=1), None),
              (f"bound: max_tokens = {max_tokens}", gen(max_tokens=max_tokens), None),
              ("bound: temperature = 0", gen(temperature=0.0), None),
              ("bound: top_k = 0 (whole vocabulary)", gen(top_k=0), None),
              ("bound: seed = 2**31 - 1", gen(seed=2**31 - 1), None)]
    return cases


def _ranges(server: ServerProcess, printer) -> Row:
    cases, bad = range_cases(), []
    for name, body, field in cases:
        status, answer = _call(server.port, "POST", PREDICT, body, server.headers())
        error = (answer or {}).get("error", "") if isinstance(answer, dict) else ""
        if field is None and status != 200:
            bad.append(f"{name}: {status} {error[:80]}")
        elif field is not None and (status != 400 or f"'{field}'" not in error):
            bad.append(f"{name}: {status} {error[:80]!r} (expected a 400 naming {field!r})")
    printer(f"  ranges: {len(cases)} requests, {len(bad)} wrong")
    return _after(server, Row("every request field past its declared range → 400 naming it; "
                              "each bound → 200", len(cases), len(bad), notes=_first(bad)))


def _hostile(server: ServerProcess, rounds: int, printer) -> Row:
    cases = hostile_cases(server.token) * rounds
    rss0, bad, statuses = server.rss(), [], Counter()
    for case in cases:
        try:
            status = _exchange(server.port, case.data, head=case.head)
        except TimeoutError:
            status = "hang"
        statuses[status] += 1
        if status == "hang" or not case.judge(status):
            bad.append(f"{case.name}: {status} (expected {case.expect})")
    growth = (server.rss() - rss0) / MIB
    printer(f"  hostile: {len(cases)} requests, statuses {_counts(statuses)}, RSS "
            f"{growth:+.0f} MiB")
    return _after(server, Row(
        "hostile requests (deep nesting, 50 MB bodies, NaN/Infinity, invalid UTF-8, path "
        "traversal, huge k/max_tokens, wrong methods/content types, empty bodies, bad HTTP, "
        "bad tokens)", len(cases), len(bad),
        notes=f"statuses {_counts(statuses)}; RSS {growth:+.0f} MiB" + _first(bad)))


#: A connection the server closed before answering (a flood guard closes the longest-waiting
#: connection past --max-connections, and under a flood on a loaded machine that can be a
#: normal client whose request the server had not read yet): the normal client sends its
#: request again on a new connection, as HTTP clients do with an idempotent request (a
#: prediction changes nothing), once; the retries are counted in the row.
RETRIED_ERRORS = (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)


class _Watch:
    """While an attack runs: a normal client (one prediction every 0.2 s on a fresh
    connection, sent again once if the server closed the connection before answering) and
    the server's RSS and open files (every 0.1 s)."""

    def __init__(self, server: ServerProcess):
        self.server, self.latencies, self.errors, self.retries = server, [], [], 0
        self.rss, self.fds = [], []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, daemon=True),
                         threading.Thread(target=self._sample, daemon=True)]

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def _client(self):
        body = {"signature_name": "next_tokens", "inputs": {"text": ["the cat"], "k": 2}}
        while not self._stop.wait(0.2):
            t0 = time.monotonic()
            for attempt in range(2):
                try:
                    status, _ = _call(self.server.port, "POST", PREDICT, body,
                                     self.server.headers(), timeout=30)
                except RETRIED_ERRORS as err:
                    status = type(err).__name__
                    self.retries += attempt == 0
                    continue
                except (OSError, http.client.HTTPException) as err:
                    status = type(err).__name__
                break
            self.latencies.append(time.monotonic() - t0)
            if status != 200:
                self.errors.append(status)

    def _sample(self):
        while not self._stop.wait(0.1):
            try:
                self.rss.append(self.server.rss())
                self.fds.append(self.server.fds())
            except OSError:
                return


def _open(port: int, timeout: float = 3.0):
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return None
    sock.setblocking(False)
    return sock


def _slow_clients(server: ServerProcess, n: int, seconds: float, read_timeout: float,
                  within_s: float, printer) -> Row:
    """``n`` connections sending a byte every 0.2 s (a third each: the headers, a body
    after complete headers, nothing at all), reopened when the server cuts them."""
    head = (f"POST {PREDICT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            f"\r\nAuthorization: Bearer {server.token}\r\nX-Pad: " + "a" * 400 + "\r\n\r\n")
    body_head = (f"POST {PREDICT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n"
                 f"Authorization: Bearer {server.token}\r\n\r\n")
    fds0, rss0 = server.fds(), server.rss()
    conns = {}  # socket → [style, bytes to send, bytes sent, opened at]
    lifetimes: list[float] = []
    opened = 0

    def open_one(style):
        nonlocal opened
        sock = _open(server.port)
        if sock is None:
            return
        opened += 1
        payload = head.encode() if style == 0 else b"" if style == 2 else b"x" * 100_000
        if style == 1:
            try:
                sock.send(body_head.encode())
            except OSError:
                sock.close()
                return
        conns[sock] = [style, payload, 0, time.monotonic()]

    with _Watch(server) as watch:
        for i in range(n):
            open_one(i % 3)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            readable, _, _ = select.select(list(conns), [], [], 0.2)
            for sock in list(conns):
                style, payload, sent, since = conns[sock]
                closed = False
                if sock in readable:
                    try:
                        closed = sock.recv(4096) == b""
                    except OSError:
                        closed = True
                elif sent < len(payload):
                    try:
                        conns[sock][2] += sock.send(payload[sent:sent + 1])
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed = True
                if closed:
                    lifetimes.append(time.monotonic() - since)
                    del conns[sock]
                    sock.close()
                    open_one(style)
        alive = [time.monotonic() - c[3] for c in conns.values()]
        for sock in conns:
            sock.close()
        time.sleep(min(1.0, read_timeout))
    fds_after = _settle(server.fds, fds0)
    longest = max(lifetimes + alive, default=0.0)
    bound = read_timeout + max(1.0, read_timeout / 4)  # + the attacker's own delay to notice
    return _attack_row(server, "slow clients (slowloris: headers, bodies or nothing, a byte "
                       f"at a time, {n} connections for {seconds:g} s)", opened, watch,
                       fds0, rss0, fds_after, within_s, n + 32, printer, extra=(
                           f"{len(lifetimes)} cut by the server, longest-lived "
                           f"{longest:.1f} s (--read-timeout {read_timeout:g} s, bound "
                           f"{bound:g} s)"), failed=longest > bound)


def _flood(server: ServerProcess, n: int, max_connections: int, within_s: float,
           printer) -> Row:
    """``n`` connections opened as fast as possible and held silent, then 200 opened and
    reset at once."""
    fds0, rss0 = server.fds(), server.rss()
    held, refused = [], 0
    with _Watch(server) as watch:
        for _ in range(n):
            sock = _open(server.port, timeout=2.0)
            if sock is None:
                refused += 1
            else:
                held.append(sock)
        time.sleep(0.5)
        for _ in range(200):
            sock = _open(server.port, timeout=2.0)
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                sock.close()
        time.sleep(0.5)
        cut = 0
        for sock in held:
            try:
                cut += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                cut += 1
            sock.close()
    fds_after = _settle(server.fds, fds0)
    return _attack_row(server, f"connection flood ({n} connections held silent, 200 reset; "
                       f"--max-connections {max_connections})", n + 200, watch, fds0, rss0,
                       fds_after, within_s, max_connections + 4 * LISTEN_BACKLOG + 32,
                       printer,
                       extra=f"{cut} of the held connections cut by the server, {refused} "
                       "not accepted in 2 s")


def _settle(fds, baseline: int, timeout: float = 15.0) -> int:
    """Open files once they are back near ``baseline`` (or after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while (now := fds()) > baseline + 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    return now


def _attack_row(server, scenario, cases, watch: _Watch, fds0, rss0, fds_after, within_s,
                fd_bound, printer, extra="", failed=False) -> Row:
    lat = sorted(watch.latencies)
    slowest = lat[-1] if lat else float("inf")
    peak_fds, peak_rss = max(watch.fds, default=fds0), max(watch.rss, default=rss0)
    problems = []
    if failed:
        problems.append("a slow connection outlived the read timeout")
    if not lat or watch.errors or slowest > within_s:
        problems.append(f"normal client: {len(watch.errors)} error(s) {watch.errors[:3]}, "
                        f"slowest {slowest:.2f} s (bound {within_s:g} s)")
    if peak_fds - fds0 > fd_bound or fds_after > fds0 + 8:
        problems.append(f"open files {fds0} → {peak_fds} → {fds_after} (bound +{fd_bound})")
    if peak_rss - rss0 > 200 * MIB:
        problems.append(f"RSS grew {(peak_rss - rss0) / MIB:.0f} MiB (bound 200)")
    notes = (f"{extra}; server open files {fds0} → peak {peak_fds} → {fds_after} after; RSS "
             f"{rss0 / MIB:.0f} → peak {peak_rss / MIB:.0f} MiB; normal client "
             f"{len(lat)} requests, {len(watch.errors)} errors, {watch.retries} sent "
             "again after a reset, median "
             f"{lat[len(lat) // 2] * 1000 if lat else 0:.0f} ms, slowest {slowest:.2f} s "
             f"(bound {within_s:g} s)")
    printer(f"  {scenario.split(' (')[0]}: {notes}")
    return _after(server, Row(scenario, cases, len(problems),
                              notes=notes + ("; FAILED: " + "; ".join(problems)
                                             if problems else "")))


def _token(server: ServerProcess, printer) -> Row:
    """Wrong tokens get 401 (and the right one 200), and the comparison goes through
    ``hmac.compare_digest`` (checked in process, on the server's own app)."""
    rng = random.Random(11)
    wrong = ["", "x", TOKEN[:-1], TOKEN + "a", TOKEN.upper(), "x" + TOKEN, "é" * 40,
             "a" * 4096] + ["".join(rng.choices("abcdefxyz-0123456789", k=rng.randint(1, 64)))
                            for _ in range(40)]
    bad = []
    for value in wrong:
        header = f"Bearer {value}".encode().decode("latin-1")
        try:
            status = _call(server.port, "GET", f"/v1/models/{MODEL}",
                          headers={"Authorization": header})[0]
        except (OSError, http.client.HTTPException) as err:
            status = type(err).__name__
        if status != 401:
            bad.append(f"token {value[:20]!r}: {status}")
    if _call(server.port, "GET", f"/v1/models/{MODEL}", headers=server.headers())[0] != 200:
        bad.append("the right token was refused")
    if not uses_compare_digest():
        bad.append("the server compares tokens with something other than "
                   "hmac.compare_digest (not constant time)")
    return _after(server, Row("bearer token (wrong, partial, long, non-ASCII tokens; "
                              "constant-time comparison)", len(wrong) + 2, len(bad),
                              notes="401 for every wrong token; hmac.compare_digest checked "
                              "in process" + _first(bad)))


def uses_compare_digest() -> bool:
    """Whether the server's auth compares bearer tokens through ``hmac.compare_digest``
    (or ``secrets.compare_digest``): a wrong token is sent to the app in process, with the
    comparison functions watched.

    >>> uses_compare_digest()
    True
    """
    import asyncio

    from keras_seq.serving.app import ServeConfig, create_app
    from keras_seq.serving.registry import ModelRegistry

    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append(1)
        return real(a, b)

    with tempfile.TemporaryDirectory() as base:
        app = create_app(ServeConfig(base, token="right"),
                         registry=ModelRegistry(base, poll_interval=0), printer=lambda m: None)
        saved = hmac.compare_digest, secrets.compare_digest
        hmac.compare_digest = secrets.compare_digest = spy
        try:
            status = asyncio.run(asgi_status(app, "GET", f"/v1/models/{MODEL}",
                                             {"Authorization": "Bearer wrong"}))
        finally:
            hmac.compare_digest, secrets.compare_digest = saved
    return status == 401 and bool(calls)


async def asgi_status(app, method: str, path: str, headers: dict) -> int:
    """The status an ASGI ``app`` answers a body-less request with, called in process."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80),
             "headers": [(k.lower().encode("latin-1"), v.encode("latin-1"))
                         for k, v in headers.items()]}
    await app(scope, receive, send)
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def _break(src: Path, dst: Path, how: str) -> Path:
    """A copy of the SavedModel ``src`` at ``dst``, broken in one way."""
    shutil.copytree(src, dst)
    data = next((dst / "variables").glob("variables.data-*"))
    if how == "no variables":
        shutil.rmtree(dst / "variables")
    elif how == "no variables.index":
        (dst / "variables" / "variables.index").unlink()
    elif how == "truncated weights":
        os.truncate(data, data.stat().st_size // 2)
    elif how == "bit-flipped weights":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif how == "truncated saved_model.pb":
        pb = dst / "saved_model.pb"
        os.truncate(pb, pb.stat().st_size // 3)
    elif how == "garbage saved_model.pb":
        (dst / "saved_model.pb").write_bytes(os.urandom(4096))
    elif how == "no saved_model.pb":
        (dst / "saved_model.pb").unlink()
    return dst


BROKEN = ("no variables", "no variables.index", "truncated weights", "bit-flipped weights",
          "truncated saved_model.pb", "garbage saved_model.pb", "no saved_model.pb")


def _publish(server: ServerProcess, base: Path, saved: Path, workdir: Path, poll: float,
             full: bool, printer) -> Row:
    """Broken SavedModels are refused by ``publish_saved_model`` (and ``--publish``);
    half-copied version folders are never served and the old version stays; a finished
    copy is then picked up; a server restarted over a broken newest version serves the
    newest one that loads."""
    from keras_seq.errors import KerasSeqError
    from keras_seq.serving.layout import list_versions, publish_saved_model

    model_dir = base / MODEL
    bad, cases = [], 0

    def check(what: str, served):
        if server.served_version() != served or not server.serves():
            bad.append(f"{what}: the server serves {server.served_version()} (expected "
                       f"{served}) or fails")

    served = server.served_version()
    kinds = BROKEN if full else ("no variables", "bit-flipped weights")
    for how in kinds:
        cases += 1
        broken = _break(saved, workdir / f"broken-{how.replace(' ', '-')}", how)
        before = sorted(os.listdir(model_dir))
        try:
            publish_saved_model(broken, base, MODEL)
            bad.append(f"publish of a SavedModel with {how} was accepted")
        except KerasSeqError:
            pass
        if sorted(os.listdir(model_dir)) != before:
            bad.append(f"publish of {how} left {sorted(set(os.listdir(model_dir)) - set(before))}")
    if full:  # the command itself, once: an error message and exit status 1, nothing written
        cases += 1
        proc = subprocess.run([sys.executable, "-m", "keras_seq.cli", "serve", "--model-base",
                               str(base), "--model-name", MODEL, "--publish",
                               str(workdir / "broken-no-variables")], capture_output=True,
                              text=True, timeout=300,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        if proc.returncode == 0 or "nothing was published" not in proc.stderr + proc.stdout:
            bad.append(f"--publish of a broken SavedModel: exit {proc.returncode}, "
                       f"{(proc.stderr or proc.stdout)[-200:]!r}")
    check("after broken publishes", served)

    # a version folder copied in by hand: first without its variables (as `cp -r` leaves
    # it half-way), then slowly, file by file, while requests keep coming
    nxt = max(list_versions(model_dir)) + 1
    half = model_dir / str(nxt)
    half.mkdir()
    shutil.copy2(saved / "saved_model.pb", half / "saved_model.pb")
    cases += 1
    if not _wait(lambda: _load_failed(server, nxt), 20 + 10 * poll):
        bad.append(f"the poller did not try the half-copied version {nxt}")
    check("half-copied version (no variables)", served)
    shutil.copytree(saved / "variables", half / "variables")
    shutil.copytree(saved / "assets", half / "assets", dirs_exist_ok=True)
    cases += 1
    if not _wait(lambda: server.served_version() == nxt, 20 + 10 * poll):
        bad.append(f"the completed copy of version {nxt} was not served")
    served = server.served_version()

    slow = model_dir / str(nxt + 1)
    errors = _slow_copy(server, saved, slow, seconds=4 * poll if full else 0.8,
                        served=served)
    cases += 1
    bad += errors
    if not _wait(lambda: server.served_version() == nxt + 1, 20 + 10 * poll):
        bad.append(f"version {nxt + 1}, copied slowly, was not served once complete")

    # a restart over a broken newest version: the newest version that loads is served
    cases += 1
    restart = workdir / "restart-base"
    publish_saved_model(saved, restart, MODEL, 1, check=False)
    _break(saved, restart / MODEL / "2", "no variables")
    from keras_seq.serving.registry import ModelRegistry

    registry = ModelRegistry(restart, poll_interval=0, printer=lambda m: None)
    registry.start()
    if registry.healthy().get(MODEL) != 1:
        bad.append(f"a restarted server over a broken version 2 serves "
                   f"{registry.healthy().get(MODEL)} (expected 1)")
    printer(f"  publish: {cases} scenarios, {len(bad)} failure(s)")
    return _after(server, Row("--publish of broken SavedModels; half-copied and slowly "
                              "copied version folders; restart over a broken newest version",
                              cases, len(bad), notes=(
                                  f"broken: {', '.join(kinds)}; the served version never "
                                  "changed to one that does not load, and finished copies "
                                  "were picked up") + _first(bad)))


def _slow_copy(server: ServerProcess, saved: Path, target: Path, seconds: float,
               served) -> list[str]:
    """Copy ``saved`` to ``target`` file by file, in small pieces over ``seconds``, while
    checking that the server keeps serving ``served`` without an error."""
    files = sorted(p for p in saved.rglob("*") if p.is_file())
    files.sort(key=lambda p: p.name != "saved_model.pb")  # the worst order: .pb first
    chunks = [(p, i) for p in files for i in range(0, max(1, p.stat().st_size), 4096)]
    pause = seconds / max(1, len(chunks))
    errors = []
    for path, offset in chunks:
        dest = target / path.relative_to(saved)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "rb") as src, open(dest, "r+b" if dest.exists() else "wb") as out:
            src.seek(offset)
            out.seek(offset)
            out.write(src.read(4096))
        time.sleep(pause)
        version = server.served_version()
        if version != served:
            errors.append(f"while version {target.name} was being copied the server served "
                          f"{version}")
            break
    if not server.serves():
        errors.append(f"a request failed while version {target.name} was being copied")
    return errors


def _load_failed(server: ServerProcess, version: int) -> bool:
    """Whether the server's status shows that ``version`` failed to load."""
    try:
        states = server.get(f"/v1/models/{MODEL}")[1]["model_version_status"]
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
        return False
    return any(s["version"] == str(version) and s["state"] == "END"
               and s["status"]["error_code"] != "OK" for s in states)


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return bool(predicate())


def _after(server: ServerProcess, row: Row) -> Row:
    """``row``, failed too if the server is no longer healthy and serving."""
    if not server.serves():
        row.failures += 1
        row.notes += "; FAILED: the server no longer serves (see serve.log)"
    return row


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(counter.items(), key=lambda kv: str(kv[0])))


def _first(bad: list, n: int = 3) -> str:
    return f"; FAILED: {'; '.join(bad[:n])}" + (f" (+{len(bad) - n} more)" if len(bad) > n
                                                 else "") if bad else ""


POLL = 0.25  # the campaign server's --poll-interval (s)


def campaign_server(scale: str, workdir, printer=print) -> ServerProcess:
    """The server the campaign attacks (not started yet: use it in a ``with``): the tiny
    model published as version 1 of ``lm`` under ``workdir/models``, the token
    :data:`TOKEN`, and the scale's read timeout and connection cap."""
    from keras_seq.serving.layout import publish_saved_model

    s, workdir = SETTINGS[scale], Path(workdir)
    publish_saved_model(tiny_saved_model(printer), workdir / "models", MODEL, 1, check=False)
    return ServerProcess(workdir / "models", "--model-name", MODEL, "--poll-interval", POLL,
                         "--read-timeout", s["read_timeout"], "--max-connections",
                         s["max_connections"], "--max-generated-tokens", 32, token=TOKEN,
                         log=workdir / "serve.log")


def run(scale: str, workdir, printer=print, server: ServerProcess | None = None) -> list[Row]:
    """Attack a live ``keras-seq serve``; one :class:`Row` per scenario. ``server``: a
    running :func:`campaign_server` to use (and leave running) instead of starting one."""
    s = SETTINGS[scale]
    workdir = Path(workdir)
    own = server is None
    if own:
        server = campaign_server(scale, workdir, printer).__enter__()
    rows = []
    try:
        rss0 = server.rss()
        scenarios = [
            lambda: _generated(server, s["generated"], printer),
            lambda: _hostile(server, s["hostile_rounds"], printer),
            lambda: _ranges(server, printer),
            lambda: _slow_clients(server, s["slow"], s["slow_s"], s["read_timeout"],
                                  s["served_within_s"], printer),
            lambda: _flood(server, s["flood"], s["max_connections"], s["served_within_s"],
                           printer),
            lambda: _token(server, printer),
            lambda: _publish(server, server.model_base, tiny_saved_model(printer), workdir,
                             POLL, scale == "full", printer)]
        for scenario in scenarios:
            started = time.monotonic()
            rows.append(scenario())
            printer(f"    ({time.monotonic() - started:.1f} s)")
        rss1 = server.rss()
    finally:
        code = server.stop() if own else None
    errors = [line for line in server.log().splitlines()
              if "internal error" in line or "Traceback" in line]
    rows[0].notes += f"; server RSS {rss0 / MIB:.0f} → {rss1 / MIB:.0f} MiB over the campaign"
    if own:
        rows[0].notes += f", exit code {code} on SIGTERM"
    if errors or code not in (None, 0, -signal.SIGTERM):  # uvicorn re-raises SIGTERM
        rows[0].failures += 1
        rows[0].notes += (f"; FAILED: exit code {code}, {len(errors)} internal error(s) "
                          f"logged: {errors[:2]}")
    return rows
