"""Which Keras backend runs keras-seq, chosen before Keras is imported, and what needs TF.

Keras reads ``KERAS_BACKEND`` once, when ``keras`` is first imported, so the backend of a
process cannot change afterwards. The CLI therefore picks it from ``--backend`` (or
``$KERAS_BACKEND``, else TensorFlow) before any command module imports Keras
(:func:`select_backend`); an in-process caller that already imported Keras with another
backend gets an error that says so.

TensorFlow stays the backend of export and serving, and the writer of TensorBoard logs
and subword tokenization (tensorflow-text) on every backend: :func:`tensorflow_available`
and :func:`require_tensorflow` say where it is missing.

:func:`compiled` runs a model function compiled on the running backend (``tf.function``,
``jax.jit`` over the model's variables, eager under ``torch.no_grad``) and returns numpy,
for evaluation and decoding loops outside ``fit``.

No Keras or TensorFlow import at module level.

>>> requested_backend(["train", "lm", "--backend=jax", "--run-dir", "r"])
'jax'
>>> requested_backend(["train", "lm", "--run-dir", "r"]) is None
True
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

from keras_seq.errors import KerasSeqError

BACKENDS = ("tensorflow", "jax", "torch")
#: the pip package that provides each backend
PACKAGES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}
MIXED_PRECISION = ("off", "mixed_float16", "mixed_bfloat16")


def requested_backend(argv) -> str | None:
    """The value of ``--backend NAME`` / ``--backend=NAME`` in ``argv`` (``None``: absent).

    Read before argparse runs, so the choice is made before anything imports Keras.
    """
    argv = list(argv)
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--backend" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--backend="):
            return arg.split("=", 1)[1]
    return None


def default_backend() -> str:
    """``$KERAS_BACKEND`` if set, else ``tensorflow``."""
    return os.environ.get("KERAS_BACKEND") or "tensorflow"


def installed(name: str) -> bool:
    """Whether the package behind backend (or module) ``name`` can be imported."""
    try:
        return importlib.util.find_spec(PACKAGES.get(name, name)) is not None
    except (ImportError, ValueError):
        return False


def imported_backend() -> str | None:
    """The backend of the Keras already imported in this process (``None``: not yet)."""
    if "keras" not in sys.modules:
        return None
    # lazy: Keras is imported once the backend is chosen
    import keras

    return keras.backend.backend()


def select_backend(name: str | None = None) -> str:
    """Make ``name`` the backend Keras uses (default: the backend of an already imported
    Keras, else :func:`default_backend`).

    Sets ``KERAS_BACKEND`` when Keras is not imported yet. Raises :class:`KerasSeqError`
    for an unknown name, a backend whose package is not installed, or a Keras already
    imported with another backend. Returns the backend name.
    """
    name = name or imported_backend() or default_backend()
    if name not in BACKENDS:
        raise KerasSeqError(f"unknown Keras backend {name!r}; expected one of "
                            f"{', '.join(BACKENDS)} (--backend or $KERAS_BACKEND)")
    if not installed(name):
        raise KerasSeqError(f"the {name} backend needs the {PACKAGES[name]!r} package, which "
                            f"is not installed: pip install {PACKAGES[name]} (or choose "
                            "another --backend)")
    running = imported_backend()
    if running is not None and running != name:
        raise KerasSeqError(
            f"Keras is already imported in this process with the {running} backend, so it "
            f"cannot switch to {name}; set KERAS_BACKEND={name} before starting Python "
            f"(or run `KERAS_BACKEND={name} keras-seq ...` / `keras-seq ... --backend {name}` "
            "in a new process)")
    os.environ["KERAS_BACKEND"] = name
    return name


def tensorflow_available() -> bool:
    """Whether TensorFlow can be imported (it writes TensorBoard logs on every backend)."""
    return installed("tensorflow")


def require_tensorflow(what: str, packages: str = "tensorflow", hint: str = "") -> None:
    """Raise a one-line :class:`KerasSeqError` when TensorFlow is not installed.

    Args:
        what: the feature that needs it (``"export"``, ``"subword tokenization"``…).
        packages: what to ``pip install``.
        hint: appended to the message (another way round it).
    """
    if not tensorflow_available():
        raise KerasSeqError(f"{what} needs TensorFlow, which is not installed: "
                            f"pip install {packages}{hint}")


def require_tensorflow_backend(what: str) -> None:
    """Raise unless TensorFlow is installed and is the Keras backend of this process
    (export and serving trace TensorFlow graphs; ``.keras`` files from any backend load
    under it)."""
    require_tensorflow(what)
    running = imported_backend() or default_backend()
    if running != "tensorflow":
        raise KerasSeqError(
            f"{what} needs the TensorFlow backend, but Keras runs {running} in this process; "
            "run it with KERAS_BACKEND=tensorflow (a .keras checkpoint trained under any "
            "backend loads there)")



def compiled(model, fn, **tf_function_kwargs):
    """``fn`` (a function of arrays that calls ``model``) compiled for the running backend.

    * TensorFlow: ``tf.function(fn, reduce_retracing=True, **tf_function_kwargs)``;
    * JAX: ``jax.jit`` of ``fn`` run statelessly over ``model``'s variables; variables it
      assigns (recurrent state) are written back after each call, so a stateful model
      keeps its state across calls as it does eagerly;
    * other backends: ``fn`` eagerly, without gradient tracking under torch.

    The returned function takes numpy arrays (nested in tuples/lists/dicts) and returns
    ``fn``'s outputs as numpy arrays.
    """
    # lazy: Keras is imported once the backend is chosen
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        graph_fn = tf.function(fn, reduce_retracing=True, **tf_function_kwargs)
        return lambda *args: keras.tree.map_structure(to_numpy, graph_fn(*args))
    if backend == "jax":
        return _jax_compiled(model, fn)

    def eager(*args):
        if backend == "torch":
            # lazy: loads PyTorch only when this runs
            import torch

            with torch.no_grad():
                out = fn(*args)
        else:
            out = fn(*args)
        return keras.tree.map_structure(to_numpy, out)

    return eager


def to_numpy(x):
    """A backend tensor (TensorFlow, JAX, torch) as a numpy array (``None`` stays)."""
    if x is None or isinstance(x, np.ndarray):
        return x
    # lazy: Keras is imported once the backend is chosen
    import keras

    return np.asarray(keras.ops.convert_to_numpy(x))


def _jax_compiled(model, fn):
    # lazy: loads JAX, Keras only when this runs
    import jax
    import keras

    def pure(trainable, other, args):
        variables = model.trainable_variables, model.non_trainable_variables
        mapping = list(zip(variables[0], trainable)) + list(zip(variables[1], other))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            out = fn(*args)
        changed = [scope.get_current_value(v) for v in variables[1]]
        return out, changed

    jitted = jax.jit(pure)

    def call(*args):
        other = model.non_trainable_variables
        out, changed = jitted([v.value for v in model.trainable_variables],
                              [v.value for v in other], args)
        for variable, value in zip(other, changed):
            if value is not None:
                variable.assign(value)
        return keras.tree.map_structure(to_numpy, out)

    return call
