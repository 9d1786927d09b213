"""The models a server holds: for each name, the highest version under
``MODEL_BASE/NAME`` (TF Serving's default "latest" version policy), re-scanned every
``poll_interval`` seconds so a newly written version is loaded and served without a
restart (the old one is then unloaded; requests already running on it finish).

A version only replaces the one being served once it has loaded: one that fails (broken,
or half-copied into the model base) is logged and skipped, and the old version stays. A
version whose files changed since the previous scan is still being written and waits for
the next scan; a failed one is retried when its files change (the copy finished)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from keras_seq.serving.errors import not_found
from keras_seq.serving.layout import check_model_name, discover_models, list_versions
from keras_seq.serving.servable import Servable


class _Model:
    def __init__(self, name: str):
        self.name = name
        self.servable = None  # the version being served
        self.states: dict[int, dict] = {}  # version -> {"state", "error_code", "error_message"}


class ModelRegistry:
    """Loads and serves models from a TF Serving model base folder."""

    def __init__(self, model_base, names=None, poll_interval: float = 1.0, loader=None,
                 printer=print):
        self.base = Path(model_base)
        self.names = [check_model_name(n) for n in names] if names else None
        self.poll_interval = poll_interval
        self._loader = loader or Servable
        self._printer = printer
        self._models: dict[str, _Model] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for name in self.names or []:
            self._models[name] = _Model(name)
        self._seen: dict[tuple, tuple] = {}  # (name, version) → its files at the last scan
        self._failed: dict[tuple, tuple] = {}  # (name, version) → the files that failed
        self._scans = 0

    # -- loading ----------------------------------------------------------------------------
    def scan(self) -> None:
        """Serve the highest version of every model that loads; with none served yet (at
        start), lower versions are tried in turn. Only the first scan loads versions whose
        files have not been seen before (later ones wait until the files stop changing)."""
        names = self.names if self.names is not None else discover_models(self.base)
        settled_only = self._scans > 0
        self._scans += 1
        for name in names:
            with self._lock:
                model = self._models.setdefault(name, _Model(name))
            for version in reversed(list_versions(self.base / name)):
                current = model.servable
                if current is not None and version <= current.version:
                    break
                if self._load(model, version, settled_only):
                    break

    def _load(self, model: _Model, version: int, settled_only: bool) -> bool:
        """Load ``version`` of ``model`` and serve it; False (logged, and the version being
        served stays) if its files are still changing or it does not load."""
        path, key = self.base / model.name / str(version), (model.name, version)
        files = _files(path)
        before, self._seen[key] = self._seen.get(key), files
        if (settled_only and files != before) or self._failed.get(key) == files:
            return False  # still being written, or failed before with these very files
        current = model.servable
        model.states[version] = {"state": "LOADING", "error_code": "OK", "error_message": ""}
        try:
            servable = self._loader(model.name, version, path)
            if _files(path) != files:
                raise RuntimeError("its files changed while it was loading")
        except Exception as err:  # noqa: BLE001 — reported in the model status and the log
            self._failed[key] = files
            model.states[version] = {"state": "END", "error_code": "UNKNOWN",
                                     "error_message": f"{type(err).__name__}: {err}"[:500]}
            self._printer(f"serve: could not load {model.name} version {version} from {path}: "
                          f"{type(err).__name__}: {str(err)[:300]}; "
                          + (f"still serving version {current.version}" if current else
                             "no version of it is served yet")
                          + " (it is tried again when its files change)")
            return False
        with self._lock:
            model.servable = servable
            model.states[version] = {"state": "AVAILABLE", "error_code": "OK",
                                     "error_message": ""}
            if current is not None:
                model.states[current.version] = {"state": "END", "error_code": "OK",
                                                 "error_message": ""}
        self._printer(f"serve: model {model.name} version {version} is AVAILABLE"
                      + (f" (unloaded version {current.version})" if current else ""))
        return True

    def start(self) -> None:
        """Load what is there now, then poll in a background thread."""
        self.scan()
        if self.poll_interval and self.poll_interval > 0:
            self._thread = threading.Thread(target=self._poll, name="keras-seq-model-poll",
                                            daemon=True)
            self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                self.scan()
            except Exception as err:  # noqa: BLE001 — keep polling
                self._printer(f"serve: polling {self.base} failed: {err}")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- lookups ----------------------------------------------------------------------------
    def model_names(self) -> list[str]:
        with self._lock:
            return sorted(self._models)

    def get(self, name: str, version: int | None = None):
        """The servable for a predict/metadata request (404 like TF Serving if none)."""
        with self._lock:
            model = self._models.get(name)
            servable = model.servable if model else None
        if servable is None or (version is not None and servable.version != version):
            spec = f"Latest({name})" if version is None else f"Specific({name}, {version})"
            raise not_found(f"Servable not found for request: {spec}")
        return servable

    def status(self, name: str, version: int | None = None) -> dict:
        """TF Serving's ``GetModelStatusResponse`` as JSON."""
        with self._lock:
            model = self._models.get(name)
            states = dict(model.states) if model else {}
        if not states:
            raise not_found(f"Could not find any versions of model {name}")
        if version is not None:
            if version not in states:
                raise not_found(f"Could not find version {version} of model {name}")
            states = {version: states[version]}
        return {"model_version_status": [
            {"version": str(v), "state": s["state"],
             "status": {"error_code": s["error_code"], "error_message": s["error_message"]}}
            for v, s in sorted(states.items(), reverse=True)]}

    def healthy(self) -> dict:
        with self._lock:
            return {name: (m.servable.version if m.servable else None)
                    for name, m in self._models.items()}

    def servables(self) -> list:
        with self._lock:
            return [m.servable for m in self._models.values() if m.servable is not None]


def _files(folder: Path) -> tuple:
    """``(relative path, size, mtime)`` of every file under ``folder``: it changes while
    the folder is being written."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:  # removed while we looked
                continue
            found.append((os.path.relpath(os.path.join(root, name), folder), st.st_size,
                          st.st_mtime_ns))
    return tuple(sorted(found))


def wait_for(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (used by tests/bench)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
