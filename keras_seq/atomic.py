"""Writes that survive a kill at any moment, and the crash hook that tests them.

Every file keras-seq writes for a run (configs, metrics, checkpoints, state) goes through
:func:`atomic_replace`: a temporary file beside the target, fsynced, renamed over it, the
folder flushed. A kill leaves the old file or the new one, never half of one; a full or
read-only disk raises :class:`~keras_seq.errors.RunWriteError` naming the file.

:func:`crash_phase` is the fault campaign's hook (``tools/reliability``): with
``KERAS_SEQ_KILL_AT=NAME:N:PHASE`` set, the ``N``-th write of ``NAME`` kills the process at
``PHASE``. It lives here, on the real write path, so the campaign tests the code that runs.

>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "config.json"
>>> write_json_atomic(path, {"loss": float("nan")})
>>> import json
>>> json.loads(path.read_text())
{'loss': None}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
from pathlib import Path

from keras_seq.errors import RunWriteError

#: the fault campaign's crash hook (tools/reliability/training.py): "NAME:N:PHASE"
KILL_AT_ENV = "KERAS_SEQ_KILL_AT"
KILL_PHASES = ("mid-write", "before-rename", "after-rename")
_writes_seen: dict[str, int] = {}


def crash_phase(path: str | Path) -> str | None:
    """Where this write of ``path`` should die, for the reliability campaign's kill
    trials: with ``KERAS_SEQ_KILL_AT=NAME:N:PHASE`` set, the ``N``-th write of a file
    called ``NAME`` returns ``PHASE`` (one of :data:`KILL_PHASES`) and the writer then
    calls :func:`die` at that point. Unset (always, outside those trials): None."""
    spec = os.environ.get(KILL_AT_ENV)
    if not spec:
        return None
    name, count, phase = spec.rsplit(":", 2)
    if Path(path).name != name:
        return None
    _writes_seen[name] = _writes_seen.get(name, 0) + 1
    return phase if _writes_seen[name] == int(count) else None


def die() -> None:
    """SIGKILL this process (a crash the program cannot clean up after)."""
    os.kill(os.getpid(), signal.SIGKILL)


def fsync_dir(folder: str | Path) -> None:
    """Flush a folder's entries (a rename in it) to disk, where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def discard(path: Path) -> None:
    """Delete ``path`` if it is there; on a read-only folder (where nothing could have been
    written either) say nothing."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


@contextlib.contextmanager
def atomic_replace(path: str | Path, tmp: Path | None = None):
    """Write ``path`` through a temporary file: the body writes (and fsyncs) the yielded
    ``(tmp, crash)``, then ``tmp`` is renamed over ``path`` and the folder flushed.

    ``crash`` is :func:`crash_phase` of this write; the body acts on ``"mid-write"``, the
    rename phases are acted on here. Any ``OSError`` (a full disk, a read-only folder)
    removes ``tmp`` and raises :class:`~keras_seq.errors.RunWriteError` naming ``path``;
    the old file is untouched. ``tmp`` defaults to ``.NAME.tmp`` beside ``path``.
    """
    path = Path(path)
    tmp = tmp or path.with_name(f".{path.name}.tmp")
    crash = crash_phase(path)
    try:
        yield tmp, crash
        if crash == "before-rename":
            die()
        tmp.replace(path)
        if crash == "after-rename":
            die()
    except OSError as err:
        discard(tmp)
        raise RunWriteError(path, err) from err
    fsync_dir(path.parent)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file (flushed, fsynced) and a rename.

    A kill at any moment leaves either the old file or the new one, never half of one.
    A full disk or a read-only folder raises :class:`~keras_seq.errors.RunWriteError`
    naming ``path``; the temporary file is removed and the old file is untouched.
    """
    with atomic_replace(path) as (tmp, crash), open(tmp, "w", encoding="utf-8") as f:
        if crash == "mid-write":
            f.write(text[: len(text) // 2])
            f.flush()
            die()
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def json_safe(value):
    """``value`` with NaN/Inf floats (e.g. empty length buckets) replaced by ``None``.

    >>> json_safe({"a": float("nan"), "b": [1.0, float("inf")]})
    {'a': None, 'b': [1.0, None]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json_atomic(path: str | Path, payload) -> None:
    write_text_atomic(path, json.dumps(json_safe(payload), indent=2, default=str))
