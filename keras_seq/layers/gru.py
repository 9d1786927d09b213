"""Gated recurrent unit (Cho et al. 2014), both ``reset_after`` conventions.

Gates (Keras order z, r, h along the ``3·units`` axis)::

    z_t = σ(x_t W_xz + h_{t-1} W_hz + b_z)            update gate
    r_t = σ(x_t W_xr + h_{t-1} W_hr + b_r)            reset gate
    h̃_t = tanh(x_t W_xh + (r_t ⊙ h_{t-1}) W_hh + b_h)   reset_after=False
    h̃_t = tanh(x_t W_xh + r_t ⊙ (h_{t-1} W_hh + b'_h))  reset_after=True (cuDNN)
    h_t = z_t ⊙ h_{t-1} + (1 − z_t) ⊙ h̃_t

With ``reset_after=True`` the bias is ``(2, 3U)``: row 0 for the input
projection, row 1 for the recurrent one.
"""

from __future__ import annotations

import importlib

import keras
from keras import ops

from keras_seq.layers import dispatch
from keras_seq.layers._base import (
    BaseCell,
    FastRNN,
    activation_name,
    check_implementation,
    fused_kernel,
    read,
)

_CELL_ARGS = (
    "units",
    "activation",
    "recurrent_activation",
    "use_bias",
    "kernel_initializer",
    "recurrent_initializer",
    "bias_initializer",
    "kernel_regularizer",
    "recurrent_regularizer",
    "bias_regularizer",
    "kernel_constraint",
    "recurrent_constraint",
    "bias_constraint",
    "dropout",
    "recurrent_dropout",
    "reset_after",
    "seed",
    "weight_dropout",
    "qat",
)


@keras.saving.register_keras_serializable(package="keras_seq")
class GRUCell(BaseCell):
    """One GRU step, with Keras's weight layout (gate order z, r, h).

    ``kernel`` is ``(D, 3U)``, ``recurrent_kernel`` ``(U, 3U)``, ``bias`` ``(3U,)``
    or, with ``reset_after=True``, ``(2, 3U)``; so
    ``set_weights(keras.layers.GRUCell(...).get_weights())`` works.

    Args:
        units: Positive integer, size of the hidden state.
        activation: Candidate activation. Default ``"tanh"``.
        recurrent_activation: Gate activation. Default ``"sigmoid"``.
        use_bias: Whether to add bias vectors. Default ``True``.
        kernel_initializer: Initializer for ``kernel``. Default ``"glorot_uniform"``.
        recurrent_initializer: Initializer for ``recurrent_kernel``.
            Default ``"orthogonal"``.
        bias_initializer: Initializer for ``bias``. Default ``"zeros"``.
        kernel_regularizer, recurrent_regularizer, bias_regularizer:
            Regularizers for the three weights. Default ``None``.
        kernel_constraint, recurrent_constraint, bias_constraint:
            Constraints for the three weights. Default ``None``.
        dropout: Fraction of the inputs to drop (one mask per sequence). Default 0.
        recurrent_dropout: Fraction of ``h_{t-1}`` to drop in the recurrent
            matmuls (one mask per sequence). Default 0.
        reset_after: Apply the reset gate after the recurrent matmul (Keras
            and cuDNN default, ``True``) or before it (the original paper).
        seed: Random seed for dropout.
        implementation: Keras's legacy gate-matmul choice, 0, 1 or 2; accepted for code
            written for Keras, same results either way (1 is said in one line).
        weight_dropout: DropConnect on ``recurrent_kernel`` (one mask per sequence,
            Merity et al. 2017's weight drop); a regulariser for small corpora.
            Default 0.
        qat: Quantization-aware training: ``"int8"`` or ``"int4"`` rounds ``kernel`` and
            ``recurrent_kernel`` in every pass to the symmetric per-output-channel grid
            TFLite's exporters use (:mod:`keras_seq.layers.quant`), so the exported
            quantized model computes what was trained. Default ``None`` (float).

    Call arguments:
        inputs: ``(batch, features)``, one timestep.
        states: list with one ``(batch, units)`` tensor.
        training: Whether dropout is active.

    Returns ``(h, [h])``, each ``(batch, units)``.

    Example:

    >>> import numpy as np, keras
    >>> rnn = keras.layers.RNN(GRUCell(4, reset_after=False))
    >>> tuple(rnn(np.zeros((2, 5, 3), "float32")).shape)
    (2, 4)
    """

    ARGS = _CELL_ARGS
    num_gates = 3

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        reset_after=True,
        implementation=2,
        **kwargs,
    ):
        check_implementation("GRUCell", implementation)
        super().__init__(units, activation=activation, **kwargs)
        self.implementation = implementation  # Keras's name; not in the config (as Keras)
        self.recurrent_activation = keras.activations.get(recurrent_activation)
        self.reset_after = reset_after
        self.state_size = units

    def _bias_shape(self):
        return (2, 3 * self.units) if self.reset_after else (3 * self.units,)

    def _input_bias(self):
        return self.bias[0] if self.reset_after else self.bias

    def step_params(self, training=False):
        params = super().step_params(training=training)
        rk = params["recurrent_kernel"]  # (U, 3U), DropConnect-ed when training
        if self.reset_after and self.use_bias:
            params["recurrent_bias"] = read(self.bias)[1]
        if not self.reset_after:
            params["kernel_zr"], params["kernel_h"] = (
                rk[:, : 2 * self.units],
                rk[:, 2 * self.units :],
            )
        return params

    def activation_points(self):
        # the outputs TFLite quantizes in an int8 step, in order (qat="int8")
        if self.reset_after:
            return ("xp", "h", "hp", "zr", "rh", "hin", "zh", "omz", "omz_hh")
        return ("xp", "h", "hzr", "zr", "rh", "hr", "hin", "zh", "omz", "omz_hh")

    def recurrent_step(self, x_proj, states, params, rec_mask=None):
        aq, aq_fixed = self._aq, self._aq_fixed  # identities unless qat="int8"
        x_proj = aq("xp", x_proj)  # (B, 3U): the input FULLY_CONNECTED's output
        h_tm1 = aq("h", states[0])  # (B, U)
        h_rec = h_tm1 if rec_mask is None else h_tm1 * rec_mask
        gate = self.recurrent_activation
        u = self.units
        x_zr, x_h = x_proj[:, : 2 * u], x_proj[:, 2 * u :]  # (B, 2U), (B, U)
        if self.reset_after:
            inner = ops.matmul(h_rec, params["recurrent_kernel"])  # (B, 3U)
            if "recurrent_bias" in params:
                inner = inner + params["recurrent_bias"]
            inner = aq("hp", inner)
            zr = aq_fixed("sigmoid", gate(aq("zr", x_zr + inner[:, : 2 * u])))  # (B, 2U)
            z, r = zr[:, :u], zr[:, u:]
            candidate = aq("hin", x_h + aq("rh", r * inner[:, 2 * u :]))  # (B, U)
        else:
            zr = aq_fixed("sigmoid", gate(aq("zr", x_zr + aq(
                "hzr", ops.matmul(h_rec, params["kernel_zr"])))))  # (B, 2U)
            z, r = zr[:, :u], zr[:, u:]
            recurrent = aq("hr", ops.matmul(aq("rh", r * h_rec), params["kernel_h"]))
            candidate = aq("hin", x_h + recurrent)  # (B, U)
        hh = aq_fixed("tanh", self.activation(candidate))  # (B, U)
        h = aq("h", aq("zh", z * h_tm1) + aq("omz_hh", aq("omz", 1.0 - z) * hh))  # (B, U)
        return h, [h]

    cudnn_kind = "gru"

    def cudnn_sequence(self, sequences, states, mask, params, return_sequences, go_backwards):
        # lazy: Keras is imported once the backend is chosen
        from keras.src import backend

        if keras.backend.backend() == "torch":
            # lazy: imports torch (by module name: the package's `rnn` is a function)
            torch_rnn = importlib.import_module("keras.src.backend.torch.rnn")

            return dispatch.run_torch_kernel(
                torch_rnn._cudnn_gru, sequences, states, self._cudnn_kernel(),
                params["recurrent_kernel"], self.bias, return_sequences, go_backwards)
        return backend.gru(
            sequences, states[0], mask,  # (B, T, D), (B, U), (B, T)
            kernel=self._cudnn_kernel(), recurrent_kernel=params["recurrent_kernel"],
            bias=self.bias, activation=self.activation,
            recurrent_activation=self.recurrent_activation,
            return_sequences=return_sequences, go_backwards=go_backwards,
            reset_after=self.reset_after,
        )

    def supports_fused(self):
        names = activation_name(self.activation), activation_name(self.recurrent_activation)
        return (names == ("tanh", "sigmoid") and self.qat != "int8"
                and fused_kernel("gru_sequence") is not None)

    def fused_sequence(self, xs, states, params, training=False):
        hs, h = fused_kernel("gru_sequence", training)(
            xs,
            states[0],
            params["recurrent_kernel"],
            params.get("recurrent_bias"),
            reset_after=self.reset_after,
        )
        return hs, [h]


@keras.saving.register_keras_serializable(package="keras_seq")
class GRU(FastRNN):
    """GRU layer with a fast loop; a drop-in for ``keras.layers.GRU``.

    All timesteps' input projections are computed in one ``(B, T, D) @ (D, 3U)``
    matmul, then a minimal loop runs the recurrent matmul(s) per step. Weights,
    arguments, masking and outputs match ``keras.layers.GRU`` (both
    ``reset_after`` values).

    Args:
        units: Positive integer, size of the hidden state.
        activation, recurrent_activation, use_bias, kernel_initializer,
        recurrent_initializer, bias_initializer, kernel_regularizer,
        recurrent_regularizer, bias_regularizer, kernel_constraint,
        recurrent_constraint, bias_constraint, dropout, recurrent_dropout,
        reset_after, seed, implementation, weight_dropout, qat: as in :class:`GRUCell`.
        return_sequences: Return the whole output sequence. Default ``False``.
        return_state: Also return the final state. Default ``False``.
        go_backwards: Process the sequence backwards (outputs come reversed).
        stateful: Carry the final state of batch ``k`` into batch ``k + 1``;
            needs a static batch size; ``reset_state()`` zeroes it.
        unroll: Force a Python-unrolled loop (short sequences are unrolled anyway).
        use_cudnn: ``"auto"`` (default) runs the backend's fused cuDNN kernel on a GPU
            when the configuration allows it (:mod:`keras_seq.layers.dispatch`),
            ``False`` never, ``True`` always (an error naming the reason when it can't).
        activity_regularizer: Regularizer applied to the layer's output.

    Call arguments:
        sequences: ``(batch, timesteps, features)``.
        initial_state: optional list with one ``(batch, units)`` tensor.
        mask: optional boolean ``(batch, timesteps)``; ``False`` steps are skipped
            (state and output carried over).
        training: Whether dropout is active.

    Returns ``(batch, units)`` or ``(batch, timesteps, units)``; with
    ``return_state`` also the final ``(batch, units)``.

    Example:

    >>> import numpy as np
    >>> tuple(GRU(4)(np.zeros((2, 5, 3), "float32")).shape)
    (2, 4)
    """

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        weight_dropout=0.0,
        qat=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        reset_after=True,
        use_cudnn="auto",
        implementation=2,
        **kwargs,
    ):
        cell = GRUCell(
            units,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            reset_after=reset_after,
            seed=seed,
            weight_dropout=weight_dropout,
            qat=qat,
            implementation=implementation,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="gru_cell",
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            use_cudnn=use_cudnn,
            **kwargs,
        )
