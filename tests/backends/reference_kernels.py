"""CPU stand-ins for the GPU-only fused RNN kernels, of the same contract, so that each
backend's real Keras ``lstm()``/``gru()`` code (and keras-seq's call of it) runs end to end
on a CPU. Only the device kernel and the device checks are replaced:

- TensorFlow: ``tf.raw_ops.CudnnRNNV3`` (GPU kernels only) by :func:`tf_cudnn_rnn_v3`,
  which unpacks the flat cuDNN ``params`` vector (per-gate ``(units, in)`` blocks, input
  weights, recurrent weights, then input and recurrent biases; LSTM gates i, f, c, o; GRU
  gates r, z, h) into a step loop that honours ``sequence_lengths`` as cuDNN does (zero
  outputs past a row's length, final state at it). So keras-seq's arguments and Keras's
  packing (``_cudnn_lstm``/``_cudnn_gru``) are checked against cuDNN's documented layout.
- JAX: ``jax.experimental.rnn.lstm`` (a cuDNN custom call) by :func:`jax_lstm`, which
  unpacks the weights with ``jax.experimental.rnn.unpack_lstm_weights`` and runs JAX's own
  ``lstm_ref``. Like the real kernel it takes float32 only: the real one fails when XLA
  compiles the step (jaxlib ``gpu_rnn``: "Unknown output type"), past Keras's try/except,
  so the stand-in raises :class:`KernelContractError`, which nothing catches.
- PyTorch: nothing replaced: ``torch._VF.lstm``/``gru`` (what Keras's ``_cudnn_lstm`` and
  ``_cudnn_gru`` call, cuDNN on a CUDA device) run on the CPU; only keras-seq's device
  check is bypassed. Calls are counted.

``install(monkeypatch)`` patches the running backend and returns a dict of call counts.
"""

from __future__ import annotations

import importlib

import keras
import numpy as np

from keras_seq.layers import dispatch


class KernelContractError(Exception):
    """The stand-in kernel was called outside the real kernel's contract (not caught by
    Keras's backend code, as the real failure is not)."""


def tf_cudnn_rnn_v3(input, input_h, input_c, params, is_training, rnn_mode,  # noqa: A002
                    sequence_lengths, time_major=False, **_):
    """``CudnnRNNV3`` for ``rnn_mode`` ``"lstm"``/``"gru"``, one layer, one direction."""
    import tensorflow as tf

    if time_major:
        raise KernelContractError("the reference takes batch-major inputs only")
    units, dim = input_h.shape[-1], input.shape[-1]
    gates = {"lstm": 4, "gru": 3}[rnn_mode]
    sizes = [units * dim] * gates + [units * units] * gates + [units] * (2 * gates)
    if params.shape[0] != sum(sizes):
        raise KernelContractError(f"params has {params.shape[0]} values; cuDNN expects "
                                  f"{sum(sizes)} for {rnn_mode} units={units} input={dim}")
    blocks = tf.split(params, sizes)
    w = [tf.reshape(b, (units, dim)) for b in blocks[:gates]]  # (U, D) each
    r = [tf.reshape(b, (units, units)) for b in blocks[gates:2 * gates]]  # (U, U)
    bw, br = blocks[2 * gates:3 * gates], blocks[3 * gates:]
    h = input_h[:, 0]  # (B, U): batch-major state is (B, layers, U)
    c = input_c[:, 0] if rnn_mode == "lstm" else None
    outputs = []
    for t in range(input.shape[1]):
        x = input[:, t]  # (B, D)
        wx = [tf.matmul(x, wg, transpose_b=True) + bg for wg, bg in zip(w, bw)]
        rh = [tf.matmul(h, rg, transpose_b=True) + bg for rg, bg in zip(r, br)]
        if rnn_mode == "lstm":
            i, f = tf.sigmoid(wx[0] + rh[0]), tf.sigmoid(wx[1] + rh[1])
            g, o = tf.tanh(wx[2] + rh[2]), tf.sigmoid(wx[3] + rh[3])
            c_new = f * c + i * g
            h_new = o * tf.tanh(c_new)
        else:  # cuDNN's GRU: reset gate, update gate, new memory (reset after R·h)
            reset, update = tf.sigmoid(wx[0] + rh[0]), tf.sigmoid(wx[1] + rh[1])
            cand = tf.tanh(wx[2] + reset * rh[2])
            h_new = (1 - update) * cand + update * h
        active = tf.expand_dims(t < sequence_lengths, 1)  # (B, 1)
        h = tf.where(active, h_new, h)
        if c is not None:
            c = tf.where(active, c_new, c)
        outputs.append(tf.where(active, h_new, tf.zeros_like(h_new)))
    out = tf.stack(outputs, axis=1)  # (B, T, U)
    c_out = tf.expand_dims(c, 1) if c is not None else tf.zeros_like(input_h)
    return out, tf.expand_dims(h, 1), c_out, tf.zeros([0]), tf.zeros([0], tf.int8)


def jax_lstm(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers,
             dropout, bidirectional, precision=None):
    """``jax.experimental.rnn.lstm`` through its reference ``lstm_ref`` (float32 only)."""
    import jax.numpy as jnp
    from jax.experimental import rnn

    dtypes = {str(a.dtype) for a in (x, h_0, c_0, weights)}
    if dtypes != {"float32"}:
        raise KernelContractError(
            f"jax.experimental.rnn.lstm got {sorted(dtypes)}; its cuDNN lowering takes "
            "float32 only (jaxlib gpu_rnn raises 'Unknown output type' when XLA compiles)")
    w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(weights, input_size, hidden_size,
                                                     num_layers, bidirectional)
    return rnn.lstm_ref(x, h_0, c_0, w_ih, w_hh, b_ih, b_hh, jnp.asarray(seq_lengths),
                        input_size, hidden_size, num_layers, dropout, bidirectional)


def install(monkeypatch):
    """Make the running backend's fused path runnable on this CPU; returns call counts
    ``{"lstm": n, "gru": n}`` of the (stand-in or real) device kernel."""
    calls = {"lstm": 0, "gru": 0}
    backend = keras.backend.backend()
    monkeypatch.setattr(dispatch, "gpu_available", lambda: True)

    def counted(kind, fn):
        def wrapper(*args, **kwargs):
            calls[kind if kind != "v3" else kwargs["rnn_mode"]] += 1
            return fn(*args, **kwargs)
        return wrapper

    if backend == "tensorflow":
        import tensorflow as tf

        keras_rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")
        monkeypatch.setattr(keras_rnn, "_is_gpu_available", lambda: True)
        monkeypatch.setattr(tf.raw_ops, "CudnnRNNV3", counted("v3", tf_cudnn_rnn_v3))
    elif backend == "jax":
        from jax.experimental import rnn

        keras_rnn = importlib.import_module("keras.src.backend.jax.rnn")
        monkeypatch.setattr(keras_rnn, "_is_gpu_available", lambda: True)
        monkeypatch.setattr(rnn, "lstm", counted("lstm", jax_lstm))
    elif backend == "torch":
        import torch

        monkeypatch.setattr(dispatch, "torch_runtime_blocker", lambda inputs: None)
        monkeypatch.setattr(torch._VF, "lstm", counted("lstm", torch._VF.lstm))
        monkeypatch.setattr(torch._VF, "gru", counted("gru", torch._VF.gru))
    return calls


def grads(fn, variables):
    """Gradients of the scalar ``fn()`` with respect to Keras ``variables`` (numpy):
    ``tf.GradientTape``, ``jax.grad`` through ``keras.StatelessScope``, or
    ``torch.autograd.grad``."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = fn()
        return [np.asarray(g) for g in tape.gradient(loss, [v.value for v in variables])]
    if backend == "jax":
        import jax

        def pure(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return fn()

        # Compiled, as Keras's JAX trainer runs it (and an eager scan is slow).
        return [np.asarray(g) for g in jax.jit(jax.grad(pure))([v.value for v in variables])]
    if backend == "torch":
        import torch

        loss = fn()
        return [g.detach().cpu().float().numpy()
                for g in torch.autograd.grad(loss, [v.value for v in variables])]
    raise NotImplementedError(f"grads: no gradient helper for the {backend!r} backend")
