"""``keras-seq bench lm``: the chapters' arc — Kneser-Ney n-gram → feed-forward NPLM →
SimpleRNN → GRU → LSTM — at an equal parameter budget, each trained for the same
wall-clock budget, on identical tokens. ``nplm_orders`` adds the NPLM's perplexity against
its window size beside KN's perplexity against its order.

Every run is an ordinary run directory (``OUT/<cell>``), so each number can be re-checked
with ``keras-seq eval lm --run-dir OUT/<cell>``. The table reports validation perplexity,
its ratio to KN5's, parameters, minutes and training tokens/s; with ``suggestions`` (word
tokens) a second table gives what a keyboard user sees of each model on the same positions
(docs/keyboard.md: top-1/top-3 next-word accuracy, completion, keystroke savings) and each
neural model's difference from KN with its paired 95% interval.

``backend``/``device``/``mixed_precision``/``jit_compile`` say how every model trains
(:mod:`keras_seq.benchmarks.backends`: another backend than this process's, or the CPU of a
machine with a GPU, runs in a worker process, ``python -m keras_seq.benchmarks.lm``).

:func:`run_speed` (``bench lm --speed``) measures instead the training speed of this
workload, keras-seq's layers against Keras's built-in ones: the same RecurrentLM as
``train lm`` builds it (the built-in as ``cell="keras-lstm"`` …), on the corpus's stream
batches, the two alternating in turns over rounds, on the same backend, device, precision
and XLA setting; no run directories, no KN.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from keras_seq.benchmarks import backends
from keras_seq.benchmarks.cells import alternate, check_counts, settings_text, speed_row
from keras_seq.cells import keras_twins, mirrored_cells
from keras_seq.data.batching import stream_arrays
from keras_seq.data.corpus import load_corpus
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.keyboard import LABELS, METRICS, format_difference, paired_bootstrap
from keras_seq.layers.params import count_params
from keras_seq.metrics import PerplexityResult, check_comparable
from keras_seq.models.nplm import nplm_param_count
from keras_seq.ngram.data import load_tokenized
from keras_seq.ngram.kneser_ney import DiscountWarning, train_kneser_ney
from keras_seq.ngram.scorer import evaluate
from keras_seq.ngram.scorer import keyboard_outcomes as ngram_keyboard_outcomes
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.evaluation import keyboard_outcomes, perplexity_of_run
from keras_seq.tasks.lm.task import build_model, train_lm

#: the keyboard metrics whose difference from KN the table gives with its interval
VERSUS_KN = ("top1_iv", "top3_iv", "ksr")

#: what `bench lm` compares by default: the NPLM and every cell with a Keras built-in
LM_MODELS = ("nplm", *mirrored_cells())


def model_params(cell: str, vocab: int, embed: int, units: int, layers: int, tie: bool,
                 context: int = 4) -> int:
    """Trainable parameters of a :class:`~keras_seq.models.RecurrentLM` (or, for
    ``cell="nplm"``, of an NPLM reading ``context`` tokens with ``units`` hidden units)."""
    if cell == "nplm":
        return nplm_param_count(vocab, context + 1, embed, units, direct=False)
    total = vocab * embed
    for i in range(layers):
        total += count_params(cell, embed if i == 0 else units, units)
    total += vocab if tie else units * vocab + vocab
    return total


def units_for_budget(cell: str, vocab: int, embed: int, layers: int, budget: int, tie: bool,
                     context: int = 4) -> int:
    """The largest unit count whose model stays within ``budget`` parameters."""
    if tie and cell != "nplm":  # tying needs units == embed: the budget can't be matched
        return embed
    lo, hi = 1, 1
    while model_params(cell, vocab, embed, hi, layers, tie, context) <= budget:
        hi *= 2
    while lo < hi - 1:
        mid = (lo + hi) // 2
        if model_params(cell, vocab, embed, mid, layers, tie, context) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class KNBaseline:
    """KN of one order on the LM's tokens: its score on a split, the seconds it took to
    estimate, the model, and the split's word lines as written (for keyboard metrics)."""

    result: PerplexityResult
    seconds: float
    model: object
    raw_lines: list


def kn_baseline(config: LMConfig, order: int, split: str = "val") -> KNBaseline:
    """Interpolated modified KN of ``order`` on exactly the LM's tokens."""
    data = load_tokenized(
        config.data,
        max_vocab=config.max_vocab,
        min_count=config.min_count or 1,
        split=config.split_ratio,
        data_dir=config.data_dir,
    )
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        model = train_kneser_ney(data.train, order)
    seconds = time.monotonic() - start
    result = evaluate(
        model, data.lines(split), fingerprint=data.fingerprint(split), name=f"KN{order}"
    )
    return KNBaseline(result, seconds, model, data.raw_lines(split))


def run_bench(
    out_dir: str | Path,
    *,
    data: str = "tinyshakespeare",
    split_ratio: str = "90/10",
    tokenizer: str = "word",
    min_count: int = 2,
    cells=LM_MODELS,
    nplm_context: int = 4,
    nplm_orders=(),
    minutes: float = 60.0,
    budget: int | None = None,
    embed_dim: int = 256,
    num_layers: int = 2,
    dropout: float = 0.5,
    bptt: int = 35,
    batch_size: int = 20,
    lr: float = 2e-3,
    tie_weights: bool = False,
    kn_order: int = 5,
    suggestions: int | None = 3,
    max_steps_per_epoch=None,
    seed: int = 1234,
    verbose: int = 2,
    printer=print,
    backend: str | None = None,
    device: str | None = None,
    mixed_precision: str = "off",
    jit_compile: bool = False,
    **lm_options,
) -> dict:
    """Train each cell for ``minutes`` at an equal parameter ``budget``; compare with KN.

    ``min_count=2`` (the default) maps words seen once in training to ``<unk>``, so the
    neural models learn its probability; with ``min_count=1`` the training stream has no
    ``<unk>`` and the neural models pay ~16 nats for every unknown validation word.

    ``budget`` defaults to the parameters of the LSTM with ``units = embed_dim``; the
    ``nplm`` row reads ``nplm_context`` tokens and gets as many hidden units as the budget
    allows (no direct connections, no weight tying). ``nplm_orders`` (e.g. ``range(2, 9)``)
    also trains one NPLM per order n (window n − 1) for ``minutes`` each and scores KN of
    the same orders: ``out["by_order"]``. ``suggestions`` (word tokens; None: off) is the
    keyboard strip's size for each row's ``keyboard`` metrics and ``vs_kn`` intervals.
    ``lm_options`` are further :class:`LMConfig` fields shared by every run (e.g.
    ``weight_dropout=0.3``, ``lr_decay=0.85``).

    ``backend``, ``device``, ``mixed_precision`` and ``jit_compile`` say how every model
    trains (module docstring); by default, this process's backend, wherever it puts the
    model, float32, no XLA (JAX always compiles).
    """
    arguments = {k: v for k, v in locals().items() if k not in ("printer", "lm_options")}
    backends.check_settings("bench lm", backend, device, mixed_precision, jit_compile)
    if backends.worker_reason(backend, device):
        arguments = {**arguments, **lm_options, "out_dir": str(out_dir)}
        return backends.run_worker("keras_seq.benchmarks.lm", {"mode": "bench", **arguments},
                                   backend, device)
    if device is not None:
        backends.resolve_device("bench lm", device)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # How the models compute: only what differs from LMConfig's defaults is passed.
    computing = {k: v for k, v in (("mixed_precision", mixed_precision),
                                   ("jit_compile", jit_compile)) if v not in ("off", False)}
    base = LMConfig(
        data=data,
        split_ratio=split_ratio,
        tokenizer=tokenizer,
        min_count=None if tokenizer == "subword" else min_count,
        embed_dim=embed_dim,
        num_layers=num_layers,
        dropout=dropout,
        bptt=bptt,
        batch_size=batch_size,
        optimizer="adam",
        lr=lr,
        epochs=1000,
        max_minutes=minutes,
        tie_weights=tie_weights,
        max_steps_per_epoch=max_steps_per_epoch,
        seed=seed,
        histogram_freq=0,
        **computing,
        **lm_options,
    )

    # The vocabulary every run will build (same options), to size the models.
    corpus = load_corpus(data, split=split_ratio)
    vocab_options = {} if tokenizer == "subword" else {"min_count": min_count}
    vocab = make_tokenizer(tokenizer, **vocab_options).fit(corpus.text("train")).vocab_size
    if budget is None:
        budget = model_params("lstm", vocab, embed_dim, embed_dim, num_layers, tie_weights)
    rows = []
    results = []
    def train(name, config, described):
        run_dir = out_dir / name
        printer(f"\n== {name}: {described}, {minutes:g} min budget → {run_dir}")
        if (run_dir / "metrics.json").is_file():
            printer("   (already trained: reusing its metrics.json)")
            summary = json.loads((run_dir / "metrics.json").read_text())
        else:
            summary = train_lm(config, run_dir, verbose=verbose, printer=printer)
        return summary, perplexity_of_run(run_dir, "val")

    for cell in cells:
        units = units_for_budget(cell, vocab, embed_dim, num_layers, budget, tie_weights,
                                 nplm_context)
        params = model_params(cell, vocab, embed_dim, units, num_layers, tie_weights,
                              nplm_context)
        if cell == "nplm":
            config = LMConfig.from_dict({**base.to_dict(), "model": "nplm", "units": units,
                                         "context": nplm_context, "tie_weights": False,
                                         "batch_size": 128})
            described = f"window {nplm_context}, {units} hidden units, {params:,} params"
        else:
            config = LMConfig.from_dict({**base.to_dict(), "cell": cell, "units": units})
            described = f"{units} units × {num_layers} layers, {params:,} params"
        summary, result = train(cell, config, described)
        results.append(result)
        rows.append(
            {
                "model": cell,
                "worst_epoch_val_ppl": _worst_epoch_val_ppl(out_dir / cell),
                "units": units,
                "params": summary["params"],
                "minutes": round(summary["train_minutes"], 1),
                "epochs": summary["epochs_done"],
                "tokens_per_s": round(summary["tokens_per_sec"]),
                "val_ppl": result.ppl,
                "val_nats": result.nats,
            }
        )
    baseline = kn_baseline(base, kn_order)
    kn, kn_seconds = baseline.result, baseline.seconds
    results.append(kn)
    check_comparable(*results)  # identical tokens, split and corpus, or an error
    rows.append(
        {
            "model": f"KN{kn_order}",
            "units": None,
            "params": None,
            "minutes": round(kn_seconds / 60, 2),
            "epochs": None,
            "tokens_per_s": None,
            "val_ppl": kn.ppl,
            "val_nats": kn.nats,
        }
    )
    for row in rows:
        row["ppl_vs_kn"] = row["val_ppl"] / kn.ppl
    if suggestions and tokenizer == "word":
        printer(f"\n== keyboard metrics ({suggestions} suggestions) on the val split")
        _add_keyboard(rows, out_dir, baseline, suggestions)
    by_order = []
    for order in nplm_orders:
        units = units_for_budget("nplm", vocab, embed_dim, 1, budget, False, order - 1)
        config = LMConfig.from_dict({**base.to_dict(), "model": "nplm", "units": units,
                                     "context": order - 1, "tie_weights": False,
                                     "batch_size": 128})
        _, nplm = train(f"nplm-n{order}", config, f"NPLM n={order}, {units} hidden units")
        kn_n = kn_baseline(base, order).result
        check_comparable(nplm, kn_n)
        by_order.append({"order": order, "nplm_units": units, "nplm_val_ppl": nplm.ppl,
                         "kn_val_ppl": kn_n.ppl})
    out = {
        "data": data,
        "vocab_size": vocab,
        "split_ratio": split_ratio,
        "tokenizer": tokenizer,
        "fingerprint": kn.fingerprint,
        "budget_params": budget,
        "minutes_per_model": minutes,
        "rows": rows,
        "by_order": by_order,
    }
    (out_dir / "bench_lm.json").write_text(json.dumps(out, indent=2, default=str))
    return out


def _add_keyboard(rows: list[dict], out_dir: Path, baseline: KNBaseline, k: int) -> None:
    """Each row's ``keyboard`` metrics (KN's last) and each neural row's ``vs_kn``: its
    difference from KN on the same positions, with the paired 95% interval."""
    kn = ngram_keyboard_outcomes(baseline.model, baseline.raw_lines, k)
    rows[-1]["keyboard"] = kn.metrics()
    for row in rows[:-1]:
        outcomes = keyboard_outcomes(out_dir / row["model"], "val", k)
        row["keyboard"] = outcomes.metrics()
        row["vs_kn"] = paired_bootstrap(outcomes, kn, names=VERSUS_KN)


def format_keyboard(out: dict) -> list[str]:
    """The keyboard table of :func:`run_bench`'s rows (empty when they have none)."""
    rows = [r for r in out["rows"] if "keyboard" in r]
    if not rows:
        return []
    first = rows[0]["keyboard"]
    lines = [f"\nkeyboard, % ({first['k']} suggestions; {first['positions']:,} val positions,"
             f" {first['in_vocab_words']:,} in-vocab words); − KN: points, paired 95% "
             "interval",
             f"{'model':<6} " + " ".join(f"{LABELS[m]:>16}" for m in METRICS) + "  "
             + "  ".join(f"{LABELS[m] + ' − KN':>28}" for m in VERSUS_KN)]
    for r in rows:
        versus = [r["vs_kn"][m] for m in VERSUS_KN] if "vs_kn" in r else []
        lines.append(f"{r['model']:<6} "
                     + " ".join(f"{100 * r['keyboard'][m]:>16.2f}" for m in METRICS) + "  "
                     + "  ".join(format_difference(d).rjust(28) for d in versus))
    return lines


def _worst_epoch_val_ppl(run_dir: Path) -> float | None:
    """The highest validation perplexity any epoch of a run logged (``metrics.csv``)."""
    path = Path(run_dir) / "metrics.csv"
    if not path.is_file():
        return None
    header, *rows = (line.split(",") for line in path.read_text().strip().splitlines())
    if "val_loss" not in header or not rows:
        return None
    col = header.index("val_loss")
    return max(math.exp(float(r[col])) for r in rows if r[col])


def format_bench(out: dict) -> str:
    lines = [
        f"{out['data']} ({out['split_ratio']}, {out['tokenizer']}), tokenizer "
        f"{out['fingerprint']['tokenizer']}; budget {out['budget_params']:,} params, "
        f"{out['minutes_per_model']:g} min per model; val split"
    ]
    lines.append(
        f"{'model':<6} {'units':>6} {'params':>11} {'min':>6} {'epochs':>6} "
        f"{'tokens/s':>9} {'val PPL':>9} {'nats':>7} {'× KN':>6}"
    )
    for r in out["rows"]:

        def f(v, spec):
            return format(v, spec) if v is not None else format("-", spec.rstrip(","))

        lines.append(
            f"{r['model']:<6} {f(r['units'], '>6')} {f(r['params'], '>11,')} "
            f"{f(r['minutes'], '>6')} {f(r['epochs'], '>6')} "
            f"{f(r['tokens_per_s'], '>9,')} {r['val_ppl']:>9.2f} "
            f"{r['val_nats']:>7.4f} {r['ppl_vs_kn']:>6.3f}"
        )
    worst = [(r["model"], r["worst_epoch_val_ppl"]) for r in out["rows"]
             if r.get("worst_epoch_val_ppl") is not None]
    if worst and out.get("vocab_size"):
        above = [f"{m} ({w:,.0f})" for m, w in worst if w > out["vocab_size"]]
        lines.append(f"every epoch's val PPL below the uniform baseline |V| = "
                     f"{out['vocab_size']:,}: " + ("yes" if not above else
                                                   "NO: " + ", ".join(above)) +
                     f" (worst epochs: {', '.join(f'{m} {w:,.1f}' for m, w in worst)})")
    lines += format_keyboard(out)
    if out.get("by_order"):
        lines.append("\nPPL vs context: NPLM window n−1 vs KN order n (val)")
        lines.append(f"{'n':>3} {'NPLM units':>10} {'NPLM PPL':>9} {'KN PPL':>9}")
        lines += [f"{r['order']:>3} {r['nplm_units']:>10} {r['nplm_val_ppl']:>9.2f} "
                  f"{r['kn_val_ppl']:>9.2f}" for r in out["by_order"]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# keras-seq vs Keras's built-in layers on this workload (``bench lm --speed``)

SPEED_CELLS = mirrored_cells()  # the cells Keras has built-ins for
#: The RecurrentLM cell of Keras's built-in layer for each keras-seq cell.
BUILTIN_CELL = keras_twins()


def run_speed(
    *,
    data: str = "tinyshakespeare",
    split_ratio: str = "90/10",
    tokenizer: str = "word",
    min_count: int = 2,
    cells=SPEED_CELLS,
    budget: int | None = None,
    embed_dim: int = 256,
    num_layers: int = 2,
    dropout: float = 0.5,
    bptt: int = 35,
    batch_size: int = 20,
    lr: float = 2e-3,
    tie_weights: bool = False,
    seed: int = 1234,
    steps: int = 20,
    repeats: int = 5,
    warmup: int = 2,
    chunk: int = 5,
    backend: str | None = None,
    device: str | None = None,
    mixed_precision: str = "off",
    jit_compile: bool = False,
    progress: bool = True,
    timeout: float | None = None,
    **lm_options,
) -> dict:
    """Training tokens/s of each cell's LM, keras-seq's layers vs Keras's built-ins.

    The models are ``bench lm``'s (same corpus, vocabulary, sizes, parameter budget,
    dropout, optimizer, clipping; ``lm_options`` are further :class:`LMConfig` fields), built
    and compiled by ``train lm``'s ``build_model`` with ``cell`` and with
    ``cell="keras-<cell>"``. Each takes ``warmup`` untimed steps, then per run the two take
    turns of ``chunk`` train steps (who goes first alternates) until each did ``steps``, on
    consecutive stream batches of the training split (stateful, as in training).
    ``backend``/``device``/``mixed_precision``/``jit_compile``: as in :func:`run_bench`.

    Returns ``{"config", "results", "environment"}``; each result row has the cell, units,
    parameters, each implementation's tokens/s (best and median run), path and XLA
    setting, ``ratio`` (median per-run keras-seq/built-in speed) and its spread
    (``ratio_min``, ``ratio_max``).
    """
    arguments = {k: v for k, v in locals().items() if k not in ("lm_options", "timeout")}

    check_counts("bench lm --speed", steps=steps, repeats=repeats, warmup=warmup, chunk=chunk)
    unknown = [c for c in cells if c not in SPEED_CELLS]
    if unknown:
        raise ValueError(f"bench lm --speed: received cells {unknown}; expected some of "
                         f"{', '.join(SPEED_CELLS)} (the ones Keras has built-ins for).")
    if lm_options.get("weight_dropout"):
        raise ValueError(f"bench lm --speed: received weight_dropout="
                         f"{lm_options['weight_dropout']}, but Keras's built-in layers have no "
                         "weight drop, so the two would not train the same model; drop "
                         "--weight-dropout (or compare keras-seq with itself via train lm).")
    backends.check_settings("bench lm", backend, device, mixed_precision, jit_compile)
    arguments = {**arguments, **lm_options, "cells": list(cells)}
    if backends.worker_reason(backend, device):
        return backends.run_worker("keras_seq.benchmarks.lm", {"mode": "speed", **arguments},
                                   backend, device, timeout=timeout)
    device_used = backends.resolve_device("bench lm", device)
    with backends.precision_policy(mixed_precision):
        return _speed_here(device_used, **arguments)


def _speed_here(device_used, *, data, split_ratio, tokenizer, min_count, cells, budget,
                embed_dim, num_layers, dropout, bptt, batch_size, lr, tie_weights, seed,
                steps, repeats, warmup, chunk, backend, device, mixed_precision, jit_compile,
                progress, **lm_options):
    # lazy: Keras is imported once the backend is chosen
    import keras

    corpus = load_corpus(data, split=split_ratio)
    vocab_options = {} if tokenizer == "subword" else {"min_count": min_count}
    tok = make_tokenizer(tokenizer, **vocab_options).fit(corpus.text("train"))
    vocab = tok.vocab_size
    x, y = stream_arrays(tok.encode(corpus.text("train")), batch_size, bptt)
    n_batches = min(len(x) // batch_size, 64)
    if n_batches < 1:
        raise ValueError(f"bench lm --speed: the training split of {data!r} is too short for "
                         f"one batch of {batch_size} x bptt {bptt}; pass a smaller "
                         "--batch-size or --bptt.")
    batches = [(keras.ops.convert_to_tensor(x[k * batch_size:(k + 1) * batch_size]),
                keras.ops.convert_to_tensor(y[k * batch_size:(k + 1) * batch_size]))
               for k in range(n_batches)]
    if budget is None:
        budget = model_params("lstm", vocab, embed_dim, embed_dim, num_layers, tie_weights)
    base = LMConfig(data=data, split_ratio=split_ratio, tokenizer=tokenizer,
                    min_count=None if tokenizer == "subword" else min_count,
                    embed_dim=embed_dim, num_layers=num_layers, dropout=dropout, bptt=bptt,
                    batch_size=batch_size, optimizer="adam", lr=lr, tie_weights=tie_weights,
                    seed=seed, histogram_freq=0, **lm_options).to_dict()
    jit = backends.jit_setting(jit_compile)
    if jit:
        base["jit_compile"] = True
    impls = ("keras_seq", "builtin")
    models, units, builtin_paths = {}, {}, {}
    for cell in cells:
        units[cell] = units_for_budget(cell, vocab, embed_dim, num_layers, budget, tie_weights)
        for impl in impls:
            name = cell if impl == "keras_seq" else BUILTIN_CELL[cell]
            keras.utils.set_random_seed(seed)
            model = build_model(LMConfig.from_dict({**base, "cell": name,
                                                    "units": units[cell]}), vocab)
            if impl == "builtin":
                record = []
                with backends.probe_builtin_path(record):
                    model.train_on_batch(*batches[0])  # traces the train step
                builtin_paths[cell] = backends.builtin_path(
                    record, "simple_rnn" if cell == "rnn" else cell)
            else:
                model.train_on_batch(*batches[0])
            models[cell, impl] = model
    position = dict.fromkeys(models, 1)
    for key, model in models.items():  # warm-up after every model is built (bench cells)
        for _ in range(max(warmup, 1)):
            model.train_on_batch(*batches[position[key] % n_batches])
            position[key] += 1

    def stepper(key):
        model = models[key]

        def run(n):
            for _ in range(n):
                logs = model.train_on_batch(*batches[position[key] % n_batches])
                position[key] += 1
            float(np.asarray(logs).ravel()[0])  # make sure the work is done
        return run

    bar = keras.utils.Progbar(len(models) * repeats, unit_name="run") if progress else None
    times = alternate({key: stepper(key) for key in models}, cells, impls, steps, repeats,
                      chunk, bar)
    precision = "fp32" if mixed_precision == "off" else mixed_precision
    results = []
    for cell in cells:
        ours = models[cell, "keras_seq"]
        layer = (getattr(ours, "rnns", None) or [None])[0]
        row = {"cell": cell, "units": units[cell], "params": ours.count_params(),
               "backend": keras.backend.backend(), "device": device_used,
               "precision": precision,
               "keras_seq_path": backends.keras_seq_path(layer),
               "builtin_path": builtin_paths[cell],
               "keras_seq_jit": backends.jit_label(ours),
               "builtin_jit": backends.jit_label(models[cell, "builtin"]),
               "keras_seq_blockers": backends.keras_seq_blockers(layer) if layer else []}
        row.update(speed_row(times[cell, "keras_seq"], times[cell, "builtin"],
                             steps * batch_size * bptt))
        results.append(row)
    config = {"data": data, "split_ratio": split_ratio, "tokenizer": tokenizer,
              "vocab_size": vocab, "budget_params": budget, "embed_dim": embed_dim,
              "num_layers": num_layers, "dropout": dropout, "bptt": bptt,
              "batch_size": batch_size, "steps": steps, "repeats": repeats, "warmup": warmup,
              "chunk": chunk, "backend": keras.backend.backend(), "device": device_used,
              "mixed_precision": mixed_precision, "jit_compile": jit_compile,
              "lm_options": lm_options}
    return {"config": config, "results": results, "environment": backends.environment()}


def format_speed(out: dict) -> str:
    """``run_speed``'s report as plain text, one row per cell."""
    cfg = out["config"]
    lines = [
        f"bench lm --speed: {cfg['data']} ({cfg['split_ratio']}, {cfg['tokenizer']}, vocab "
        f"{cfg['vocab_size']:,}), {cfg['num_layers']} layers, embed {cfg['embed_dim']}, bptt "
        f"{cfg['bptt']}, batch {cfg['batch_size']}, budget {cfg['budget_params']:,} params; "
        f"{cfg['steps']} train steps x {cfg['repeats']} runs per model (turns of "
        f"{cfg['chunk']}); tok/s of the best run; ours/built-in = median of per-run ratios",
        f"{'cell':<5} {'units':>5} {'keras-seq tok/s':>16} {'built-in tok/s':>15} "
        f"{'ours/built-in':>14}  {'spread':<11}  {'settings':<38} path ours / built-in",
    ]
    for row in out["results"]:
        spread = f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}"
        lines.append(
            f"{row['cell']:<5} {row['units']:>5} {row['keras_seq_tokens_per_s']:>16,.0f} "
            f"{row['builtin_tokens_per_s']:>15,.0f} {row['ratio']:>13.2f}x  {spread:<11}  "
            f"{settings_text(row):<38} {row['keras_seq_path']} / {row['builtin_path']}"
        )
    for row in out["results"]:
        if row.get("keras_seq_blockers") and row["cell"] != "rnn":
            lines.append(f"{row['cell']}: no cuDNN kernel for keras-seq: "
                         f"{'; '.join(row['keras_seq_blockers'])}")
    return "\n".join(lines)


def _worker(mode, **kwargs):
    # (worker_main sends what run_bench prints to stderr: stdout carries the JSON report)
    return run_speed(**kwargs) if mode == "speed" else run_bench(**kwargs)


if __name__ == "__main__":
    import sys

    sys.exit(backends.worker_main(_worker))
