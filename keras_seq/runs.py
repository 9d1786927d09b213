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
and reports can open a run. Writes go through :mod:`keras_seq.atomic`: an interrupted
write never leaves half a file (:mod:`keras_seq.training.checkpoints` says how a run
survives a kill at any moment).

>>> import tempfile
>>> from keras_seq.atomic import write_json_atomic
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

import json
from pathlib import Path

from keras_seq import __version__
from keras_seq.errors import KerasSeqError

CONFIG, STATE, METRICS = "config.json", "state.json", "metrics.json"
LAST, BEST = Path("checkpoints") / "last.keras", Path("checkpoints") / "best.keras"


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
