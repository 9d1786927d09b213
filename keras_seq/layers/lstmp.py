"""LSTM with a recurrent projection layer (LSTMP; Sak, Senior & Beaufays 2014), optionally CIFG.

Gates (Keras order i, f, c, o along the ``G·units`` axis, ``G = 4``)::

    z_t = x_t W + h_{t-1} R + b                  W (D, G·U), R (P, G·U), b (G·U,)
    c_t = f_t ⊙ c_{t-1} + i_t ⊙ tanh(z_c)
    m_t = o_t ⊙ tanh(c_t)                        (B, U)
    h_t = m_t W_p                                W_p (U, P): the projection

The recurrent state is ``[h (B, P), c (B, U)]`` and the output is ``h``: the
recurrent matmul is ``(P, G·U)`` instead of ``(U, G·U)``, and a following layer
(or a softmax) reads ``P`` features. With ``coupled_input_forget=True`` (CIFG,
the Gboard on-device cell) ``i_t = 1 − f_t`` and the blocks are f, c, o
(``G = 3``).
"""

from __future__ import annotations

import keras
from keras import constraints, initializers, ops, regularizers

from keras_seq.layers._base import FastRNN, fused_kernel, read
from keras_seq.layers.lstm import _CELL_ARGS, LSTMCell
from keras_seq.layers.quant import fake_quant

_PROJECTION_ARGS = ("projection_initializer", "projection_regularizer", "projection_constraint")
_SERIALIZED = {
    "projection_initializer": initializers,
    "projection_regularizer": regularizers,
    "projection_constraint": constraints,
}


@keras.saving.register_keras_serializable(package="keras_seq")
class LSTMPCell(LSTMCell):
    """One LSTMP step: an LSTM whose output and recurrent state ``h`` is projected to
    ``proj_units``.

    Weights: ``kernel`` ``(D, G·U)``, ``recurrent_kernel`` ``(P, G·U)``, ``bias``
    ``(G·U,)`` and ``projection_kernel`` ``(U, P)`` (``G = 4``, or 3 with CIFG), in
    that ``get_weights`` order. With ``proj_units == units`` and an identity
    projection it is exactly :class:`~keras_seq.layers.LSTMCell`.

    Args:
        units: Positive integer, size of the cell state ``c`` (and of the gates).
        proj_units: Positive integer ``≤ units``, size of the projected output and
            hidden state ``h``.
        activation, recurrent_activation, use_bias, unit_forget_bias,
        kernel_initializer, recurrent_initializer, bias_initializer,
        kernel_regularizer, recurrent_regularizer, bias_regularizer,
        kernel_constraint, recurrent_constraint, bias_constraint, dropout,
        recurrent_dropout (on ``h``, ``(B, P)``), seed, weight_dropout (DropConnect on
        ``recurrent_kernel``), coupled_input_forget: as in :class:`LSTMCell`.
        qat: as in :class:`LSTMCell`; ``projection_kernel`` is rounded too.
        projection_initializer: Initializer for ``projection_kernel``.
            Default ``"glorot_uniform"``.
        projection_regularizer: Regularizer for ``projection_kernel``. Default ``None``.
        projection_constraint: Constraint for ``projection_kernel``. Default ``None``.

    Call arguments:
        inputs: ``(batch, features)``, one timestep.
        states: ``[h, c]``: ``(batch, proj_units)`` and ``(batch, units)``.
        training: Whether dropout is active.

    Returns ``(h, [h, c])``: ``h`` ``(batch, proj_units)``, ``c`` ``(batch, units)``.

    Example:

    >>> import numpy as np, keras
    >>> rnn = keras.layers.RNN(LSTMPCell(8, 3), return_state=True)
    >>> [tuple(t.shape) for t in rnn(np.zeros((2, 5, 4), "float32"))]
    [(2, 3), (2, 3), (2, 8)]
    """

    ARGS = (*_CELL_ARGS[:1], "proj_units", *_CELL_ARGS[1:], *_PROJECTION_ARGS)

    def __init__(
        self,
        units,
        proj_units,
        projection_initializer="glorot_uniform",
        projection_regularizer=None,
        projection_constraint=None,
        **kwargs,
    ):
        super().__init__(units, **kwargs)
        if not isinstance(proj_units, int) or isinstance(proj_units, bool) or proj_units <= 0:
            raise ValueError(
                f"{type(self).__name__}: received proj_units={proj_units!r}; expected a "
                "positive integer (the size of the projected output h), e.g. proj_units=64."
            )
        if proj_units > units:
            raise ValueError(
                f"{type(self).__name__}: received proj_units={proj_units} > units={units}; "
                "the projection maps the cell's units down to proj_units ≤ units. Lower "
                "proj_units or raise units."
            )
        self.proj_units = proj_units
        self.projection_initializer = initializers.get(projection_initializer)
        self.projection_regularizer = regularizers.get(projection_regularizer)
        self.projection_constraint = constraints.get(projection_constraint)
        self.state_size = [proj_units, units]  # [h, c]
        self.output_size = proj_units

    cudnn_kind = None  # cuDNN's LSTM has no recurrent projection

    def _recurrent_rows(self):
        return self.proj_units  # recurrent_kernel (P, G·U): h is projected

    def build(self, input_shape):
        super().build(input_shape)  # kernel (D, G·U), recurrent_kernel (P, G·U), bias
        self.projection_kernel = self.add_weight(
            shape=(self.units, self.proj_units),
            name="projection_kernel",
            initializer=self.projection_initializer,
            regularizer=self.projection_regularizer,
            constraint=self.projection_constraint,
        )

    def step_params(self, training=False):
        # recurrent_kernel (P, G·U), DropConnect-ed when training with weight_dropout
        params = super().step_params(training=training)
        # (U, P), rounded to the export grid under qat (per output column)
        params["projection_kernel"] = fake_quant(read(self.projection_kernel), self.qat)
        return params

    def qat_weights(self):
        return [*super().qat_weights(),
                (self.projection_kernel, fake_quant(read(self.projection_kernel), self.qat))]

    def activation_points(self):
        # the LSTM's, and m = o·tanh(c) before the projection (whose output is h)
        return super().activation_points() + ("m",)

    def recurrent_step(self, x_proj, states, params, rec_mask=None):
        h_tm1, c_tm1 = self._aq("h", states[0]), self._aq("c", states[1])  # (B, P), (B, U)
        if rec_mask is not None:
            h_tm1 = h_tm1 * rec_mask  # (B, P)
        kernel = params["recurrent_kernel"]  # None: x_proj holds h·R already (merged_step)
        z = x_proj if kernel is None else x_proj + ops.matmul(h_tm1, kernel)  # (B, G·U)
        o, c = self.gates(self._aq("z", z), c_tm1)
        m = self._aq("m", o * self._aq_fixed("tanh", self.activation(c)))  # (B, U)
        h = self._aq("h", ops.matmul(m, params["projection_kernel"]))  # (B, U)@(U, P) -> (B, P)
        return h, [h, c]

    fused_kernel_name = "lstmp_sequence"

    def fused_sequence(self, xs, states, params, training=False):
        # xs (T, B, G·U); states [h (B, P), c (B, U)] -> hs (T, B, P)
        hs, h, c = fused_kernel("lstmp_sequence", training)(
            xs,
            states[0],
            states[1],
            params["recurrent_kernel"],
            params["projection_kernel"],
            self.coupled_input_forget,
        )
        return hs, [h, c]

    def arg_config(self):
        config = super().arg_config()
        for name, module in _SERIALIZED.items():
            config[name] = module.serialize(getattr(self, name))
        return config


@keras.saving.register_keras_serializable(package="keras_seq")
class LSTMP(FastRNN):
    """LSTMP layer (LSTM with a recurrent projection) with the keras-seq fast loop.

    All timesteps' input projections are computed in one ``(B, T, D) @ (D, G·U)``
    matmul; with tanh/sigmoid, no mask and no recurrent dropout the loop is the
    fused kernel :func:`keras_seq.layers._fused.lstmp_sequence` (hand-written
    gradient), otherwise an autodiff loop over :meth:`LSTMPCell.recurrent_step`.

    Args:
        units: Positive integer, size of the cell state ``c``.
        proj_units: Positive integer ``≤ units``, size of the output and of ``h``.
        activation, recurrent_activation, use_bias, unit_forget_bias,
        kernel_initializer, recurrent_initializer, bias_initializer,
        kernel_regularizer, recurrent_regularizer, bias_regularizer,
        kernel_constraint, recurrent_constraint, bias_constraint, dropout,
        recurrent_dropout, seed, weight_dropout, coupled_input_forget, qat,
        projection_initializer, projection_regularizer, projection_constraint: as
        in :class:`LSTMPCell`.
        return_sequences, return_state, go_backwards, stateful, unroll,
        activity_regularizer: as in :class:`~keras_seq.layers.LSTM`.

    Call arguments:
        sequences: ``(batch, timesteps, features)``.
        initial_state: optional ``[h, c]``: ``(batch, proj_units)``, ``(batch, units)``.
        mask: optional boolean ``(batch, timesteps)``; ``False`` steps are skipped
            (states and output carried over).
        training: Whether dropout is active.

    Returns ``(batch, proj_units)`` or ``(batch, timesteps, proj_units)``; with
    ``return_state`` also ``h`` ``(batch, proj_units)`` and ``c`` ``(batch, units)``.

    Example:

    >>> import numpy as np
    >>> out, h, c = LSTMP(8, 3, coupled_input_forget=True, return_sequences=True,
    ...                   return_state=True)(np.zeros((2, 5, 4), "float32"))
    >>> tuple(out.shape), tuple(h.shape), tuple(c.shape)
    ((2, 5, 3), (2, 3), (2, 8))
    """

    def __init__(
        self,
        units,
        proj_units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
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
        coupled_input_forget=False,
        qat=None,
        projection_initializer="glorot_uniform",
        projection_regularizer=None,
        projection_constraint=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        **kwargs,
    ):
        cell = LSTMPCell(
            units,
            proj_units,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            unit_forget_bias=unit_forget_bias,
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
            coupled_input_forget=coupled_input_forget,
            qat=qat,
            projection_initializer=projection_initializer,
            projection_regularizer=projection_regularizer,
            projection_constraint=projection_constraint,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="lstmp_cell",
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
