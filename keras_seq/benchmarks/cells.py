"""Training speed of keras-seq's SimpleRNN / GRU / LSTM against Keras's built-ins.

Workload (a word-level language model, the shape of a PTB-style run)::

    tokens (B, T) -> Embedding(vocab, embed) -> RNN(units, return_sequences)
                  -> Dense(vocab) -> sparse softmax cross-entropy

Both implementations get the same model, optimizer, data and compiled train
step (``model.train_on_batch``) in one process, warm-up excluded; within each
run they take turns of ``chunk`` steps (who goes first alternates), so that
load from other processes on a shared machine hits both alike. Tokens/s come from
each implementation's fastest run; the speed-up is the median over runs of
the per-run ratio (both halves of a run saw the same load), its spread the lowest and
highest per-run ratio. ``head="none"`` drops the vocabulary softmax (loss = mean of the
RNN outputs) to time the recurrent layer alone, which the full softmax otherwise dominates.

Backend, device, precision and XLA (:mod:`keras_seq.benchmarks.backends`): both
implementations always run on the same ones. ``backend`` other than this process's runs
the benchmark in a worker process (``python -m keras_seq.benchmarks.cells --worker
KWARGS_JSON``); ``device="cpu"`` hides a GPU the same way. Each result row names the
backend, device, precision, XLA and the path each layer took (``"cudnn"``,
``"fused-loop"``, ``"loop"``; the built-in's ``"backend-loop"`` is Keras's backend
``lstm()``/``gru()`` without cuDNN).

Use ``keras-seq bench cells`` or :func:`run_benchmark`.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from keras_seq.benchmarks import backends
from keras_seq.cells import cell_spec

CELLS = ("simple_rnn", "gru", "lstm")
IMPLS = ("keras_seq", "builtin")
DEFAULTS = {
    "vocab": 10_000,  # PTB-sized vocabulary
    "embed": 128,
    "units": 256,
    "seq_len": 35,  # the classic truncated-BPTT length
    "batch": 32,
    "steps": 100,  # timed train steps per run
    "repeats": 5,  # runs per (cell, impl), alternating; the fastest run is reported
    "warmup": 3,  # untimed steps before the first timed run
}
#: The recurrent layer's name in :func:`build_model`'s model.
LAYER_NAME = "rnn"


def _layer(cell, impl, units):
    spec = cell_spec(cell)  # "simple_rnn" is the registry's "rnn"
    cls = spec.layer_cls if impl == "keras_seq" else spec.builtin_cls
    return cls(units, return_sequences=True, name=LAYER_NAME)


def build_model(cell, impl, vocab, embed, units, seq_len, batch, head="softmax", seed=0,
                jit_compile=False):
    """The benchmark model, compiled, for one cell type and implementation.

    Under a mixed-precision policy the vocabulary layer computes in float32 (logits and
    loss stay float32); ``mixed_float16`` gets Keras's loss scaling (``compile`` wraps
    the optimizer).
    """
    # lazy: Keras is imported once the backend is chosen
    import keras

    keras.utils.set_random_seed(seed)
    mixed = keras.mixed_precision.global_policy().name != "float32"
    tokens = keras.Input((seq_len,), batch_size=batch, dtype="int32")
    x = keras.layers.Embedding(vocab, embed)(tokens)  # (B, T, E)
    x = _layer(cell, impl, units)(x)  # (B, T, U)
    if head == "softmax":
        x = keras.layers.Dense(vocab, dtype="float32" if mixed else None)(x)  # (B, T, V)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        loss = lambda y_true, y_pred: keras.ops.mean(keras.ops.cast(y_pred, "float32"))
    model = keras.Model(tokens, x)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss,
                  jit_compile=backends.jit_setting(jit_compile))
    return model


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def check_counts(command, **counts):
    """ValueError unless every count is a positive integer (``warmup`` may be 0)."""
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) \
                or value < (0 if name == "warmup" else 1):
            raise ValueError(
                f"{command}: received {name}={value!r}; expected a positive integer "
                f"(warmup may be 0). Pass e.g. --{name} 10."
            )


def alternate(step_fns, groups, impls, steps, repeats, chunk, bar=None):
    """Seconds per run of each ``(group, impl)`` in ``step_fns`` (``fn(n)`` runs ``n`` train
    steps and waits for them): per run and group, the implementations take turns of
    ``chunk`` steps, who goes first alternating, so that load hits them alike."""
    times = {key: [] for key in step_fns}
    for r in range(repeats):
        for group in groups:
            spent = dict.fromkeys(impls, 0.0)
            for c, start in enumerate(range(0, steps, chunk)):
                n = min(chunk, steps - start)
                for impl in impls if (r + c) % 2 == 0 else impls[::-1]:
                    begin = time.perf_counter()
                    step_fns[group, impl](n)
                    spent[impl] += time.perf_counter() - begin
            for impl in impls:
                times[group, impl].append(spent[impl])
                if bar is not None:
                    bar.add(1)
    return times


def speed_row(times_ours, times_builtin, tokens):
    """Tokens/s (best and median run), run times and the per-run ratios of one pair."""
    row = {}
    for impl, runs in (("keras_seq", times_ours), ("builtin", times_builtin)):
        row[f"{impl}_tokens_per_s"] = tokens / min(runs)
        row[f"{impl}_median_tokens_per_s"] = tokens / _median(runs)
        # 4 significant digits, not 4 decimals: a quick run of ~1 ms must keep its ratio.
        row[f"{impl}_seconds"] = [float(f"{t:.4g}") for t in runs]
    # Runs are interleaved, so each run's pair of times saw the same load.
    paired = [b / k for k, b in zip(times_ours, times_builtin)]
    row["ratio"] = _median(paired)
    row["paired_ratios"] = [round(v, 3) for v in paired]
    row["ratio_min"], row["ratio_max"] = min(paired), max(paired)
    row["best_ratio"] = row["keras_seq_tokens_per_s"] / row["builtin_tokens_per_s"]
    return row


def run_benchmark(
    cells=CELLS,
    steps=DEFAULTS["steps"],
    repeats=DEFAULTS["repeats"],
    warmup=DEFAULTS["warmup"],
    vocab=DEFAULTS["vocab"],
    embed=DEFAULTS["embed"],
    units=DEFAULTS["units"],
    seq_len=DEFAULTS["seq_len"],
    batch=DEFAULTS["batch"],
    head="softmax",
    chunk=10,
    progress=True,
    backend=None,
    device=None,
    mixed_precision="off",
    jit_compile=False,
    timeout=None,
):
    """Time training steps of each cell, keras-seq vs the Keras built-in.

    Args:
        cells: cell types among ``"simple_rnn"``, ``"gru"``, ``"lstm"``.
        steps: timed train steps per run.
        repeats: runs per (cell, implementation); the fastest run gives
            tokens/s, the median per-run ratio gives the speed-up.
        warmup: untimed steps per model after all models are built (at least 1).
        vocab, embed, units, seq_len, batch: workload sizes.
        head: ``"softmax"`` (full LM) or ``"none"`` (recurrent layer only).
        chunk: steps per turn; within a run the two implementations take turns
            of ``chunk`` steps.
        progress: show a Keras progress bar.
        backend: ``"tensorflow"``, ``"jax"``, ``"torch"`` or None (this process's); another
            backend than this process's runs in a worker process.
        device: ``"cpu"``, ``"gpu"`` or None (wherever the backend puts it). ``"gpu"``
            without a GPU raises ValueError; ``"cpu"`` hides a GPU (in a worker).
        mixed_precision: ``"off"``, ``"mixed_float16"`` or ``"mixed_bfloat16"`` (Keras's
            global policy while the models are built and trained).
        jit_compile: compile the train step with XLA (``torch.compile`` on PyTorch;
            JAX always compiles).
        timeout: seconds a worker process may take (None: no limit).

    Returns:
        dict with ``config``, ``results`` (one row per cell: best and median
        tokens/s and run times for each implementation; ``ratio``: the median
        over runs of keras_seq's speed / the built-in's in the same run;
        ``ratio_min``/``ratio_max``: its spread; ``best_ratio``: best run over best run;
        the settings and each implementation's ``*_path`` and ``*_jit``),
        ``relative_speed`` (each cell's keras-seq tokens/s over SimpleRNN's; built-in
        likewise), ``params`` (from :func:`keras_seq.layers.param_table`) and
        ``environment`` (versions and devices).
    """
    check_counts("bench cells", steps=steps, repeats=repeats, warmup=warmup, chunk=chunk)
    unknown = [c for c in cells if c not in CELLS]
    if unknown:
        raise ValueError(
            f"bench cells: received cells {unknown}; expected some of {', '.join(CELLS)}."
        )
    if head not in ("softmax", "none"):
        raise ValueError(f"bench cells: received head={head!r}; expected 'softmax' or 'none'.")
    backends.check_settings("bench cells", backend, device, mixed_precision, jit_compile)
    kwargs = dict(cells=list(cells), steps=steps, repeats=repeats, warmup=warmup, vocab=vocab,
                  embed=embed, units=units, seq_len=seq_len, batch=batch, head=head,
                  chunk=chunk, progress=progress, backend=backend, device=device,
                  mixed_precision=mixed_precision, jit_compile=jit_compile)
    if backends.worker_reason(backend, device):
        return backends.run_worker("keras_seq.benchmarks.cells", kwargs, backend, device,
                                   timeout=timeout)
    device_used = backends.resolve_device("bench cells", device)
    with backends.precision_policy(mixed_precision):
        report = _run_here(device_used, **kwargs)
    return report


def _run_here(device_used, cells, steps, repeats, warmup, vocab, embed, units, seq_len, batch,
              head, chunk, progress, mixed_precision, jit_compile, **_):
    # lazy: Keras is imported once the backend is chosen
    import keras

    from keras_seq.layers import param_table

    cells = tuple(cells)
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab, size=(batch, seq_len), dtype=np.int32)
    y = np.roll(x, -1, axis=1) if head == "softmax" else np.zeros((batch, seq_len), "float32")
    x, y = keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(y)

    models, builtin_paths = {}, {}
    for cell in cells:
        for impl in IMPLS:
            model = build_model(cell, impl, vocab, embed, units, seq_len, batch, head,
                                jit_compile=jit_compile)
            if impl == "builtin":
                record = []
                with backends.probe_builtin_path(record):
                    model.train_on_batch(x, y)  # traces the train step
                builtin_paths[cell] = backends.builtin_path(record, cell)
            else:
                model.train_on_batch(x, y)  # traces the train step
            models[cell, impl] = model
    # Measured here: a model's first step after other models were built is slow
    # again (~100 ms), so every model gets its warm-up after all are built.
    for model in models.values():
        for _ in range(max(warmup, 1)):
            model.train_on_batch(x, y)

    def stepper(model):
        def run(n):
            for _ in range(n):
                loss = model.train_on_batch(x, y)
            float(np.asarray(loss))  # make sure the work is done
        return run

    bar = keras.utils.Progbar(len(models) * repeats, unit_name="run") if progress else None
    times = alternate({key: stepper(m) for key, m in models.items()}, cells, IMPLS, steps,
                      repeats, chunk, bar)

    tokens = steps * batch * seq_len
    precision = "fp32" if mixed_precision == "off" else mixed_precision
    results = []
    for cell in cells:
        layer = models[cell, "keras_seq"].get_layer(LAYER_NAME)
        row = {"cell": cell, "backend": keras.backend.backend(), "device": device_used,
               "precision": precision,
               "keras_seq_path": backends.keras_seq_path(layer),
               "builtin_path": builtin_paths[cell],
               "keras_seq_jit": backends.jit_label(models[cell, "keras_seq"]),
               "builtin_jit": backends.jit_label(models[cell, "builtin"]),
               "keras_seq_blockers": backends.keras_seq_blockers(layer)}
        row.update(speed_row(times[cell, "keras_seq"], times[cell, "builtin"], tokens))
        results.append(row)
    relative = {}
    if "simple_rnn" in cells:
        base = {impl: results[cells.index("simple_rnn")][f"{impl}_tokens_per_s"] for impl in IMPLS}
        relative = {
            impl: {row["cell"]: row[f"{impl}_tokens_per_s"] / base[impl] for row in results}
            for impl in IMPLS
        }
    config = {
        "vocab": vocab,
        "embed": embed,
        "units": units,
        "seq_len": seq_len,
        "batch": batch,
        "steps": steps,
        "repeats": repeats,
        "warmup": warmup,
        "head": head,
        "chunk": chunk,
        "backend": keras.backend.backend(),
        "device": device_used,
        "mixed_precision": mixed_precision,
        "jit_compile": jit_compile,
    }
    return {
        "config": config,
        "results": results,
        "relative_speed": relative,
        "params": param_table([(embed, units)]),
        "environment": backends.environment(),
    }


def settings_text(row) -> str:
    """``"tensorflow/cpu fp32 jit no"``: the settings a result row ran under."""
    jit = row.get("keras_seq_jit", "no")
    if row.get("builtin_jit", jit) != jit:
        jit = f"{jit}/{row['builtin_jit']}"
    return (f"{row.get('backend', '?')}/{row.get('device', '?')} {row.get('precision', 'fp32')} "
            f"jit {jit}")


def format_report(report):
    """The report as plain text: speed table, relative speeds, parameter table."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.layers.params import format_param_table

    cfg = report["config"]
    lines = [
        f"bench cells: embed {cfg['embed']}, units {cfg['units']}, seq_len {cfg['seq_len']}, "
        f"batch {cfg['batch']}, vocab {cfg['vocab']}, head {cfg['head']}, "
        f"{cfg['steps']} steps x {cfg['repeats']} runs (interleaved in turns of {cfg['chunk']} "
        "steps); tok/s of the best run; ours/built-in = median of per-run ratios",
        f"{'cell':<11} {'keras-seq tok/s':>16} {'built-in tok/s':>15} {'ours/built-in':>14}"
        f"  {'spread':<11}  {'settings':<38} {'path ours / built-in':<22}  per-run ratios",
    ]
    for row in report["results"]:
        spread = (f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}" if "ratio_min" in row
                  else "-")
        paths = f"{row.get('keras_seq_path', '?')} / {row.get('builtin_path', '?')}"
        lines.append(
            f"{row['cell']:<11} {row['keras_seq_tokens_per_s']:>16,.0f} "
            f"{row['builtin_tokens_per_s']:>15,.0f} {row['ratio']:>13.2f}x"
            f"  {spread:<11}  {settings_text(row):<38} {paths:<22}"
            f"  {' '.join(f'{v:.2f}' for v in row['paired_ratios'])}"
        )
    rel = report["relative_speed"]
    if rel:
        for impl, label in (("keras_seq", "keras-seq"), ("builtin", "built-in")):
            speeds = " : ".join(f"{rel[impl][c]:.2f}" for c in rel[impl])
            lines.append(f"relative speed {' : '.join(rel[impl])} ({label}) = {speeds}")
        lines.append("(seeds' claim: simple_rnn : gru : lstm = 1 : 0.7 : 0.5)")
    blocked = [(row["cell"], row["keras_seq_blockers"]) for row in report["results"]
               if row.get("keras_seq_blockers") and row["cell"] != "simple_rnn"]
    for cell, reasons in blocked:
        lines.append(f"{cell}: no cuDNN kernel for keras-seq: {'; '.join(reasons)}")
    lines.append("")
    lines.append("parameters per cell:")
    lines.append(format_param_table(report["params"]))
    return "\n".join(lines)


MARKDOWN_COLUMNS = ("cell", "backend", "device", "precision", "jit", "keras-seq path",
                    "built-in path", "keras-seq tok/s", "built-in tok/s", "ours/built-in",
                    "spread (runs)")


def markdown_rows(report, label=None):
    """One markdown table row (a list of cells) per result of a bench cells report."""
    rows = []
    for row in report["results"]:
        jit = row.get("keras_seq_jit", "no")
        if row.get("builtin_jit", jit) != jit:
            jit = f"{jit} / {row['builtin_jit']}"
        rows.append([
            row["cell"] if label is None else f"{row['cell']} ({label})",
            row.get("backend", "?"), row.get("device", "?"), row.get("precision", "fp32"),
            jit, row.get("keras_seq_path", "?"), row.get("builtin_path", "?"),
            f"{row['keras_seq_tokens_per_s']:,.0f}", f"{row['builtin_tokens_per_s']:,.0f}",
            f"**{row['ratio']:.2f}×**",
            f"{row['ratio_min']:.2f}–{row['ratio_max']:.2f} ({len(row['paired_ratios'])})",
        ])
    return rows


def markdown_table(rows, columns=MARKDOWN_COLUMNS) -> str:
    """A GitHub markdown table of ``rows`` (lists of cells) under ``columns``."""
    def cell(value):
        return str(value).replace("|", "\\|").replace("\n", " ")

    numeric = ("tok/s", "/built-in", "spread")
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---:" if any(k in c for k in numeric) else "---"
                            for c in columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _worker(**kwargs):
    kwargs.setdefault("progress", True)
    return run_benchmark(**kwargs)


if __name__ == "__main__":
    sys.exit(backends.worker_main(_worker))
