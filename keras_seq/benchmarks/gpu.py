"""The GPU check in one command: the environment, whether the fused cuDNN call is in the
compiled train step, the gpu-marked tests (with per-test durations), then keras-seq vs
Keras's built-in LSTM and GRU (fp32 and mixed precision), written as ONE markdown table.

Entry: ``scripts/bench_gpu.sh`` (``make bench-gpu BACKEND=jax``), which installs carried
wheels and sets ``KERAS_BACKEND`` first, then runs ``python -m keras_seq.benchmarks.gpu``.
Every step runs in its own process under its own time limit; a step that fails or runs out
of time becomes a row that says so, the next step still runs, and ``bench_gpu.md`` /
``bench_gpu.json`` are rewritten after every step (a later crash loses nothing). The whole
run stays inside ``--budget`` seconds (default 450: the check must end within 8 minutes).

Writes to ``--out``: ``bench_gpu.md`` (the table, also printed), ``bench_gpu.json`` (every
report), ``gpu_tests.xml`` and ``gpu_tests.log`` (pytest, ``--durations=0``).

Without a GPU, ``--device cpu`` runs the same steps on the CPU; the gpu tests then run on
the reference kernels of ``tests/backends/reference_kernels.py``
(``KERAS_SEQ_REFERENCE_KERNELS=1``), a dry run of their expectations:
``KERAS_BACKEND=jax python -m keras_seq.benchmarks.gpu --device cpu --quick --out /tmp/b``.
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

import numpy as np

from keras_seq.benchmarks import backends
from keras_seq.benchmarks.cells import MARKDOWN_COLUMNS, markdown_rows, markdown_table

ROOT = Path(__file__).resolve().parents[2]

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


def kernel_probe(units=8, batch=4, steps=6, features=5):
    """Whether the fused cuDNN call is in the train step keras-seq's LSTM compiles here:
    JAX: "cudnn" in the compiled HLO of ``jit(grad(loss))``; TensorFlow: a ``CudnnRNN`` op
    in the ``tf.function`` graph of the gradient; PyTorch (eager): a cuDNN op among those
    the profiler saw in a forward and backward pass. Also the layer's ``last_path`` and
    ``last_path_reason``. Runs in a worker (``python -m keras_seq.benchmarks.gpu --worker``)."""
    import keras  # lazy: the backend is chosen by the worker's environment
    from keras import ops

    from keras_seq.layers import LSTM

    layer = LSTM(units, return_sequences=True)
    x = np.random.default_rng(0).normal(size=(batch, steps, features)).astype("float32")
    layer(x)
    variables = layer.trainable_variables
    backend = keras.backend.backend()
    if backend == "jax":
        # lazy: loads JAX only when this runs
        import jax

        def loss(values, x):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return ops.sum(layer(x))

        compiled = jax.jit(jax.grad(loss)).lower([v.value for v in variables], x).compile()
        found, how = "cudnn" in compiled.as_text().lower(), "'cudnn' in the compiled HLO"
    elif backend == "tensorflow":
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        @tf.function
        def grad(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x))
            return tape.gradient(loss, [v.value for v in variables])

        graph = grad.get_concrete_function(tf.constant(x)).graph.as_graph_def()
        found, how = "CudnnRNN" in str(graph), "a CudnnRNN op in the gradient's graph"
    else:
        # lazy: loads PyTorch only when this runs
        import torch

        with torch.profiler.profile() as prof:
            ops.sum(layer(x)).backward()
        names = {event.key for event in prof.key_averages()}
        found = any("cudnn" in name.lower() for name in names)
        how = "a cuDNN op in torch.profiler's forward+backward"
    return {"backend": backend, "cudnn_in_program": bool(found), "checked": how,
            "keras_seq_path": layer.last_path, "reason": layer.last_path_reason}


def nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"nvidia-smi: {err}"


#: The gpu tests ``--quick`` keeps (one per kind of check).
QUICK_TESTS = "outputs_states_and_gradients or bidirectional or mixed_float16"


def run_tests(python, backend, device, out, timeout, quick=False):
    """``pytest -m gpu tests/test_gpu.py --durations=0``: a one-line summary (and failing
    tests). On the CPU the tests run on the reference kernels (a dry run)."""
    xml = out / "gpu_tests.xml"
    cmd = [python, "-m", "pytest", "-m", "gpu", "tests/test_gpu.py", "-q", "-rfEs",
           "--durations=0", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    if quick:
        cmd += ["-k", QUICK_TESTS]
    env = backends.worker_env(backend, device)
    if device == "cpu":
        env["KERAS_SEQ_REFERENCE_KERNELS"] = "1"
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


def probe_text(probe):
    """One line from :func:`kernel_probe`'s report."""
    where = "IS" if probe["cudnn_in_program"] else "is NOT"
    reason = f" ({probe['reason']})" if probe.get("reason") else ""
    return (f"the cuDNN call {where} in the compiled train step ({probe['checked']}); "
            f"keras-seq LSTM path: {probe['keras_seq_path']}{reason}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default=os.environ.get("KERAS_BACKEND", "jax"),
                   choices=backends.BACKENDS)
    p.add_argument("--device", default="gpu", choices=backends.DEVICES)
    p.add_argument("--precisions", default="off,mixed_float16",
                   help="comma-separated mixed-precision settings to benchmark")
    p.add_argument("--out", default=os.environ.get("OUT") or "runs/bench-gpu")
    p.add_argument("--budget", type=float, default=450.0, help="seconds for the whole run")
    p.add_argument("--bench", default="{}",
                   help="JSON of bench cells settings over the defaults, e.g. "
                        "'{\"batch\": 128, \"units\": 512}'")
    p.add_argument("--quick", action=argparse.BooleanOptionalAction, default=False,
                   help="tiny sizes (a smoke test)")
    p.add_argument("--skip-tests", action=argparse.BooleanOptionalAction, default=False)
    args = p.parse_args(argv)

    python = sys.executable
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget)
    os.environ["KERAS_BACKEND"] = args.backend
    rows, reports, ok = [], {}, True
    settings = {**(QUICK if args.quick else BENCH), **json.loads(args.bench)}
    cfg = {k: v for k, v in settings.items() if k != "cells"}
    head = {"smi": nvidia_smi(), "env": "not read yet", "probe": "not run yet"}

    def write():
        """The table so far: rewritten after every step."""
        lines = [
            f"## keras-seq vs Keras built-in LSTM/GRU on {args.backend}/{args.device}",
            "",
            f"GPU: {head['smi']}. {head['env']}.",
            f"Fused kernel: {head['probe']}.",
            f"bench cells settings: {json.dumps(cfg)}; tok/s of the best run; ours/built-in "
            "= median of per-run ratios, spread = lowest–highest (number of runs).",
            f"Command: `make bench-gpu BACKEND={args.backend}` "
            f"(`scripts/bench_gpu.sh {args.backend}`), {time.strftime('%Y-%m-%d %H:%M %Z')}.",
            "",
            markdown_table(rows, COLUMNS),
            "",
        ]
        text = "\n".join(lines)
        (out / "bench_gpu.md").write_text(text)
        (out / "bench_gpu.json").write_text(json.dumps(reports, indent=2, default=str))
        return text

    try:
        env = environment(python, args.backend, args.device, budget.grant(60))
        reports["environment"] = env
        head["env"] = (f"keras {env.get('keras')}, {args.backend} {env.get(args.backend)}, "
                       f"python {env.get('python')}, devices {env.get('devices')}, "
                       f"GPU visible to {args.backend}: {env.get('gpu_visible')}")
    except Exception as err:  # noqa: BLE001 - reported in the table
        ok = False
        head["env"] = f"environment FAILED: {err}"
        rows.append(failed_row("environment", f"FAILED: {err}", args.backend, args.device))
    write()

    try:
        probe = backends.run_worker("keras_seq.benchmarks.gpu", {}, args.backend,
                                    args.device, timeout=budget.grant(90), echo=False)
        reports["kernel probe"] = probe
        head["probe"] = probe_text(probe)
        if args.device == "gpu" and not probe["cudnn_in_program"]:
            ok = False
            rows.append(failed_row("kernel probe", "NO cuDNN CALL: " + head["probe"],
                                   args.backend, args.device))
    except Exception as err:  # noqa: BLE001 - reported in the table
        ok = False
        head["probe"] = f"probe FAILED: {err}"
        rows.append(failed_row("kernel probe", f"FAILED: {err}", args.backend, args.device))
    write()

    if not args.skip_tests:
        try:
            passed, text = run_tests(python, args.backend, args.device, out,
                                     budget.grant(240), quick=args.quick)
        except Exception as err:  # noqa: BLE001
            passed, text = False, f"FAILED: {err}"
        ok &= passed
        step = "pytest -m gpu" + (" (reference kernels on the CPU)" if args.device == "cpu"
                                  else "")
        rows.append(failed_row(step, text, args.backend, args.device))
        write()

    for precision in [p.strip() for p in args.precisions.split(",") if p.strip()]:
        label = "fp32" if precision == "off" else precision
        step = f"bench cells ({label})"
        seconds = budget.grant(120)
        if seconds < 30:
            ok = False
            rows.append(failed_row(step, "SKIPPED: time budget spent", args.backend,
                                   args.device, label))
            write()
            continue
        kwargs = {**settings, "device": args.device, "mixed_precision": precision}
        try:
            report = backends.run_worker("keras_seq.benchmarks.cells", kwargs, args.backend,
                                         args.device, timeout=seconds)
        except Exception as err:  # noqa: BLE001 - reported in the table
            ok = False
            rows.append(failed_row(step, f"FAILED: {err}", args.backend, args.device, label))
            write()
            continue
        reports[step] = report
        rows += [[step, *r, "ok"] for r in markdown_rows(report)]
        write()

    print(write())
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(backends.worker_main(kernel_probe))
    sys.exit(main())
