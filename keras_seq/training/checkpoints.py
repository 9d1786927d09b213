"""Crash-safe checkpoints: a run killed at any moment resumes from its last commit.

At each epoch end, and mid-epoch when the time budget stops a run, :func:`commit_epoch`
writes, in this order:

1. ``checkpoints/epoch-NNNN.keras`` (weights + optimizer; ``epoch-NNNN-bMMMMMM.keras``
   after ``MMMMMM`` batches of the next epoch): a temporary file, flushed and fsynced,
   then renamed; beside it ``….states.npz``, the recurrent state of every stream row of
   a stateful model (truncated BPTT carries it from batch to batch), written the same way;
2. ``checkpoints/best.keras`` when the validation loss improved: a hard link to (or a
   copy of) that file, renamed into place;
3. ``state.json``, atomically: **the commit**. It names the checkpoint (and states file)
   with its size and sha256, the position (``epochs_done``, ``batches_done`` into the
   next epoch), the best validation loss, the dropout RNG states, mid-epoch the metric
   accumulators of the epoch so far, and keeps the previous commit (``"previous"``);
4. ``checkpoints/last.keras``, pointed at the new checkpoint (for exporters and
   evaluators, which read it);
5. checkpoints older than the previous commit's are deleted.

A kill before step 3 leaves the previous commit in force (the new file is an orphan,
deleted at the next commit); after it, ``last.keras`` may lag by one epoch until the
run resumes. :func:`resume_point` reads the commit and checks its checkpoint's size and
sha256; a missing, truncated or altered file is reported by name and the previous
commit is used instead. :func:`committed_rows` reads ``metrics.csv`` back to the
committed epochs only (an epoch logged but not committed is trained again, so it must
not appear twice); :class:`~keras_seq.training.callbacks.MetricsCSV` rewrites the file
atomically each epoch, so it never holds half a row.

Every write goes through :func:`keras_seq.atomic.write_text_atomic` or
:func:`save_model_atomic`: a full disk or a read-only folder gives a
:class:`~keras_seq.errors.RunWriteError` naming the path, and leaves no temporary file.

>>> import tempfile
>>> run = Path(tempfile.mkdtemp())
>>> resume_point(run) is None   # nothing committed yet
True
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from keras_seq.atomic import atomic_replace, die, discard, file_sha256, write_json_atomic
from keras_seq.errors import KerasSeqError, RunWriteError
from keras_seq.layers.seeds import restore_seed_generator_states
from keras_seq.models.loading import load_keras_file
from keras_seq.runs import BEST, LAST, STATE

CHECKPOINTS = "checkpoints"
_EPOCH_FILE = re.compile(r"^epoch-(\d+)(?:-b(\d+))?\.keras$")
_STATES_FILE = re.compile(r"^epoch-(\d+)(?:-b(\d+))?\.states\.npz$")


def epoch_file(epochs_done: int, batches_done: int = 0) -> str:
    """The checkpoint file name of the commit after ``epochs_done`` epochs and
    ``batches_done`` batches of the next one.

    >>> epoch_file(2), epoch_file(2, 17)
    ('epoch-0002.keras', 'epoch-0002-b000017.keras')
    """
    if batches_done:
        return f"epoch-{epochs_done:04d}-b{batches_done:06d}.keras"
    return f"epoch-{epochs_done:04d}.keras"


def states_file(checkpoint_name: str) -> str:
    """The recurrent-states file committed beside ``checkpoint_name``."""
    return checkpoint_name[: -len(".keras")] + ".states.npz"


def _position(name: str) -> tuple[int, int]:
    """``(epochs_done, batches_done)`` of a checkpoint file name."""
    match = _EPOCH_FILE.match(name)
    return int(match.group(1)), int(match.group(2) or 0)


def save_arrays_atomic(arrays: list, path: str | Path) -> Path:
    """``arrays`` into the ``.npz`` file ``path`` through a temporary file, fsynced, then
    renamed (a kill leaves the old file or the new one); errors as :func:`save_model_atomic`.
    """
    path = Path(path)
    with atomic_replace(path) as (tmp, crash), open(tmp, "wb") as f:
        np.savez(f, *arrays)
        if crash == "mid-write":
            f.truncate(f.tell() // 2)
            f.flush()
            die()
        f.flush()
        os.fsync(f.fileno())
    return path


def load_arrays(path: str | Path) -> list:
    """The arrays :func:`save_arrays_atomic` wrote, in order."""
    with np.load(path) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def save_model_atomic(model, path: str | Path) -> Path:
    """``model.save(path)`` through a temporary file, fsynced, then renamed.

    Raises :class:`~keras_seq.errors.RunWriteError` (naming ``path``) when the disk is
    full or the folder read-only; the temporary file is removed and ``path``, if it
    existed, is untouched.
    """
    path = Path(path)
    with atomic_replace(path, path.with_name(f".{path.stem}.tmp.keras")) as (tmp, crash):
        model.save(tmp)  # Keras wants the .keras suffix
        with open(tmp, "rb+") as f:
            if crash == "mid-write":  # what a kill during the save leaves on disk
                f.truncate(os.path.getsize(tmp) // 2)
                f.flush()
                die()
            os.fsync(f.fileno())
    return path


def _link_atomic(source: Path, target: Path) -> None:
    """Make ``target`` the same file as ``source`` (a hard link, else a copy), atomically."""
    with atomic_replace(target) as (tmp, crash):
        discard(tmp)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        if crash == "mid-write":
            die()


def commit_epoch(model, run_dir: str | Path, epochs_done: int, best_val_loss: float | None,
                 improved: bool, extra: dict, batches_done: int = 0,
                 stream_states: list | None = None) -> dict:
    """Save the model after ``epochs_done`` epochs (and ``batches_done`` batches of the
    next one) and commit it (module docstring).

    ``extra``: more entries for ``state.json`` (RNG states, last logs, metric states);
    ``stream_states``: the recurrent state arrays of a stateful model, saved beside the
    checkpoint. Returns the state.
    """
    run_dir = Path(run_dir)
    folder = run_dir / CHECKPOINTS
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunWriteError(folder, err) from err
    name = epoch_file(epochs_done, batches_done)
    checkpoint = save_model_atomic(model, folder / name)
    state = {"epochs_done": epochs_done, "batches_done": batches_done, "checkpoint": name,
             "size": checkpoint.stat().st_size, "sha256": file_sha256(checkpoint)}
    if stream_states:
        states = save_arrays_atomic(stream_states, folder / states_file(name))
        state.update(states_file=states.name, states_size=states.stat().st_size,
                     states_sha256=file_sha256(states))
    if improved:
        _link_atomic(checkpoint, run_dir / BEST)
    previous = _read_state(run_dir / STATE)
    state.update(best_val_loss=best_val_loss, **extra)
    if previous and "checkpoint" in previous:
        state["previous"] = {k: v for k, v in previous.items() if k != "previous"}
    write_json_atomic(run_dir / STATE, state)  # the commit
    _link_atomic(checkpoint, run_dir / LAST)
    kept = (state, state.get("previous", {}))
    keep = {entry.get(key) for entry in kept for key in ("checkpoint", "states_file")}
    for old in folder.iterdir():
        if (_EPOCH_FILE.match(old.name) or _STATES_FILE.match(old.name)) \
                and old.name not in keep:
            discard(old)
    return state


def _read_state(path: Path) -> dict | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError):
        return {"damaged": True}
    return state if isinstance(state, dict) else {"damaged": True}


@dataclass
class ResumePoint:
    """Where a resumed run starts: the checkpoint to load and what goes with it.

    Attributes:
        checkpoint: the ``.keras`` file (weights + optimizer).
        epochs_done: epochs it holds.
        rng_states: the dropout RNG states saved with it (None: lost, see ``notes``).
        best_val_loss: the best validation loss up to it (None: none yet).
        state: the commit's whole ``state.json`` entry.
        notes: what was damaged and what is used instead, in words.
        batches_done: batches of epoch ``epochs_done + 1`` it holds (a mid-epoch stop).
        stream_states: the recurrent state of every stream row (None: none saved).
    """

    checkpoint: Path
    epochs_done: int
    rng_states: list | None
    best_val_loss: float | None
    state: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    batches_done: int = 0
    stream_states: list | None = None

    @property
    def where(self) -> str:
        """The position in words: ``epoch 3`` or ``epoch 3, batch 17``."""
        if self.batches_done:
            return f"epoch {self.epochs_done + 1}, batch {self.batches_done}"
        return f"epoch {self.epochs_done}"


def _check(folder: Path, entry: dict) -> str | None:
    """Why the checkpoint ``entry`` names can't be used, or None when it is intact."""
    path = folder / str(entry.get("checkpoint"))
    if not path.is_file():
        return f"{path} is missing"
    size = path.stat().st_size
    if "size" in entry and size != entry["size"]:
        return f"{path} has {size:,} bytes, not the {entry['size']:,} committed (truncated)"
    if "sha256" in entry and file_sha256(path) != entry["sha256"]:
        return f"{path} does not match its committed sha256 (altered or corrupt)"
    if entry.get("states_file"):
        states = folder / str(entry["states_file"])
        if not states.is_file():
            return f"{states} is missing"
        if states.stat().st_size != entry.get("states_size") or \
                file_sha256(states) != entry.get("states_sha256"):
            return f"{states} does not match its committed size and sha256 (truncated or altered)"
    return None


def _point(folder: Path, entry: dict, notes: list[str]) -> ResumePoint:
    best = entry.get("best_val_loss")
    states = load_arrays(folder / entry["states_file"]) if entry.get("states_file") else None
    return ResumePoint(folder / entry["checkpoint"], int(entry["epochs_done"]),
                       entry.get("rng_states"), None if best is None else float(best),
                       entry, notes, int(entry.get("batches_done", 0)), states)


def resume_point(run_dir: str | Path) -> ResumePoint | None:
    """The newest intact commit of ``run_dir`` (None when nothing was committed yet).

    A damaged checkpoint falls back to the previous commit; a damaged ``state.json``
    falls back to the newest checkpoint file that opens (its dropout RNG states are then
    lost, so the run goes on correctly but not bit for bit). Each fallback is said in
    ``notes``. Raises :class:`KerasSeqError` when no intact checkpoint is left.
    """
    run_dir = Path(run_dir)
    folder = run_dir / CHECKPOINTS
    state = _read_state(run_dir / STATE)
    if state is None:
        return None
    if state.get("damaged"):
        return _newest_readable(run_dir, folder)
    if "checkpoint" not in state:  # written before commits named their checkpoint
        legacy = dict(state, checkpoint=LAST.name)
        return _point(folder, legacy, [])
    notes = []
    for entry in (state, state.get("previous")):
        if not entry:
            break
        problem = _check(folder, entry)
        if problem is None:
            return _point(folder, entry, notes)
        notes.append(problem)
    raise KerasSeqError(f"no intact checkpoint left in {folder}: {'; '.join(notes)}; "
                        "re-train the run (start it again without --resume)")


def _newest_readable(run_dir: Path, folder: Path) -> ResumePoint:
    names = sorted((p for p in folder.glob("epoch-*.keras") if _EPOCH_FILE.match(p.name)),
                   key=lambda p: _position(p.name), reverse=True) if folder.is_dir() else []
    for path in names:
        try:
            with zipfile.ZipFile(path) as archive:
                if archive.testzip() is None:
                    epochs, batches = _position(path.name)
                    point = ResumePoint(path, epochs, None, None, {}, [],
                                        batches_done=batches)
                    point.notes.append(
                        f"{run_dir / STATE} is damaged; resuming from {path} ({point.where})"
                        ", the newest checkpoint that opens. Its dropout RNG states (and "
                        "recurrent states) are lost: the run continues correctly but will "
                        "not match an uninterrupted one bit for bit")
                    return point
        except (OSError, zipfile.BadZipFile):
            continue
    raise KerasSeqError(f"{run_dir / STATE} is damaged and no checkpoint in {folder} opens; "
                        "re-train the run (start it again without --resume)")


def point_last_at(run_dir: str | Path, point: ResumePoint) -> None:
    """Make ``checkpoints/last.keras`` the resume point's checkpoint (a kill between the
    commit and step 4, or a fallback to the previous commit, leaves it pointing
    elsewhere)."""
    last = Path(run_dir) / LAST
    try:
        if last.is_file() and os.path.samefile(last, point.checkpoint):
            return
    except OSError:
        pass
    if last.resolve() != point.checkpoint.resolve():
        _link_atomic(point.checkpoint, last)


def remove_temporaries(run_dir: str | Path) -> list[Path]:
    """Delete the temporary files an interrupted write left in ``run_dir`` and its
    ``checkpoints/`` (``.NAME.tmp``, ``.NAME.tmp.keras``); returns them."""
    run_dir = Path(run_dir)
    found = [p for folder in (run_dir, run_dir / CHECKPOINTS) if folder.is_dir()
             for p in folder.iterdir()
             if p.name.startswith(".") and (p.name.endswith(".tmp") or
                                            p.name.endswith(".tmp.keras"))]
    for path in found:
        discard(path)
    return found


def committed_rows(path: str | Path, epochs_done: int) -> tuple[list[str], list[dict], int]:
    """``(columns, rows, dropped)`` of ``metrics.csv``: its complete rows of epochs
    ``< epochs_done``, one per epoch (a repeated epoch keeps the later session's row).

    ``dropped`` counts the rows left out: logged by a session that died before committing
    them, or cut off mid-line.
    """
    path = Path(path)
    if not path.is_file():
        return [], [], 0
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    if not lines:
        return [], [], 0
    columns = next(csv.reader([lines[0]]))
    rows, dropped = {}, 0
    for line in lines[1:]:
        values = next(csv.reader([line]), [])
        complete = line.endswith("\n") and len(values) == len(columns)
        try:
            epoch = int(values[0]) if complete else None
        except ValueError:
            epoch = None
        if epoch is None or epoch >= epochs_done or epoch in rows:
            dropped += 1
        if epoch is not None and epoch < epochs_done:
            rows[epoch] = dict(zip(columns, values))
    return columns, [rows[e] for e in sorted(rows)], dropped


def csv_text(columns: list[str], rows: list[dict]) -> str:
    """``metrics.csv``'s text: a header, then one line per row (missing values empty)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def resume_from_checkpoint(point):
    """The model of a :class:`~keras_seq.training.checkpoints.ResumePoint` (weights and
    optimizer), with its dropout RNG states put back so training continues exactly."""
    model = load_keras_file(point.checkpoint)
    if point.rng_states is not None:
        restore_seed_generator_states(model, point.rng_states)
    return model
