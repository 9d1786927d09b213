"""``keras-seq bench quantization``: post-training quantization against quantization-aware
training, for one model and one token stream.

From a float ``keras-seq train lm`` run, :func:`run_quantization_benchmark` fine-tunes one
quantization-aware run per mode (``--qat int8`` full integer, ``--qat int4`` weights; each
``train lm --init-from RUN --qat MODE``), exports the float run in float32 and its
post-training variants (dynamic range, full int8 calibrated on training text, int4, and
the shipped ``dynamic_shared``) and each QAT run in its own variant, then measures every
file on the same validation stream: size, perplexity through LiteRT and its change from
float, the keyboard metrics (top-1 in-vocabulary next word, keystroke savings;
docs/keyboard.md) and their change, and the per-token time of a step and of the keyboard's
job (a step, then the top 3 suggestions), one thread, the models alternated in rounds.
A float fine-tune with the same epochs and learning rate is the control: a QAT run's
perplexity is compared with the float run it starts from and with that control (the extra
epochs alone may lower it). The CPU and the load before and after are part of the report.

>>> [row[0] for row in ROWS][:3]
['float32', 'float32 fine-tuned alike', 'PTQ dynamic']
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from keras_seq import runs
from keras_seq.errors import KerasSeqError
from keras_seq.keyboard import stream_outcomes
from keras_seq.machine import describe as describe_machine
from keras_seq.machine import load_1min
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.data import corpus_for

#: ``(row label, source, variant)``: ``float`` is the run given, ``qat-<mode>`` its
#: quantization-aware fine-tune, ``float-ft`` the control: the same fine-tune without
#: quantization (what the extra epochs at a low learning rate give by themselves)
ROWS = (
    ("float32", "float", "float32"),
    ("float32 fine-tuned alike", "float-ft", "float32"),
    ("PTQ dynamic", "float", "dynamic"),
    ("PTQ full int8", "float", "int8"),
    ("PTQ int4", "float", "int4"),
    ("PTQ dynamic_shared", "float", "dynamic_shared"),
    ("QAT full int8", "qat-int8", "int8"),
    ("QAT int4", "qat-int4", "int4"),
)
KEYBOARD_K = 3  # the keyboard's job: a step, then the top 3 suggestions
QUIET_LOAD, SETTLE_SECONDS = 0.5, 120  # timing waits for a quiet machine, up to 2 minutes


def _finetune(run_dir, out_dir, mode: str | None, epochs: int, lr: float,
              printer) -> float:
    """The run's ``qat=mode`` fine-tune into ``out_dir`` (:func:`finetune_lm`; a finished
    one is reused); returns its seconds here."""
    # lazy: loads Keras, TensorFlow only when this runs
    from keras_seq.tasks.lm.task import finetune_lm

    t0 = time.perf_counter()
    finetune_lm(run_dir, out_dir, mode, epochs, lr, printer)
    seconds = time.perf_counter() - t0
    printer(f"  {out_dir}: {seconds:.0f} s")
    return seconds


def _exports(run_dir, qat_dirs: dict, out: Path, printer) -> dict:
    """``{row label: manifest entry}`` (``file`` made absolute) of every row's model."""
    # lazy: loads TensorFlow only when this runs
    from keras_seq.export.tflite import export_tflite

    wanted: dict[str, list] = {}
    for _, source, variant in ROWS:
        if source == "float" or source in qat_dirs:
            wanted.setdefault(source, []).append(variant)
    entries = {}
    for source, variants in wanted.items():
        folder = out / source
        printer(f"  export {source}: {', '.join(variants)}")
        manifest = export_tflite(run_dir if source == "float" else qat_dirs[source], folder,
                                 variants=variants, graphs=["step"], printer=printer)
        for m in manifest["models"]:
            if "error" in m:
                raise KerasSeqError(f"{source} {m['variant']} did not convert: {m['error']}")
            entries[(source, m["variant"])] = {**m, "file": str(folder / m["file"]),
                                               "keras_val_ppl": manifest["keras_val_ppl"]}
    return {label: entries[(source, variant)] for label, source, variant in ROWS
            if (source, variant) in entries}


def _keyboard(entries: dict, val_text: str, printer) -> dict:
    """``{label: keyboard metrics}`` of every model on ``val_text``."""
    out = {}
    for label, entry in entries.items():
        lm = LiteRTLM(entry["file"])
        lm.reset()
        out[label] = stream_outcomes(lm.step, lm.tokenizer, val_text, KEYBOARD_K).metrics()
        printer(f"  keyboard {label}: top-1 {100 * out[label]['top1_iv']:.2f}%, keystroke "
                f"savings {100 * out[label]['ksr']:.2f}%")
    return out


def _timings(entries: dict, stream: np.ndarray, warmup: int, rounds: int) -> dict:
    """``{label: {"step": [µs p50 per round], "keyboard": […]}}``, one thread, alternated."""
    # lazy: the streaming module loads the n-gram tools too
    from keras_seq.export.streaming import interleaved_streams

    steppers = {}
    for label, entry in entries.items():
        lm = LiteRTLM(entry["file"], num_threads=1)
        steppers[f"{label}|step"] = (lm.reset, lm.step)
        steppers[f"{label}|keyboard"] = (
            lm.reset, lambda t, lm=lm: (lm.step(t), lm.suggest(KEYBOARD_K)))
    timed = interleaved_streams(steppers, stream, warmup, rounds)
    out: dict = {}
    for name, runs_us in timed.items():
        label, job = name.split("|")
        out.setdefault(label, {})[job] = [float(np.median(r)) for r in runs_us]
    return out


def run_quantization_benchmark(run_dir, out_dir, modes=("int8", "int4"), epochs: int = 1,
                               lr: float = 5e-4, tokens: int = 1000, warmup: int = 50,
                               rounds: int = 3, printer=print) -> dict:
    """Fine-tune, export and measure (see the module doc); returns the report, also
    written to ``out_dir/quantization.json`` and ``.md``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started, load_before = time.perf_counter(), load_1min()
    qat_dirs, finetune_seconds = {}, {}
    for mode in (None, *modes):  # the float control first
        source = f"qat-{mode}" if mode else "float-ft"
        printer(f"fine-tune {source} ({epochs} epoch(s), lr {lr:g}) …")
        qat_dirs[source] = out / f"{source}-run"
        finetune_seconds[source] = _finetune(run_dir, qat_dirs[source], mode, epochs, lr,
                                             printer)
    printer("exports …")
    entries = _exports(run_dir, qat_dirs, out, printer)
    config = LMConfig.load(Path(run_dir) / runs.CONFIG)
    val_text = corpus_for(config).text("val")
    printer("keyboard metrics on the validation split …")
    keyboard = _keyboard(entries, val_text, printer)
    first = LiteRTLM(entries["float32"]["file"])
    stream = np.resize(first.tokenizer.encode(val_text), warmup + tokens).astype(np.int32)
    printer(f"timing: {len(entries)} models × 2 jobs × {rounds} rounds of {tokens} tokens, "
            "1 thread, alternated …")
    load_timing = _settle(printer)
    timings = _timings(entries, stream, warmup, rounds)
    report = {"run_dir": str(run_dir), "machine": describe_machine(),
              "load_1min": {"start": load_before, "timing": load_timing, "end": load_1min()},
              "qat_epochs": epochs, "qat_lr": lr, "tokens": tokens, "rounds": rounds,
              "finetune_seconds": finetune_seconds,
              "rows": _rows(entries, keyboard, timings),
              "seconds": time.perf_counter() - started}
    (out / "quantization.json").write_text(json.dumps(report, indent=2))
    (out / "quantization.md").write_text(format_report(report))
    return report


def _settle(printer) -> float | None:
    """Wait (at most :data:`SETTLE_SECONDS`) for the 1-minute load to fall below
    :data:`QUIET_LOAD`: the fine-tunes and exports just before leave it high for a while.
    Returns the load then."""
    quiet, wait = QUIET_LOAD, SETTLE_SECONDS
    t0 = time.monotonic()
    load = load_1min()
    if load is not None and load >= quiet:
        printer(f"  waiting for the load ({load:.2f}) to fall below {quiet} (at most "
                f"{wait:.0f} s) …")
        while load is not None and load >= quiet and time.monotonic() - t0 < wait:
            time.sleep(5)
            load = load_1min()
    return load


def _rows(entries: dict, keyboard: dict, timings: dict) -> list[dict]:
    float_ppl = entries["float32"]["parity"]["val_ppl"]
    control = entries.get("float32 fine-tuned alike", entries["float32"])["parity"]["val_ppl"]
    base = keyboard["float32"]
    rows = []
    for label, entry in entries.items():
        p, kb, t = entry["parity"], keyboard[label], timings[label]
        rows.append({
            "model": label, "file": entry["file"], "size_bytes": entry["size_bytes"],
            "val_ppl": p["val_ppl"], "ppl_vs_float_pct": 100 * (p["val_ppl"] / float_ppl - 1),
            "ppl_vs_control_pct": 100 * (p["val_ppl"] / control - 1),
            "keras_val_ppl": entry["keras_val_ppl"], "top1_agreement": p["top1_agreement"],
            "top1_iv": kb["top1_iv"], "top1_vs_float_points": 100 * (kb["top1_iv"]
                                                                      - base["top1_iv"]),
            "ksr": kb["ksr"], "ksr_vs_float_points": 100 * (kb["ksr"] - base["ksr"]),
            "step_us": float(np.median(t["step"])), "step_us_rounds": t["step"],
            "keyboard_us": float(np.median(t["keyboard"])),
            "keyboard_us_rounds": t["keyboard"]})
    return rows


def format_report(report: dict) -> str:
    """The table as Markdown, with the CPU, the load and the command's settings."""
    load = report["load_1min"]
    machine = report["machine"]
    lines = [f"CPU: {machine['cpu']} ({machine['cores']} cores); load (1 min) "
             f"{load['start']:.2f} at the start, "
             f"{load['timing']:.2f} before timing, {load['end']:.2f} at the end; QAT "
             f"fine-tunes {report['qat_epochs']} epoch(s) at lr {report['qat_lr']:g}; times: "
             f"median of {report['rounds']} alternated rounds of {report['tokens']} tokens "
             "(their range), 1 thread. vs float: the val PPL against the float run's; vs "
             "control: against the float run fine-tuned alike (same epochs and learning "
             "rate, no quantization); Δ top-1, Δ KSR: points against the float run", ""]
    header = ["model", "size KB", "val PPL", "vs float", "vs control", "top-1 %", "Δ top-1",
              "KSR %", "Δ KSR", "step µs", f"step+top{KEYBOARD_K} µs"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in report["rows"]:
        spread = (f" ({min(r['step_us_rounds']):.0f}–{max(r['step_us_rounds']):.0f})")
        spread_k = (f" ({min(r['keyboard_us_rounds']):.0f}–"
                    f"{max(r['keyboard_us_rounds']):.0f})")
        lines.append(
            f"| {r['model']} | {r['size_bytes'] / 1000:,.0f} | {r['val_ppl']:.2f} | "
            f"{r['ppl_vs_float_pct']:+.2f}% | {r['ppl_vs_control_pct']:+.2f}% | "
            f"{100 * r['top1_iv']:.2f} | "
            f"{r['top1_vs_float_points']:+.2f} | {100 * r['ksr']:.2f} | "
            f"{r['ksr_vs_float_points']:+.2f} | {r['step_us']:.1f}{spread} | "
            f"{r['keyboard_us']:.1f}{spread_k} |")
    return "\n".join(lines) + "\n"
