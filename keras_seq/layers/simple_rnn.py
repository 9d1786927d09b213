"""Elman RNN: ``h_t = φ(x_t W_xh + h_{t-1} W_hh + b)``."""

from __future__ import annotations

import keras
from keras import ops

from keras_seq.layers._base import BaseCell, FastRNN, activation_name, fused_kernel

#: The constructor arguments every cell shares, in Keras's order (a new cell's ``ARGS``
#: starts with them: docs/architecture.md).
CELL_ARGS = (
    "units",
    "activation",
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
    "seed",
    "weight_dropout",
    "qat",
)


@keras.saving.register_keras_serializable(package="keras_seq")
class SimpleRNNCell(BaseCell):
    """One step of a fully connected RNN, with Keras's weight layout.

    ``h_t = activation(x_t @ kernel + h_{t-1} @ recurrent_kernel + bias)``. The
    weights (``kernel`` ``(D, U)``, ``recurrent_kernel`` ``(U, U)``, ``bias``
    ``(U,)``) are laid out like ``keras.layers.SimpleRNNCell``'s, so
    ``set_weights(keras_cell.get_weights())`` works.

    Args:
        units: Positive integer, size of the hidden state.
        activation: ``"tanh"`` (default) or ``"relu"`` (any Keras activation).
        use_bias: Whether to add a bias vector. Default ``True``.
        kernel_initializer: Initializer for ``kernel``. Default ``"glorot_uniform"``.
        recurrent_initializer: Initializer for ``recurrent_kernel``.
            Default ``"orthogonal"``.
        bias_initializer: Initializer for ``bias``. Default ``"zeros"``.
        kernel_regularizer: Regularizer for ``kernel``. Default ``None``.
        recurrent_regularizer: Regularizer for ``recurrent_kernel``.
        bias_regularizer: Regularizer for ``bias``.
        kernel_constraint: Constraint for ``kernel``.
        recurrent_constraint: Constraint for ``recurrent_kernel``.
        bias_constraint: Constraint for ``bias``.
        dropout: Fraction of the inputs to drop (one mask per sequence). Default 0.
        recurrent_dropout: Fraction of the previous state to drop in the
            recurrent matmul (one mask per sequence). Default 0.
        seed: Random seed for dropout.
        weight_dropout: DropConnect on ``recurrent_kernel`` (one mask per sequence,
            Merity et al. 2017's weight drop); a regulariser for small corpora.
            Default 0.
        qat: Quantization-aware training: ``"int8"`` or ``"int4"`` rounds ``kernel`` and
            ``recurrent_kernel`` in every pass to the symmetric per-output-channel grid
            TFLite's exporters use (:mod:`keras_seq.layers.quant`), so the exported
            quantized model computes what was trained. Default ``None`` (float).

    Call arguments:
        inputs: ``(batch, features)``, one timestep.
        states: list with one ``(batch, units)`` tensor, the previous state.
        training: Whether dropout is active.

    Returns ``(output, [new_state])``, both ``(batch, units)``.

    Example:

    >>> import numpy as np, keras
    >>> rnn = keras.layers.RNN(SimpleRNNCell(4))
    >>> tuple(rnn(np.zeros((2, 5, 3), "float32")).shape)
    (2, 4)
    """

    ARGS = CELL_ARGS

    def __init__(self, units, activation="tanh", **kwargs):
        super().__init__(units, activation=activation, **kwargs)
        self.state_size = units

    ACTIVATION_POINTS = ("z",)  # qat="int8": the FULLY_CONNECTED's output; h is tanh's

    def recurrent_step(self, x_proj, states, params, rec_mask=None):
        h_tm1 = self._aq_fixed("tanh", states[0])  # (B, U): h is a tanh output
        if rec_mask is not None:
            h_tm1 = h_tm1 * rec_mask
        kernel = params["recurrent_kernel"]  # None: x_proj holds h·R already (merged_step)
        z = x_proj if kernel is None else x_proj + ops.matmul(h_tm1, kernel)  # (B, U)
        h = self._aq_fixed("tanh", self.activation(self._aq("z", z)))  # (B, U)
        return h, [h]

    merges_recurrent_matmul = True  # z = x·W + h·R + b: see BaseCell.merged_step

    def supports_fused(self):
        return (activation_name(self.activation) in ("tanh", "relu") and self.qat != "int8"
                and fused_kernel("simple_rnn_sequence") is not None)

    def fused_sequence(self, xs, states, params, training=False):
        relu = activation_name(self.activation) == "relu"
        run = fused_kernel("simple_rnn_sequence", training)
        hs, h = run(xs, states[0], params["recurrent_kernel"], relu=relu)
        return hs, [h]


@keras.saving.register_keras_serializable(package="keras_seq")
class SimpleRNN(FastRNN):
    """Fully connected RNN layer with a fast loop; a drop-in for ``keras.layers.SimpleRNN``.

    All timesteps' input projections are computed in one matmul, then a minimal
    loop runs one ``h @ recurrent_kernel`` per step. Weights, arguments, masking
    and outputs match ``keras.layers.SimpleRNN``.

    Args:
        units: Positive integer, size of the hidden state.
        activation: ``"tanh"`` (default) or ``"relu"``.
        use_bias, kernel_initializer, recurrent_initializer, bias_initializer,
        kernel_regularizer, recurrent_regularizer, bias_regularizer,
        kernel_constraint, recurrent_constraint, bias_constraint, dropout,
        recurrent_dropout, seed, weight_dropout, qat: as in :class:`SimpleRNNCell`.
        return_sequences: Return the whole output sequence instead of the last
            output. Default ``False``.
        return_state: Also return the final state. Default ``False``.
        go_backwards: Process the sequence backwards (outputs come reversed).
        stateful: Carry the final state of batch ``k`` into batch ``k + 1``;
            needs a static batch size; ``reset_state()`` zeroes it.
        unroll: Force a Python-unrolled loop (short sequences are unrolled
            anyway; see ``keras_seq.layers._fast_rnn.UNROLL_MAX_STEPS``).
        activity_regularizer: Regularizer applied to the layer's output.

    Call arguments:
        sequences: ``(batch, timesteps, features)``.
        initial_state: optional list with one ``(batch, units)`` tensor.
        mask: optional boolean ``(batch, timesteps)``; ``False`` steps are skipped
            (state and output carried over).
        training: Whether dropout is active.

    Returns ``(batch, units)``, or ``(batch, timesteps, units)`` with
    ``return_sequences``; with ``return_state`` also the final ``(batch, units)``.

    Example:

    >>> import numpy as np
    >>> layer = SimpleRNN(4, activation="relu", return_sequences=True)
    >>> tuple(layer(np.zeros((2, 5, 3), "float32")).shape)
    (2, 5, 4)
    """

    def __init__(
        self,
        units,
        activation="tanh",
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
        **kwargs,
    ):
        cell = SimpleRNNCell(
            units,
            activation=activation,
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
            seed=seed,
            weight_dropout=weight_dropout,
            qat=qat,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="simple_rnn_cell",
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            **kwargs,
        )
