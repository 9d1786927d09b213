"""Attention vs no attention: one benchmark, same data, same sizes, same training.

``run_bench`` trains, for each task asked for:

* ``reverse`` — RNNsearch (Bahdanau attention) and RNNenc (final encoder state only) on
  letter strings of length 1 … ``max_len`` (default 64), each for the same time budget,
  and scores both on the same test set per source-length bucket;
* ``dates`` — the attention model on date normalisation (stops at the target exact
  match or the time budget).

It prints/returns the tables and writes ``length_curve.png`` (both models' exact match
per length bucket) and ``attention_heatmap.png`` (the longest test source) into
``out_dir``. Each model's run directory is kept under ``out_dir`` for ``eval``/``translate``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from keras_seq.tasks.seq2seq.config import Seq2SeqConfig
from keras_seq.tasks.seq2seq.data import reverse_pairs
from keras_seq.tasks.seq2seq.evaluation import evaluate_run, heatmap_for, load_run
from keras_seq.tasks.seq2seq.task import train_seq2seq


def _train(config: Seq2SeqConfig, run_dir: Path, fresh: bool, verbose: int, printer) -> dict:
    if fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    if (run_dir / "metrics.json").is_file():
        saved = json.loads((run_dir / "config.json").read_text())
        wanted = {k: v for k, v in config.to_dict().items() if v is not None}
        if all(saved.get(k) == v for k, v in wanted.items()):
            printer(f"reusing finished run {run_dir} (pass --fresh to retrain)")
            return json.loads((run_dir / "metrics.json").read_text())
        printer(f"{run_dir} was trained with other settings; retraining")
    if run_dir.exists():  # an interrupted run: start over so the budget is honest
        shutil.rmtree(run_dir)
    return train_seq2seq(config, run_dir, verbose=verbose, printer=printer)


def reversal_bench(out_dir, max_len: int = 64, minutes: float = 12.0, units: int = 64,
                   embed_dim: int = 32, batch_size: int = 64, train_size: int = 60000,
                   test_size: int = 2000, buckets: int = 8, seed: int = 1234,
                   fresh: bool = False, verbose: int = 2, printer=print) -> dict:
    out_dir = Path(out_dir)
    runs, evals = {}, {}
    for attention in ("bahdanau", "none"):
        config = Seq2SeqConfig(data="reverse", min_len=1, max_len=max_len,
                               train_size=train_size, val_size=200, test_size=test_size,
                               units=units, embed_dim=embed_dim, batch_size=batch_size,
                               attention=attention, epochs=1000, max_minutes=minutes,
                               steps_per_epoch=250, eval_size=200, seed=seed)
        run_dir = out_dir / f"reverse-{attention}"
        printer(f"== reverse 1–{max_len}, attention={attention}: training for ≤ {minutes} min")
        runs[attention] = _train(config, run_dir, fresh, verbose, printer)
        evals[attention] = evaluate_run(run_dir, "test")
    rows = []
    for with_att, without in zip(evals["bahdanau"]["by_length"], evals["none"]["by_length"]):
        rows.append({"source length": with_att["bucket"], "n": with_att["n"],
                     "attention exact %": round(100 * with_att["exact_match"], 2),
                     "no-attention exact %": round(100 * without["exact_match"], 2),
                     "gap (points)": round(100 * (with_att["exact_match"]
                                                  - without["exact_match"]), 2),
                     "attention token %": round(100 * with_att["token_accuracy"], 2),
                     "no-attention token %": round(100 * without["token_accuracy"], 2)})
    params = {a: runs[a]["params"] for a in runs}
    # lazy: loads matplotlib only when this runs
    from keras_seq.tasks.seq2seq.plots import length_curve

    curve = length_curve({f"Bahdanau attention ({params['bahdanau']['total']:,} params)":
                          evals["bahdanau"]["by_length"],
                          f"no attention ({params['none']['total']:,} params)":
                          evals["none"]["by_length"]},
                         out_dir / "length_curve.png",
                         title=f"reversal: exact match vs source length (≤ {minutes:g} min "
                               "CPU training each)")
    _, src_tok, tgt_tok, model = load_run(out_dir / "reverse-bahdanau")
    example = reverse_pairs(1, seed=seed + 99, min_len=max_len, max_len=max_len)[0][0]
    heatmap = heatmap_for(model, src_tok, tgt_tok, example, out_dir / "attention_heatmap.png")
    summary = {
        "task": "reverse", "max_len": max_len,
        "params": params,
        "param_gap_percent": 100 * (params["bahdanau"]["total"] - params["none"]["total"])
        / params["none"]["total"],
        "minutes": {a: runs[a]["train_minutes"] for a in runs},
        "epochs": {a: runs[a]["epochs_done"] for a in runs},
        "overall": {a: {k: evals[a][k] for k in ("exact_match", "token_accuracy", "bleu", "n")}
                    for a in evals},
        "by_length": rows,
        "longest_bucket_gap_points": rows[-1]["gap (points)"],
        "plots": {"length_curve": str(curve), "heatmap": str(heatmap)},
    }
    return summary


def dates_bench(out_dir, minutes: float = 14.0, train_size: int = 30000,
                target_exact_match: float = 0.998, seed: int = 1234, fresh: bool = False,
                verbose: int = 2, printer=print) -> dict:
    out_dir = Path(out_dir)
    run_dir = out_dir / "dates-bahdanau"
    config = Seq2SeqConfig(data="dates", train_size=train_size, val_size=500, test_size=2000,
                           epochs=1000, max_minutes=minutes,
                           target_exact_match=target_exact_match, seed=seed)
    printer(f"== dates, attention=bahdanau: training for ≤ {minutes} min")
    run = _train(config, run_dir, fresh, verbose, printer)
    result = evaluate_run(run_dir, "test", plot_dir=out_dir / "dates-plots")
    return {"task": "dates", "params": run["params"], "minutes": run["train_minutes"],
            "epochs": run["epochs_done"],
            "test": {k: result[k] for k in ("exact_match", "token_accuracy", "bleu", "n")},
            "by_length": [{"source length": r["bucket"], "n": r["n"],
                           "exact %": round(100 * r["exact_match"], 2),
                           "token acc %": round(100 * r["token_accuracy"], 2)}
                          for r in result["by_length"] if r["n"]],
            "plots": result.get("plots", {})}
