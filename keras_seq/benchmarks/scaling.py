"""``keras-seq bench lm --strategy …``: training tokens/s on 1 and 2 replicas, 1 and 2 workers.

Each setting is a real ``keras-seq train lm`` run in fresh processes (the strategy and
logical devices are fixed when TensorFlow starts): ``one`` (one device), ``mirrored``
(``--devices 2``: two GPUs, or two logical CPU devices on a host without one) and
``multi-worker`` with one and with two localhost workers (``TF_CONFIG``). Every run trains
the same model on the same global batch for the same steps; tokens/s is the run's own
(``metrics.json``: optimizer steps × global batch × bptt over the time in ``fit``), so the
first epoch's tracing is in it — compare runs of equal length only.

On a 2-core CPU host this shows the overhead of the replicas and the collective ops, not
a speed-up (the replicas share the cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from keras_seq.training import distribute

SETTINGS = {  # label: (strategy flags, workers)
    "one device": (["--strategy", "one"], 1),
    "mirrored, 2 replicas": (["--strategy", "mirrored", "--devices", "2"], 1),
    "multi-worker, 1 worker": (["--strategy", "multi-worker"], 1),
    "multi-worker, 2 workers": (["--strategy", "multi-worker"], 2),
}


def _run(flags, workers: int, train_args: list[str], folder: Path, timeout: float) -> dict:
    """One setting: ``workers`` processes of ``keras-seq train lm``; worker 0's results."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}
    cluster = distribute.localhost_cluster(workers)
    procs = []
    started = time.monotonic()
    for index in range(workers):
        if "multi-worker" in flags:
            env = {**env, "TF_CONFIG": distribute.tf_config(cluster, index)}
        cmd = [sys.executable, "-m", "keras_seq.cli", "train", "lm", "--run-dir",
               str(folder / f"w{index}"), *train_args, *flags, "--quiet"]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
    try:
        errors = [p.communicate(timeout=timeout)[1] for p in procs]
    finally:
        for p in procs:
            p.kill()
    wall = time.monotonic() - started
    for p, err in zip(procs, errors):
        if p.returncode != 0:
            lines = [line for line in err.splitlines() if line.strip()]
            raise RuntimeError(f"bench lm --strategy: {' '.join(flags)} failed: "
                               + (lines[-1] if lines else f"exit {p.returncode}"))
    metrics = json.loads((folder / "w0" / "metrics.json").read_text())
    return {"tokens_per_sec": metrics["tokens_per_sec"], "train_minutes":
            metrics["train_minutes"], "wall_seconds": wall}


def run_scaling(strategies, train_args: list[str], rounds: int = 2,
                timeout: float = 900.0, progress=print) -> dict:
    """Each setting whose strategy is in ``strategies``, ``rounds`` times, alternating.

    ``train_args``: the ``train lm`` flags every run shares (data, model, batch, epochs).
    """
    labels = [label for label, (flags, _) in SETTINGS.items() if flags[1] in strategies]
    if not labels:
        raise ValueError(f"bench lm --strategy: received {strategies!r}; expected some of "
                         "one, mirrored, multi-worker")
    results = {label: [] for label in labels}
    with tempfile.TemporaryDirectory(prefix="keras-seq-scaling-") as tmp:
        for r in range(rounds):
            for label in labels if r % 2 == 0 else labels[::-1]:
                flags, workers = SETTINGS[label]
                folder = Path(tmp) / f"{len(results[label])}-{label.replace(' ', '_')}"
                progress(f"round {r + 1}/{rounds}: {label}")
                results[label].append(_run(flags, workers, train_args, folder, timeout))
    rows = []
    base = max(x["tokens_per_sec"] for x in results[labels[0]])
    for label in labels:
        speeds = [x["tokens_per_sec"] for x in results[label]]
        rows.append({"setting": label, "tokens_per_sec": max(speeds),
                     "runs": speeds, "vs_first": max(speeds) / base})
    return {"train_args": train_args, "rounds": rounds, "rows": rows}


def format_scaling(out: dict) -> str:
    lines = [f"bench lm --strategy: train lm {' '.join(out['train_args'])}; best of "
             f"{out['rounds']} alternated runs (tokens/s of each run in brackets)",
             f"{'setting':<26}{'tokens/s':>10}{'vs first':>10}  runs"]
    for row in out["rows"]:
        runs = ", ".join(f"{s:,.0f}" for s in row["runs"])
        lines.append(f"{row['setting']:<26}{row['tokens_per_sec']:>10,.0f}"
                     f"{row['vs_first']:>9.2f}x  [{runs}]")
    return "\n".join(lines)
