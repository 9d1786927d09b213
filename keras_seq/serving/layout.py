"""TF Serving's model layout on disk: ``MODEL_BASE/NAME/VERSION/saved_model.pb``.

A version is a folder whose name is a non-negative integer and that holds a
``saved_model.pb``; the highest one is served. :func:`publish_saved_model` copies an
exported SavedModel into the layout atomically (copy to a hidden folder, load it there to
check it, then rename), so a server polling the folder never sees a half-written version
and a SavedModel that does not load is never published.

Example::

    publish_saved_model("exports/lstm_saved_model", "models", "lstm")  # → models/lstm/1
    publish_saved_model("exports/lstm_v2", "models", "lstm")            # → models/lstm/2
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from keras_seq.errors import KerasSeqError

VERSION_RE = re.compile(r"^[0-9]{1,18}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


def check_model_name(name: str) -> str:
    """``name`` if it is a safe model name (letters, digits, ``_.-``; no path parts)."""
    if not NAME_RE.match(name or "") or name in (".", ".."):
        raise KerasSeqError(f"model name {name!r} is not allowed: use letters, digits, '_', "
                            "'.' and '-' (at most 128 characters, no path separators)")
    return name


def list_versions(model_dir) -> list[int]:
    """The version numbers under ``model_dir`` that hold a SavedModel, ascending."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return []
    versions = []
    for child in model_dir.iterdir():
        if VERSION_RE.match(child.name) and child.is_dir() and (
                (child / "saved_model.pb").is_file() or (child / "saved_model.pbtxt").is_file()):
            versions.append(int(child.name))
    return sorted(versions)


def discover_models(model_base) -> list[str]:
    """Every model name under ``model_base`` that has at least one version."""
    base = Path(model_base)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir()
                  if p.is_dir() and NAME_RE.match(p.name) and list_versions(p))


def publish_saved_model(saved_dir, model_base, name: str, version: int | None = None,
                        check: bool = True) -> Path:
    """Copy the SavedModel ``saved_dir`` to ``model_base/name/version`` (default: the next
    version number, 1 for a new model) and return that folder. Refuses to overwrite, and
    (``check``) to publish a SavedModel that does not load: the copy is loaded as the server
    would load it before it is renamed into place, so nothing is left behind on failure."""
    check_model_name(name)
    saved_dir = Path(saved_dir)
    if not (saved_dir / "saved_model.pb").is_file():
        raise KerasSeqError(f"{saved_dir} is not a SavedModel (no saved_model.pb); export one "
                            "with `keras-seq export saved-model --run-dir RUN --out DIR`")
    model_dir = Path(model_base) / name
    model_dir.mkdir(parents=True, exist_ok=True)
    if version is None:
        existing = [int(p.name) for p in model_dir.iterdir() if VERSION_RE.match(p.name)]
        version = max(existing, default=0) + 1
    if version < 0:
        raise KerasSeqError(f"version must be a non-negative integer, got {version}")
    target = model_dir / str(version)
    if target.exists():
        raise KerasSeqError(f"{target} already exists; publish as a new version (omit "
                            "--version to take the next number)")
    tmp = model_dir / f".tmp-{version}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        shutil.copytree(saved_dir, tmp)
        if check:
            _check_loads(tmp, saved_dir, name, version)
        if target.exists():
            raise KerasSeqError(f"{target} appeared while {saved_dir} was being copied; "
                                "publish again to take the next version number")
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _check_loads(folder: Path, saved_dir: Path, name: str, version: int) -> None:
    """Load the SavedModel copied to ``folder`` as the server does, or say why it does not."""
    # lazy: servable imports this module
    from keras_seq.serving.servable import Servable

    try:
        Servable(name, version, folder)
    except Exception as err:  # noqa: BLE001 — any failure to load means: do not publish
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        raise KerasSeqError(f"{saved_dir} does not load as a SavedModel ({detail}); nothing "
                            "was published. Export it again with `keras-seq export "
                            "saved-model --run-dir RUN --out DIR` (or `export classifier`) and "
                            "publish the complete folder") from None
