"""``keras-seq bench web``: per-token latency of every step variant in a real browser.

Each variant of an export folder (``step_*.tflite``, the fused ones included) is opened in
headless Chromium on the page ``keras-seq export web`` writes, on LiteRT.js Wasm with one
thread and with several (the page is cross-origin isolated, so the threaded build loads) and
on WebGPU when the browser offers an adapter; beside it, the same file on native LiteRT
(``ai_edge_litert``, the same thread counts). Both sides feed the same kind of stream: greedy
tokens from the start token, one token per call, the state carried by the caller, the
logits read back each step. Rounds alternate the variants; each cell is the median over
rounds of the per-round median, with the spread (min-max of the round medians).

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
from keras_seq.errors import KerasSeqError
from keras_seq.export.web import export_web, step_models
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


def _browser_micros(browser, url: str, steps: int, warmup: int) -> tuple[np.ndarray | None, str]:
    page = browser.new_page()
    try:
        page.goto(url)
        state = page.evaluate("window.kerasSeq.ready.then(() => 'ok', (e) => e.message)")
        if state != "ok":
            return None, state
        micros = page.evaluate("(o) => window.kerasSeq.benchmark(o)",
                               {"steps": steps, "warmup": warmup})
        return np.asarray(micros), ""
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
                      printer=print) -> dict:
    """Measure every step model of ``tflite_dir`` in Chromium and on native LiteRT
    (``names``: only these file stems; ``screenshot``: also save a PNG of the page, default
    model, after typing; ``browser``: a Playwright browser to use instead of a new one)."""
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
    if browser is not None:
        return _measure(browser, models, steps, warmup, rounds, threads, webgpu, screenshot,
                        screenshot_text, printer)
    with sync_playwright() as p:
        browser = launch_chromium(p, gpu=webgpu)
        try:
            return _measure(browser, models, steps, warmup, rounds, threads, webgpu,
                            screenshot, screenshot_text, printer)
        finally:
            browser.close()


def _measure(browser, models, steps, warmup, rounds, threads, webgpu, screenshot,
             screenshot_text, printer) -> dict:
    settings = [("wasm", t) for t in threads]
    cells: dict[tuple, list] = {}
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
                        micros, error = _browser_micros(browser, url, steps, warmup)
                        if micros is None:
                            errors[key] = error
                        else:
                            cells.setdefault(key, []).append(float(np.median(micros)))
                    for n in threads:
                        key = (model.stem, "native", n)
                        micros = native_step_micros(model, steps, warmup, n)
                        cells.setdefault(key, []).append(float(np.median(micros)))
                printer(f"round {r + 1}/{rounds} done")
    version = browser.version
    rows = []
    for model in models:
        row = {"model": model.stem, "size_bytes": model.stat().st_size, "cells": {}}
        for accelerator, n in [("native", t) for t in threads] + settings:
            key = (model.stem, accelerator, n)
            label = f"{accelerator} ×{n}"
            if key in errors:
                row["cells"][label] = {"error": errors[key]}
            elif key in cells:
                values = cells[key]
                row["cells"][label] = {"p50_us": float(np.median(values)),
                                       "min_us": min(values), "max_us": max(values)}
        rows.append(row)
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "browser": f"Chromium {version}",
            "chromium": chromium_path(), "webgpu_adapter": adapter, "steps": steps,
            "warmup": warmup, "rounds": rounds, "threads": list(threads),
            "load_average": os.getloadavg()[0], "rows": rows}


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
        cells = []
        for label in labels:
            cell = row["cells"].get(label)
            if cell is None:
                cells.append("–")
            elif "error" in cell:
                cells.append(f"fails: {cell['error'][:90]}")
            else:
                cells.append(f"{cell['p50_us']:.0f} [{cell['min_us']:.0f}–{cell['max_us']:.0f}]")
        lines.append(f"| {row['model']} | {row['size_bytes'] / 1e3:,.0f} KB | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_web_report(report: dict, path) -> Path:
    # lazy: loads matplotlib only when this runs
    import matplotlib

    matplotlib.use("Agg")
    # lazy: loads matplotlib only when this runs
    import matplotlib.pyplot as plt

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
