"""The whole pipeline in one call: train → compare with an n-gram → export → benchmark → demo.

``keras-seq pipeline --data python-docs --out DIR [--minutes M]`` runs, on CPU:

1. a small word-level LSTM LM (``train_lm``, most of the time budget);
2. an interpolated Kneser-Ney n-gram on the same corpus with the same word tokenizer
   (the fingerprints are checked, so the two perplexities are comparable);
3. the SavedModel (``DIR/saved_model``) and every TFLite variant (``DIR/tflite``) with
   parity against Keras;
4. the streaming benchmark (``DIR/streaming.json``, ``DIR/streaming.png``);
5. the demo model: the fastest TFLite step model within +1.5% of float PPL, copied to
   ``DIR/demo/model.tflite`` with its metadata and tokenizer, ready for
   ``keras-seq demo --model DIR/demo/model.tflite``.

Everything it measured goes to ``DIR/pipeline.json``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from keras_seq.errors import KerasSeqError

# Sizes chosen to fit ~10 minutes on 2 CPU cores (python-docs: ~43k train tokens).
# min_count=2: words seen once become <unk>, so the LSTM learns <unk>'s probability (with
# every training word in the vocabulary it never sees <unk> and pays ~16 nats per unknown).
LSTM_DEFAULTS = dict(tokenizer="word", min_count=2, cell="lstm", embed_dim=64, units=256,
                     num_layers=1, bptt=35, batch_size=20, dropout=0.2, lr=3e-3, histogram_freq=0,
                     sample_tokens=0, log_every=100)
NGRAM_ORDER = 3


def _train_ngram(config, out: Path, say) -> dict:
    from keras_seq.metrics import check_comparable  # noqa: F401 - used by the caller
    from keras_seq.ngram.arpa import write_arpa
    from keras_seq.ngram.counts import NgramCounts, Vocabulary
    from keras_seq.ngram.data import load_tokenized
    from keras_seq.ngram.kneser_ney import kneser_ney
    from keras_seq.ngram.scorer import evaluate

    t0 = time.perf_counter()
    data = load_tokenized(config.data, max_vocab=config.max_vocab,
                          min_count=config.min_count or 1, split=config.split_ratio,
                          data_dir=config.data_dir)
    vocab = Vocabulary.from_lines(data.train)
    stream = vocab.encode(data.train)
    counts = NgramCounts.from_stream(stream, NGRAM_ORDER, len(vocab))
    meta = {"tokenizer": "word", "tokenizer_options": data.tokenizer.options,
            "tokenizer_fingerprint": data.tokenizer.fingerprint, "corpus": data.corpus.name,
            "corpus_sha256": data.corpus.sha256, "corpus_split": config.split_ratio,
            "train_tokens": stream.n_predicted}
    model = kneser_ney(counts, vocab, True, meta)
    arpa = out / f"kn{NGRAM_ORDER}.arpa"
    write_arpa(model, arpa)
    result = evaluate(model, data.lines("val"), fingerprint=data.fingerprint("val"),
                      name=f"KN {NGRAM_ORDER}-gram")
    say(f"  KN {NGRAM_ORDER}-gram: val PPL {result.ppl:.2f} over {result.tokens:,} tokens "
        f"({time.perf_counter() - t0:.1f}s) → {arpa}")
    return {"arpa": str(arpa), "result": result, "seconds": time.perf_counter() - t0}


def run_pipeline(data: str = "python-docs", out="pipeline_out", minutes: float = 10.0,
                 bench_tokens: int = 1000, printer=print, lstm_overrides: dict | None = None,
                 variants=None, data_dir=None, split_ratio: str | None = None) -> dict:
    """Run every stage into ``out``; returns the summary (also ``out/pipeline.json``)."""
    from keras_seq.benchmarks.streaming import format_report, plot_report, run_streaming_benchmark
    from keras_seq.export.saved_model import export_saved_model
    from keras_seq.export.tflite import VARIANTS, best_demo_model, export_tflite
    from keras_seq.metrics import NotComparableError, check_comparable
    from keras_seq.tasks.lm.config import LMConfig
    from keras_seq.tasks.lm.evaluation import evaluate_run
    from keras_seq.tasks.lm.task import train_lm

    started = time.perf_counter()
    out = Path(out)
    if (out / "run" / "config.json").exists():
        raise KerasSeqError(f"{out} already holds a pipeline run; choose a new --out or "
                            "remove it")
    out.mkdir(parents=True, exist_ok=True)
    stages: dict[str, float] = {}

    def stage(name):
        printer(f"\n== {name} ==  (t = {time.perf_counter() - started:.0f}s)")
        return time.perf_counter()

    # 1. LSTM
    t = stage("1/5 train LSTM LM")
    train_minutes = max(0.2, 0.45 * minutes)
    split = {"split_ratio": split_ratio} if split_ratio else {}
    config = LMConfig(**{**LSTM_DEFAULTS, "data": data, "data_dir": data_dir, "epochs": 100,
                         "max_minutes": train_minutes, **split, **(lstm_overrides or {})})
    printer(f"  {config.cell} {config.num_layers}×{config.units}, embed {config.embed_dim}, "
            f"bptt {config.bptt}, batch {config.batch_size}; budget {train_minutes:.1f} min")
    train_results = train_lm(config, out / "run", verbose=0, printer=printer)
    stages["train_lstm"] = time.perf_counter() - t
    lstm_val = evaluate_run(out / "run", "val")
    printer(f"  LSTM: {train_results['epochs_done']} epoch(s), val PPL {lstm_val.ppl:.2f} over "
            f"{lstm_val.tokens:,} tokens")

    # 2. n-gram and the comparison
    t = stage("2/5 Kneser-Ney n-gram + comparison")
    ngram = _train_ngram(config, out, printer)
    stages["ngram"] = time.perf_counter() - t
    ng = ngram["result"]
    try:
        check_comparable(lstm_val, ng)
        comparable, why = True, "same tokenizer fingerprint, split and corpus"
    except NotComparableError as err:
        comparable, why = False, str(err)
    printer(f"  comparable: {comparable} ({why})")
    printer(f"  val PPL: LSTM {lstm_val.ppl:.2f} vs KN {NGRAM_ORDER}-gram {ng.ppl:.2f} "
            f"(tokenizer {lstm_val.fingerprint.get('tokenizer')})")

    # 3. exports
    t = stage("3/5 export SavedModel + TFLite")
    export_saved_model(out / "run", out / "saved_model", printer=printer)
    manifest = export_tflite(out / "run", out / "tflite", variants=variants or VARIANTS,
                             printer=printer)
    stages["export"] = time.perf_counter() - t

    # 4. streaming benchmark
    t = stage(f"4/5 streaming benchmark ({bench_tokens} tokens per runtime)")
    report = run_streaming_benchmark(out / "run", tokens=bench_tokens,
                                     export_dir=out / "tflite",
                                     saved_model_dir=out / "saved_model", progress=printer)
    plot_report(report, out / "streaming.png")
    (out / "streaming.json").write_text(json.dumps(report, indent=2, default=str))
    stages["bench"] = time.perf_counter() - t
    printer("")
    printer(format_report(report))

    # 5. demo model
    t = stage("5/5 demo model")
    latencies = {r["runtime"].removeprefix("tflite "): r["p50_us"] for r in report["rows"]
                 if r["runtime"].startswith("tflite ") and r["threads"] == 1}
    chosen = best_demo_model(manifest, latencies=latencies)
    if chosen is None:
        raise KerasSeqError("no TFLite step model converted; see the export messages above")
    demo_dir = out / "demo"
    if demo_dir.exists():
        shutil.rmtree(demo_dir)
    demo_dir.mkdir()
    shutil.copy2(out / "tflite" / chosen["file"], demo_dir / "model.tflite")
    shutil.copy2(out / "tflite" / (Path(chosen["file"]).stem + ".json"), demo_dir / "model.json")
    shutil.copy2(out / "tflite" / "tokenizer.json", demo_dir / "tokenizer.json")
    stages["demo"] = time.perf_counter() - t
    printer(f"  demo model: {chosen['name']} ({chosen['size_bytes'] / 1024:.0f} KiB, p50 "
            f"{latencies.get(chosen['name'], float('nan')):.0f} µs) → {demo_dir / 'model.tflite'}")
    printer(f"  try it: keras-seq demo --model {demo_dir / 'model.tflite'}")

    wall = time.perf_counter() - started
    summary = {
        "data": data, "out": str(out), "minutes_budget": minutes, "wall_seconds": wall,
        "stages_seconds": stages,
        "lstm": {"config": config.to_dict(), "epochs": train_results["epochs_done"],
                 "val": lstm_val.to_dict()},
        "ngram": {"order": NGRAM_ORDER, "arpa": ngram["arpa"], "val": ng.to_dict()},
        "comparable": comparable, "comparable_note": why,
        "demo_model": {"name": chosen["name"], "path": str(demo_dir / "model.tflite")},
        "streaming_verdict": report["verdict"],
    }
    (out / "pipeline.json").write_text(json.dumps(summary, indent=2, default=str))
    printer(f"\npipeline done in {wall / 60:.1f} min → {out / 'pipeline.json'}")
    return summary
