"""Which loop a keras-seq recurrent layer runs, on every Keras backend.

Three paths, chosen per call:

- ``"cudnn"``: the backend's fused kernel, through Keras's own backend functions
  (``keras/src/backend/{tensorflow,jax,torch}/rnn.py`` ``lstm()``/``gru()``: TensorFlow's
  ``CudnnRNNV3``, ``jax.experimental.rnn``, PyTorch's cuDNN RNN), fed the layer's own
  weights (they already use Keras's layout). Only on a GPU, and only when the
  configuration allows it (:func:`fused_kernel_blockers`).
- ``"fused-loop"``: keras-seq's own whole-sequence kernel with a hand-written gradient,
  one module per backend (``_fused.py``: a ``tf.while_loop``; ``_fused_jax.py``: a
  ``lax.scan`` under ``jax.custom_vjp``; ``_fused_torch.py``: a
  ``torch.autograd.Function``): no mask, no recurrent dropout, standard activations.
- ``"loop"``: everything else; one step of the cell per timestep (``_fast_rnn.py`` on
  TensorFlow, ``keras.src.backend.rnn`` on JAX and PyTorch), after one matmul that
  projects every timestep's input.

``use_cudnn`` works as in Keras: ``"auto"`` takes the kernel when it can, ``False`` never
does, ``True`` raises an error naming the reason when it cannot.

Example:

>>> from keras_seq.layers import GRU, LSTM
>>> fused_kernel_blockers(LSTM(8))
[]
>>> for reason in fused_kernel_blockers(GRU(8, reset_after=False, recurrent_dropout=0.1)):
...     print(reason)
recurrent_dropout=0.1 (the fused kernel has no per-step dropout)
reset_after=False (cuDNN computes the reset gate after the recurrent matmul: reset_after=True)
"""

from __future__ import annotations

import functools

import keras
from keras import ops


def check_use_cudnn(value):
    """``value`` if it is ``"auto"``, ``True`` or ``False``; else a ValueError that says so."""
    if not (value is True or value is False or value == "auto"):
        raise ValueError(
            f"received use_cudnn={value!r}; expected 'auto' (the fused cuDNN kernel when the "
            "device and configuration allow it), True (always; an error when it can't) or "
            "False (never)."
        )
    return value


@functools.cache
def gpu_available() -> bool:
    """Whether the current Keras backend sees a GPU that its fused RNN kernels can use
    (asked once per process: every layer call consults it)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        return bool(tf.config.list_logical_devices("GPU"))
    if backend == "jax":
        # lazy: loads JAX only when this runs
        import jax

        return jax.default_backend() == "gpu"
    if backend == "torch":
        # lazy: loads PyTorch only when this runs
        import torch

        return torch.cuda.is_available() and torch.backends.cudnn.is_available()
    return False


def _is(fn, *candidates):
    return any(fn is c for c in candidates)


def fused_kernel_blockers(layer) -> list[str]:
    """Reasons, in words, why ``layer``'s configuration cannot run the fused cuDNN kernel.

    Empty when it can (the device is not considered here: see :func:`gpu_available`).
    """
    cell = layer.cell
    kind = getattr(cell, "cudnn_kind", None)
    if kind is None:
        return [f"{type(cell).__name__} has no fused cuDNN kernel (LSTM and GRU have)"]
    reasons = []
    if not _is(cell.activation, keras.activations.tanh, ops.tanh):
        reasons.append(f"activation={_name(cell.activation)!r} (cuDNN computes 'tanh')")
    if not _is(cell.recurrent_activation, keras.activations.sigmoid, ops.sigmoid):
        reasons.append(f"recurrent_activation={_name(cell.recurrent_activation)!r} "
                       "(cuDNN computes 'sigmoid')")
    if not cell.use_bias:
        reasons.append("use_bias=False (the fused kernel always adds biases)")
    if layer.unroll:
        reasons.append("unroll=True (the fused kernel is a loop of its own)")
    if cell.recurrent_dropout:
        reasons.append(f"recurrent_dropout={cell.recurrent_dropout} "
                       "(the fused kernel has no per-step dropout)")
    if kind == "lstm" and getattr(cell, "coupled_input_forget", False):
        reasons.append("coupled_input_forget=True (cuDNN has no CIFG LSTM)")
    if getattr(cell, "qat", None) == "int8":
        reasons.append("qat='int8' (activations are rounded inside every step; the fused "
                       "kernel computes them in float)")
    if kind == "gru" and not cell.reset_after:
        reasons.append("reset_after=False (cuDNN computes the reset gate after the "
                       "recurrent matmul: reset_after=True)")
    return reasons


def _name(fn):
    return getattr(fn, "__name__", repr(fn))


def mask_blocker(mask) -> str | None:
    """Why a mask stops the fused kernel on this backend (None: it does not, or only
    at run time when it is not right-padded, which the layer checks)."""
    if mask is None or keras.backend.backend() == "tensorflow":
        return None
    return (f"a mask (the {keras.backend.backend()} backend's fused kernel takes none; "
            "TensorFlow's takes right-padded masks)")


def cudnn_mask_ok(mask):
    """A scalar boolean tensor: every row of ``mask (B, T)`` is right-padded and not empty.

    TensorFlow's cuDNN call asserts both at run time; a layer checks first and runs its
    loop instead, so a left-padded batch falls back rather than failing.
    """
    mask = ops.cast(mask, "int32")  # (B, T)
    lengths = ops.sum(mask, axis=1)  # (B,)
    steps = ops.arange(ops.shape(mask)[1], dtype="int32")  # (T,)
    prefix = ops.cast(ops.expand_dims(steps, 0) < ops.expand_dims(lengths, 1), "int32")
    return ops.logical_and(ops.all(ops.equal(mask, prefix)), ops.all(lengths > 0))


def backend_blocker(layer) -> str | None:
    """Why this backend has no fused kernel for ``layer``'s cell (None: it has one)."""
    if keras.backend.backend() != "jax":
        return None
    if getattr(layer.cell, "cudnn_kind", None) == "gru":
        # Keras's JAX gru() is a lax.scan like this layer's own loop, on every device.
        return "the JAX backend has no fused GRU kernel (jax.experimental.rnn has LSTM only)"
    if layer.compute_dtype != "float32":
        # jaxlib's cuDNN lowering (gpu_rnn._rnn_fwd_lowering) raises "Unknown output type"
        # for float16/bfloat16 when XLA compiles the step, after Keras's try/except.
        return (f"compute dtype {layer.compute_dtype} (jax.experimental.rnn's cuDNN LSTM "
                "handles float32 only)")
    return None


def torch_runtime_blocker(inputs) -> str | None:
    """Why PyTorch's cuDNN call cannot run on ``inputs`` now (None: it can): the checks
    Keras's torch ``lstm()``/``gru()`` make before calling it (inputs on a CUDA device, not
    inside a TorchScript trace or ``torch.compile``)."""
    import torch  # lazy: only the torch backend calls this

    if inputs.device.type != "cuda":
        return f"the inputs are on {inputs.device.type}, not a CUDA device"
    if torch.jit.is_tracing():
        return "inside a TorchScript trace"
    if torch.compiler.is_compiling():
        return "inside torch.compile (Keras's torch kernel call is eager only)"
    return None


def run_torch_kernel(cudnn_fn, inputs, states, kernel, recurrent_kernel, bias,
                     return_sequences, go_backwards):
    """Keras's torch ``lstm()``/``gru()``, with its cuDNN call made here so that what ran
    is known: Keras's own ``lstm()`` silently runs a loop of its own when the device check
    fails or the cuDNN call raises, and its caller cannot tell.

    ``cudnn_fn`` is ``keras.src.backend.torch.rnn._cudnn_lstm`` or ``_cudnn_gru``.
    Returns ``(last (B, U), outputs (B, T or 1, U), states)`` in computed order (reversed
    for ``go_backwards``, as the loop); raises NotImplementedError naming why not.
    """
    import torch  # lazy: only the torch backend calls this
    from keras.src.backend.torch.core import convert_to_tensor

    kernel = convert_to_tensor(kernel)
    recurrent_kernel = convert_to_tensor(recurrent_kernel)
    bias = convert_to_tensor(bias)
    inputs = convert_to_tensor(inputs).to(kernel.dtype)  # as Keras: the kernel's dtype
    states = [convert_to_tensor(s).to(kernel.dtype) for s in states]
    reason = torch_runtime_blocker(inputs)
    if reason:
        raise NotImplementedError(reason)
    if go_backwards:
        inputs = torch.flip(inputs, dims=[1])
    try:
        return cudnn_fn(inputs, *states, kernel, recurrent_kernel, bias,
                        return_sequences=return_sequences, device=inputs.device)
    except Exception as err:  # noqa: BLE001 - what Keras's lstm()/gru() swallow
        raise NotImplementedError(
            f"PyTorch's cuDNN call failed ({type(err).__name__}: {err})") from err


def decide(layer, mask) -> tuple[bool, str]:
    """``(use the fused kernel?, why not)`` for one call of ``layer`` with ``mask``.

    Raises ValueError when ``layer.use_cudnn is True`` and the kernel cannot run.
    """
    if layer.use_cudnn is False:
        return False, "use_cudnn=False"
    reasons = fused_kernel_blockers(layer)
    reasons += [b for b in (backend_blocker(layer), mask_blocker(mask)) if b]
    if not reasons and not gpu_available():
        reasons.append(f"no GPU visible to the {keras.backend.backend()} backend")
    if reasons and layer.use_cudnn is True:
        raise ValueError(
            f"{layer.name}: use_cudnn=True, but the fused cuDNN kernel cannot run: "
            + "; ".join(reasons) + ". Pass use_cudnn='auto' to run the keras-seq loop instead."
        )
    return not reasons, "; ".join(reasons)
