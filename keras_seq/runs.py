"""Run directories: what every trainer writes, and the checks before anything reads one.

Every ``keras-seq train TASK`` run directory holds::

    config.json        the resolved config, with the run's "kind" (lm, seq2seq, classify,
                       tag, conditioned), the keras-seq "version", the Keras "backend"
                       that started it, "mixed_precision" and "jit_compile"
    *tokenizer.json    the fitted tokenizer(s) (their fingerprints go into every result)
    metrics.csv        one row per epoch (the committed ones), rewritten atomically
    metrics.json       final results with fingerprints, timing, diagnostics and the
                       backend / mixed precision / jit_compile of the last session
    state.json         the commit: epochs done, the checkpoint with its size and sha256,
                       best val loss, dropout RNG states (exact --resume), the previous
                       commit (the fallback when a checkpoint is found damaged)
    checkpoints/       epoch-NNNN.keras (the last two commits: weights + optimizer; loads
                       under any Keras backend), last.keras (the newest of them),
                       best.keras (by val loss)
    tensorboard/       train/ and validation/ (Keras) plus the task's own logs (written
                       where TensorFlow is installed, whatever the backend)

This module reads and checks them without importing any trainer, so exporters, servers
and reports can open a run. Writes go through :func:`write_text_atomic`: an interrupted
write never leaves half a file (:mod:`keras_seq.training.checkpoints` says how a run
survives a kill at any moment).

>>> import tempfile
>>> run = Path(tempfile.mkdtemp())
>>> write_json_atomic(run / "config.json", {"kind": "lm", "version": __version__})
>>> read_run_config(run, kind="lm")["kind"]
'lm'
>>> read_run_config(run, kind="seq2seq")
Traceback (most recent call last):
...
keras_seq.errors.KerasSeqError: ... holds a `keras-seq train lm` run, not a seq2seq run; ...
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

from keras_seq import __version__
from keras_seq.errors import KerasSeqError

CONFIG, STATE, METRICS = "config.json", "state.json", "metrics.json"
LAST, BEST = Path("checkpoints") / "last.keras", Path("checkpoints") / "best.keras"


#: the reliability campaign's crash hook (keras_seq.reliability.training): "NAME:N:PHASE"
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
    import signal

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
    from keras_seq.errors import RunWriteError

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
    import hashlib

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


def read_run_config(run_dir: str | Path, kind: str | None = None) -> dict:
    """The ``config.json`` of a run after checking its kind and keras-seq version.

    When ``run_dir`` is not a ``kind`` run, the message says what it is instead: missing,
    a file, an empty folder, an export, another kind of run (and which commands read that
    kind), or a run of another keras-seq version.
    """
    readers = {"lm": "eval lm, generate, compare, export saved-model/tflite",
               "seq2seq": "eval seq2seq, translate, export seq2seq",
               "classify": "eval classify, predict, export classifier",
               "tag": "eval tag, predict, export tagger",
               "conditioned": "eval conditioned, generate"}
    run_dir = Path(run_dir)
    path = run_dir / CONFIG
    wanted = f"`keras-seq train {kind}`" if kind else "`keras-seq train …`"
    fix = f"pass the --run-dir of a {wanted} run"
    if not path.is_file():
        if not run_dir.exists():
            what = "does not exist"
        elif not run_dir.is_dir():
            what = "is a file"
        elif (run_dir / "saved_model.pb").is_file():
            what = "holds a SavedModel (an export), not a training run"
        elif any(run_dir.glob("*.tflite")):
            what = "holds TFLite exports, not a training run"
        elif not any(run_dir.iterdir()):
            what = "is empty"
        else:
            what = f"has no {CONFIG}"
        raise KerasSeqError(f"{run_dir} is not a keras-seq run directory (it {what}); {fix}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise KerasSeqError(f"{path} is not valid JSON ({err}); the run directory is damaged, "
                            "re-train it") from None
    if not isinstance(data, dict):
        raise KerasSeqError(f"{path} holds a JSON {type(data).__name__}, not the object of "
                            "fields a run writes; the run directory is damaged, re-train it")
    found, version = data.get("kind"), data.get("version")
    if kind is not None and found != kind:
        if isinstance(found, str) and found in readers:
            raise KerasSeqError(f"{run_dir} holds a `keras-seq train {found}` run, not a {kind} "
                                f"run; {fix} (read this one with keras-seq {readers[found]})")
        raise KerasSeqError(f"{run_dir} holds a run whose {CONFIG} names no known kind (kind "
                            f"{found!r}, keras-seq {version!r}), not a {kind} run; {fix}")
    if version != __version__:
        written = f"keras-seq {version}" if isinstance(version, str) else \
            "a keras-seq that recorded no version"
        raise KerasSeqError(f"{run_dir} was written by {written}, this is keras-seq "
                            f"{__version__}; re-train it or use the matching keras-seq version")
    return data


def check_run_dir(run_dir: str | Path, kind: str | None = None) -> Path:
    """``run_dir``, after checking it holds a ``kind`` run with a checkpoint."""
    run_dir = Path(run_dir)
    found = read_run_config(run_dir, kind).get("kind", kind)
    if not (run_dir / LAST).is_file():
        raise KerasSeqError(f"{run_dir} has no checkpoint yet ({LAST}): its first epoch never "
                            f"finished; continue it with `keras-seq train {found} --run-dir "
                            f"{run_dir} --resume` or train it again")
    return run_dir


def epochs_done(run_dir: str | Path) -> int:
    """Epochs a run has finished (``state.json``; 0 before the first checkpoint)."""
    path = Path(run_dir) / STATE
    return int(json.loads(path.read_text())["epochs_done"]) if path.is_file() else 0


def checkpoint_path(run_dir: str | Path, which: str = "best") -> Path:
    """``best.keras`` when asked for and present, else ``last.keras``."""
    run_dir = Path(run_dir)
    if which not in ("best", "last"):
        raise KerasSeqError(f"which must be 'best' or 'last', got {which!r}")
    best = run_dir / BEST
    return best if which == "best" and best.is_file() else run_dir / LAST


def load_model(run_dir: str | Path, which: str = "best"):
    """The Keras model of a checked run (without its optimizer)."""

    return load_keras_file(checkpoint_path(run_dir, which), compile=False)


def load_keras_file(path: str | Path, compile: bool = True):
    """A ``.keras`` file written by keras-seq, loaded in Keras's safe mode (no ``Lambda``
    code, no class keras-seq does not register). Whatever Keras raises for a damaged or
    foreign file becomes a :class:`KerasSeqError` naming the file."""
    import keras

    import keras_seq.keras_metrics  # noqa: F401  (registers the classes a run may hold)
    import keras_seq.models  # noqa: F401

    path = Path(path)
    if not path.is_file():
        raise KerasSeqError(f"{path} does not exist; the run has no checkpoint yet")
    try:
        return keras.saving.load_model(path, compile=compile, safe_mode=True)
    except Exception as err:  # Keras raises ValueError, TypeError, OSError, BadZipFile…
        text = str(err).strip()
        reason = text.splitlines()[0][:300] if text else type(err).__name__
        raise KerasSeqError(
            f"cannot load the model in {path}: {reason} (keras-seq loads .keras files in "
            "Keras safe mode: no Lambda layers or classes it does not know; the file is "
            "damaged or was not written by keras-seq: re-train the run)") from None
