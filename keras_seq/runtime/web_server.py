"""Serve a ``keras-seq export web`` site on the loopback interface, cross-origin isolated.

Threaded Wasm (``SharedArrayBuffer``) and 5 µs timers need a cross-origin-isolated page:
every response carries ``Cross-Origin-Opener-Policy: same-origin`` and
``Cross-Origin-Embedder-Policy: require-corp``. ``.wasm`` files go out as
``application/wasm`` (required for streaming compilation) and nothing is cached, so a
re-exported site is what the next reload shows.

Example::

    with SiteServer("runs/pipeline/web", port=0) as server:
        print(server.url)          # http://127.0.0.1:PORT/
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from keras_seq.errors import KerasSeqError

ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
TYPES = {".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript",
         ".json": "application/json", ".tflite": "application/octet-stream",
         ".html": "text/html; charset=utf-8", ".css": "text/css"}


class _Handler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **TYPES}

    def end_headers(self):
        for name, value in ISOLATION_HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        if self.server.verbose:
            super().log_message(format, *args)


class SiteServer:
    """A static server for one site folder, in a background thread.

    Args:
        site: the folder ``keras-seq export web`` wrote (it must hold ``site.json``).
        host: the address to bind (default loopback only).
        port: TCP port; 0 picks a free one (see :attr:`url`).
        verbose: log every request to stderr.
    """

    def __init__(self, site: str | Path, host: str = "127.0.0.1", port: int = 8000,
                 verbose: bool = False):
        self.site = Path(site)
        if not (self.site / "site.json").is_file():
            raise KerasSeqError(f"{self.site} is not a keras-seq site (no site.json); write one "
                                "with `keras-seq export web --tflite-dir DIR --out SITE`")
        handler = functools.partial(_Handler, directory=str(self.site))
        try:
            self.httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as err:
            raise KerasSeqError(f"cannot listen on {host}:{port} ({err.strerror}); pass another "
                                "--port (0 picks a free one)") from None
        self.httpd.verbose = verbose
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> SiteServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=5)
        self.httpd.server_close()

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
