"""The pipeline's keyboard stages after export: the neural model mixed with a small n-gram
and a cache of typed words (:mod:`keras_seq.runtime.mixture`), chosen on validation, and
every keyboard model rated on the **test** split, which nothing was chosen on.

1. :func:`mixing_ngram`: the n-gram that rides along — the order with the lowest
   validation PPL whose compact 8-bit file fits beside the shipped model in
   :data:`DEVICE_BYTES`;
2. :func:`mixture_stage`: the mixture's weights and cache half-life fitted on validation,
   its keyboard metrics there; it ships (``demo/mix.json``) when it beats the neural model
   alone on validation perplexity without losing keystroke savings there;
3. :func:`test_stage`: the best n-gram (both files), the shipped neural model and the
   mixture typing the test split in order, from a fresh state and an empty cache: PPL,
   the keyboard metrics and paired 95% intervals of each against the compact n-gram; and
   the mixture without its cache (weights fitted without it), so the gain of adapting to
   what the user typed is measured on its own.
"""

from __future__ import annotations

import time
from pathlib import Path

from keras_seq.keyboard import format_difference, format_metrics, paired_bootstrap
from keras_seq.ngram.compact import read_compact, write_compact
from keras_seq.ngram.scorer import evaluate
from keras_seq.ngram.scorer import keyboard_outcomes as ngram_keyboard
from keras_seq.runtime.mixture import MixedLM, MixSpec, fit_mixture, mixture_outcomes

#: (b) the shipped neural model and the n-gram it mixes, together on the device
DEVICE_BYTES = 3_000_000
MIX_NAME = "mix"
NO_CACHE_NAME = "mix without cache"


def mixing_ngram(ngram: dict, out: Path, budget: int, printer) -> dict | None:
    """``{"order", "path", "model", "bytes"}`` of the n-gram to mix: of the orders the
    n-gram stage trained, the one with the lowest validation PPL whose compact 8-bit file
    fits in ``budget`` bytes (written as ``out/kn<N>.mix.q8.bin`` unless it is the best
    order's file); None (said) when none fits."""
    by_ppl = sorted(ngram["models"], key=lambda n: ngram["by_order"][n].ppl)
    for order in by_ppl:
        path = (ngram["compact_path"] if order == ngram["best_order"]
                else out / f"kn{order}.mix.q8.bin")
        if path != ngram["compact_path"]:
            write_compact(ngram["models"][order], path, quantize_bits=8)
        size = path.stat().st_size
        if size <= budget:
            printer(f"  n-gram to mix: KN{order} compact 8-bit, {size:,} bytes (the lowest "
                    f"validation PPL, {ngram['by_order'][order].ppl:.2f}, within the "
                    f"{budget:,} bytes left of {DEVICE_BYTES:,})")
            return {"order": order, "path": path, "model": read_compact(path), "bytes": size}
        if path != ngram["compact_path"]:
            path.unlink()
    printer(f"  no compact n-gram fits in the {budget:,} bytes left beside the model: the "
            "mixture uses the cache only")
    return None


def mixture_stage(out: Path, ngram: dict, shipped: dict, k: int, printer) -> dict:
    """Fit the mixture for the shipped step model on validation (:func:`fit_mixture`) and
    rate it there; returns ``{"spec", "ngram", "val", "outcomes", "ships", "why",
    "seconds"}`` (``val``: the mixture's and the neural model's PPL and keyboard metrics)."""
    t0 = time.perf_counter()
    model = out / "tflite" / shipped["file"]
    mix_ngram = mixing_ngram(ngram, out, DEVICE_BYTES - shipped["size_bytes"], printer)
    sources = ("neural", "ngram", "cache") if mix_ngram else ("neural", "cache")
    spec = fit_mixture(model, mix_ngram["model"] if mix_ngram else None, ngram["val_text"],
                       mix_ngram["path"].name if mix_ngram else None, sources, printer)
    rated = {}
    for name, use in ((MIX_NAME, spec), ("neural", MixSpec({"neural": 1.0}))):
        lm = MixedLM(model, use, ngram=mix_ngram["model"] if mix_ngram and use.ngram else None)
        rated[name] = mixture_outcomes(lm, ngram["val_text"], k)
    (mix_kb, mix_ppl), (nn_kb, nn_ppl) = rated[MIX_NAME], rated["neural"]
    mix_m, nn_m = mix_kb.metrics(), nn_kb.metrics()
    ships = mix_ppl < nn_ppl and mix_m["ksr"] >= nn_m["ksr"]  # wins on validation
    why = (f"validation PPL {mix_ppl:.2f} vs {nn_ppl:.2f} alone, keystroke savings "
           f"{100 * mix_m['ksr']:.2f}% vs {100 * nn_m['ksr']:.2f}%: "
           + ("the mixture ships" if ships else "the neural model ships alone"))
    printer(f"  {MIX_NAME}: {format_metrics(mix_m)}")
    printer(f"  {why}")
    used_bytes = mix_ngram["bytes"] if mix_ngram and spec.ngram else 0
    return {"spec": spec, "ngram": mix_ngram if spec.ngram else None, "ngram_bytes": used_bytes,
            "device_bytes": shipped["size_bytes"] + used_bytes,
            "val": {"mix": {"ppl": mix_ppl, **mix_m}, "neural": {"ppl": nn_ppl, **nn_m}},
            "outcomes": mix_kb, "ships": ships, "why": why,
            "seconds": time.perf_counter() - t0}


def test_stage(out: Path, ngram: dict, shipped: dict, mix: dict, k: int, printer) -> dict:
    """Every keyboard model on the test split (each from a fresh state, the mixture's cache
    empty, typing the split in order): ``{"models": {name: metrics + ppl}, "versus":
    {name: paired_bootstrap vs the compact n-gram}, "mix_vs_neural", "positions",
    "seconds"}``; None (said) when the split has no test text."""
    t0 = time.perf_counter()
    if not ngram["test_text"].strip():
        printer("  the split has no test text (its third share is 0): the targets are "
                "judged on validation")
        return None
    order, lines = ngram["best_order"], ngram["test_lines"]
    compact_name, arpa_name = ngram_runtime(order, "compact"), ngram_runtime(order, "arpa")
    outcomes, ppl = {}, {}
    for name, model in ((arpa_name, ngram["model"]), (compact_name, ngram["compact"])):
        ppl[name] = evaluate(model, lines, name=name).ppl
        outcomes[name] = ngram_keyboard(model, ngram["raw_test_lines"], k)
    model = out / "tflite" / shipped["file"]
    runs = [(f"tflite {shipped['name']}", MixSpec({"neural": 1.0}), None)]
    if mix is not None:
        spec, mixed_ngram = mix["spec"], mix["ngram"]["model"] if mix["ngram"] else None
        runs.append((MIX_NAME, spec, mixed_ngram))
        if spec.weights["cache"] > 0:  # the same without the cache: what adapting adds
            without = spec.fitted["weights_without_cache"]
            runs.append((NO_CACHE_NAME, MixSpec(without, ngram=spec.ngram), mixed_ngram))
    for name, spec, mixed_ngram in runs:
        outcomes[name], ppl[name] = mixture_outcomes(MixedLM(model, spec, ngram=mixed_ngram),
                                                     ngram["test_text"], k)
    models = {name: {"ppl": ppl[name], **outcomes[name].metrics()} for name in outcomes}
    for name, m in models.items():
        printer(f"  {name}: test PPL {m['ppl']:.2f}; {format_metrics(m)}")
    versus = {name: paired_bootstrap(outcomes[name], outcomes[compact_name])
              for name in outcomes if not name.startswith("ngram")}
    result = {"models": models, "versus": versus, "positions": models[compact_name]["positions"],
              "seconds": time.perf_counter() - t0}
    if mix is not None:
        result["mix_vs_neural"] = paired_bootstrap(outcomes[MIX_NAME], outcomes[runs[0][0]])
    if NO_CACHE_NAME in outcomes:
        gain = paired_bootstrap(outcomes[MIX_NAME], outcomes[NO_CACHE_NAME])
        result["cache_gain"] = {"ppl": (models[NO_CACHE_NAME]["ppl"], models[MIX_NAME]["ppl"]),
                                **gain}
        printer("  adapting to the user (the cache, growing as the test split is typed): "
                f"PPL {models[NO_CACHE_NAME]['ppl']:.2f} → {models[MIX_NAME]['ppl']:.2f}; "
                f"top-1 in-vocab {format_difference(gain['top1_iv'], ' points')}, keystrokes "
                f"saved {format_difference(gain['ksr'], ' points')}")
    return result


def ngram_runtime(order: int, form: str) -> str:
    """The benchmark row name of the order-``order`` n-gram in ``form`` (``arpa``/``compact``)."""
    return (f"ngram KN{order} arpa [hash]" if form == "arpa"
            else f"ngram KN{order} compact-q8 [trie]")
