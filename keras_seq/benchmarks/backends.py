"""Backend, device, precision and XLA settings shared by the speed benchmarks.

The Keras backend is fixed once ``keras`` is imported, so a benchmark asked for another
backend than the current process's runs in a worker process (``python -m MODULE --worker
KWARGS_JSON`` with ``KERAS_BACKEND`` set) and hands its report back as JSON on stdout.
``device="cpu"`` on a machine whose backend sees a GPU also runs in a worker, with the GPU
hidden (``CUDA_VISIBLE_DEVICES=""``, ``JAX_PLATFORMS=cpu``); ``device="gpu"`` where the
backend sees none is an error that says so. Nothing here imports a backend at import time.

Which loop a layer ran is part of each result: a keras-seq layer says it itself
(``layer.last_path``: ``"cudnn"``, ``"fused-loop"`` or ``"loop"``); for Keras's built-in
LSTM/GRU :func:`probe_builtin_path` watches Keras's backend functions while the train step
is traced (``"cudnn"``; ``"backend-loop"`` when Keras's backend ``lstm()``/``gru()`` ran
without cuDNN, as PyTorch's fallback and JAX's GRU, which is a ``lax.scan``; ``"loop"``
when it declined and the layer looped).
"""

from __future__ import annotations

import contextlib
import contextlib as _contextlib
import importlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from keras_seq.backend import BACKENDS, MIXED_PRECISION, PACKAGES, installed

DEVICES = ("cpu", "gpu")
PRECISIONS = MIXED_PRECISION
#: How to install each backend's package.
INSTALL = {
    "tensorflow": "pip install tensorflow==2.21.0 (requirements.txt)",
    "jax": "pip install 'jax[cpu]' (or jax[cuda13] on an NVIDIA GPU)",
    "torch": "pip install torch --index-url https://download.pytorch.org/whl/cpu "
             "(about 200 MB; the CUDA build on a GPU machine)",
}
WORKER_ENV = "KERAS_SEQ_BENCH_WORKER"


def check_settings(command, backend=None, device=None, mixed_precision="off",
                   jit_compile=False):
    """Raise ValueError naming what was received, what is allowed and how to fix it."""
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"{command}: received backend={backend!r}; expected one of "
                         f"{', '.join(BACKENDS)} (or None for this process's, "
                         f"{current_backend()!r}). Pass e.g. --backend jax.")
    if device is not None and device not in DEVICES:
        raise ValueError(f"{command}: received device={device!r}; expected 'cpu' or 'gpu' "
                         "(or None: wherever the backend puts it). Pass --device cpu|gpu.")
    if mixed_precision not in PRECISIONS:
        raise ValueError(f"{command}: received mixed_precision={mixed_precision!r}; expected "
                         f"one of {', '.join(PRECISIONS)}. Pass e.g. --mixed-precision "
                         "mixed_bfloat16.")
    if not isinstance(jit_compile, bool):
        raise ValueError(f"{command}: received jit_compile={jit_compile!r}; expected True or "
                         "False (--jit-compile turns XLA on; JAX always compiles).")
    if backend is not None and backend != current_backend():
        if not installed(backend):
            raise ValueError(f"{command}: --backend {backend} needs the {PACKAGES[backend]!r} "
                             f"package, which this Python ({sys.executable}) does not have. "
                             f"Install it ({INSTALL[backend]}) or pick another backend.")


def current_backend() -> str:
    """This process's Keras backend, without importing Keras (and so a backend) if it is
    not imported yet: ``KERAS_BACKEND``, else ``keras.json``, else TensorFlow."""
    if "keras" in sys.modules:
        # lazy: Keras is imported once the backend is chosen
        import keras

        return keras.backend.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras"))
    try:
        return json.loads((home / "keras.json").read_text()).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


def gpu_visible() -> bool:
    """Whether the current backend sees a GPU (``keras_seq.layers.dispatch.gpu_available``)."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.layers.dispatch import gpu_available

    return gpu_available()


def worker_reason(backend=None, device=None) -> str | None:
    """Why the benchmark must run in a worker process (None: it can run here)."""
    if backend is not None and backend != current_backend():
        return f"the {backend} backend (this process runs {current_backend()})"
    if device == "cpu" and gpu_visible():
        return "the CPU with the GPU hidden"
    return None


def resolve_device(command, device=None) -> str:
    """The device this process will run on (``"cpu"`` or ``"gpu"``), checked against the
    one asked for."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    visible = gpu_visible()
    if device == "gpu" and not visible:
        hidden = {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES", "JAX_PLATFORMS")
                  if k in os.environ}
        raise ValueError(
            f"{command}: received --device gpu, but the {keras.backend.backend()} backend "
            "sees no GPU" + (f" (environment: {hidden})" if hidden else "") + ". Run on a "
            "machine with an NVIDIA GPU and the backend's CUDA build, or pass --device cpu.")
    if device == "cpu" and visible:
        raise RuntimeError(f"{command}: --device cpu, but this process sees a GPU; run it "
                           f"through {__name__}.run_worker (it hides the GPU).")
    return "gpu" if visible else "cpu"


def worker_env(backend=None, device=None) -> dict:
    """The environment of a worker process for ``backend`` on ``device``."""
    env = dict(os.environ)
    env[WORKER_ENV] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["JAX_PLATFORMS"] = "cpu"
    # Make this checkout's keras_seq importable in the worker (also when not installed).
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def run_worker(module, kwargs, backend=None, device=None, timeout=None, echo=True) -> dict:
    """Run ``python -m module --worker JSON(kwargs)`` for ``backend``/``device``; its JSON
    report. Its progress (stderr) is echoed live to ours when ``echo``. A failure raises
    RuntimeError with the worker's error line (or its last output) and exit status."""
    if os.environ.get(WORKER_ENV) and backend not in (None, current_backend()):
        raise RuntimeError(f"a benchmark worker for {backend!r} runs the "
                           f"{current_backend()!r} backend: is KERAS_BACKEND overridden?")
    cmd = [sys.executable, "-m", module, "--worker", json.dumps(kwargs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=worker_env(backend, device))
    out = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    err = bytearray()
    timer = threading.Timer(timeout, proc.kill) if timeout else None
    if timer:
        timer.start()
    try:
        for chunk in iter(lambda: proc.stderr.read1(4096), b""):
            err += chunk
            if echo:
                sys.stderr.write(chunk.decode(errors="replace"))
                sys.stderr.flush()
        code = proc.wait()
    finally:
        if timer:
            timer.cancel()
    reader.join()
    stdout = out[0].decode(errors="replace") if out else ""
    where = f"{module} on {backend or current_backend()}" + (f"/{device}" if device else "")
    if code != 0:
        text = err.decode(errors="replace")
        lines = [line for line in text.replace("\r", "\n").splitlines() if line.strip()]
        errors = [line.split("error: ", 1)[1] for line in lines if "keras-seq: error: " in line]
        detail = errors[-1] if errors else " | ".join(lines[-6:])
        status = f"killed after {timeout} s" if code < 0 and timeout else f"exit {code}"
        raise RuntimeError(f"benchmark worker ({where}) failed ({status}): {detail}")
    try:
        return json.loads(stdout)
    except ValueError as e:
        raise RuntimeError(f"benchmark worker ({where}) printed no JSON report "
                           f"({stdout[-300:]!r})") from e


def worker_main(run, argv=None) -> int:
    """Entry point of a worker: ``--worker KWARGS_JSON``; the report as JSON on stdout,
    progress on stderr, a failure as ``keras-seq: error: ...`` on stderr with exit 2."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "--worker":
        print(f"usage: python -m MODULE --worker KWARGS_JSON (received {argv!r})",
              file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with _contextlib.redirect_stdout(sys.stderr):
            report = run(**json.loads(argv[1]))
    except (ValueError, RuntimeError, ImportError, OSError, NotImplementedError) as err:
        print(f"keras-seq: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    json.dump(report, sys.stdout, default=str)
    sys.stdout.write("\n")
    return 0


@contextlib.contextmanager
def precision_policy(name="off"):
    """Keras's global dtype policy set to ``name`` (``"off"``: float32) while inside."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32" if name == "off" else name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def jit_setting(jit_compile: bool) -> bool:
    """The ``jit_compile`` a model gets: as asked, except on JAX, which always compiles
    (un-jitted JAX runs op by op, which no one trains with)."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    return True if keras.backend.backend() == "jax" else bool(jit_compile)


def jit_label(model) -> str:
    """``"xla"`` (TensorFlow/JAX), ``"torch.compile"`` or ``"no"``: what ``model`` runs."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    if not getattr(model, "jit_compile", False):
        return "no"
    return "torch.compile" if keras.backend.backend() == "torch" else "xla"


def keras_seq_path(layer) -> str:
    """The path a keras-seq layer's latest call took (``layer.last_path``)."""
    return getattr(layer, "last_path", None) or "n/a"


def keras_seq_blockers(layer) -> list[str]:
    """Why ``layer``'s configuration cannot use the cuDNN kernel (empty: it can)."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.layers.dispatch import fused_kernel_blockers

    return fused_kernel_blockers(layer) if hasattr(layer, "cell") else []


@contextlib.contextmanager
def probe_builtin_path(record: list):
    """Append to ``record`` the path each call of Keras's built-in LSTM/GRU takes while
    inside: ``"cudnn"``, ``"backend-loop"`` or ``"loop"`` (see the module docstring).

    Wraps ``keras.src.backend.lstm``/``gru`` and the functions that call cuDNN
    (TensorFlow's and PyTorch's ``_cudnn_lstm``/``_cudnn_gru``, ``jax.experimental.rnn.lstm``);
    a name a Keras version lacks is skipped. Use it around one model's first train step
    (where the step is traced); keras-seq layers must not run inside.
    """
    # lazy: Keras is imported once the backend is chosen
    import keras
    from keras.src import backend as kb

    patches = []
    cudnn_hits = []

    def patch(owner, name, make):
        original = getattr(owner, name, None)
        if original is not None:
            patches.append((owner, name, original))
            setattr(owner, name, make(original))

    def fused(original):
        def wrapper(*args, **kwargs):
            before = len(cudnn_hits)
            try:
                out = original(*args, **kwargs)
            except NotImplementedError:
                record.append("loop")
                raise
            record.append("cudnn" if len(cudnn_hits) > before else "backend-loop")
            return out
        return wrapper

    def cudnn(original):
        def wrapper(*args, **kwargs):
            out = original(*args, **kwargs)
            cudnn_hits.append(1)
            return out
        return wrapper

    name = keras.backend.backend()
    for fn in ("lstm", "gru"):
        patch(kb, fn, fused)
    if name in ("tensorflow", "torch"):
        module = importlib.import_module(f"keras.src.backend.{name}.rnn")
        for fn in ("_cudnn_lstm", "_cudnn_gru"):
            patch(module, fn, cudnn)
    elif name == "jax":
        try:
            # lazy: loads JAX only when this runs
            import jax.experimental.rnn as jax_rnn
        except ImportError:
            jax_rnn = None
        if jax_rnn is not None:
            patch(jax_rnn, "lstm", cudnn)
    try:
        yield record
    finally:
        for owner, attr, original in reversed(patches):
            setattr(owner, attr, original)


def builtin_path(record, cell) -> str:
    """One label from :func:`probe_builtin_path`'s record for a built-in ``cell`` layer."""
    if cell == "simple_rnn" or not record:
        return "loop"
    return record[-1]


def environment() -> dict:
    """Versions and devices of this process's backend (for reports)."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    info = {"backend": keras.backend.backend(), "keras": keras.__version__,
            "python": sys.version.split()[0]}
    backend = info["backend"]
    try:
        module = importlib.import_module({"tensorflow": "tensorflow", "jax": "jax",
                                          "torch": "torch"}[backend])
        info[backend] = getattr(module, "__version__", "?")
        if backend == "jax":
            info["devices"] = [str(d) for d in module.devices()]
        elif backend == "torch" and module.cuda.is_available():
            info["devices"] = [module.cuda.get_device_name(0)]
        elif backend == "tensorflow":
            info["devices"] = [d.name for d in module.config.list_logical_devices()]
    except Exception as err:  # informative only
        info["devices_error"] = repr(err)
    return info
