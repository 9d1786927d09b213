"""``keras-seq bench web``: per-token latency of every step variant in a real browser.

Each variant of an export folder (``step_*.tflite``, the fused ones included) is opened in
headless Chromium on the page ``keras-seq export web`` writes, on LiteRT.js Wasm with one
thread and with several (the page is cross-origin isolated, so the threaded build loads) and
on WebGPU when the browser offers an adapter; beside it, the same file on native LiteRT
(``ai_edge_litert``, the same thread counts). Both sides feed the same kind of stream: greedy
tokens from the start token, one token per call, the state carried by the caller, the
logits read back each step. Rounds alternate the variants; each cell is the median over
rounds of the per-round median, with the spread (min-max of the round medians).

The **keystroke path** is measured the same way on both sides: a text is typed word by word
(the bundled tinyshakespeare's validation split by default); each keystroke that ends a word
runs the step that reads it, then the top-3 of the words that start with the next word's
first letter (``suggest(3, prefix)``: the strip the user sees on the next key). Its ratio,
browser over native with one thread, is computed per round and given with its spread.

A variant LiteRT.js cannot run is a row too, with the page's error.

Example::

    report = run_web_benchmark("runs/pipeline/tflite", steps=200, rounds=3)
    print(format_web_report(report))
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from keras_seq.benchmarks.browser import chromium_path, launch_chromium
from keras_seq.data.corpus import load_corpus
from keras_seq.errors import KerasSeqError
from keras_seq.export.web import export_web, step_models
from keras_seq.extras import pyplot
from keras_seq.machine import cpu_name
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.runtime.web_server import SiteServer
from keras_seq.sampling import special_ids


def native_step_micros(model: Path, steps: int, warmup: int, threads: int) -> np.ndarray:
    """Per-step µs of ``model`` on native LiteRT: greedy tokens, one call per token."""
    lm = LiteRTLM(model, num_threads=threads)
    banned = special_ids(lm.tokenizer)
    lm.reset()
    logits = lm.step(lm.start_id())
    out = []
    for i in range(warmup + steps):
        masked = logits.copy()
        masked[banned] = -np.inf
        token = int(np.argmax(masked))
        t0 = time.perf_counter_ns()
        logits = lm.step(token)
        if i >= warmup:
            out.append((time.perf_counter_ns() - t0) / 1e3)
    return np.asarray(out)


def typing_script(tokenizer, text: str, count: int) -> tuple[list[int], list[str]]:
    """The first ``count`` tokens of ``text`` as ids, and for each the prefix typed next: the
    first letter of the following word (lower-cased like the page), "" before a token that is
    not a word (punctuation, a line end) and for character models."""
    tokens = tokenizer.tokens(text)[:count + 1]
    if len(tokens) <= count:
        raise KerasSeqError(f"the typing text has {len(tokens)} tokens, the benchmark needs "
                            f"{count + 1}: give a longer text or fewer --steps/--warmup")
    ids = [int(i) for i in tokenizer.tokens_to_ids(tokens[:count])]
    if tokenizer.kind != "word":
        return ids, [""] * count
    prefixes = [t[0].lower() if (t[0].isalnum() or t[0] in "_'") else "" for t in tokens[1:]]
    return ids, prefixes


def native_keystroke_micros(model: Path, ids, prefixes, warmup: int, threads: int,
                            k: int = 3) -> np.ndarray:
    """Per-keystroke µs of ``model`` on native LiteRT: ``step(ids[i])`` then
    ``suggest(k, prefixes[i])``, the first ``warmup`` untimed."""
    lm = LiteRTLM(model, num_threads=threads)
    lm.reset()
    lm.step(lm.start_id())
    out = []
    for i, (token, prefix) in enumerate(zip(ids, prefixes)):
        t0 = time.perf_counter_ns()
        lm.step(token)
        lm.suggest(k, prefix)
        if i >= warmup:
            out.append((time.perf_counter_ns() - t0) / 1e3)
    return np.asarray(out)


def _browser_micros(browser, url: str, steps: int, warmup: int,
                    script) -> tuple[dict | None, str]:
    """Per-token and per-keystroke µs in one page (``None`` and the page's error if it fails)."""
    page = browser.new_page()
    try:
        page.goto(url)
        state = page.evaluate("window.kerasSeq.ready.then(() => 'ok', (e) => e.message)")
        if state != "ok":
            return None, state
        step = page.evaluate("(o) => window.kerasSeq.benchmark(o)",
                             {"steps": steps, "warmup": warmup})
        keys = page.evaluate("(o) => window.kerasSeq.benchmarkKeystrokes(o)",
                             {"ids": script[0], "prefixes": script[1], "warmup": warmup})
        return {"step": np.asarray(step), "keys": np.asarray(keys)}, ""
    finally:
        page.close()


def _webgpu_adapter(browser, url: str) -> str | None:
    page = browser.new_page()
    try:
        page.goto(url + "site.json")
        return page.evaluate(
            "navigator.gpu ? navigator.gpu.requestAdapter().then((a) => a ? [a.info.vendor, "
            "a.info.architecture, a.info.description].filter(Boolean).join(' ') || 'unnamed' "
            ": null) : null")
    finally:
        page.close()


def take_screenshot(browser, url: str, text: str, path) -> Path:
    """The page after typing ``text`` key by key (suggestions showing) and generating."""
    page = browser.new_page(viewport={"width": 900, "height": 760})
    try:
        page.goto(url)
        page.evaluate("window.kerasSeq.ready")
        page.type("#input", text)
        page.wait_for_selector(f"#suggestions[data-text={json.dumps(text)}]")
        page.click("#generate")
        page.wait_for_selector("#genstats:has-text('tokens')")
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.close()
    return Path(path)


def run_web_benchmark(tflite_dir, steps: int = 200, warmup: int = 30, rounds: int = 3,
                      threads=(1, 2), webgpu: bool = True, names=None, screenshot=None,
                      screenshot_text: str = "my lord, the king is ", browser=None,
                      text: str | None = None, printer=print) -> dict:
    """Measure every step model of ``tflite_dir`` in Chromium and on native LiteRT
    (``names``: only these file stems; ``screenshot``: also save a PNG of the page, default
    model, after typing; ``browser``: a Playwright browser to use instead of a new one;
    ``text``: what the keystroke path types, default tinyshakespeare's validation split)."""
    # lazy: Playwright loads only when a browser benchmark runs
    from playwright.sync_api import sync_playwright

    if steps < 10 or rounds < 1:
        raise KerasSeqError(f"need steps ≥ 10 and rounds ≥ 1, got steps={steps}, "
                            f"rounds={rounds}")
    models = step_models(tflite_dir, graphs=("step", "step_fused"))
    if names:
        missing = set(names) - {m.stem for m in models}
        if missing:
            raise KerasSeqError(f"{tflite_dir} has no step model {sorted(missing)}; it has "
                                f"{[m.stem for m in models]}")
        models = [m for m in models if m.stem in names]
    if text is None:
        text = load_corpus("tinyshakespeare").splits["val"]
    script = typing_script(LiteRTLM(models[0]).tokenizer, text, warmup + steps)
    args = (models, steps, warmup, rounds, threads, webgpu, screenshot, screenshot_text,
            script, printer)
    if browser is not None:
        return _measure(browser, *args)
    with sync_playwright() as p:
        browser = launch_chromium(p, gpu=webgpu)
        try:
            return _measure(browser, *args)
        finally:
            browser.close()


def _measure(browser, models, steps, warmup, rounds, threads, webgpu, screenshot,
             screenshot_text, script, printer) -> dict:
    settings = [("wasm", t) for t in threads]
    cells: dict[tuple, list] = {}   # (model, accelerator, threads) → round medians, per token
    keys: dict[tuple, list] = {}    # the same, per keystroke
    errors: dict[tuple, str] = {}
    with tempfile.TemporaryDirectory(prefix="keras-seq-bench-web-") as scratch:
        site = Path(scratch) / "web"
        default = "step_dynamic" if any(m.stem == "step_dynamic" for m in models) else None
        export_web(models, site, default=default)
        with SiteServer(site, port=0) as server:
            adapter = _webgpu_adapter(browser, server.url) if webgpu else None
            if screenshot:
                take_screenshot(browser, f"{server.url}index.html", screenshot_text, screenshot)
            if adapter:
                settings.append(("webgpu", 1))
            for r in range(rounds):
                for model in models:
                    for accelerator, n in settings:
                        key = (model.stem, accelerator, n)
                        if key in errors:
                            continue
                        url = (f"{server.url}index.html?model={model.stem}"
                               f"&accelerator={accelerator}&threads={n}")
                        micros, error = _browser_micros(browser, url, steps, warmup, script)
                        if micros is None:
                            errors[key] = error
                        else:
                            cells.setdefault(key, []).append(float(np.median(micros["step"])))
                            keys.setdefault(key, []).append(float(np.median(micros["keys"])))
                    for n in threads:
                        key = (model.stem, "native", n)
                        micros = native_step_micros(model, steps, warmup, n)
                        cells.setdefault(key, []).append(float(np.median(micros)))
                        micros = native_keystroke_micros(model, *script, warmup, n)
                        keys.setdefault(key, []).append(float(np.median(micros)))
                printer(f"round {r + 1}/{rounds} done")
    version = browser.version
    rows = [_row(model, threads, settings, cells, keys, errors) for model in models]
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "browser": f"Chromium {version}",
            "chromium": chromium_path(), "webgpu_adapter": adapter, "steps": steps,
            "warmup": warmup, "rounds": rounds, "threads": list(threads),
            "load_average": os.getloadavg()[0], "typed_words": len(script[0]), "rows": rows}


def _spread(values) -> dict:
    return {"p50_us": float(np.median(values)), "min_us": min(values), "max_us": max(values)}


def _row(model, threads, settings, cells, keys, errors) -> dict:
    """One model's cells (per token), keystroke cells and keystroke ratios (browser over
    native with one thread, per round: median and range)."""
    row = {"model": model.stem, "size_bytes": model.stat().st_size, "cells": {}, "keys": {},
           "key_ratio": {}}
    native = keys.get((model.stem, "native", 1))
    for accelerator, n in [("native", t) for t in threads] + settings:
        key = (model.stem, accelerator, n)
        label = f"{accelerator} ×{n}"
        if key in errors:
            row["cells"][label] = {"error": errors[key]}
        elif key in cells:
            row["cells"][label] = _spread(cells[key])
            row["keys"][label] = _spread(keys[key])
            if native and accelerator != "native":
                ratios = [b / a for a, b in zip(native, keys[key])]
                row["key_ratio"][label] = {"p50": float(np.median(ratios)),
                                           "min": min(ratios), "max": max(ratios)}
    return row


def format_web_report(report: dict) -> str:
    labels = list(dict.fromkeys(label for row in report["rows"] for label in row["cells"]))
    lines = [f"Per-token latency, µs (median of {report['rounds']} round medians, range in "
             f"brackets; {report['steps']} greedy steps each), {report['browser']} headless "
             f"vs native LiteRT, {report['cpu']} ({report['cores']} cores), load "
             f"{report['load_average']:.2f}; WebGPU adapter: "
             f"{report['webgpu_adapter'] or 'none in this browser'}", "",
             "| model | size | " + " | ".join(labels) + " |",
             "|---|---:|" + "---:|" * len(labels)]
    for row in report["rows"]:
        lines.append(f"| {row['model']} | {row['size_bytes'] / 1e3:,.0f} KB | "
                     + " | ".join(_cell(row["cells"].get(label)) for label in labels) + " |")
    ratio_labels = list(dict.fromkeys(label for row in report["rows"]
                                      for label in row.get("key_ratio", {})
                                      if label.startswith("wasm")))
    lines += ["", f"Keystroke path, µs (step + top-3 of the words starting with the next "
              f"word's first letter; {report.get('typed_words', '?')} words typed, the first "
              f"{report['warmup']} untimed), and the "
              "browser over native ×1 (per round: median [range])", "",
              "| model | " + " | ".join(labels) + " | "
              + " | ".join(f"{label} ÷ native ×1" for label in ratio_labels) + " |",
              "|---|" + "---:|" * (len(labels) + len(ratio_labels))]
    for row in report["rows"]:
        ratios = []
        for label in ratio_labels:
            r = row.get("key_ratio", {}).get(label)
            ratios.append(f"{r['p50']:.2f}× [{r['min']:.2f}–{r['max']:.2f}]" if r else "–")
        lines.append(f"| {row['model']} | "
                     + " | ".join(_cell(row.get("keys", {}).get(label, row["cells"].get(label)))
                                  for label in labels) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def _cell(cell) -> str:
    if cell is None:
        return "–"
    if "error" in cell:
        return f"fails: {cell['error'][:90]}"
    return f"{cell['p50_us']:.0f} [{cell['min_us']:.0f}–{cell['max_us']:.0f}]"


def plot_web_report(report: dict, path) -> Path:
    plt = pyplot("the web benchmark plot (--plot)")

    rows = [r for r in report["rows"] if any("p50_us" in c for c in r["cells"].values())]
    labels = list(dict.fromkeys(label for row in rows for label in row["cells"]))
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) * max(len(labels), 1) / 2 + 2))
    width = 0.8 / max(len(labels), 1)
    y = np.arange(len(rows))
    for i, label in enumerate(labels):
        values = [r["cells"].get(label, {}).get("p50_us", np.nan) for r in rows]
        ax.barh(y + i * width, values, height=width, label=label)
    ax.set_yticks(y + width * (len(labels) - 1) / 2, [r["model"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("µs per token (log scale)")
    ax.set_title(f"Step model per token: {report['browser']} (LiteRT.js) vs native LiteRT")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
