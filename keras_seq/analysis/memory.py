"""Effective memory length: train each cell on the synthetic tasks at growing distances.

For every (task, cell, distance ``d``) a fresh model is trained for at most
``steps`` Adam steps on freshly generated batches (the same budget for every cell
and distance), checked on a validation set every ``eval_every`` steps (training
stops early once it is solved), and scored on a separate test set.

**Solved** (the thresholds, :data:`THRESHOLDS`):

- distant negation: test accuracy ≥ 95 % (chance: 50 %);
- copy memory: accuracy on the 10 recalled symbols ≥ 95 % (chance: 12.5 %);
- adding problem: test MSE ≤ 10 % of the baseline 1/6 (i.e. ≤ 0.0167).

**Effective memory length** of a cell on a task: the largest ``d`` of the sweep
such that the task is solved at ``d`` *and at every smaller* ``d`` of the sweep
(0 if the smallest distance already fails). ``largest_solved`` (the largest ``d``
solved at all) is reported next to it. With ``stop_after_failures=k`` a cell
skips the longer distances after ``k`` consecutive failures (they cannot change
its effective length); skipped cells are marked ``None``.

Models (``units`` hidden units each; inputs are 2 floats for adding, an
embedding of the token ids otherwise):

- ``rnn`` / ``gru`` / ``lstm``: the keras-seq layer; many-to-one tasks read the
  last state, the copy task reads every step;
- ``attn-gru``: a GRU whose states are pooled by additive attention
  (``α_t = softmax_t(vᵀ tanh(W h_t))``, context ``Σ α_t h_t`` joined to the last
  state), or, for the copy task, causal dot-product attention over earlier
  states at every step: a contrast with a path of length 1 to any position.

Many-to-one heads have one hidden tanh layer (negation is an XOR of two facts).
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from keras_seq.analysis._common import (
    COLORS,
    LABELS,
    Progress,
    check_cells,
    recurrent_layer,
)
from keras_seq.data.probes import TASKS, make_task
from keras_seq.errors import KerasSeqError
from keras_seq.extras import pyplot

MEMORY_CELLS = ("rnn", "gru", "lstm", "attn-gru")
DISTANCES = (5, 10, 20, 40, 80, 160, 320)
THRESHOLDS = {"negation": ("accuracy", ">=", 0.95), "copy": ("accuracy", ">=", 0.95),
              "adding": ("loss_ratio", "<=", 0.10)}
SEED_CLAIMS = {"rnn": 10, "gru": 80, "lstm": 100}  # seed 004's table, in steps


def is_solved(task: str, accuracy: float | None, loss: float, baseline: float) -> bool:
    """Whether a test result passes the task's threshold (see :data:`THRESHOLDS`)."""
    metric, op, value = THRESHOLDS[task]
    x = accuracy if metric == "accuracy" else loss / baseline
    if x is None or not math.isfinite(x):
        return False
    return x >= value if op == ">=" else x <= value


def effective_memory_length(solved: dict) -> dict:
    """``{d: solved (bool) or None (not run)}`` → effective and largest solved distance.

    Returns ``{"effective": int, "largest_solved": int}``: ``effective`` is the
    largest ``d`` with every ``d' ≤ d`` of the sweep solved (0 if none),
    ``largest_solved`` the largest solved ``d`` at all (0 if none).

    >>> effective_memory_length({5: True, 10: True, 20: False, 40: True})
    {'effective': 10, 'largest_solved': 40}
    """
    effective, largest = 0, 0
    contiguous = True
    for d in sorted(solved):
        ok = bool(solved[d])
        if ok:
            largest = d
            if contiguous:
                effective = d
        else:
            contiguous = False
    return {"effective": effective, "largest_solved": largest}


# -- models ----------------------------------------------------------------------------


@functools.cache
def _attention_pooling_layer():
    """The ``AttentionPooling`` class, defined on first use (keeps TensorFlow out of import)."""
    # lazy: Keras is imported once the backend is chosen
    import keras
    from keras import ops

    @keras.saving.register_keras_serializable(package="keras_seq")
    class AttentionPooling(keras.layers.Layer):
        """Additive attention pooling: ``Σ_t softmax_t(vᵀ tanh(h_t W)) h_t``.

        Call arguments:
            states: ``(batch, time, units)``.

        Returns ``(batch, units)``.
        """

        def __init__(self, units: int, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def build(self, input_shape):
            dim = input_shape[-1]
            self.w = self.add_weight(shape=(dim, self.units), name="w")
            self.v = self.add_weight(shape=(self.units, 1), name="v")

        def call(self, states):
            scores = ops.matmul(ops.tanh(ops.matmul(states, self.w)), self.v)  # (B, T, 1)
            alpha = ops.softmax(scores, axis=1)  # (B, T, 1)
            return ops.sum(alpha * states, axis=1)  # (B, U)

        def get_config(self):
            return {**super().get_config(), "units": self.units}

    return AttentionPooling


def build_memory_model(cell: str, task, units: int = 32, embed_dim: int = 16, lr: float = 1e-2,
                       seed: int = 0):
    """A compiled model for ``task`` (a :class:`keras_seq.data.probes.Task`)."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    keras.utils.set_random_seed(seed)
    if task.vocab is None:
        inputs = keras.Input((task.length, 2), dtype="float32")
        x = inputs
    else:
        inputs = keras.Input((task.length,), dtype="int32")
        x = keras.layers.Embedding(task.vocab, embed_dim)(inputs)  # (B, T, E)
    sequence = task.kind == "sequence"
    base = "gru" if cell == "attn-gru" else cell
    if cell == "attn-gru":
        hs = recurrent_layer(base, units, return_sequences=True)(x)  # (B, T, U)
        if sequence:
            ctx = keras.layers.Attention()([hs, hs], use_causal_mask=True)  # (B, T, U)
            x = keras.layers.Concatenate()([hs, ctx])
        else:
            ctx = _attention_pooling_layer()(units)(hs)  # (B, U)
            last = keras.layers.Lambda(lambda t: t[:, -1])(hs)
            x = keras.layers.Concatenate()([last, ctx])
    else:
        x = recurrent_layer(base, units, return_sequences=sequence)(x)
    if sequence:
        out = keras.layers.Dense(task.num_classes)(x)  # (B, T, C) logits
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        x = keras.layers.Dense(units, activation="tanh")(x)
        if task.kind == "regression":
            out = keras.layers.Reshape(())(keras.layers.Dense(1)(x))  # (B,)
            loss = "mse"
        else:
            out = keras.layers.Dense(task.num_classes)(x)  # (B, C)
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = keras.Model(inputs, out, name=f"{cell}_{task.name}_{task.distance}")
    model.compile(optimizer=keras.optimizers.Adam(lr, global_clipnorm=1.0), loss=loss)
    return model


def score(model, task, x, y, batch: int = 256) -> dict:
    """Test loss (matching the baseline's definition) and accuracy on ``x, y``."""
    pred = np.asarray(model.predict(x, batch_size=batch, verbose=0), np.float64)
    if task.kind == "regression":
        return {"loss": float(np.mean((pred - y) ** 2)), "accuracy": None}
    logp = pred - pred.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, y[..., None].astype(np.int64), -1)[..., 0]
    hit = pred.argmax(-1) == y
    if task.kind == "sequence":  # accuracy on the recalled symbols only
        return {"loss": float(nll.mean()), "accuracy": float(hit[:, -10:].mean())}
    return {"loss": float(nll.mean()), "accuracy": float(hit.mean())}


def train_on_task(cell: str, task, steps: int = 300, batch: int = 32, units: int = 32,
                  lr: float = 1e-2, eval_every: int = 50, num_eval: int = 512, seed: int = 0,
                  progress=None) -> dict:
    """Train one fresh model on ``task`` for at most ``steps`` steps; returns its test row."""
    started = time.monotonic()
    model = build_memory_model(cell, task, units=units, lr=lr, seed=seed)
    vx, vy = task.generate(num_eval, seed=seed + 10_001)
    tx, ty = task.generate(num_eval, seed=seed + 20_002)
    done, solved_at = 0, None
    losses = []
    for step in range(steps):
        x, y = task.generate(batch, seed=seed * 1_000_003 + step)
        losses.append(float(model.train_on_batch(x, y)))
        done = step + 1
        if progress is not None:
            progress.add(1)
        if not math.isfinite(losses[-1]):
            break
        if eval_every and done % eval_every == 0 and done < steps:
            v = score(model, task, vx, vy)
            if is_solved(task.name, v["accuracy"], v["loss"], task.baseline_loss):
                solved_at = done
                break
    if progress is not None and done < steps:
        progress.add(steps - done)
    test = score(model, task, tx, ty)
    return {
        "task": task.name, "cell": cell, "distance": task.distance, "length": task.length,
        "steps": done, "solved_at_step": solved_at,
        "train_loss": float(np.mean(losses[-10:])) if losses else None,
        "test_loss": test["loss"], "test_accuracy": test["accuracy"],
        "baseline_loss": task.baseline_loss, "baseline_accuracy": task.baseline_accuracy,
        "loss_ratio": test["loss"] / task.baseline_loss,
        "solved": is_solved(task.name, test["accuracy"], test["loss"], task.baseline_loss),
        "params": int(model.count_params()),
        "seconds": time.monotonic() - started,
    }


def memory_sweep(tasks=TASKS, cells=MEMORY_CELLS, distances=DISTANCES, steps: int = 300,
                 batch: int = 32, units: int = 32, lr: float = 1e-2, eval_every: int = 50,
                 num_eval: int = 512, seed: int = 0, stop_after_failures: int | None = 1,
                 max_minutes: float | None = None, progress: bool = True,
                 printer=None) -> dict:
    """Train every (task, cell, distance); return rows and effective memory lengths.

    With ``max_minutes`` the runs not started within that wall time are skipped
    (rows with ``"skipped": "time budget"``; an effective length that stops at a
    skipped distance is then a lower bound, ``"truncated": True``).

    Returns ``{"config", "rows": [...], "memory": {task: {cell: {"effective",
    "largest_solved", "truncated"}}}}``.
    """
    cells = check_cells(cells, MEMORY_CELLS)
    for name in tasks:
        make_task(name, 2)  # validates the name
    distances = tuple(sorted(int(d) for d in distances))
    if not distances or distances[0] < 2:
        raise KerasSeqError(
            f"received distances {list(distances)}; expected integers ≥ 2, "
            "e.g. --distances 5 10 20 40"
        )
    bar = Progress(len(tasks) * len(cells) * len(distances) * steps, progress, "step")
    started = time.monotonic()
    rows, memory = [], {}
    for name in tasks:
        memory[name] = {}
        for cell in cells:
            solved, failures, truncated = {}, 0, False
            for d in distances:
                if stop_after_failures and failures >= stop_after_failures:
                    solved[d] = None
                    rows.append({"task": name, "cell": cell, "distance": d,
                                 "skipped": "failed at shorter distances"})
                    bar.add(steps)
                    continue
                if max_minutes is not None and time.monotonic() - started > 60 * max_minutes:
                    solved[d] = None
                    truncated = truncated or failures == 0
                    rows.append({"task": name, "cell": cell, "distance": d,
                                 "skipped": "time budget"})
                    bar.add(steps)
                    continue
                row = train_on_task(cell, make_task(name, d), steps=steps, batch=batch,
                                    units=units, lr=lr, eval_every=eval_every,
                                    num_eval=num_eval, seed=seed, progress=bar)
                rows.append(row)
                solved[d] = row["solved"]
                failures = 0 if row["solved"] else failures + 1
                if printer is not None:
                    acc = row["test_accuracy"]
                    printer(f"{name:>8} {cell:>8} d={d:<4} loss {row['test_loss']:.4f} "
                            f"(baseline {row['baseline_loss']:.4f})"
                            + (f" acc {acc:.3f}" if acc is not None else "")
                            + f" {'solved' if row['solved'] else 'not solved'} "
                            f"[{row['steps']} steps, {row['seconds']:.0f}s]")
            memory[name][cell] = {**effective_memory_length(solved), "truncated": truncated}
    config = {"tasks": list(tasks), "cells": list(cells), "distances": list(distances),
              "steps": steps, "batch": batch, "units": units, "lr": lr,
              "eval_every": eval_every, "num_eval": num_eval, "seed": seed,
              "stop_after_failures": stop_after_failures, "max_minutes": max_minutes,
              "thresholds": {k: " ".join(map(str, v)) for k, v in THRESHOLDS.items()}}
    return {"config": config, "rows": rows, "memory": memory}


def memory_table(result: dict) -> list[dict]:
    """One row per cell: effective memory length per task, and the seed's claim."""
    tasks = result["config"]["tasks"]
    rows = []
    for cell in result["config"]["cells"]:
        row = {"cell": LABELS[cell]}
        for t in tasks:
            m = result["memory"][t][cell]
            row[t] = m["effective"]
            if m.get("truncated"):
                row[t] = f"≥ {m['effective']} (time budget)"
            elif m["largest_solved"] != m["effective"]:
                row[t] = f"{m['effective']} (solved up to {m['largest_solved']})"
        row["seed 004 claim"] = SEED_CLAIMS.get(cell, "—")
        rows.append(row)
    return rows


def plot_memory(result: dict, path: str) -> str:
    """One panel per task: test accuracy (or loss / baseline for adding) against ``d``."""
    plt = pyplot("the memory-task plot")
    tasks = result["config"]["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, name in zip(axes[0], tasks):
        metric, _, threshold = THRESHOLDS[name]
        for cell in result["config"]["cells"]:
            pts = [(r["distance"], r["test_accuracy"] if metric == "accuracy"
                    else r["loss_ratio"]) for r in result["rows"]
                   if r["task"] == name and r["cell"] == cell and not r.get("skipped")]
            if pts:
                ax.plot(*zip(*pts), "o-", color=COLORS[cell], label=LABELS[cell])
        ax.axhline(threshold, color="gray", ls="--", label="solved threshold")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("distance d (steps)")
        if metric == "accuracy":
            ax.set_ylabel("test accuracy")
            ax.set_ylim(0, 1.02)
        else:
            ax.set_ylabel("test MSE / baseline MSE (1/6)")
            ax.set_yscale("log")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    cfg = result["config"]
    fig.suptitle(f"memory tasks: {cfg['steps']} steps × batch {cfg['batch']}, "
                 f"{cfg['units']} units")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
