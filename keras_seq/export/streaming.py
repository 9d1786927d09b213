"""Per-token streaming latency of one language model across runtimes.

Runtimes (batch 1, one token per call, the state carried between calls):

* ``keras-eager``: a stateful batch-1 Keras clone called eagerly on ``(1, 1)``;
* ``tf-function``: the explicit-state step graph in a ``tf.function``;
* ``saved-model``: the exported SavedModel's ``step`` signature;
* ``tflite <model>``: every exported TFLite step model (``step_*`` explicit state;
  ``step_fused_*`` the fused ``UNIDIRECTIONAL_SEQUENCE_LSTM`` with internal state) on the
  LiteRT interpreter at each thread count.

Each runtime streams ``warmup`` untimed tokens, then ``tokens`` timed ones (validation
text, cycled); the per-token latency is the wall time of one call including the Python
overhead of feeding it (what an app would see). Reported: p50/p95/p99 µs, tokens/s, model
size (TFLite file; SavedModel folder; float32 weights for Keras), the validation
perplexity change vs float Keras (TFLite: measured through that model at export; the TF
runtimes run the float graph itself, so 0) and, for TFLite, the weight bytes one step
reads (:func:`weight_bytes_per_token`: how far a model is from the memory-bandwidth bound).

``job``: ``step`` (the next-token distribution) or ``step+top<k>`` (the keyboard's job: the
step and then its top-``k`` suggestions, for the models named in ``keyboard`` and for
``extra_steppers`` that do the same, e.g. an n-gram's ``step`` + ``suggest``).

Use ``keras-seq bench streaming --run-dir R`` or :func:`run_streaming_benchmark`.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from keras_seq.errors import DataError
from keras_seq.extras import pyplot
from keras_seq.ngram.compact import CompactNgram, NgramStream, model_size_bytes
from keras_seq.ngram.counts import BOS
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.tables import print_table
from keras_seq.tasks.lm.data import corpus_for

TARGET_SPEEDUP = 3.0
PPL_TOLERANCE_PCT = 1.5


def _dir_size(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _time_stream(call, stream: np.ndarray, warmup: int) -> np.ndarray:
    for token in stream[:warmup]:
        call(int(token))
    out = np.empty(len(stream) - warmup)
    for i, token in enumerate(stream[warmup:]):
        t0 = time.perf_counter_ns()
        call(int(token))
        out[i] = (time.perf_counter_ns() - t0) / 1e3
    return out


def interleaved_streams(steppers: dict, stream: np.ndarray, warmup: int,
                        rounds: int = 3) -> dict[str, list[np.ndarray]]:
    """Time every runtime on the same stream, alternating them: ``rounds`` rounds, each
    running every runtime once (from a reset state), in an order rotated every round, so a
    slow spell on the machine hits all of them alike.

    ``steppers``: ``{name: (reset, step)}`` with ``step(token_id)``; ``stream``: the token
    ids every runtime streams, or ``{name: ids}`` (runtimes with their own vocabularies,
    e.g. an n-gram). Returns
    ``{name: [µs per token of round 0, round 1, …]}``.

    >>> calls = []
    >>> out = interleaved_streams({"a": (lambda: None, calls.append),
    ...                            "b": (lambda: None, calls.append)}, np.arange(4), 1, 2)
    >>> [len(r) for r in out["a"]], len(calls)
    ([3, 3], 16)
    """
    if rounds < 1:
        raise ValueError(f"rounds must be ≥ 1, got {rounds}")
    names = list(steppers)
    timed: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % max(len(names), 1)
        for name in names[shift:] + names[:shift]:
            reset, step = steppers[name]
            reset()
            own = stream[name] if isinstance(stream, dict) else stream
            timed[name].append(_time_stream(step, own, warmup))
    return timed


def weight_bytes_per_token(path) -> int:
    """Bytes of weights one step of a TFLite model reads: every ``FULLY_CONNECTED``'s
    weights and bias as stored (int4 packed two to a byte; a weight the interpreter
    dequantizes when it prepares the model, e.g. float16, as the float32 it then reads),
    plus one row of each embedding table (``GATHER`` / ``EMBEDDING_LOOKUP``). ``path``: a
    ``.tflite`` file or its bytes."""
    # lazy: LiteRT's flatbuffer tools, only when this runs
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    data = path if isinstance(path, (bytes, bytearray)) else Path(path).read_bytes()
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(data))
    ops = schema.BuiltinOperator
    codes = [flatbuffer_utils.get_builtin_code_from_operator_code(c)
             for c in model.operatorCodes]
    total = 0
    for subgraph in model.subgraphs:
        tensors = subgraph.tensors

        def stored(index, tensors=tensors):  # bytes as read (4 per dequantized element)
            data = model.buffers[tensors[index].buffer].data
            return len(data) if data is not None else 4 * int(np.prod(tensors[index].shape))

        for op in subgraph.operators:
            code = codes[op.opcodeIndex]
            if code == ops.FULLY_CONNECTED:
                total += sum(stored(int(i)) for i in list(op.inputs)[1:] if i >= 0)
            elif code in (ops.GATHER, ops.EMBEDDING_LOOKUP):
                table = int(op.inputs[0] if code == ops.GATHER else op.inputs[1])
                total += stored(table) // max(int(tensors[table].shape[0]), 1)
    return total


def _row(name: str, threads, micros, size: int, ppl_delta, job: str = "step",
         bytes_per_token: int | None = None) -> dict:
    """One table row. ``micros``: one array of µs per token, or one per round (then the
    row also gives each round's p50, ``p50_rounds_us``, for the spread)."""
    per_round = list(micros) if isinstance(micros, (list, tuple)) else [micros]
    pooled = np.concatenate(per_round)
    row = {"runtime": name, "threads": threads,
           "p50_us": float(np.percentile(pooled, 50)),
           "p95_us": float(np.percentile(pooled, 95)),
           "p99_us": float(np.percentile(pooled, 99)),
           "tokens_per_s": float(len(pooled) / (pooled.sum() / 1e6)),
           "size_kib": size / 1024, "ppl_delta_pct": ppl_delta, "job": job,
           "weight_kib_per_token": None if bytes_per_token is None else bytes_per_token / 1024}
    if len(per_round) > 1:
        row["p50_rounds_us"] = [float(np.percentile(m, 50)) for m in per_round]
    return row


def _keras_eager_row(model, stream: np.ndarray, warmup: int, weight_bytes: int) -> dict:
    """The ``keras-eager`` row: a stateful batch-1 Keras clone called eagerly on ``(1, 1)``."""
    runner = model.clone_for_batch(1, stateful=True)
    micros = _time_stream(
        lambda t: runner(np.array([[t]], np.int32), training=False), stream, warmup)
    return _row("keras-eager", "-", micros, weight_bytes, 0.0)


def _carrying_step(step_fn, state: dict, state_names):
    """``step(token) -> logits`` over an explicit-state step function (a ``tf.function`` or a
    SavedModel signature) that carries ``state`` (its outputs ``state_names``) along."""
    # lazy: loads TensorFlow only when a TensorFlow row runs
    import tensorflow as tf

    def step(token):
        out = step_fn(token=tf.constant([token], tf.int32), **state)
        state.update({k: out[k] for k in state_names})
        return out["logits"].numpy()

    return step


def _tf_function_row(graphs, stream: np.ndarray, warmup: int, weight_bytes: int) -> dict:
    """The ``tf-function`` row: the explicit-state step graph in a ``tf.function``."""
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    fn = tf.function(lambda **kw: graphs.step(**kw))
    state = {k: tf.constant(v) for k, v in graphs.zero_states(1).items()}
    step = _carrying_step(fn, state, graphs.state_names)
    return _row("tf-function", "-", _time_stream(step, stream, warmup), weight_bytes, 0.0)


def _saved_model_row(saved_model_dir, graphs, stream: np.ndarray, warmup: int) -> dict:
    """The ``saved-model`` row: the exported SavedModel's ``step`` signature."""
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    from keras_seq.export.saved_model import load_step

    loaded, sig, names = load_step(saved_model_dir)
    shapes = graphs.state_shapes(1)  # (1, proj_units) for an lstmp layer's h
    step = _carrying_step(sig, {k: tf.zeros(shapes[k]) for k in names}, names)
    row = _row("saved-model", "-", _time_stream(step, stream, warmup),
               _dir_size(saved_model_dir), 0.0)
    del loaded
    return row


def _tflite_steppers(entries: list[dict], export_dir, tokenizer, stream: np.ndarray, n: int,
                     th: int, keyboard, keyboard_k: int, extra: dict) -> tuple[dict, dict]:
    """``(steppers, streams)`` for :func:`interleaved_streams` at ``th`` threads: every
    TFLite step model, on one thread also the ``keyboard`` models' ``+top<k>`` job and the
    ``extra`` runtimes (on their own ids, cycled to ``n``)."""
    steppers, streams = {}, {}
    for entry in entries:
        lm = LiteRTLM(Path(export_dir) / entry["file"], tokenizer=tokenizer,
                      num_threads=th)
        steppers[entry["name"]] = (lm.reset, lm.step)
        streams[entry["name"]] = stream
        if th == 1 and entry["name"] in keyboard:
            steppers[f"{entry['name']} +top{keyboard_k}"] = (
                lm.reset, lambda t, lm=lm: (lm.step(t), lm.suggest(keyboard_k)))
            streams[f"{entry['name']} +top{keyboard_k}"] = stream
    if th == 1:  # the others (an n-gram) run on one thread
        for name, (pair, _, ids_other) in extra.items():
            steppers[name] = pair
            streams[name] = np.resize(np.asarray(ids_other), n)
    return steppers, streams


def _tflite_rows(entries: list[dict], export_dir, timed: dict, th: int, keyboard,
                 keyboard_k: int, extra: dict) -> list[dict]:
    """The rows of one thread count from ``timed`` (:func:`interleaved_streams`' result
    for :func:`_tflite_steppers`' runtimes)."""
    rows = []
    job = f"step+top{keyboard_k}"
    for entry in entries:
        delta = (entry.get("parity") or {}).get("ppl_delta_pct")
        per_token = weight_bytes_per_token(Path(export_dir) / entry["file"])
        names = [(entry["name"], "step")]
        if th == 1 and entry["name"] in keyboard:
            names.append((f"{entry['name']} +top{keyboard_k}", job))
        for name, kind in names:
            rows.append(_row(f"tflite {name}", th, timed[name], entry["size_bytes"],
                             delta, kind, per_token))
    if th == 1:
        for name, (_, size, _) in extra.items():
            kind = "step+" + name.rsplit("+", 1)[1] if " +top" in name else "step"
            rows.append(_row(name, 1, timed[name], size, None, kind))
    return rows


def _model_summary(config, tokenizer) -> dict:
    """The report's ``model``: the run's architecture and vocabulary size."""
    return {"cell": config.cell, "units": config.units, "embed_dim": config.embed_dim,
            "num_layers": config.num_layers, "vocab_size": tokenizer.vocab_size,
            "proj_units": getattr(config, "proj_units", None),
            "cifg": bool(getattr(config, "cifg", False))}


def run_streaming_benchmark(run_dir, tokens: int = 1000, warmup: int = 50,
                            threads=(1, 2), export_dir=None, saved_model_dir=None,
                            variants=None, progress=None, skip=(), rounds: int = 3,
                            extra_steppers: dict | None = None, keyboard=(),
                            keyboard_k: int = 3) -> dict:
    """Benchmark every runtime on the run in ``run_dir``; returns the report dict.

    ``export_dir`` / ``saved_model_dir``: reuse exports (a ``keras-seq export tflite`` folder
    with ``manifest.json``; a SavedModel); otherwise both are exported to a temporary folder.
    ``skip``: runtime kinds to leave out (``keras-eager``, ``tf-function``, ``saved-model``).
    ``rounds``: the TFLite models run ``rounds`` times each, alternated (see
    :func:`interleaved_streams`); rows give each round's p50 and the speed-up's spread.
    ``extra_steppers``: ``{name: ((reset, step), size_bytes, ids)}``, other one-thread
    runtimes alternated with the TFLite models on their own ``ids`` (the pipeline's n-gram);
    a name ending in ``+top<k>`` is a ``step+top<k>`` job.
    ``keyboard``: TFLite model names also timed doing the keyboard's job on one thread:
    the step, then :meth:`~keras_seq.runtime.litert.LiteRTLM.suggest` (``keyboard_k``).
    """
    # lazy: loads TensorFlow, Keras only when this runs
    from keras_seq.export.graphs import LMGraphs
    from keras_seq.export.saved_model import export_saved_model
    from keras_seq.export.tflite import VARIANTS, export_tflite
    from keras_seq.tasks.lm.evaluation import load_run

    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    config, tokenizer, model = load_run(run_dir)
    corpus = corpus_for(config)
    val_text = corpus.text("val") or corpus.text("train")
    ids = tokenizer.encode(val_text)
    n = warmup + tokens
    stream = np.resize(ids, n).astype(np.int32)
    tmp = tempfile.TemporaryDirectory()
    rows = []
    try:
        if export_dir is None or not (Path(export_dir) / "manifest.json").is_file():
            export_dir = Path(tmp.name) / "tflite"
            say("exporting TFLite variants …")
            export_tflite(run_dir, export_dir, variants=variants or VARIANTS,
                          graphs=("step", "step_fused"), printer=say, model=model,
                          tokenizer=tokenizer, config=config)
        manifest = json.loads((Path(export_dir) / "manifest.json").read_text())
        keras_ppl = manifest.get("keras_val_ppl")

        graphs = LMGraphs(model)
        weight_bytes = 4 * int(model.count_params())  # float32 weights (no optimizer state)
        if "keras-eager" not in skip:
            say(f"keras-eager: {n} tokens …")
            rows.append(_keras_eager_row(model, stream, warmup, weight_bytes))
        if "tf-function" not in skip:
            say(f"tf-function: {n} tokens …")
            rows.append(_tf_function_row(graphs, stream, warmup, weight_bytes))
        if "saved-model" not in skip:
            if saved_model_dir is None or not Path(saved_model_dir).is_dir():
                saved_model_dir = Path(tmp.name) / "saved_model"
                export_saved_model(run_dir, saved_model_dir, printer=say, model=model,
                                   tokenizer=tokenizer)
            say(f"saved-model step: {n} tokens …")
            rows.append(_saved_model_row(saved_model_dir, graphs, stream, warmup))
        entries = streamed_models(manifest)
        extra = dict(extra_steppers or {})
        for th in threads:
            say(f"tflite: {len(entries)} step models{f' + {len(extra)} others' if extra else ''}"
                f" × {rounds} rounds of {n} tokens ({th} thread{'s' if th > 1 else ''}), "
                "alternated …")
            steppers, streams = _tflite_steppers(entries, export_dir, tokenizer, stream, n,
                                                 th, keyboard, keyboard_k, extra)
            timed = interleaved_streams(steppers, streams, warmup, rounds)
            rows.extend(_tflite_rows(entries, export_dir, timed, th, keyboard, keyboard_k,
                                     extra))
    finally:
        tmp.cleanup()

    verdict = score_rows(rows)
    return {"run_dir": str(run_dir), "tokens": tokens, "warmup": warmup, "rounds": rounds,
            "model": _model_summary(config, tokenizer),
            "keras_val_ppl": keras_ppl, "tokenizer_fingerprint": tokenizer.fingerprint,
            "rows": rows, "verdict": verdict}


def streamed_models(manifest: dict) -> list[dict]:
    """The exported models the benchmark streams: step graphs that converted (no error)."""
    return [m for m in manifest["models"]
            if "error" not in m and m["graph"].startswith("step")]


def score_rows(rows: list[dict]) -> dict:
    """Set every row's ``speedup_vs_tflite_fp32`` (the 1-thread ``tflite step_float32``
    p50 over the row's p50; ``None`` without that baseline) and return the verdict."""
    base = next((r for r in rows if r["runtime"] == "tflite step_float32" and r["threads"] == 1
                 and r.get("job", "step") == "step"), None)
    for r in rows:
        r["speedup_vs_tflite_fp32"] = base["p50_us"] / r["p50_us"] if base else None
        ours, theirs = r.get("p50_rounds_us"), (base or {}).get("p50_rounds_us")
        if ours and theirs and len(ours) == len(theirs) and r["threads"] == base["threads"]:
            ratios = [b / o for b, o in zip(theirs, ours)]  # the same round's fp32 / ours
            r["speedup_range"] = [min(ratios), max(ratios)]
    return _verdict(rows, base)


def _verdict(rows, base) -> dict:
    """Did the best quantized TFLite step model reach ≥3× fp32 speed within +1.5% PPL?"""
    quantized = [r for r in rows if r["runtime"].startswith("tflite step")
                 and not r["runtime"].endswith(("float32",)) and r["threads"] == 1
                 and r.get("job", "step") == "step"]
    ok = [r for r in quantized if r["ppl_delta_pct"] is not None
          and r["ppl_delta_pct"] <= PPL_TOLERANCE_PCT]
    if not base or not ok:
        return {"met": False, "reason": "no quantized model within the PPL tolerance"
                if base else "no fp32 TFLite baseline"}
    best = max(ok, key=lambda r: r["speedup_vs_tflite_fp32"])
    met = best["speedup_vs_tflite_fp32"] >= TARGET_SPEEDUP
    return {"met": met, "best": best["runtime"], "speedup": best["speedup_vs_tflite_fp32"],
            "speedup_range": best.get("speedup_range"),
            "ppl_delta_pct": best["ppl_delta_pct"], "target_speedup": TARGET_SPEEDUP,
            "ppl_tolerance_pct": PPL_TOLERANCE_PCT}


COLUMNS = ["runtime", "job", "threads", "p50_us", "p50_rounds", "p95_us", "p99_us",
           "tokens_per_s", "size_kib", "weight_kib_per_token", "ppl_delta_pct",
           "speedup_vs_tflite_fp32"]


def format_report(report: dict) -> str:
    buf = io.StringIO()
    m = report["model"]
    print(f"streaming latency, batch 1, {report['tokens']} timed tokens after "
          f"{report['warmup']} warm-up; {m['cell']}{' (CIFG)' if m.get('cifg') else ''} "
          f"{m['num_layers']}×{m['units']} units"
          f"{' → ' + str(m['proj_units']) if m.get('proj_units') else ''}, "
          f"embed {m['embed_dim']}, vocab {m['vocab_size']:,}; float Keras val PPL "
          f"{report['keras_val_ppl'] or float('nan'):.3f}", file=buf)
    rows = [{**r, "p50_rounds": "–".join(f"{x:.1f}" for x in (min(r["p50_rounds_us"]),
                                                               max(r["p50_rounds_us"])))
             if r.get("p50_rounds_us") else ""} for r in report["rows"]]
    print_table(rows, COLUMNS, file=buf)
    v = report["verdict"]
    if "best" in v:
        word = "MET" if v["met"] else "MISSED"
        spread = (f" (rounds {v['speedup_range'][0]:.2f}–{v['speedup_range'][1]:.2f}×)"
                  if v.get("speedup_range") else "")
        print(f"target (quantized ≥ {v['target_speedup']:.0f}× faster per token than fp32 "
              f"TFLite, PPL within +{v['ppl_tolerance_pct']}%): {word} — best {v['best']} "
              f"{v['speedup']:.2f}×{spread} at {v['ppl_delta_pct']:+.2f}% PPL", file=buf)
    else:
        print(f"target: MISSED ({v['reason']})", file=buf)
    return buf.getvalue().rstrip("\n")


def plot_report(report: dict, path) -> Path:
    plt = pyplot("the streaming plot (--plot)")  # the plot extra, imported when it runs
    rows = report["rows"]
    labels = [r["runtime"] + (f" ×{r['threads']}" if r["threads"] != "-" else "")
              for r in rows]
    p50 = np.array([r["p50_us"] for r in rows])
    p95 = np.array([r["p95_us"] for r in rows])
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    y = np.arange(len(rows))
    ax.barh(y, p50, xerr=[np.zeros_like(p50), p95 - p50], color="tab:blue", alpha=0.8,
            label="p50 (bar), p95 (whisker)")
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("µs per token (log scale)")
    ax.set_title("Streaming next-token latency, batch 1")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def bench_ngram_stream(model, ids, warmup: int = 50, *, index: str = "hash",
                       suggest_k: int = 3, tokens: int | None = None, size_bytes=None,
                       ppl_delta_pct=None, runtime: str | None = None) -> dict:
    """Per-token latency of :class:`NgramStream` ``step`` and ``suggest(k)`` (1 thread).

    ``ids``: token ids of the model's vocabulary, e.g. ``model.vocab.encode(lines).ids``
    (``<s>`` ids are dropped: ``</s>`` already starts the next sentence). ``warmup``
    untimed tokens, then each remaining one (or ``tokens``, cycling ``ids``) is timed as
    one ``step`` call, wall time by ``time.perf_counter_ns`` as
    :func:`bench_streaming` times a TFLite step. A second pass times
    ``suggest(suggest_k)`` before each step (what a keyboard shows), untimed steps between.

    Returns that module's row (``runtime``, ``threads``, ``p50_us``, ``p95_us``,
    ``p99_us``, ``tokens_per_s``, ``size_kib``, ``ppl_delta_pct``) plus ``index``,
    ``suggest_k``, ``suggest_p50_us``, ``suggest_p95_us``, ``suggest_p99_us``. ``size_kib``:
    ``size_bytes`` if given, else :func:`model_size_bytes`.

    >>> from keras_seq.ngram.kneser_ney import train_kneser_ney
    >>> lines = [["the", "cat", "sat"], ["the", "dog", "sat"]] * 5
    >>> model = train_kneser_ney(lines, order=3, discount_fallback=True)
    >>> row = bench_ngram_stream(model, model.vocab.encode(lines).ids, warmup=5)
    >>> row["runtime"], row["threads"], row["p50_us"] > 0, row["suggest_p50_us"] > 0
    ('ngram arpa [hash]', 1, True, True)
    """
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    ids = ids[ids != BOS]
    if tokens is not None:
        ids = np.resize(ids, warmup + int(tokens))
    if ids.size <= warmup:
        raise DataError(f"{ids.size} tokens (without <s>) leave none to time after "
                        f"{warmup} warm-up tokens")
    stream = NgramStream(model, index=index)
    micros = _time_stream(stream.step, ids, warmup)
    stream.reset()
    for t in ids[:warmup]:
        stream.suggest(suggest_k)
        stream.step(int(t))
    sugg = np.empty(ids.size - warmup)
    for i, t in enumerate(ids[warmup:]):
        t0 = time.perf_counter_ns()
        stream.suggest(suggest_k)
        sugg[i] = (time.perf_counter_ns() - t0) / 1e3
        stream.step(int(t))
    if runtime is None:
        if isinstance(model, CompactNgram):
            kind = f"q{model.quantize_bits}" if model.quantize_bits else "f64"
            runtime = f"ngram compact-{kind} [{index}]"
        else:
            runtime = f"ngram arpa [{index}]"
    size = model_size_bytes(model) if size_bytes is None else int(size_bytes)
    row = _row(runtime, 1, micros, size, ppl_delta_pct)
    row.update(index=index, suggest_k=int(suggest_k),
               suggest_p50_us=float(np.percentile(sugg, 50)),
               suggest_p95_us=float(np.percentile(sugg, 95)),
               suggest_p99_us=float(np.percentile(sugg, 99)))
    return row
