"""The REST server: TF Serving's API on FastAPI/uvicorn.

Endpoints (the same paths and JSON as TensorFlow Serving's REST API)::

    GET  /v1/models/NAME                       version status of every known version
    GET  /v1/models/NAME/versions/V            status of one version
    GET  /v1/models/NAME[/versions/V]/metadata signature defs (GetModelMetadataResponse)
    POST /v1/models/NAME[/versions/V]:predict  {"signature_name", "instances"|"inputs"}
    POST /v1/models/NAME[/versions/V]:classify {"examples": [{"inputs": "text"}, …]} →
                                               {"results": [[["label", score], …], …]}
    GET  /healthz                              200 when every model has a version loaded
    GET  /openapi.json                         the OpenAPI spec

Errors are ``{"error": "..."}`` with 400 (bad request), 401 (missing/bad bearer token),
404 (unknown model, version or path), 413 (body over ``max_body_bytes``) or 504 (request
over ``request_timeout_s``). Slow and idle clients cannot pin the server: a request's line,
headers and body must arrive within ``read_timeout_s`` (else the connection is closed), and
past ``max_connections`` open connections the one that has waited longest for its request
is closed to make room (:func:`guarded_protocol`). ``:classify`` answers for classifier
SavedModels (``keras-seq export classifier``); on any other model it is a 400. Requests
never name files: models come only from the model base folder given at start.
"""


import asyncio
import hmac
import json
import os
import re
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from keras_seq.serving.codec import (
    Limits,
    encode_classify,
    encode_outputs,
    parse_classify,
    parse_predict,
)
from keras_seq.serving.dynamic_batching import Batcher
from keras_seq.serving.errors import ServingError, bad_request
from keras_seq.serving.registry import ModelRegistry

TOKEN_ENV = "KERAS_SEQ_SERVE_TOKEN"
#: connections waiting to be accepted, also the most asyncio accepts in one turn of the
#: event loop; a closed connection's socket goes a few turns later, so under a flood the
#: open files stay under max_connections + 4 × this (+ the process's own)
LISTEN_BACKLOG = 128


@dataclass
class ServeConfig:
    """Everything ``keras-seq serve`` can set (the defaults are the command's)."""

    model_base: str
    model_names: list | None = None  # None: every model folder under model_base
    host: str = "127.0.0.1"
    port: int = 8501
    poll_interval: float = 1.0  # seconds between scans for new versions (0: never)
    max_batch_size: int = 32
    batch_timeout_ms: float = 2.0
    num_batch_threads: int = 2
    batch_signatures: tuple = ("score", "next_tokens", "serving_default", "classify", "tag")
    eager_batching: bool = False  # start a batch at once when no call is running
    max_body_bytes: int = 1 << 20
    limits: Limits = field(default_factory=Limits)
    request_timeout_s: float = 30.0
    token: str | None = None
    graceful_timeout_s: float = 30.0
    read_timeout_s: float = 10.0  # a request's line, headers and body must arrive in this
    max_connections: int = 1000  # open connections; past it the longest-waiting is closed


class _Response:
    """JSONResponse that writes NaN/Infinity as TF Serving does and keeps UTF-8 as is."""

    @staticmethod
    def make(content, status_code: int = 200, headers=None):
        body = json.dumps(content, ensure_ascii=False, allow_nan=True,
                          separators=(",", ":")).encode("utf-8", "backslashreplace")
        return Response(body, status_code=status_code, headers=headers,
                        media_type="application/json")


def _error(status: int, message: str, headers=None):
    return _Response.make({"error": message}, status, headers)


_ANY = {}
_PREDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "signature_name": {"type": "string", "description": "default: serving_default",
                           "examples": ["score", "next_tokens", "generate", "step"]},
        "instances": {"type": "array", "items": _ANY,
                      "description": "row format: one entry per row (an object of named "
                      "inputs, or the value when the signature has one input)"},
        "inputs": {"description": "columnar format: an object of named inputs (or the "
                   "value when the signature has one input)"},
    },
    "examples": [
        {"signature_name": "score", "instances": ["the cat sat"]},
        {"signature_name": "next_tokens", "inputs": {"text": ["the cat"], "k": 3}},
        {"signature_name": "next_tokens", "instances": [{"text": "the cat", "k": 3}]},
        {"signature_name": "generate", "inputs": {"prompt": ["the"], "max_tokens": 5,
                                                  "temperature": 1.0, "top_k": 5,
                                                  "seed": 1}},
    ],
}
_CLASSIFY_SCHEMA = {
    "type": "object",
    "properties": {
        "signature_name": {"type": "string", "description": "default: classify (else "
                           "serving_default)"},
        "examples": {"type": "array", "items": {"type": "object"},
                     "description": "one object per text: {\"inputs\": \"some text\"}"},
    },
    "required": ["examples"],
    "examples": [{"examples": [{"inputs": "the film was not bad"}, {"inputs": "dull"}]}],
}
_ERROR_SCHEMA = {"type": "object", "properties": {"error": {"type": "string"}},
                 "required": ["error"]}


def _responses(*codes):
    text = {400: "bad request", 401: "missing or bad bearer token", 404: "not found",
            413: "request body too large", 504: "request timed out",
            503: "a model has no version loaded"}
    return {c: {"description": text[c],
                "content": {"application/json": {"schema": _ERROR_SCHEMA}}} for c in codes}


_DIGITS = re.compile(r"[0-9]{1,18}")


def _parse_version(version: str) -> int:
    if not _DIGITS.fullmatch(version):
        raise bad_request(f"Malformed request: version must be a non-negative integer, got "
                          f"{version[:40]!r}")
    return int(version)


async def _read_body(request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None:
        if not _DIGITS.fullmatch(length):
            raise bad_request("Malformed request: bad Content-Length header")
        if int(length) > limit:
            raise ServingError(413, f"request body of {int(length)} bytes is larger than the "
                               f"limit of {limit} bytes (--max-body-bytes)")
    chunks, total = [], 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise ServingError(413, f"request body is larger than the limit of {limit} "
                                   "bytes (--max-body-bytes)")
            chunks.append(chunk)
    except ClientDisconnect:  # the client left (or was cut off by --read-timeout) mid-body
        raise bad_request(f"the client disconnected after {total} bytes of the body") from None
    return b"".join(chunks)


def check_token(given: str, expected: str) -> bool:
    """Whether the bearer token ``given`` is ``expected``, compared in constant time (the
    time taken does not tell how much of a guess was right).

    >>> check_token("s3cret", "s3cret"), check_token("s3creT", "s3cret")
    (True, False)
    """
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


def _lifespan(registry: ModelRegistry, batcher: Batcher):
    """The app's lifespan: load the models at start; at the end stop watching for new
    versions, let the batches in flight finish and close the batcher."""

    @asynccontextmanager
    async def lifespan(app):
        await asyncio.to_thread(registry.start)
        try:
            yield
        finally:
            registry.stop()
            await batcher.drain()
            batcher.close()

    return lifespan


def _authorizer(token: str | None):
    """The dependency that checks a request's bearer token against ``token`` (every
    request passes when ``token`` is None)."""
    bearer = HTTPBearer(auto_error=False, description="only when the server has a token")

    async def authorize(creds: Annotated[HTTPAuthorizationCredentials | None,
                                         Depends(bearer)]):
        if token is None:
            return
        if creds is None or not check_token(creds.credentials, token):
            raise ServingError(401, "missing or invalid bearer token (send "
                               "'Authorization: Bearer <token>')")

    return authorize


def _add_error_handlers(app: FastAPI, printer) -> None:
    """Answer every error as ``{"error": ...}`` with its status; internal errors are also
    reported through ``printer``."""

    @app.exception_handler(ServingError)
    async def _serving_error(request, err: ServingError):
        headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
        return _error(err.status, err.message, headers)

    @app.exception_handler(HTTPException)
    async def _http_error(request, err: HTTPException):
        message = err.detail if isinstance(err.detail, str) else json.dumps(err.detail)
        if err.status_code == 404:
            message = f"Malformed request: {request.method} {request.url.path[:200]} " \
                      "(no such endpoint)"
        return _error(err.status_code, message, getattr(err, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request, err: RequestValidationError):
        first = err.errors()[0] if err.errors() else {}
        return _error(400, f"Malformed request: {first.get('msg', 'invalid request')} at "
                      f"{'/'.join(str(p) for p in first.get('loc', ()))}")

    @app.exception_handler(Exception)
    async def _internal(request, err: Exception):
        printer(f"serve: internal error on {request.url.path}: {type(err).__name__}: {err}")
        return _error(500, f"internal error: {type(err).__name__}")


def _add_status_routes(app: FastAPI, registry: ModelRegistry, batcher: Batcher,
                       auth: list) -> None:
    """``GET /healthz`` and the status and metadata of a model or one of its versions."""

    @app.get("/healthz", summary="liveness and loaded versions", responses=_responses(503))
    async def healthz():
        models = registry.healthy()
        ok = all(v is not None for v in models.values())
        return _Response.make({"status": "ok" if ok else "loading", "models": models,
                               "batching": batcher.stats()}, 200 if ok else 503)

    @app.get("/v1/models/{model_name}", dependencies=auth, summary="model version status",
             responses=_responses(400, 401, 404))
    async def model_status(model_name: str):
        return _Response.make(registry.status(model_name))

    @app.get("/v1/models/{model_name}/versions/{version}", dependencies=auth,
             summary="status of one version", responses=_responses(400, 401, 404))
    async def version_status(model_name: str, version: str):
        return _Response.make(registry.status(model_name, _parse_version(version)))

    @app.get("/v1/models/{model_name}/metadata", dependencies=auth,
             summary="signature defs of the latest version", responses=_responses(401, 404))
    async def model_metadata(model_name: str):
        return _Response.make(registry.get(model_name).metadata())

    @app.get("/v1/models/{model_name}/versions/{version}/metadata", dependencies=auth,
             summary="signature defs of one version", responses=_responses(400, 401, 404))
    async def version_metadata(model_name: str, version: str):
        return _Response.make(registry.get(model_name, _parse_version(version)).metadata())


async def _run_request(config: ServeConfig, registry: ModelRegistry, batcher: Batcher,
                       request: Request, model_name: str, version: int | None, parse):
    """Read and decode the body, parse it against the servable, run it (batched)."""
    raw = await _read_body(request, config.max_body_bytes)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise bad_request(f"JSON Parse error: {str(err)[:200]}") from None
    servable = registry.get(model_name, version)
    try:
        parsed = parse(body, servable, config.limits)
    except RecursionError:
        raise bad_request("JSON value nested too deeply") from None
    try:
        outputs = await asyncio.wait_for(batcher.submit(servable, parsed),
                                         config.request_timeout_s)
    except TimeoutError:
        raise ServingError(504, f"Deadline exceeded: the request took longer than "
                           f"{config.request_timeout_s:g} s (--request-timeout)") from None
    return parsed, outputs


def _add_inference_routes(app: FastAPI, config: ServeConfig, registry: ModelRegistry,
                          batcher: Batcher, auth: list) -> None:
    """``POST …:predict`` and ``POST …:classify``, with the latest version or one version."""

    async def _predict(request: Request, model_name: str, version: int | None):
        parsed, outputs = await _run_request(config, registry, batcher, request, model_name,
                                             version, parse_predict)
        return _Response.make(encode_outputs(outputs, parsed.columnar))

    async def _classify(request: Request, model_name: str, version: int | None):
        _, outputs = await _run_request(config, registry, batcher, request, model_name,
                                        version, parse_classify)
        return _Response.make(encode_classify(outputs))

    body_doc = {"requestBody": {"required": True, "content": {
        "application/json": {"schema": _PREDICT_SCHEMA}}}}

    @app.post("/v1/models/{model_name}:predict", dependencies=auth, openapi_extra=body_doc,
              summary="predict with the latest version",
              responses=_responses(400, 401, 404, 413, 504))
    async def predict(request: Request, model_name: str):
        return await _predict(request, model_name, None)

    @app.post("/v1/models/{model_name}/versions/{version}:predict", dependencies=auth,
              openapi_extra=body_doc, summary="predict with one version",
              responses=_responses(400, 401, 404, 413, 504))
    async def predict_version(request: Request, model_name: str, version: str):
        return await _predict(request, model_name, _parse_version(version))

    classify_doc = {"requestBody": {"required": True, "content": {
        "application/json": {"schema": _CLASSIFY_SCHEMA}}}}

    @app.post("/v1/models/{model_name}:classify", dependencies=auth,
              openapi_extra=classify_doc, summary="classify with the latest version",
              responses=_responses(400, 401, 404, 413, 504))
    async def classify(request: Request, model_name: str):
        return await _classify(request, model_name, None)

    @app.post("/v1/models/{model_name}/versions/{version}:classify", dependencies=auth,
              openapi_extra=classify_doc, summary="classify with one version",
              responses=_responses(400, 401, 404, 413, 504))
    async def classify_version(request: Request, model_name: str, version: str):
        return await _classify(request, model_name, _parse_version(version))


def create_app(config: ServeConfig, registry: ModelRegistry | None = None, printer=print):
    """The FastAPI application; models load when it starts (lifespan)."""
    registry = registry or ModelRegistry(config.model_base, config.model_names,
                                         config.poll_interval, printer=printer)
    batcher = Batcher(config.max_batch_size, config.batch_timeout_ms,
                      config.num_batch_threads, config.batch_signatures,
                      eager=config.eager_batching)
    app = FastAPI(title="keras-seq serving", version="1",
                  description="TensorFlow Serving's REST API (predict, classify, status, "
                  "metadata) for "
                  "keras-seq SavedModels, with dynamic batching.",
                  lifespan=_lifespan(registry, batcher), docs_url=None, redoc_url=None)
    app.state.registry, app.state.batcher, app.state.config = registry, batcher, config
    auth = [Depends(_authorizer(config.token))]
    _add_error_handlers(app, printer)
    _add_status_routes(app, registry, batcher, auth)
    _add_inference_routes(app, config, registry, batcher, auth)
    return app


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def guarded_protocol(read_timeout_s: float, max_connections: int):
    """uvicorn's h11 protocol with two guards against slow and idle clients (slowloris,
    connection floods), which uvicorn alone lets hold a connection open for ever:

    * a request's line, headers and body must arrive within ``read_timeout_s`` of its
      first byte (of the connection, for the first request); else the connection is closed;
    * past ``max_connections`` open connections, the connection that has waited longest
      for a request (idle, or still sending one) is closed to make room for the new one.

    >>> cls = guarded_protocol(10.0, 1000)
    >>> cls.read_timeout_s, cls.max_connections
    (10.0, 1000)
    """
    # lazy: loads h11, uvicorn only when this runs
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _read_timer = None
        _waiting_since = None  # when it began waiting for a request; None while serving one

        def connection_made(self, transport):
            super().connection_made(transport)
            self._start_read_timer()
            if len(self.connections) > self.max_connections:
                waiting = [c for c in self.connections
                           if c._waiting_since is not None and not c.transport.is_closing()]
                min(waiting, key=lambda c: c._waiting_since, default=self).transport.close()

        def connection_lost(self, exc):
            self._stop_read_timer()
            super().connection_lost(exc)

        def data_received(self, data):
            if self._read_timer is None and self.conn.their_state is h11.IDLE:
                self._start_read_timer()  # the first byte of a request on a kept-alive one
            # h11 refuses a request head over its limit (16 KiB) only when the head is still
            # incomplete at the end of a read, so a 64 KiB header that arrived in one read
            # got through (and one that arrived in two did not). Fed in pieces of the limit,
            # a head that is too long is refused, with a 400, however it arrives.
            piece = self.config.h11_max_incomplete_event_size or 16 * 1024  # h11's default
            for start in range(0, len(data), piece):
                if self.transport.is_closing():
                    break
                super().data_received(data[start:start + piece])
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                self._stop_read_timer()  # the whole request is in (or the connection failed)

        def on_response_complete(self):
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE \
                    and self._read_timer is None:
                self._waiting_since = time.monotonic()  # idle until the next request

        def _start_read_timer(self):
            self._waiting_since = time.monotonic()
            self._read_timer = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

        def _stop_read_timer(self):
            if self._read_timer is not None:
                self._read_timer.cancel()
            self._read_timer = self._waiting_since = None

        def _read_timed_out(self):
            self._read_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    GuardedH11Protocol.read_timeout_s = float(read_timeout_s)
    GuardedH11Protocol.max_connections = int(max_connections)
    return GuardedH11Protocol


def _open_files_limit(wanted: int) -> int:
    """Raise the soft limit on open files towards ``wanted`` (up to the hard limit); the
    limit now (``wanted`` where there is no such limit)."""
    try:
        # lazy: an optional dependency
        import resource
    except ImportError:  # not a POSIX system
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    return wanted if soft == resource.RLIM_INFINITY else soft


def uvicorn_config(app, config: ServeConfig):
    """The ``uvicorn.Config`` the server runs ``app`` with: quiet logs, the h11 protocol
    with :func:`guarded_protocol`'s read timeout and connection cap (kept under the limit
    on open files, which it raises when it can)."""
    # lazy: loads uvicorn only when this runs
    import uvicorn

    # open files: the connections, those accepted before the cap closes any (up to a few
    # times the listen backlog), and the process's own (models, logs, the listening socket)
    extra = 4 * LISTEN_BACKLOG + 64
    cap = max(1, min(config.max_connections,
                     _open_files_limit(config.max_connections + extra) - extra))
    return uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                          access_log=False, lifespan="on", backlog=LISTEN_BACKLOG,
                          http=guarded_protocol(config.read_timeout_s, cap),
                          timeout_graceful_shutdown=config.graceful_timeout_s)


def run_server(config: ServeConfig, printer=print) -> None:
    """Serve until SIGINT/SIGTERM; in-flight requests finish (up to graceful_timeout_s)."""
    # lazy: loads uvicorn only when this runs
    import uvicorn

    if config.token is None and os.environ.get(TOKEN_ENV):
        config.token = os.environ[TOKEN_ENV]
    if not _loopback(config.host):
        printer(f"serve: WARNING: listening on {config.host}, reachable from other machines"
                + ("" if config.token else " without a token (--token)"))
    app = create_app(config, printer=printer)
    server = uvicorn.Server(uvicorn_config(app, config))
    printer(f"serve: http://{config.host}:{config.port}/v1/models/… (model base "
            f"{config.model_base})")
    server.run()
