"""An LSTM that the TFLite converter fuses into ``UNIDIRECTIONAL_SEQUENCE_LSTM``.

Keras 3 LSTMs (and keras-seq's) convert to a TFLite ``WHILE`` loop. The converter's
composite-function pass (``ConvertKerasLSTMLayer``) replaces a ``tf.function`` carrying
``experimental_attributes={"api_implements": "lstm_<id>", "time_major": ..,
"go_backwards": ..}`` by the fused builtin op when (GUIDE §3, verified on TF 2.21):

* its positional arguments are ``(inputs, init_h, init_c, kernel, recurrent_kernel, bias)``
  passed as *tensors* (read variables first: ``tf.Variable`` arguments crash the pass);
* it returns exactly five results ``(last_output, outputs, h, c, runtime)``;
* gate order is i, f, c, o along the ``4·units`` axis (Keras's layout);
* shapes are static and there is no mask;
* only results 0 and 1 are used downstream (2–4 become zeros in the fused graph).

In the fused op the state lives in *variable tensors* that persist across
``Interpreter.invoke()`` calls, so a length-1 model streams token by token with internal
state; ``interpreter.reset_all_variables()`` starts a new stream.

Example:

>>> import numpy as np, tensorflow as tf
>>> x = tf.zeros((1, 3, 2)); h = tf.zeros((1, 4))
>>> k, rk, b = tf.zeros((2, 16)), tf.zeros((4, 16)), tf.zeros((16,))
>>> tuple(fused_lstm(x, h, h, k, rk, b)[1].shape)
(1, 3, 4)
"""

from __future__ import annotations

import uuid

import tensorflow as tf


def _lstm_body(inputs, init_h, init_c, kernel, recurrent_kernel, bias):
    """Batch-major LSTM over a static-length sequence (gate order i, f, c, o)."""
    steps = inputs.shape[1]
    x_proj = tf.einsum("btd,dg->btg", inputs, kernel) + bias  # (B, T, 4U)
    h, c = init_h, init_c
    outputs = []
    for t in range(steps):  # static length: unrolled in TF, fused away by the converter
        z = x_proj[:, t] + tf.matmul(h, recurrent_kernel)  # (B, 4U)
        z_i, z_f, z_c, z_o = tf.split(z, 4, axis=-1)
        c = tf.sigmoid(z_f) * c + tf.sigmoid(z_i) * tf.tanh(z_c)
        h = tf.sigmoid(z_o) * tf.tanh(c)
        outputs.append(h)
    outputs = tf.stack(outputs, axis=1)  # (B, T, U)
    runtime = tf.constant(0.0)  # Keras's "runtime" result (which kernel ran); unused
    return outputs[:, -1], outputs, h, c, runtime


def make_fused_lstm():
    """A fresh composite function (each one gets its own ``api_implements`` id)."""
    attributes = {"api_implements": f"lstm_{uuid.uuid4()}", "time_major": False,
                  "go_backwards": False}
    return tf.function(_lstm_body, experimental_attributes=attributes, autograph=False)


def fused_lstm(inputs, init_h, init_c, kernel, recurrent_kernel, bias):
    """Run one LSTM layer through a composite function: ``(B, T, D) → 5 results``.

    Args:
        inputs: ``(B, T, D)`` float tensor, static shape.
        init_h, init_c: ``(B, U)`` initial states.
        kernel, recurrent_kernel, bias: tensors ``(D, 4U)``, ``(U, 4U)``, ``(4U,)``.

    Returns ``(last_output (B, U), outputs (B, T, U), h, c, runtime)``; after TFLite fusion
    only the first two are meaningful.
    """
    tensors = [tf.convert_to_tensor(t) for t in
               (inputs, init_h, init_c, kernel, recurrent_kernel, bias)]
    return make_fused_lstm()(*tensors)
