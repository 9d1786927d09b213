"""Training speed of keras-seq's SimpleRNN / GRU / LSTM against Keras's built-ins.

Workload (a word-level language model, the shape of a PTB-style run)::

    tokens (B, T) -> Embedding(vocab, embed) -> RNN(units, return_sequences)
                  -> Dense(vocab) -> sparse softmax cross-entropy

Both implementations get the same model, optimizer, data and compiled train
step (``model.train_on_batch``) in one process, warm-up excluded; within each
run they take turns of ``chunk`` steps (who goes first alternates), so that
load from other processes on a shared machine hits both alike. Tokens/s come from
each implementation's fastest run; the speed-up is the median over runs of
the per-run ratio (both halves of a run saw the same load). ``head="none"`` drops the
vocabulary softmax (loss = mean of the RNN outputs) to time the recurrent layer
alone, which the full softmax otherwise dominates.

Use ``keras-seq bench cells`` or :func:`run_benchmark`.
"""

from __future__ import annotations

import time

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


def _layer(cell, impl, units):
    import keras

    from keras_seq import layers as ks

    module = ks if impl == "keras_seq" else keras.layers
    cls = {"simple_rnn": module.SimpleRNN, "gru": module.GRU, "lstm": module.LSTM}[cell]
    return cls(units, return_sequences=True)


def build_model(cell, impl, vocab, embed, units, seq_len, batch, head="softmax", seed=0):
    """The benchmark model, compiled, for one cell type and implementation."""
    import keras

    keras.utils.set_random_seed(seed)
    tokens = keras.Input((seq_len,), batch_size=batch, dtype="int32")
    x = keras.layers.Embedding(vocab, embed)(tokens)  # (B, T, E)
    x = _layer(cell, impl, units)(x)  # (B, T, U)
    if head == "softmax":
        x = keras.layers.Dense(vocab)(x)  # (B, T, V)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        loss = lambda y_true, y_pred: keras.ops.mean(y_pred)
    model = keras.Model(tokens, x)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss, jit_compile=False)
    return model


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


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

    Returns:
        dict with ``config``, ``results`` (one row per cell: best and median
        tokens/s and run times for each implementation; ``ratio``: the median
        over runs of keras_seq's speed / the built-in's in the same run;
        ``best_ratio``: best run over best run), ``relative_speed``
        (each cell's keras-seq tokens/s over SimpleRNN's; built-in likewise)
        and ``params`` (from :func:`keras_seq.layers.param_table`).
    """
    import keras
    import numpy as np

    from keras_seq.layers import param_table

    for name, value in (
        ("steps", steps),
        ("repeats", repeats),
        ("warmup", warmup),
        ("chunk", chunk),
    ):
        if not isinstance(value, int) or value < (0 if name == "warmup" else 1):
            raise ValueError(
                f"bench cells: received {name}={value!r}; expected a positive integer "
                f"(warmup may be 0). Pass e.g. --{name} 10."
            )
    unknown = [c for c in cells if c not in CELLS]
    if unknown:
        raise ValueError(
            f"bench cells: received cells {unknown}; expected some of {', '.join(CELLS)}."
        )
    if head not in ("softmax", "none"):
        raise ValueError(f"bench cells: received head={head!r}; expected 'softmax' or 'none'.")
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab, size=(batch, seq_len), dtype=np.int32)
    y = np.roll(x, -1, axis=1) if head == "softmax" else np.zeros((batch, seq_len), "float32")
    x, y = keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(y)

    models = {}
    for cell in cells:
        for impl in IMPLS:
            model = build_model(cell, impl, vocab, embed, units, seq_len, batch, head)
            model.train_on_batch(x, y)  # traces the train step
            models[cell, impl] = model
    # Measured here: a model's first step after other models were built is slow
    # again (~100 ms), so every model gets its warm-up after all are built.
    for model in models.values():
        for _ in range(max(warmup, 1)):
            model.train_on_batch(x, y)

    def timed(model, n):
        start = time.perf_counter()
        for _ in range(n):
            loss = model.train_on_batch(x, y)
        float(np.asarray(loss))  # make sure the work is done
        return time.perf_counter() - start

    # A run of `steps` steps per implementation, interleaved in chunks of
    # `chunk` steps (who goes first alternates), so that load from other
    # processes hits both implementations alike.
    times = {key: [] for key in models}
    bar = keras.utils.Progbar(len(models) * repeats, unit_name="run") if progress else None
    for r in range(repeats):
        for cell in cells:
            spent = dict.fromkeys(IMPLS, 0.0)
            for c, start in enumerate(range(0, steps, chunk)):
                n = min(chunk, steps - start)
                for impl in IMPLS if (r + c) % 2 == 0 else IMPLS[::-1]:
                    spent[impl] += timed(models[cell, impl], n)
            for impl in IMPLS:
                times[cell, impl].append(spent[impl])
                if bar is not None:
                    bar.add(1)

    tokens = steps * batch * seq_len
    results = []
    for cell in cells:
        row = {"cell": cell}
        for impl in IMPLS:
            row[f"{impl}_tokens_per_s"] = tokens / min(times[cell, impl])
            row[f"{impl}_median_tokens_per_s"] = tokens / _median(times[cell, impl])
            row[f"{impl}_seconds"] = [round(t, 4) for t in times[cell, impl]]
        # Runs are interleaved, so each run's pair of times saw the same load.
        paired = [b / k for k, b in zip(times[cell, "keras_seq"], times[cell, "builtin"])]
        row["ratio"] = _median(paired)
        row["paired_ratios"] = [round(v, 3) for v in paired]
        row["best_ratio"] = row["keras_seq_tokens_per_s"] / row["builtin_tokens_per_s"]
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
    }
    return {
        "config": config,
        "results": results,
        "relative_speed": relative,
        "params": param_table([(embed, units)]),
    }


def format_report(report):
    """The report as plain text: speed table, relative speeds, parameter table."""
    from keras_seq.layers.params import format_param_table

    cfg = report["config"]
    lines = [
        f"bench cells: embed {cfg['embed']}, units {cfg['units']}, seq_len {cfg['seq_len']}, "
        f"batch {cfg['batch']}, vocab {cfg['vocab']}, head {cfg['head']}, "
        f"{cfg['steps']} steps x {cfg['repeats']} runs (interleaved in turns of {cfg['chunk']} "
        "steps); tok/s of the best run; ours/built-in = median of per-run ratios",
        f"{'cell':<11} {'keras-seq tok/s':>16} {'built-in tok/s':>15} {'ours/built-in':>14}"
        f"  per-run ratios",
    ]
    for row in report["results"]:
        lines.append(
            f"{row['cell']:<11} {row['keras_seq_tokens_per_s']:>16,.0f} "
            f"{row['builtin_tokens_per_s']:>15,.0f} {row['ratio']:>13.2f}x"
            f"  {' '.join(f'{v:.2f}' for v in row['paired_ratios'])}"
        )
    rel = report["relative_speed"]
    if rel:
        for impl, label in (("keras_seq", "keras-seq"), ("builtin", "built-in")):
            speeds = " : ".join(f"{rel[impl][c]:.2f}" for c in rel[impl])
            lines.append(f"relative speed {' : '.join(rel[impl])} ({label}) = {speeds}")
        lines.append("(seeds' claim: simple_rnn : gru : lstm = 1 : 0.7 : 0.5)")
    lines.append("")
    lines.append("parameters per cell:")
    lines.append(format_param_table(report["params"]))
    return "\n".join(lines)
