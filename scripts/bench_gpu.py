"""The GPU check in one command: gpu-marked tests, then keras-seq vs Keras's built-in LSTM
and GRU on the GPU (fp32 and mixed precision), written as ONE markdown table.

Run by ``scripts/bench_gpu.sh`` (``make bench-gpu BACKEND=jax``), which installs carried
wheels and sets ``KERAS_BACKEND`` first. Every step runs in its own process under a time
limit; a step that fails or runs out of time becomes a row that says so, and the next step
still runs. The whole run stays inside ``--budget`` seconds (default 420).

Writes to ``--out``: ``bench_gpu.md`` (the table, also printed), ``bench_gpu.json`` (every
report), ``gpu_tests.xml`` and ``gpu_tests.log`` (pytest).

Without a GPU, ``--device cpu`` runs the same steps on the CPU (the gpu tests then skip):
``KERAS_BACKEND=jax python scripts/bench_gpu.py --device cpu --quick --out /tmp/b``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from keras_seq.benchmarks import backends  # noqa: E402  (no Keras import)
from keras_seq.benchmarks.cells import MARKDOWN_COLUMNS, markdown_rows, markdown_table  # noqa: E402

COLUMNS = ("step", *MARKDOWN_COLUMNS, "result")
#: bench cells settings on the GPU: the recurrent layer alone (head none), bench cells'
#: default sizes otherwise (vocab 10k, embed 128, units 256, seq_len 35, batch 32).
BENCH = dict(cells=["lstm", "gru"], head="none", steps=100, repeats=5, warmup=3, chunk=10)
QUICK = dict(cells=["lstm", "gru"], head="none", steps=2, repeats=2, warmup=1, chunk=1,
             vocab=50, embed=8, units=8, seq_len=5, batch=4)


class Budget:
    """Seconds left of the whole run; each step gets at most its cap of them."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def grant(self, cap, reserve=15):
        return max(0.0, min(cap, self.left() - reserve))


def failed_row(step, text, backend="", device="", precision=""):
    row = [step, "", backend, device, precision] + [""] * (len(COLUMNS) - 6) + [text]
    return row


def environment(python, backend, device, timeout):
    """Versions, devices and whether the backend sees a GPU, from a fresh process."""
    code = ("import json; from keras_seq.benchmarks import backends as b; "
            "info = b.environment(); info['gpu_visible'] = b.gpu_visible(); "
            "print(json.dumps(info))")
    env = backends.worker_env(backend, device)
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise RuntimeError(lines[-1] if lines else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"nvidia-smi: {err}"


def run_tests(python, backend, device, out, timeout):
    """``pytest -m gpu tests/test_gpu.py``: a one-line summary (and failing tests)."""
    xml = out / "gpu_tests.xml"
    cmd = [python, "-m", "pytest", "-m", "gpu", "tests/test_gpu.py", "-q", "-rfEs",
           "-p", "no:cacheprovider", f"--junitxml={xml}"]
    env = backends.worker_env(backend, device)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                              cwd=ROOT)
        log, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as err:
        log = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) \
            else (err.stdout or "")
        code = None
    (out / "gpu_tests.log").write_text(log)
    print(log[-6000:], file=sys.stderr)
    seconds = time.monotonic() - start
    if code is None:
        return False, f"TIMEOUT after {timeout:.0f} s (see gpu_tests.log)"
    if not xml.is_file():
        tail = " | ".join(line for line in log.splitlines()[-3:] if line.strip())
        return False, f"pytest exit {code}: {tail}"
    suite = ET.parse(xml).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    text = (f"{passed} passed, {counts['failures']} failed, {counts['errors']} errors, "
            f"{counts['skipped']} skipped in {seconds:.0f} s")
    bad = []
    for case in suite.iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            message = (problem.get("message") or "").splitlines()
            bad.append(f"{case.get('name')}: {message[0][:120] if message else '?'}")
    if counts["skipped"] == counts["tests"] and counts["tests"]:
        skip = next(iter(suite.iter("skipped")), None)
        if skip is not None:
            text += f" ({(skip.get('message') or '')[:100]})"
    if bad:
        text += ": " + "; ".join(bad[:6]) + (" …" if len(bad) > 6 else "")
    if device == "gpu" and counts["skipped"] == counts["tests"]:
        return False, "NO GPU TESTS RAN: " + text
    return counts["failures"] == counts["errors"] == 0 and code in (0, 5), text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default=os.environ.get("KERAS_BACKEND", "jax"),
                   choices=backends.BACKENDS)
    p.add_argument("--device", default="gpu", choices=backends.DEVICES)
    p.add_argument("--precisions", default="off,mixed_float16",
                   help="comma-separated mixed-precision settings to benchmark")
    p.add_argument("--out", default=os.environ.get("OUT") or "runs/bench-gpu")
    p.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run")
    p.add_argument("--bench", default="{}",
                   help="JSON of bench cells settings over the defaults, e.g. "
                        "'{\"batch\": 128, \"units\": 512}'")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    p.add_argument("--skip-tests", action="store_true")
    args = p.parse_args(argv)

    python = sys.executable
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget)
    os.environ["KERAS_BACKEND"] = args.backend
    rows, reports, ok = [], {}, True
    settings = {**(QUICK if args.quick else BENCH), **json.loads(args.bench)}

    smi = nvidia_smi()
    try:
        env = environment(python, args.backend, args.device, budget.grant(90))
        reports["environment"] = env
        env_text = (f"keras {env.get('keras')}, {args.backend} {env.get(args.backend)}, "
                    f"python {env.get('python')}, devices {env.get('devices')}, "
                    f"GPU visible to {args.backend}: {env.get('gpu_visible')}")
    except Exception as err:  # noqa: BLE001 - reported in the table
        ok = False
        env_text = f"FAILED: {err}"
        rows.append(failed_row("environment", f"FAILED: {err}", args.backend, args.device))

    if not args.skip_tests:
        try:
            passed, text = run_tests(python, args.backend, args.device, out, budget.grant(150))
        except Exception as err:  # noqa: BLE001
            passed, text = False, f"FAILED: {err}"
        ok &= passed
        rows.append(failed_row("pytest -m gpu", text, args.backend, args.device))

    for precision in [p.strip() for p in args.precisions.split(",") if p.strip()]:
        label = "fp32" if precision == "off" else precision
        step = f"bench cells ({label})"
        seconds = budget.grant(120)
        if seconds < 30:
            ok = False
            rows.append(failed_row(step, "SKIPPED: time budget spent", args.backend,
                                   args.device, label))
            continue
        kwargs = {**settings, "device": args.device, "mixed_precision": precision}
        try:
            report = backends.run_worker("keras_seq.benchmarks.cells", kwargs, args.backend,
                                         args.device, timeout=seconds)
        except Exception as err:  # noqa: BLE001 - reported in the table
            ok = False
            rows.append(failed_row(step, f"FAILED: {err}", args.backend, args.device, label))
            continue
        reports[step] = report
        rows += [[step, *r, "ok"] for r in markdown_rows(report)]

    cfg = {k: v for k, v in settings.items() if k != "cells"}
    lines = [
        f"## keras-seq vs Keras built-in LSTM/GRU on {args.backend}/{args.device}",
        "",
        f"GPU: {smi}. {env_text}.",
        f"bench cells settings: {json.dumps(cfg)}; tok/s of the best run; ours/built-in = "
        "median of per-run ratios, spread = lowest–highest (number of runs).",
        f"Command: `make bench-gpu BACKEND={args.backend}` "
        f"(`scripts/bench_gpu.sh {args.backend}`), {time.strftime('%Y-%m-%d %H:%M %Z')}.",
        "",
        markdown_table(rows, COLUMNS),
        "",
    ]
    text = "\n".join(lines)
    (out / "bench_gpu.md").write_text(text)
    (out / "bench_gpu.json").write_text(json.dumps(reports, indent=2, default=str))
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
