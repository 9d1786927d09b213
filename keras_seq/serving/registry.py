"""The models a server holds: for each name, the highest version under
``MODEL_BASE/NAME`` (TF Serving's default "latest" version policy), re-scanned every
``poll_interval`` seconds so a newly written version is loaded and served without a
restart (the old one is then unloaded; requests already running on it finish)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from keras_seq.serving.errors import not_found
from keras_seq.serving.layout import check_model_name, discover_models, list_versions


class _Model:
    def __init__(self, name: str):
        self.name = name
        self.servable = None  # the version being served
        self.states: dict[int, dict] = {}  # version -> {"state", "error_code", "error_message"}


class ModelRegistry:
    """Loads and serves models from a TF Serving model base folder."""

    def __init__(self, model_base, names=None, poll_interval: float = 1.0, loader=None,
                 printer=print):
        from keras_seq.serving.servable import Servable

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

    # -- loading ----------------------------------------------------------------------------
    def scan(self) -> None:
        """Load the highest version of every model if it is not the one being served."""
        names = self.names if self.names is not None else discover_models(self.base)
        for name in names:
            with self._lock:
                model = self._models.setdefault(name, _Model(name))
            versions = list_versions(self.base / name)
            if not versions:
                continue
            want = versions[-1]
            current = model.servable
            if current is not None and current.version == want:
                continue
            if model.states.get(want, {}).get("state") == "END" and \
                    model.states[want].get("error_code") != "OK":
                continue  # failed before; not retried until a newer version appears
            model.states[want] = {"state": "LOADING", "error_code": "OK", "error_message": ""}
            try:
                servable = self._loader(name, want, self.base / name / str(want))
            except Exception as err:  # noqa: BLE001 — reported in the model status
                model.states[want] = {"state": "END", "error_code": "UNKNOWN",
                                      "error_message": f"{type(err).__name__}: {err}"[:500]}
                self._printer(f"serve: could not load {name} version {want}: {err}")
                continue
            with self._lock:
                model.servable = servable
                model.states[want] = {"state": "AVAILABLE", "error_code": "OK",
                                      "error_message": ""}
                if current is not None:
                    model.states[current.version] = {"state": "END", "error_code": "OK",
                                                     "error_message": ""}
            self._printer(f"serve: model {name} version {want} is AVAILABLE"
                          + (f" (unloaded version {current.version})" if current else ""))

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


def wait_for(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (used by tests/bench)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
