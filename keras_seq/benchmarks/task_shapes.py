"""``keras-seq bench classify``, ``bench tag`` and ``bench conditioned``: seed 004's
sentiment case, seed 003's BiRNN-for-tagging claim and its 1→N shape, measured with
ordinary run directories (``OUT/<model>-s<seed>``).

* classify — LSTM 128, LSTM 512, BiLSTM and LSTM with attention pooling on
  ``reviews-negation``, each over several seeds; accuracy per negation distance as
  mean ± spread (half the max − min range).
* tag — a unidirectional and a bidirectional LSTM tagger at (about) equal parameters on
  ``restore-punct``; token accuracy and micro-F1 over the informative tags.
* conditioned — the same LM with and without its condition on ``python-docs-topics``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.conditioned.config import ConditionedConfig
from keras_seq.tasks.tag.config import TagConfig

CLASSIFIERS = {
    "lstm128": {"units": 128},
    "lstm512": {"units": 512},
    "bilstm128": {"units": 128, "bidirectional": True},
    "lstm128-attention": {"units": 128, "pooling": "attention"},
}


def _spread(values) -> dict:
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "spread": float((values.max() - values.min()) / 2),
            "values": values.tolist()}


def _train_or_reuse(train_fn, config, run_dir: Path, printer) -> dict:
    if (run_dir / "metrics.json").is_file():
        printer(f"   (already trained: reusing {run_dir}/metrics.json)")
        return json.loads((run_dir / "metrics.json").read_text())
    return train_fn(config, run_dir, verbose=0, printer=printer)


def bench_classify(out_dir, models=tuple(CLASSIFIERS), seeds=(1, 2, 3), minutes: float = 3.0,
                   epochs: int = 20, hard: bool = False, printer=print, **config) -> dict:
    """Train every model of ``models`` with each seed (``minutes`` each) and tabulate."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.tasks.classify.task import train_classifier

    out_dir = Path(out_dir)
    rows = []
    for name in models:
        per_seed = []
        for seed in seeds:
            cfg = ClassifyConfig(**{"epochs": epochs, "max_minutes": minutes, "hard": hard,
                                    **config, **CLASSIFIERS[name], "seed": seed})
            run_dir = out_dir / f"{name}-s{seed}"
            printer(f"== {name} seed {seed} → {run_dir}")
            per_seed.append(_train_or_reuse(train_classifier, cfg, run_dir, printer))
        groups = sorted({g for r in per_seed for g in r["test"].get("by_group", {})}, key=int)
        row = {"model": name, "params": per_seed[0]["params"],
               "epochs": [r["epochs_done"] for r in per_seed],
               "accuracy": _spread([r["test"]["accuracy"] for r in per_seed]),
               "by_distance": {str(g): _spread([r["test"]["by_group"][g]["accuracy"]
                                                for r in per_seed]) for g in groups}}
        rows.append(row)
    out = {"task": "reviews-negation" + (" (hard)" if hard else ""), "seeds": list(seeds),
           "minutes_per_run": minutes, "rows": rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_classify.json").write_text(json.dumps(out, indent=2))
    return out


def format_classify(out: dict) -> str:
    dists = sorted({d for r in out["rows"] for d in r["by_distance"]}, key=int)
    lines = [f"{out['task']}: test accuracy % (mean ± half-range over seeds "
             f"{out['seeds']}; ≤ {out['minutes_per_run']:g} min per run)",
             f"{'model':<20} {'params':>9} " + " ".join(f"{'d=' + d:>13}" for d in dists)
             + f" {'all':>13}"]
    for r in out["rows"]:
        cells = [r["by_distance"][d] for d in dists] + [r["accuracy"]]
        lines.append(f"{r['model']:<20} {r['params']:>9,} " + " ".join(
            f"{100 * c['mean']:>7.1f} ± {100 * c['spread']:<3.1f}" for c in cells))
    return "\n".join(lines)


def bench_tag(out_dir, units_bi: int = 64, seeds=(1, 2, 3), minutes: float = 3.0,
              epochs: int = 30, printer=print, **config) -> dict:
    """Uni- vs bidirectional LSTM taggers at equal parameters on ``restore-punct``."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.models.tagger import units_for_equal_params
    from keras_seq.tasks.tag.task import TASK, train_tagger

    out_dir = Path(out_dir)
    base = TagConfig(**{"epochs": epochs, "max_minutes": minutes, **config})
    prepared = TASK.prepare(base, out_dir, False, printer)
    vocab, tags = prepared.state.tokenizer.vocab_size, len(prepared.state.tags)
    variants = {
        "bilstm": {"bidirectional": True, "units": units_bi},
        "lstm": {"bidirectional": False, "units": units_for_equal_params(
            vocab, tags, base.embed_dim, units_bi, "lstm", base.num_layers)},
    }
    rows = []
    for name, variant in variants.items():
        per_seed = []
        for seed in seeds:
            cfg = TagConfig(**{**base.to_dict(), **variant, "seed": seed})
            run_dir = out_dir / f"{name}-s{seed}"
            printer(f"== {name} ({variant['units']} units) seed {seed} → {run_dir}")
            per_seed.append(_train_or_reuse(train_tagger, cfg, run_dir, printer))
        reports = [r["test"]["report"] for r in per_seed]
        rows.append({"model": name, "units": variant["units"], "params": per_seed[0]["params"],
                     "accuracy": _spread([r["accuracy"] for r in reports]),
                     "micro_f1": _spread([r["micro"]["f1"] for r in reports]),
                     "macro_f1": _spread([r["macro"]["f1"] for r in reports])})
    out = {"task": base.data, "seeds": list(seeds), "minutes_per_run": minutes, "rows": rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_tag.json").write_text(json.dumps(out, indent=2))
    return out


def format_tag(out: dict) -> str:
    lines = [f"{out['task']}: test scores % (mean ± half-range over seeds {out['seeds']}; "
             f"≤ {out['minutes_per_run']:g} min per run)",
             f"{'model':<8} {'units':>5} {'params':>9} {'token acc':>13} {'micro-F1':>13} "
             f"{'macro-F1':>13}"]
    for r in out["rows"]:
        lines.append(f"{r['model']:<8} {r['units']:>5} {r['params']:>9,} " + " ".join(
            f"{100 * r[k]['mean']:>7.2f} ± {100 * r[k]['spread']:<3.1f}"
            for k in ("accuracy", "micro_f1", "macro_f1")))
    return "\n".join(lines)


def bench_conditioned(out_dir, seeds=(1, 2, 3), minutes: float | None = None,
                      epochs: int = 8, printer=print, **config) -> dict:
    """The same LM with and without its condition, the same number of epochs each:
    validation/test PPL over seeds, and test PPL by position in the paragraph."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.tasks.conditioned.task import train_conditioned

    out_dir = Path(out_dir)
    rows = []
    for name, unconditioned in (("unconditioned", True), ("conditioned", False)):
        per_seed = []
        for seed in seeds:
            cfg = ConditionedConfig(**{"epochs": epochs, "max_minutes": minutes, **config,
                                       "unconditioned": unconditioned, "seed": seed})
            run_dir = out_dir / f"{name}-s{seed}"
            printer(f"== {name} seed {seed} → {run_dir}")
            per_seed.append(_train_or_reuse(train_conditioned, cfg, run_dir, printer))
        buckets = [b["positions"] for b in per_seed[0]["test"]["by_position"]]
        rows.append({"model": name, "params": per_seed[0]["params"],
                     "epochs": [r["epochs_done"] for r in per_seed],
                     "val_ppl": _spread([r["val"]["ppl"] for r in per_seed]),
                     "test_ppl": _spread([r["test"]["ppl"] for r in per_seed]),
                     "test_by_position": {b: _spread([r["test"]["by_position"][k]["ppl"]
                                                      for r in per_seed])
                                          for k, b in enumerate(buckets)}})
    out = {"task": ConditionedConfig(**config).data, "seeds": list(seeds),
           "minutes_per_run": minutes, "epochs": epochs, "rows": rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_conditioned.json").write_text(json.dumps(out, indent=2))
    return out


def format_conditioned(out: dict) -> str:
    buckets = list(out["rows"][0]["test_by_position"])
    lines = [f"{out['task']}: PPL (mean ± half-range over seeds {out['seeds']}; "
             f"epochs {[r['epochs'] for r in out['rows']]})",
             f"{'model':<14} {'params':>9} {'val PPL':>15} {'test PPL':>15} "
             + " ".join(f"{'test @' + b:>15}" for b in buckets)]
    for r in out["rows"]:
        cells = [r["val_ppl"], r["test_ppl"], *r["test_by_position"].values()]
        lines.append(f"{r['model']:<14} {r['params']:>9,} " + " ".join(
            f"{c['mean']:>8.2f} ± {c['spread']:<4.2f}" for c in cells))
    return "\n".join(lines)
