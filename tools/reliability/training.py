"""Reliability of training runs: kill -9 at any moment, damaged checkpoints, full disks.

Every trial runs the real CLI (``keras-seq train lm`` / ``train seq2seq``, tiny models,
dropout on so the RNG states matter) in a subprocess and checks the promise against an
uninterrupted reference run of the same command:

- **kill -9**: SIGKILL at a random moment, or at a chosen point of a chosen write (half
  of ``state.json`` written, a checkpoint written but not renamed, ``last.keras``
  renamed but ``state.json`` not yet…, through the ``KERAS_SEQ_KILL_AT`` hook of
  :func:`keras_seq.atomic.crash_phase`); then ``--resume`` to the end. The final weights
  must equal the reference's (≤ 1e-6), ``metrics.csv`` must list every epoch once, and
  no temporary file may be left.
- **damaged checkpoint**: the newest committed checkpoint truncated, bit-flipped or
  deleted, or ``state.json`` garbled; ``--resume`` must name the damaged file, use the
  previous good one, and (for a damaged checkpoint) still end on the reference weights.
- **full disk / read-only folder** (a small tmpfs in a private mount namespace, made with
  ``unshare``; skipped where that is not allowed): ``--resume`` stops with a one-line
  error naming the path, leaves no temporary file, and changes no file saved before.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from keras_seq.atomic import KILL_AT_ENV
from tools.reliability import Row

EPOCHS = 3
TRAINERS = {
    "lm": ["--data", "python-docs", "--tokenizer", "char", "--units", "16", "--embed-dim", "8",
           "--batch-size", "4", "--bptt", "10", "--max-steps-per-epoch", "15",
           "--dropout", "0.2", "--lr", "0.01"],
    "seq2seq": ["--data", "reverse", "--train-size", "64", "--val-size", "16",
                "--test-size", "8", "--max-len", "6", "--units", "16", "--embed-dim", "8",
                "--batch-size", "8", "--eval-size", "4", "--dropout", "0.2", "--lr", "0.01"],
}
TOKENIZER_FILE = {"lm": "tokenizer.json", "seq2seq": "source_tokenizer.json"}


def kill_points(task: str) -> list[str]:
    """Every write a run makes that a kill can land in, as ``NAME:N:PHASE``."""
    return [f"{TOKENIZER_FILE[task]}:1:mid-write", "config.json:1:mid-write",
            "epoch-0001.keras:1:mid-write", "epoch-0002.keras:1:before-rename",
            "state.json:2:mid-write", "state.json:2:before-rename",
            "last.keras:2:before-rename", "state.json:3:after-rename",
            "metrics.csv:3:mid-write", "metrics.json:1:mid-write"]


def _env(kill_at: str | None = None) -> dict:
    """The trainers' environment; ``kill_at`` (``NAME:N:PHASE``) arms the crash hook
    (:data:`keras_seq.atomic.KILL_AT_ENV`), which is otherwise cleared."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop(KILL_AT_ENV, None)
    if kill_at:
        env[KILL_AT_ENV] = kill_at
    return env


def command_args(task: str, run_dir: Path, *extra) -> list[str]:
    """The ``keras-seq`` arguments of a trial's run (after the program name)."""
    return ["train", task, "--run-dir", str(run_dir), *TRAINERS[task], "--epochs",
            str(EPOCHS), "--quiet", *map(str, extra)]


def _command(task: str, run_dir: Path, *extra) -> list[str]:
    return [sys.executable, "-m", "keras_seq.cli", *command_args(task, run_dir, *extra)]


def _run(task, run_dir, *extra, env=None, timeout=600, prefix=()):
    return subprocess.run([*prefix, *_command(task, run_dir, *extra)], env=env or _env(),
                          capture_output=True, text=True, timeout=timeout)


def weights(run_dir) -> list[np.ndarray]:
    """The final weights of a run (``checkpoints/last.keras``)."""
    from keras_seq.models import loading

    return loading.load_model(run_dir, "last").get_weights()


def weight_gap(a, b) -> float:
    """The largest absolute difference between two runs' weights (inf: other shapes)."""
    wa, wb = weights(a), weights(b)
    if len(wa) != len(wb) or any(x.shape != y.shape for x, y in zip(wa, wb)):
        return float("inf")
    return max(float(np.abs(x - y).max()) for x, y in zip(wa, wb))


def history(run_dir) -> list[int]:
    """The epochs ``metrics.csv`` lists, in order."""
    path = Path(run_dir) / "metrics.csv"
    if not path.is_file():
        return []
    return [int(line.split(",", 1)[0]) for line in path.read_text().splitlines()[1:] if line]


def temporaries(run_dir) -> list[str]:
    run_dir = Path(run_dir)
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob(".*")
                  if ".tmp" in p.name)


def _problems(run_dir, reference, done, exact: bool = True) -> list[str]:
    """What broke the promise in a finished trial (empty: nothing)."""
    problems = []
    if done.returncode != 0:
        return [f"--resume exited {done.returncode}: {done.stderr.strip()[-400:]}"]
    if history(run_dir) != list(range(EPOCHS)):
        problems.append(f"metrics.csv epochs {history(run_dir)}")
    if temporaries(run_dir):
        problems.append(f"temporary files left: {temporaries(run_dir)}")
    if not (Path(run_dir) / "metrics.json").is_file():
        problems.append("no metrics.json")
    if exact:
        gap = weight_gap(run_dir, reference)
        if not gap <= 1e-6:
            problems.append(f"final weights differ from the reference by {gap:.2e}")
    return problems


def reference_run(task: str, folder: Path) -> tuple[Path, float]:
    """An uninterrupted run and its wall time."""
    run_dir = folder / f"{task}-reference"
    if not (run_dir / "metrics.json").is_file():
        shutil.rmtree(run_dir, ignore_errors=True)
        started = time.monotonic()
        done = _run(task, run_dir)
        if done.returncode != 0:
            raise RuntimeError(f"the reference train {task} failed: {done.stderr[-2000:]}")
        (run_dir / ".seconds").write_text(str(time.monotonic() - started))
    return run_dir, float((run_dir / ".seconds").read_text())


def kill_trial(task, folder: Path, reference: Path, point: str | None, delay: float):
    """One run killed at ``point`` (``NAME:N:PHASE``) or, if None, after ``delay`` seconds;
    then ``--resume`` to the end. Returns ``(what happened, problems)``."""
    run_dir = folder / f"{task}-kill-{(point or f'random-{delay:.2f}s').replace(':', '-')}"
    shutil.rmtree(run_dir, ignore_errors=True)
    env = _env(kill_at=point)
    proc = subprocess.Popen(_command(task, run_dir), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    if point is None:
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    killed = proc.returncode == -signal.SIGKILL
    if point and not killed:
        return "not reached", [f"the kill point {point} was never reached (exit "
                               f"{proc.returncode}): {err.strip()[-300:]}"]
    what = "killed" if killed else "finished before the kill"
    done = _run(task, run_dir, "--resume")
    return what, _problems(run_dir, reference, done)


def kill_row(task: str, folder: Path, points: list[str], randoms: int, seed: int,
             printer) -> Row:
    """Kills at each of ``points`` and at ``randoms`` random moments, then --resume."""
    reference, seconds = reference_run(task, folder)
    rng = random.Random(seed)
    plan = [*points, *[None] * randoms]
    trials = len(plan)
    failures, notes, killed_at_points, random_kills = 0, [], 0, 0
    for i, point in enumerate(plan):
        delay = rng.uniform(1.0, seconds) if point is None else 0.0
        what, problems = kill_trial(task, folder, reference, point, delay)
        label = point or f"random kill at {delay:.1f} s ({what})"
        printer(f"  train {task}, trial {i + 1}/{trials}: {label}: "
                f"{'; '.join(problems) if problems else 'ok'}")
        if problems:
            failures += 1
            notes.append(f"{label}: {problems[0]}")
        elif point:
            killed_at_points += 1
        else:
            random_kills += 1
    summary = (f"{killed_at_points} kills at chosen write points, {random_kills} at random "
               f"moments (run ≈ {seconds:.0f} s); final weights = reference (≤ 1e-6), "
               "every epoch once in metrics.csv, no temp file")
    return Row(f"kill -9 during `train {task}`, then --resume", trials, failures,
               "none" if not failures else f"{failures} trial(s)",
               "; ".join(notes) if notes else summary)


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGES = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "bit-flipped": _flip_byte,
    "deleted": lambda p: p.unlink(),
}


def damage_row(task: str, folder: Path, kinds, printer) -> Row:
    """The newest checkpoint damaged after a finished run whose metrics.json is gone (so
    --resume must redo the last epoch from the previous checkpoint)."""
    reference, _ = reference_run(task, folder)
    failures, notes = 0, []
    for kind in kinds:
        run_dir = folder / f"{task}-damaged-{kind}"
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(reference, run_dir)
        (run_dir / "metrics.json").unlink()
        newest = run_dir / "checkpoints" / f"epoch-{EPOCHS:04d}.keras"
        exact = kind != "state.json garbled"
        if exact:
            DAMAGES[kind](newest)
        else:  # and the newest checkpoint too: the fallback scans for a readable one
            (run_dir / "state.json").write_text('{"epochs_done": 3, "checkpo')
            DAMAGES["truncated"](newest)
        done = _run(task, run_dir, "--resume")
        problems = _problems(run_dir, reference, done, exact=exact)
        named = str(run_dir / ("checkpoints" if exact else "state.json"))
        if done.returncode == 0 and named not in done.stdout + done.stderr:
            problems.append("the damaged file is not named in the output")
        printer(f"  train {task}, {kind}: {'; '.join(problems) if problems else 'ok'}")
        if problems:
            failures += 1
            notes.append(f"{kind}: {problems[0]}")
    return Row(f"damaged checkpoint on `train {task} --resume` ({', '.join(kinds)})",
               len(kinds), failures, "none" if not failures else f"{failures} case(s)",
               "; ".join(notes) if notes else
               "the damaged file named, the previous commit used: the last epoch is "
               "trained again and the run ends on the reference weights (state.json "
               "garbled: the newest readable checkpoint, its RNG states lost, as said)")


def _sha(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".seconds"}


def namespace_available() -> bool:
    """Whether ``unshare -rm`` can mount a private tmpfs here."""
    if not shutil.which("unshare"):
        return False
    done = subprocess.run(["unshare", "-rm", "sh", "-c",
                           "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs $d"],
                          capture_output=True, timeout=30)
    return done.returncode == 0


def _in_namespace(script: str, timeout=600):
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True,
                          text=True, timeout=timeout, env=_env())


DISKS = ("full", "read-only")


def disk_rows(task: str, folder: Path, printer, kinds=DISKS) -> list[Row]:
    """A finished run copied onto a full tmpfs and onto a read-only one, resumed with one
    more epoch: a one-line error naming the path, nothing changed, no temp file."""
    if not namespace_available():
        return [Row(f"full disk / read-only folder during `train {task}`", 0, 0, "none",
                    "not run: no private mount namespace here (unshare -rm refused)")]
    reference, _ = reference_run(task, folder)
    rows = []
    for kind in kinds:
        base = folder / f"{task}-{kind}"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        saved = base / "saved"
        subprocess.run(["cp", "-a", str(reference), str(saved)], check=True)  # keeps links
        (saved / "metrics.json").unlink()  # so --resume with one more epoch trains it
        before = _sha(saved)
        command = " ".join(_quote(a) for a in _command(task, base / "mnt" / "run", "--resume",
                                                      "--epochs", EPOCHS + 1))
        setup = (f"mkdir -p {base}/mnt && mount -t tmpfs -o size=16m tmpfs {base}/mnt && "
                 f"cp -a {saved} {base}/mnt/run && ")
        if kind == "full":  # 40 KB left: the run starts, its next checkpoint cannot fit
            setup += (f"avail=$(df --output=avail -B1 {base}/mnt | tail -1) && "
                      f"fallocate -l $((avail - 40960)) {base}/mnt/ballast && ")
        else:
            setup += f"mount -o remount,ro {base}/mnt && "
        after = f"; code=$?; cp -a {base}/mnt/run {base}/after; exit $code"
        done = _in_namespace(setup + command + after)
        problems = []
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        if done.returncode != 2:
            problems.append(f"exit {done.returncode}, expected 2: {done.stderr[-400:]}")
        elif not last.startswith("keras-seq: error: cannot write ") or \
                str(base / "mnt" / "run") not in last:
            problems.append(f"the error does not name the path: {last[:300]}")
        if "Traceback" in done.stderr:
            problems.append("a traceback was printed")
        after_dir = base / "after"
        if after_dir.is_dir():
            if temporaries(after_dir):
                problems.append(f"temporary files left: {temporaries(after_dir)}")
            changed = [k for k, v in before.items() if _sha(after_dir).get(k) != v]
            if changed:
                problems.append(f"files saved before were changed: {changed}")
        else:
            problems.append("the run directory could not be read back")
        printer(f"  train {task}, {kind} disk: {'; '.join(problems) if problems else 'ok'}"
                f" ({last[:160]})")
        rows.append(Row(f"{'full' if kind == 'full' else 'read-only'} run directory during "
                        f"`train {task} --resume`", 1, 1 if problems else 0,
                        "none" if not problems else "see notes",
                        "; ".join(problems) if problems else f"exit 2: {last[18:140]}…"))
    return rows


def _quote(arg) -> str:
    import shlex

    return shlex.quote(str(arg))


def run(scale: str, workdir, printer=print) -> list[Row]:
    """The training area of the campaign (see the module docstring)."""
    folder = Path(workdir)
    quick = scale == "quick"
    rows = []
    # quick (CI): one kill of train lm, between a checkpoint and its commit; full: every
    # write point of both trainers and 4 random moments each
    for i, task in enumerate(["lm"] if quick else TRAINERS):
        chosen = ["state.json:2:before-rename"] if quick else kill_points(task)
        rows.append(kill_row(task, folder, chosen, 0 if quick else 4, seed=17 + i,
                             printer=printer))
    kinds = ["truncated"] if quick else [*DAMAGES, "state.json garbled"]
    rows.append(damage_row("lm", folder, kinds, printer))
    if not quick:
        rows.append(damage_row("seq2seq", folder, kinds, printer))
    rows += disk_rows("lm", folder, printer, kinds=("read-only",) if quick else DISKS)
    return rows
