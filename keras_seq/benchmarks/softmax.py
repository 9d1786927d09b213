"""``keras-seq bench softmax``: training tokens/s and perplexity, full vs adaptive softmax.

Every variant is the same :class:`~keras_seq.models.rnn_lm.RecurrentLM` (same seed, data,
batches and steps) with another output layer: ``full`` (a dense softmax over ``V``),
``adaptive`` (:class:`~keras_seq.layers.adaptive_softmax.AdaptiveSoftmax`, the static-
shape ``dense`` loss path that XLA and JAX need) and ``adaptive-gather`` (the dynamic-shape
path: each tail only for the rows whose target is in it; not on JAX). The variants train
in turns of ``chunk`` steps, the order reversed every round, so a busy machine slows each
of them alike; each turn's tokens/s is one sample (the table gives the median and the
range). After the last turn each model is scored exactly (full log-probabilities, state
carried) on the first ``eval_tokens`` tokens of the validation split.

Example::

    result = run_softmax_bench("tinyshakespeare", max_vocab=10_000, cutoffs=(2000, 6000))
    print(format_table(result))
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import keras
import numpy as np

from keras_seq.data.batching import stream_arrays
from keras_seq.data.tokenizers import WordTokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.extras import pyplot
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.data import corpus_for
from keras_seq.tasks.lm.evaluation import evaluate_stream
from keras_seq.tasks.lm.task import build_model

VARIANTS = ("full", "adaptive", "adaptive-gather")


def _model(variant: str, vocab_size: int, cutoffs, div_value: float, sizes: dict, seed: int):
    config = LMConfig(seed=seed, **sizes, **({} if variant == "full" else {
        "softmax": "adaptive", "cutoffs": ",".join(map(str, cutoffs)),
        "div_value": div_value}))
    keras.utils.set_random_seed(seed)
    model = build_model(config, vocab_size)
    if variant == "adaptive-gather":
        model.head.loss_path = "gather"
    return model


def run_softmax_bench(data: str, max_vocab: int, cutoffs, div_value: float = 4.0,
                      variants=VARIANTS, steps: int = 100, chunk: int = 10, warmup: int = 2,
                      units: int = 256, embed_dim: int = 256, batch_size: int = 20,
                      bptt: int = 35, lr: float = 2e-3, eval_tokens: int = 20_000,
                      min_count: int = 1, seed: int = 1234, printer=print) -> dict:
    """Train every variant for ``steps`` steps on the same batches (turns of ``chunk``
    steps, alternated) and score it; returns the measurements (see :func:`format_table`)."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    if steps < chunk or chunk < 1:
        raise KerasSeqError(f"need steps ≥ chunk ≥ 1, got steps={steps}, chunk={chunk}")
    bad = set(variants) - set(VARIANTS)
    if bad:
        raise KerasSeqError(f"unknown variant(s) {', '.join(sorted(bad))}; expected some of "
                            f"{', '.join(VARIANTS)}")
    if "adaptive-gather" in variants and keras.backend.backend() == "jax":
        raise KerasSeqError("adaptive-gather needs dynamic shapes, which JAX's jit does not "
                            "allow; leave it out of --variants on JAX")
    corpus = corpus_for(LMConfig(data=data))
    started = time.perf_counter()
    tokenizer = WordTokenizer(max_vocab=max_vocab, min_count=min_count).fit(corpus.text("train"))
    train_ids = tokenizer.encode(corpus.text("train"))
    val_ids = tokenizer.encode(corpus.text("val"))[: eval_tokens + 1]
    V = tokenizer.vocab_size
    printer(f"{corpus.name}: V = {V:,} word types (max {max_vocab:,}, min count {min_count}), "
            f"{len(train_ids):,} train tokens, {len(val_ids) - 1:,} val tokens scored; "
            f"tokenized in {time.perf_counter() - started:.1f} s")
    x, y = stream_arrays(train_ids, batch_size, bptt)
    n_batches = len(x) // batch_size
    if n_batches < warmup + steps:
        raise KerasSeqError(f"{corpus.name} gives {n_batches} batches of {batch_size} × "
                            f"{bptt}; need warmup + steps = {warmup + steps}: lower --steps")
    sizes = {"units": units, "embed_dim": embed_dim, "batch_size": batch_size, "bptt": bptt,
             "lr": lr}
    models = {v: _model(v, V, cutoffs, div_value, sizes, seed) for v in variants}
    position = dict.fromkeys(variants, 0)
    samples = {v: [] for v in variants}
    losses = {v: [] for v in variants}

    def train(variant, n):
        model, out = models[variant], []
        for _ in range(n):
            k = position[variant]
            logs = model.train_on_batch(x[k * batch_size:(k + 1) * batch_size],
                                        y[k * batch_size:(k + 1) * batch_size],
                                        return_dict=True)
            position[variant] += 1
            out.append(float(logs["loss"]))
        return out

    for v in variants:  # compile and first steps, untimed
        t0 = time.perf_counter()
        train(v, warmup)
        printer(f"  {v:<16} warm-up ({warmup} steps, incl. compiling): "
                f"{time.perf_counter() - t0:.1f} s")
    rounds = steps // chunk
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for v in order:
            t0 = time.perf_counter()
            losses[v] += train(v, chunk)
            samples[v].append(chunk * batch_size * bptt / (time.perf_counter() - t0))
        printer(f"  round {r + 1}/{rounds}: " + ", ".join(
            f"{v} {samples[v][-1]:,.0f} tok/s" for v in variants))
    rows = []
    for v in variants:
        t0 = time.perf_counter()
        log_probs, n = evaluate_stream(models[v], val_ids)
        rate = np.array(samples[v])
        rows.append({"variant": v, "params": int(models[v].count_params()),
                     "tokens_per_s": float(np.median(rate)), "tokens_per_s_min": float(rate.min()),
                     "tokens_per_s_max": float(rate.max()), "turns": len(rate),
                     "train_loss_last_chunk": float(np.mean(losses[v][-chunk:])),
                     "val_ppl": float(np.exp(-log_probs.mean())), "val_tokens": int(n),
                     "eval_seconds": time.perf_counter() - t0})
    base = rows[0]["tokens_per_s"]
    for row in rows:
        row["speedup"] = row["tokens_per_s"] / base
    return {"corpus": corpus.name, "vocab_size": V, "cutoffs": list(cutoffs),
            "div_value": div_value, "steps": warmup + rounds * chunk, "timed_steps": rounds * chunk,
            "chunk": chunk, **sizes, "cell": "lstm", "backend": keras.backend.backend(),
            "tokenizer": tokenizer.fingerprint, "corpus_sha256": corpus.sha256,
            "load_average_end": os.getloadavg()[0], "chance_ppl": float(V),
            "chance_nats": math.log(V), "rows": rows}


def format_table(result: dict) -> str:
    """The measurements as a markdown table with a line saying what was measured."""
    head = (f"{result['corpus']}, V = {result['vocab_size']:,}, cutoffs "
            f"{','.join(map(str, result['cutoffs']))}, div_value {result['div_value']:g}; "
            f"{result['cell']} {result['units']} units, embed {result['embed_dim']}, batch "
            f"{result['batch_size']} × bptt {result['bptt']}, {result['steps']} steps each "
            f"({result['timed_steps']} timed in turns of {result['chunk']}); "
            f"{result['backend']}; load average at the end {result['load_average_end']:.1f}")
    lines = [head, "",
             "| softmax | params | train tokens/s (median) | range over turns | speed-up | "
             f"val PPL ({result['rows'][0]['val_tokens']:,} tokens, exact) |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        lines.append(f"| {r['variant']} | {r['params']:,} | {r['tokens_per_s']:,.0f} | "
                     f"{r['tokens_per_s_min']:,.0f}–{r['tokens_per_s_max']:,.0f} | "
                     f"{r['speedup']:.2f}× | {r['val_ppl']:,.1f} |")
    return "\n".join(lines)


def plot(result: dict, path: str | Path) -> Path:
    """Bar charts of tokens/s (with the range over turns) and val PPL, one bar per variant."""
    plt = pyplot("the softmax benchmark plot")

    rows = result["rows"]
    names = [r["variant"] for r in rows]
    med = np.array([r["tokens_per_s"] for r in rows])
    err = np.array([[m - r["tokens_per_s_min"], r["tokens_per_s_max"] - m]
                    for m, r in zip(med, rows)]).T
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    a.bar(names, med, yerr=err, capsize=4, color="#4c72b0")
    a.set_ylabel("train tokens/s (median, range)")
    b.bar(names, [r["val_ppl"] for r in rows], color="#dd8452")
    b.set_ylabel(f"val PPL after {result['steps']} steps")
    fig.suptitle(f"{result['corpus']}: V = {result['vocab_size']:,}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
