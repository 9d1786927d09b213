"""The report's ``keyboard`` section: do neural LMs beat the n-gram where a user looks?

Seeds 000 and 001 argue that neural language models (the feed-forward NPLM, then recurrent
nets with gates) fix the n-gram's flaws, and they judge "better" by perplexity. A keyboard
user judges by the suggestion strip instead (docs/keyboard.md). This section trains the
chapters' arc — NPLM, SimpleRNN, GRU, LSTM — at one parameter budget and one wall-clock
budget per model on the same tokens (``keras-seq bench lm``, :func:`run_bench`), rates each
and Kneser-Ney on the same validation positions, and gives every neural model's difference
from KN with its paired 95% interval.

Example (seconds; the numbers mean nothing)::

    section = section_keyboard(Path("out"), {"data": "python-docs", "cells": ("lstm",),
                               "minutes": 0.01, "embed_dim": 8, "num_layers": 1, "bptt": 5,
                               "batch_size": 4, "max_steps_per_epoch": 2, "kn_order": 2},
                               seed=0, data="python-docs", progress=False)
    print(section["verdict"], section["checks"])
"""

from __future__ import annotations

import shutil
from pathlib import Path

from keras_seq.analysis._common import LABELS as NAMES
from keras_seq.benchmarks.lm import VERSUS_KN, run_bench
from keras_seq.errors import KerasSeqError
from keras_seq.extras import pyplot
from keras_seq.keyboard import LABELS, format_difference


def section_keyboard(out: Path, cfg: dict, seed: int, data: str, progress: bool,
                     printer=print) -> dict:
    """Train, rate and judge (``cfg``: :func:`run_bench`'s arguments; its ``data``, if
    given, replaces the report's corpus: keyboard metrics need word text of some length)."""
    cfg = dict(cfg)
    corpus = cfg.pop("data", data)
    runs = out / "keyboard_runs"
    if runs.exists():  # a report measures afresh; run_bench would reuse finished runs
        shutil.rmtree(runs)
    bench = run_bench(runs, data=corpus, seed=seed, verbose=1 if progress else 0,
                      printer=printer, **cfg)
    rows = bench["rows"]
    if "keyboard" not in rows[-1]:
        raise KerasSeqError(f"the keyboard section rates next words; {corpus} with tokenizer "
                            f"{bench['tokenizer']!r} has none: use a word tokenizer")
    kn = rows[-1]
    checks = [_check(row, kn) for row in rows[:-1]]
    lstm = next((r for r in rows if r["model"] == "lstm"), rows[-2])
    by_ppl = lstm["val_ppl"] < kn["val_ppl"]
    by_user = all(lstm["vs_kn"][m]["low"] > 0 for m in ("top1_iv", "ksr"))
    verdict = "agrees" if by_ppl and by_user else "partly" if by_ppl or by_user else "disagrees"
    checks.append(f"{NAMES.get(lstm['model'], lstm['model'])} vs {kn['model']}: lower "
                  f"perplexity {'yes' if by_ppl else 'no'}; top-1 in-vocab and keystroke "
                  f"savings both ahead with the interval above 0: {'yes' if by_user else 'no'}")
    png = plot_keyboard_arc(bench, out / "keyboard.png")
    first = kn["keyboard"]
    body = (f"`keras_seq.benchmarks.lm.run_bench` (the `keras-seq bench lm` benchmark) on "
            f"{corpus} ({bench['split_ratio']}, word tokens, vocabulary "
            f"{bench['vocab_size']:,}): each neural model gets the parameter budget "
            f"{bench['budget_params']:,} (the LSTM with units = embedding size; the others "
            f"get as many units as fit) and {bench['minutes_per_model']:g} min of training; "
            f"KN{cfg.get('kn_order', 5)} is estimated on the same tokens. All are rated on the "
            f"same {first['positions']:,} validation positions ({first['in_vocab_words']:,} "
            f"in-vocabulary words) with a {first['k']}-word strip; differences from KN in "
            "points with the paired block-bootstrap 95% interval (docs/keyboard.md).\n\n"
            + _table(rows))
    return {"verdict": verdict, "checks": checks, "body": body, "pngs": [str(png)],
            "data": bench}


def _check(row: dict, kn: dict) -> str:
    versus = row["vs_kn"]
    return (f"{NAMES.get(row['model'], row['model'])}: PPL {row['val_ppl']:.2f} = "
            f"{row['ppl_vs_kn']:.3f}× {kn['model']}'s; "
            + "; ".join(f"{LABELS[m]} {format_difference(versus[m], ' points')}"
                        for m in VERSUS_KN))


def _table(rows: list[dict]) -> str:
    columns = ["model", "params", "epochs", "val PPL", "× KN", "top-1 %", "top-3 %",
               "top-1 in-vocab %", "top-3 in-vocab %", "keystrokes saved %"] + [
        f"{LABELS[m]} − KN" for m in VERSUS_KN]
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1)]
    for r in rows:
        k = r["keyboard"]
        cells = [NAMES.get(r["model"], r["model"]),
                 f"{r['params']:,}" if r.get("params") else "–",
                 str(r["epochs"]) if r.get("epochs") is not None else "–",
                 f"{r['val_ppl']:.2f}", f"{r['ppl_vs_kn']:.3f}"]
        cells += [f"{100 * k[m]:.2f}" for m in ("top1", "top3", "top1_iv", "top3_iv", "ksr")]
        for m in VERSUS_KN:
            d = r.get("vs_kn", {}).get(m)
            cells.append(format_difference(d) if d else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_keyboard_arc(bench: dict, path) -> Path:
    """Validation perplexity against top-1 in-vocab accuracy and keystroke savings, one
    point per model (KN as a square)."""
    plt = pyplot("the keyboard plot")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric in zip(axes, ("top1_iv", "ksr")):
        for r in bench["rows"]:
            is_kn = "vs_kn" not in r
            ax.plot(r["val_ppl"], 100 * r["keyboard"][metric], "s" if is_kn else "o",
                    color="black" if is_kn else None, markersize=8)
            ax.annotate(NAMES.get(r["model"], r["model"]),
                        (r["val_ppl"], 100 * r["keyboard"][metric]),
                        textcoords="offset points", xytext=(6, 4), fontsize=9)
        ax.set_xlabel("validation perplexity (lower is better)")
        ax.set_ylabel(f"{LABELS[metric]} (%)")
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{bench['data']}: perplexity against what a keyboard user sees, "
                 f"equal budget ({bench['budget_params']:,} params, "
                 f"{bench['minutes_per_model']:g} min each)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
