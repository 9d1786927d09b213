"""The whole pipeline in one call: n-gram → LSTM → export → on-device benchmark → demo.

``keras-seq pipeline --out DIR [--data NAME] [--minutes M]`` runs, on CPU:

1. interpolated Kneser-Ney n-grams of orders 2–5 on the corpus; the best one on validation
   is written as ARPA text (``DIR/kn<N>.arpa``) and in the compact binary form a phone
   would ship (``DIR/kn<N>.q8.bin``: sorted id arrays, 8-bit quantized probabilities);
2. a word-level LSTM LM with the AWD regularisers and tied weights (``train_lm``, most of
   the time budget), scored on exactly the n-grams' tokens (the tokenizer fingerprints,
   split and corpus are checked);
3. the SavedModel (``DIR/saved_model``) and every TFLite step variant (``DIR/tflite``) with
   parity and perplexity against Keras;
4. the on-device benchmark: every TFLite step model and the n-gram streamed token by token
   on one thread, alternated over three rounds (``DIR/streaming.json`` / ``.png``);
5. the demo model: the fastest TFLite step model within +1.5% of float perplexity that
   also beats the n-gram's perplexity with a smaller file than its ARPA, copied to
   ``DIR/demo/model.tflite`` with its metadata and tokenizer;
6. a summary table: neural vs n-gram side by side, and each of the job's targets.

The default corpus is tinyshakespeare, shipped inside the package (xz, 364 KB), so the job
runs offline. Everything it measured goes to ``DIR/pipeline.json``.
"""

from __future__ import annotations

import io
import json
import shutil
import time
import warnings
from pathlib import Path

import numpy as np

from keras_seq.benchmarks.streaming import format_report, plot_report, run_streaming_benchmark
from keras_seq.errors import KerasSeqError
from keras_seq.metrics import NotComparableError, check_comparable
from keras_seq.ngram.arpa import write_arpa
from keras_seq.ngram.compact import NgramStream, read_compact, write_compact
from keras_seq.ngram.counts import NgramCounts, Vocabulary
from keras_seq.ngram.data import load_tokenized
from keras_seq.ngram.kneser_ney import DiscountWarning, kneser_ney
from keras_seq.ngram.scorer import evaluate
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.sampling import special_ids
from keras_seq.tables import print_table
from keras_seq.tasks.lm.config import LMConfig

DEMO_DATA = "tinyshakespeare"
# The recipe that beats the best n-gram within the budget (docs/export-and-on-device.md, "The
# main job"): a tied one-layer LSTM with the AWD regularisers. 384 units: at 256 the int8
# step model is only ~2.2× faster than float32 (both are dominated by the 256 × 6,476
# output layer; fp32 is not yet memory-bound); at 384 fp32 reads 14 MB per token and int8
# pulls ahead.
# state_reset_prob keeps the zero state (where evaluation and the demo start) in training:
# without it, epoch-1 validation can collapse.
LSTM_DEFAULTS = dict(tokenizer="word", min_count=2, cell="lstm", embed_dim=384, units=384,
                     num_layers=1, tie_weights=True, dropout=0.4, variational_dropout=True,
                     embed_dropout=0.1, weight_dropout=0.3, optimizer="adam", lr=3e-3,
                     bptt=35, batch_size=20, state_reset_prob=0.02, histogram_freq=0,
                     sample_tokens=0, log_every=100)
NGRAM_ORDERS = (2, 3, 4, 5)
RESERVED_MINUTES = 2.5  # of the overall budget, for every stage but training (they take ~1)
TARGET_RATIO = 0.90  # LSTM val PPL ≤ 0.90 × the best n-gram's
GENERATION_CHECK_TOKENS = 300
# The streamed models: explicit-state steps in every variant, and the fused LSTM op
# (float32) to compare with them.
EXPORT_GRAPHS = ("step", "step_fused")


# ----------------------------------------------------------------------------------------
# Stages


def _ngram_stage(config, out: Path, say, orders=NGRAM_ORDERS) -> dict:
    """KN of every order on the LM's tokens; the best on validation written as ARPA and as
    the compact 8-bit binary (and its perplexity measured)."""
    t0 = time.perf_counter()
    data = load_tokenized(config.data, max_vocab=config.max_vocab,
                          min_count=config.min_count or 1, split=config.split_ratio,
                          data_dir=config.data_dir)
    vocab = Vocabulary.from_lines(data.train)
    stream = vocab.encode(data.train)
    meta = {"tokenizer": "word", "tokenizer_options": data.tokenizer.options,
            "tokenizer_fingerprint": data.tokenizer.fingerprint, "corpus": data.corpus.name,
            "corpus_sha256": data.corpus.sha256, "corpus_split": config.split_ratio,
            "train_tokens": stream.n_predicted}
    val_lines = data.lines("val")
    results, models = {}, {}
    for order in orders:
        counts = NgramCounts.from_stream(stream, order, len(vocab))
        with warnings.catch_warnings():  # tiny corpora: KenLM's discount fallback
            warnings.simplefilter("ignore", DiscountWarning)
            models[order] = kneser_ney(counts, vocab, True, meta)
        results[order] = evaluate(models[order], val_lines,
                                  fingerprint=data.fingerprint("val"), name=f"KN{order}")
        say(f"  KN{order}: val PPL {results[order].ppl:8.2f}")
    best = min(results, key=lambda n: results[n].ppl)
    arpa = out / f"kn{best}.arpa"
    write_arpa(models[best], arpa)
    compact_path = out / f"kn{best}.q8.bin"
    write_compact(models[best], compact_path, quantize_bits=8)
    compact = read_compact(compact_path)
    compact_result = evaluate(compact, val_lines, fingerprint=data.fingerprint("val"),
                              name=f"KN{best} compact 8-bit")
    say(f"  best: KN{best} (val PPL {results[best].ppl:.2f} over {results[best].tokens:,} "
        f"tokens) → {arpa} ({arpa.stat().st_size / 1024:,.0f} KiB); compact 8-bit "
        f"{compact_path.stat().st_size / 1024:,.0f} KiB, val PPL {compact_result.ppl:.2f} "
        f"({time.perf_counter() - t0:.1f}s)")
    return {"best_order": best, "model": models[best], "compact": compact, "arpa": arpa,
            "compact_path": compact_path, "result": results[best],
            "compact_result": compact_result, "by_order": results, "val_lines": val_lines,
            "seconds": time.perf_counter() - t0}


def _ngram_steppers(ngram: dict) -> tuple[dict, dict, np.ndarray]:
    """The n-gram's runtimes for the on-device benchmark: ``({name: (reset, step)},
    {name: size_bytes on disk}, the validation ids in the n-gram's vocabulary)``.

    The ARPA model is looked up through Python dicts built at load (KenLM's "probing"
    idea: fast, ~170 bytes of RAM per n-gram); the compact file is binary-searched in
    place, memory-mapped (a phone's choice: almost no RAM beyond the file).
    """
    steppers, sizes, order = {}, {}, ngram["best_order"]
    for name, model, path, index in (
            (ngram_runtime(order, "arpa"), ngram["model"], ngram["arpa"], "hash"),
            (ngram_runtime(order, "compact"), ngram["compact"], ngram["compact_path"], "trie")):
        stream = NgramStream(model, index=index)
        steppers[name] = (stream.reset, stream.step)
        sizes[name] = path.stat().st_size
    ids = np.asarray(ngram["model"].vocab.encode(ngram["val_lines"]).ids)
    return steppers, sizes, ids


def ngram_runtime(order: int, form: str) -> str:
    """The benchmark row name of the order-``order`` n-gram in ``form`` (``arpa``/``compact``)."""
    return (f"ngram KN{order} arpa [hash]" if form == "arpa"
            else f"ngram KN{order} compact-q8 [trie]")


def choose_demo_model(manifest: dict, rows: list[dict], ngram_ppl: float, arpa_bytes: int,
                      tolerance_pct: float = 1.5):
    """The shipped model: the fastest 1-thread TFLite step model whose perplexity is within
    ``tolerance_pct`` of float Keras, below the n-gram's, with a file smaller than the
    n-gram's ARPA. Returns ``(entry, reason)``; ``entry`` is ``None`` when none qualifies.

    >>> m = {"models": [{"name": "step_float32", "graph": "step", "size_bytes": 900,
    ...                  "parity": {"ppl_delta_pct": 0.0, "val_ppl": 80.0}},
    ...                 {"name": "step_int8", "graph": "step", "size_bytes": 300,
    ...                  "parity": {"ppl_delta_pct": 0.4, "val_ppl": 80.3}}]}
    >>> rows = [{"runtime": "tflite step_float32", "threads": 1, "p50_us": 90.0},
    ...         {"runtime": "tflite step_int8", "threads": 1, "p50_us": 25.0}]
    >>> choose_demo_model(m, rows, ngram_ppl=95.0, arpa_bytes=1000)[0]["name"]
    'step_int8'
    >>> choose_demo_model(m, rows, ngram_ppl=70.0, arpa_bytes=1000)[0] is None
    True
    """
    p50 = {r["runtime"].removeprefix("tflite "): r["p50_us"] for r in rows
           if r["runtime"].startswith("tflite ") and r["threads"] == 1}
    ok, why_not = [], []
    for m in manifest["models"]:
        if "error" in m or not m["graph"].startswith("step") or m["name"] not in p50:
            continue
        parity = m.get("parity") or {}
        if parity.get("ppl_delta_pct", 0.0) > tolerance_pct:
            why_not.append(f"{m['name']}: PPL {parity['ppl_delta_pct']:+.2f}% vs float")
        elif parity.get("val_ppl", float("inf")) >= ngram_ppl:
            why_not.append(f"{m['name']}: PPL {parity.get('val_ppl', float('nan')):.2f} ≥ "
                           f"n-gram {ngram_ppl:.2f}")
        elif m["size_bytes"] >= arpa_bytes:
            why_not.append(f"{m['name']}: {m['size_bytes'] / 1024:,.0f} KiB ≥ ARPA "
                           f"{arpa_bytes / 1024:,.0f} KiB")
        else:
            ok.append(m)
    if not ok:
        return None, "; ".join(why_not) or "no TFLite step model converted"
    best = min(ok, key=lambda m: (p50[m["name"]], m["size_bytes"]))
    return best, (f"fastest of {len(ok)} step models within +{tolerance_pct}% of float PPL, "
                  "below the n-gram's PPL and smaller than its ARPA")


def _generation_check(model_path, tokens: int = GENERATION_CHECK_TOKENS) -> dict:
    """Sample ``tokens`` with the demo model, asking for its top-5 suggestions before each
    one; count any ``<pad>``/``<unk>`` among the samples and the suggestions."""
    lm = LiteRTLM(model_path)
    words = {lm.tokenizer.vocab[i] for i in special_ids(lm.tokenizer)}
    lm.reset()
    bad_suggestions, sampled = 0, []
    for _ in range(tokens):
        bad_suggestions += sum(1 for w, _ in lm.suggest(5) if w in words)
        sampled += lm.continue_(1, seed=len(sampled))[0]
    bad = sum(1 for t in sampled if lm.tokenizer.vocab[t] in words)
    lines = sum(1 for t in sampled if t == lm.tokenizer.eos_id)
    return {"tokens": len(sampled), "special_tokens": bad,
            "special_suggestions": bad_suggestions, "line_breaks": lines}


# ----------------------------------------------------------------------------------------
# The job


def run_pipeline(data: str = DEMO_DATA, out="pipeline_out", minutes: float = 10.0,
                 bench_tokens: int = 1000, printer=print, lstm_overrides: dict | None = None,
                 variants=None, data_dir=None, split_ratio: str | None = None,
                 rounds: int = 3) -> dict:
    """Run every stage into ``out``; returns the summary (also ``out/pipeline.json``)."""
    # lazy: loads Keras, TensorFlow only when this runs
    from keras_seq.export.saved_model import export_saved_model
    from keras_seq.export.tflite import VARIANTS, export_tflite
    from keras_seq.tasks.lm.evaluation import evaluate_run
    from keras_seq.tasks.lm.task import train_lm

    started = time.perf_counter()
    out = Path(out)
    if (out / "run" / "config.json").exists():
        raise KerasSeqError(f"{out} already holds a pipeline run; choose a new --out or "
                            "remove it")
    out.mkdir(parents=True, exist_ok=True)
    stages: dict[str, float] = {}
    split = {"split_ratio": split_ratio} if split_ratio else {}
    # The epoch running when the budget ends still finishes (about 50 s here).
    train_minutes = max(0.2, minutes - RESERVED_MINUTES)
    config = LMConfig(**{**LSTM_DEFAULTS, "data": data, "data_dir": data_dir, "epochs": 100,
                         "max_minutes": train_minutes, **split, **(lstm_overrides or {})})
    config.validate()

    def stage(name):
        printer(f"\n== {name} ==  (t = {time.perf_counter() - started:.0f}s)")
        return time.perf_counter()

    # 1. n-grams
    t = stage(f"1/6 Kneser-Ney n-grams, orders {NGRAM_ORDERS[0]}–{NGRAM_ORDERS[-1]}")
    ngram = _ngram_stage(config, out, printer)
    stages["ngram"] = time.perf_counter() - t
    ng = ngram["result"]

    # 2. LSTM
    t = stage("2/6 train the LSTM LM")
    printer(f"  {config.cell} {config.num_layers}×{config.units}, embed {config.embed_dim}"
            f"{', tied' if config.tie_weights else ''}, bptt {config.bptt}, batch "
            f"{config.batch_size}; budget {train_minutes:.1f} min (the epoch running at the "
            "budget finishes)")
    train_results = train_lm(config, out / "run", verbose=2, printer=printer)
    stages["train_lstm"] = time.perf_counter() - t
    lstm_val = evaluate_run(out / "run", "val")
    try:
        check_comparable(lstm_val, ng)
        comparable, why = True, "same tokenizer fingerprint, split and corpus"
    except NotComparableError as err:
        comparable, why = False, str(err)
    ratio = lstm_val.ppl / ng.ppl
    printer(f"  LSTM: {train_results['epochs_done']} epoch(s), val PPL {lstm_val.ppl:.2f} vs "
            f"KN{ngram['best_order']} {ng.ppl:.2f} = {ratio:.3f}× (comparable: {comparable}, "
            f"{why})")

    # 3. exports
    t = stage("3/6 export SavedModel + TFLite")
    export_saved_model(out / "run", out / "saved_model", printer=printer)
    manifest = export_tflite(out / "run", out / "tflite", variants=variants or VARIANTS,
                             graphs=EXPORT_GRAPHS, printer=printer)
    stages["export"] = time.perf_counter() - t

    # 4. on-device benchmark
    t = stage(f"4/6 on-device benchmark ({rounds} rounds × {bench_tokens} tokens, 1 thread, "
              "models alternated)")
    steppers, sizes, ngram_ids = _ngram_steppers(ngram)
    report = run_streaming_benchmark(
        out / "run", tokens=bench_tokens, export_dir=out / "tflite",
        saved_model_dir=out / "saved_model", progress=printer, threads=(1,), rounds=rounds,
        skip=("keras-eager",), extra_steppers={name: (steppers[name], sizes[name], ngram_ids)
                                               for name in steppers})
    plot_report(report, out / "streaming.png")
    (out / "streaming.json").write_text(json.dumps(report, indent=2, default=str))
    stages["bench"] = time.perf_counter() - t
    printer("")
    printer(format_report(report))

    # 5. demo model
    t = stage("5/6 demo model")
    arpa_bytes = ngram["arpa"].stat().st_size
    chosen, reason = choose_demo_model(manifest, report["rows"], ng.ppl, arpa_bytes)
    if chosen is None:
        # lazy: loads Keras, TensorFlow only when this runs
        from keras_seq.export.tflite import best_demo_model

        fallback = best_demo_model(manifest)
        if fallback is None:
            raise KerasSeqError("no TFLite step model converted; see the export messages")
        printer(f"  no step model met every condition ({reason}); shipping "
                f"{fallback['name']} anyway")
        chosen = fallback
    demo_dir = out / "demo"
    if demo_dir.exists():
        shutil.rmtree(demo_dir)
    demo_dir.mkdir()
    shutil.copy2(out / "tflite" / chosen["file"], demo_dir / "model.tflite")
    shutil.copy2(out / "tflite" / (Path(chosen["file"]).stem + ".json"), demo_dir / "model.json")
    shutil.copy2(out / "tflite" / "tokenizer.json", demo_dir / "tokenizer.json")
    generation = _generation_check(demo_dir / "model.tflite")
    stages["demo"] = time.perf_counter() - t
    printer(f"  demo model: {chosen['name']} → {demo_dir / 'model.tflite'} ({reason})")
    printer(f"  generation check: {generation['tokens']} sampled tokens and 5 suggestions "
            f"before each: {generation['special_tokens'] + generation['special_suggestions']}"
            f" <pad>/<unk>; {generation['line_breaks']} <eos> shown as line breaks")

    # 6. summary
    stage("6/6 summary")
    wall = time.perf_counter() - started
    summary = {
        "data": data, "out": str(out), "minutes_budget": minutes, "wall_seconds": wall,
        "stages_seconds": stages,
        "lstm": {"config": config.to_dict(), "epochs": train_results["epochs_done"],
                 "val": lstm_val.to_dict()},
        "ngram": {"order": ngram["best_order"], "arpa": str(ngram["arpa"]),
                  "arpa_bytes": arpa_bytes, "compact": str(ngram["compact_path"]),
                  "compact_bytes": ngram["compact_path"].stat().st_size,
                  "compact_val_ppl": ngram["compact_result"].ppl, "val": ng.to_dict(),
                  "val_ppl_by_order": {n: r.ppl for n, r in ngram["by_order"].items()}},
        "comparable": comparable, "comparable_note": why, "lstm_vs_ngram": ratio,
        "demo_model": {"name": chosen["name"], "path": str(demo_dir / "model.tflite"),
                       "reason": reason, "generation_check": generation},
        "streaming_verdict": report["verdict"],
    }
    summary["table"] = summary_rows(summary, manifest, report)
    summary["checks"] = summary_checks(summary, manifest, report)
    (out / "pipeline.json").write_text(json.dumps(summary, indent=2, default=str))
    printer(format_summary(summary))
    printer(f"\npipeline done in {wall / 60:.1f} min → {out / 'pipeline.json'}")
    printer(f"  try it: keras-seq demo --model {demo_dir / 'model.tflite'}")
    return summary


# ----------------------------------------------------------------------------------------
# The summary


def summary_rows(summary: dict, manifest: dict, report: dict) -> list[dict]:
    """One row per on-device candidate: n-gram (ARPA, compact) and every TFLite step
    model: validation PPL, file size, p50/p99 µs per token (1 thread)."""
    by_runtime = {r["runtime"]: r for r in report["rows"] if r["threads"] in (1, "-")}
    ng = summary["ngram"]
    rows = []
    for name, ppl, size in ((ngram_runtime(ng["order"], "arpa"), ng["val"]["ppl"],
                             ng["arpa_bytes"]),
                            (ngram_runtime(ng["order"], "compact"), ng["compact_val_ppl"],
                             ng["compact_bytes"])):
        r = by_runtime.get(name, {})
        rows.append({"model": name, "val_ppl": ppl, "size_kib": size / 1024,
                     "p50_us": r.get("p50_us"), "p99_us": r.get("p99_us"),
                     "x_fp32_speed": r.get("speedup_vs_tflite_fp32")})
    for m in manifest["models"]:
        r = by_runtime.get(f"tflite {m['name']}")
        if "error" in m or r is None:
            continue
        rows.append({"model": f"tflite {m['name']}",
                     "val_ppl": (m.get("parity") or {}).get("val_ppl"),
                     "size_kib": m["size_bytes"] / 1024, "p50_us": r["p50_us"],
                     "p99_us": r["p99_us"], "x_fp32_speed": r.get("speedup_vs_tflite_fp32")})
    shipped = f"tflite {summary['demo_model']['name']}"
    for row in rows:
        row["shipped"] = "◀ demo" if row["model"] == shipped else ""
    return rows


def summary_checks(summary: dict, manifest: dict, report: dict) -> list[dict]:
    """The job's four targets, each with the measured numbers and met / missed."""
    ng, demo = summary["ngram"], summary["demo_model"]
    ratio = summary["lstm_vs_ngram"]
    shipped = next(m for m in manifest["models"] if m["name"] == demo["name"])
    shipped_ppl = (shipped.get("parity") or {}).get("val_ppl", float("nan"))
    v = report["verdict"]
    gen = demo["generation_check"]
    checks = [
        {"target": f"LSTM val PPL ≤ {TARGET_RATIO:.2f} × best n-gram",
         "measured": f"{summary['lstm']['val']['ppl']:.2f} vs KN{ng['order']} "
                     f"{ng['val']['ppl']:.2f} = {ratio:.3f}×",
         "met": bool(summary["comparable"] and ratio <= TARGET_RATIO)},
        {"target": "shipped model: lower PPL than the n-gram, smaller file than its ARPA",
         "measured": f"{demo['name']}: PPL {shipped_ppl:.2f} vs {ng['val']['ppl']:.2f}, "
                     f"{shipped['size_bytes'] / 1024:,.0f} KiB vs {ng['arpa_bytes'] / 1024:,.0f}"
                     " KiB",
         "met": bool(shipped_ppl < ng["val"]["ppl"] and shipped["size_bytes"] <
                     ng["arpa_bytes"])},
    ]
    if "best" in v:
        spread = (f" (rounds {v['speedup_range'][0]:.2f}–{v['speedup_range'][1]:.2f}×)"
                  if v.get("speedup_range") else "")
        checks.append({"target": "quantized step ≥ 3× faster than fp32, PPL within +1.5%",
                       "measured": f"{v['best'].removeprefix('tflite ')} {v['speedup']:.2f}×"
                                   f"{spread}, PPL {v['ppl_delta_pct']:+.2f}%",
                       "met": bool(v["met"])})
    else:
        checks.append({"target": "quantized step ≥ 3× faster than fp32, PPL within +1.5%",
                       "measured": v.get("reason", "not measured"), "met": False})
    checks.append({"target": "suggestions and generation never offer <pad>/<unk>",
                   "measured": f"{gen['special_tokens'] + gen['special_suggestions']} in "
                               f"{gen['tokens']} samples + {5 * gen['tokens']} suggestions",
                   "met": gen["special_tokens"] + gen["special_suggestions"] == 0})
    return checks


def format_summary(summary: dict) -> str:
    buf = io.StringIO()
    print("On-device candidates (validation PPL on the same tokens; 1 thread; p50/p99 µs per "
          "token):", file=buf)
    print_table(summary["table"], ["model", "val_ppl", "size_kib", "p50_us", "p99_us",
                                   "x_fp32_speed", "shipped"], file=buf)
    print("", file=buf)
    print_table([{**c, "met": "yes" if c["met"] else "NO"} for c in summary["checks"]],
                ["target", "measured", "met"], file=buf)
    return buf.getvalue().rstrip("\n")
