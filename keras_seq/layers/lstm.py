"""Long short-term memory (Hochreiter & Schmidhuber 1997), optionally CIFG.

Gates (Keras order i, f, c, o along the ``4·units`` axis)::

    i_t = σ(x_t W_xi + h_{t-1} W_hi + b_i)      input gate
    f_t = σ(x_t W_xf + h_{t-1} W_hf + b_f)      forget gate
    c̃_t = tanh(x_t W_xc + h_{t-1} W_hc + b_c)   candidate
    o_t = σ(x_t W_xo + h_{t-1} W_ho + b_o)      output gate
    c_t = f_t ⊙ c_{t-1} + i_t ⊙ c̃_t
    h_t = o_t ⊙ tanh(c_t)

CIFG (coupled input and forget gate): ``i_t = 1 − f_t``; no input-gate weights,
so the blocks are f, c, o along a ``3·units`` axis.
"""

from __future__ import annotations

import importlib

import keras
from keras import initializers, ops

from keras_seq.layers import dispatch
from keras_seq.layers._base import (
    BaseCell,
    FastRNN,
    activation_name,
    check_implementation,
    fused_kernel,
)

_CELL_ARGS = (
    "units",
    "activation",
    "recurrent_activation",
    "use_bias",
    "unit_forget_bias",
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
    "coupled_input_forget",
    "qat",
)


@keras.saving.register_keras_serializable(package="keras_seq")
class LSTMCell(BaseCell):
    """One LSTM step, with Keras's weight layout (gate order i, f, c, o).

    ``kernel`` is ``(D, 4U)``, ``recurrent_kernel`` ``(U, 4U)``, ``bias`` ``(4U,)``,
    so ``set_weights(keras.layers.LSTMCell(...).get_weights())`` works. With
    ``coupled_input_forget=True`` (CIFG) the input gate is ``1 - f`` and the
    blocks are f, c, o: ``(D, 3U)``, ``(U, 3U)``, ``(3U,)``.

    Args:
        units: Positive integer, size of the hidden and cell state.
        activation: Candidate / output squashing. Default ``"tanh"``.
        recurrent_activation: Gate activation. Default ``"sigmoid"``.
        use_bias: Whether to add a bias vector. Default ``True``.
        unit_forget_bias: Initialize the forget-gate bias to ones (as Keras;
            the other blocks use ``bias_initializer``). Default ``True``.
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
            matmul (one mask per sequence). Default 0.
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
        coupled_input_forget: CIFG variant, ``i_t = 1 - f_t``. Default ``False``.

    Call arguments:
        inputs: ``(batch, features)``, one timestep.
        states: ``[h, c]``, each ``(batch, units)``.
        training: Whether dropout is active.

    Returns ``(h, [h, c])``, each ``(batch, units)``.

    Example:

    >>> import numpy as np, keras
    >>> rnn = keras.layers.RNN(LSTMCell(4), return_state=True)
    >>> [tuple(t.shape) for t in rnn(np.zeros((2, 5, 3), "float32"))]
    [(2, 4), (2, 4), (2, 4)]
    """

    ARGS = _CELL_ARGS

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        unit_forget_bias=True,
        coupled_input_forget=False,
        implementation=2,
        **kwargs,
    ):
        check_implementation("LSTMCell", implementation)
        super().__init__(units, activation=activation, **kwargs)
        self.implementation = implementation  # Keras's name; not in the config (as Keras)
        self.recurrent_activation = keras.activations.get(recurrent_activation)
        self.unit_forget_bias = unit_forget_bias
        self.coupled_input_forget = coupled_input_forget
        self.num_gates = 3 if coupled_input_forget else 4
        self.state_size = [units, units]

    def _bias_init(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        units, rest = self.units, (self.num_gates - 1) * self.units
        before = 0 if self.coupled_input_forget else units  # forget block offset

        def init(shape, dtype=None):
            parts = [initializers.get("ones")((units,), dtype=dtype)]
            if before:
                parts.insert(0, self.bias_initializer((before,), dtype=dtype))
            parts.append(self.bias_initializer((rest - before,), dtype=dtype))
            return ops.concatenate(parts)

        return init

    def activation_points(self):
        # the outputs TFLite quantizes in an int8 step (qat="int8"): the one
        # FULLY_CONNECTED [x, h]·[W; R] + b, the products and sums, the states
        return ("z", "h", "c", "fc", "ig") + (("omf",) if self.coupled_input_forget else ())

    def gates(self, z, c_tm1):
        """``(o, c)`` from the pre-activations ``z (B, G·U)`` and ``c_{t-1}``: the output
        gate and the new cell state (rounded at each point under ``qat="int8"``)."""
        aq, aq_fixed = self._aq, self._aq_fixed
        act, gate = self.activation, self.recurrent_activation
        if self.coupled_input_forget:
            z_f, z_c, z_o = ops.split(z, 3, axis=-1)  # 3 × (B, U)
            f = aq_fixed("sigmoid", gate(z_f))
            i = aq("omf", 1.0 - f)
        else:
            z_i, z_f, z_c, z_o = ops.split(z, 4, axis=-1)  # 4 × (B, U)
            i, f = aq_fixed("sigmoid", gate(z_i)), aq_fixed("sigmoid", gate(z_f))
        g = aq_fixed("tanh", act(z_c))
        c = aq("c", aq("fc", f * c_tm1) + aq("ig", i * g))  # (B, U)
        return aq_fixed("sigmoid", gate(z_o)), c

    def recurrent_step(self, x_proj, states, params, rec_mask=None):
        h_tm1, c_tm1 = self._aq("h", states[0]), self._aq("c", states[1])  # (B, U) each
        if rec_mask is not None:
            h_tm1 = h_tm1 * rec_mask
        kernel = params["recurrent_kernel"]  # None: x_proj holds h·R already (merged_step)
        z = x_proj if kernel is None else x_proj + ops.matmul(h_tm1, kernel)  # (B, G·U)
        o, c = self.gates(self._aq("z", z), c_tm1)
        h = self._aq("h", o * self._aq_fixed("tanh", self.activation(c)))  # (B, U)
        return h, [h, c]

    merges_recurrent_matmul = True  # z = x·W + h·R + b: see BaseCell.merged_step
    cudnn_kind = "lstm"

    def cudnn_sequence(self, sequences, states, mask, params, return_sequences, go_backwards):
        # lazy: Keras is imported once the backend is chosen
        from keras.src import backend

        if keras.backend.backend() == "torch":
            # lazy: imports torch (by module name: the package's `rnn` is a function)
            torch_rnn = importlib.import_module("keras.src.backend.torch.rnn")

            return dispatch.run_torch_kernel(
                torch_rnn._cudnn_lstm, sequences, states, self._cudnn_kernel(),
                params["recurrent_kernel"], self.bias, return_sequences, go_backwards)
        if keras.backend.backend() == "jax" and go_backwards:
            # Keras's JAX lstm() flips its outputs back to input order; RNN(go_backwards=True)
            # means computed (reversed) order, as the loop and TensorFlow's kernel return
            # and Bidirectional undoes. So reverse the inputs here and run forwards.
            sequences, go_backwards = ops.flip(sequences, axis=1), False
        return backend.lstm(
            sequences, states[0], states[1], mask,  # (B, T, D), (B, U), (B, U), (B, T)
            kernel=self._cudnn_kernel(), recurrent_kernel=params["recurrent_kernel"],
            bias=self.bias, activation=self.activation,
            recurrent_activation=self.recurrent_activation,
            return_sequences=return_sequences, go_backwards=go_backwards,
        )

    def supports_fused(self):
        names = activation_name(self.activation), activation_name(self.recurrent_activation)
        return (names == ("tanh", "sigmoid") and self.qat != "int8"
                and fused_kernel(self.fused_kernel_name) is not None)

    fused_kernel_name = "lstm_sequence"  # LSTMPCell: "lstmp_sequence"

    def fused_sequence(self, xs, states, params, training=False):
        hs, h, c = fused_kernel("lstm_sequence", training)(
            xs, states[0], states[1], params["recurrent_kernel"], self.coupled_input_forget
        )
        return hs, [h, c]


@keras.saving.register_keras_serializable(package="keras_seq")
class LSTM(FastRNN):
    """LSTM layer with a fast loop; a drop-in for ``keras.layers.LSTM``.

    All timesteps' input projections are computed in one ``(B, T, D) @ (D, 4U)``
    matmul, then a minimal loop runs one ``h @ recurrent_kernel`` per step.
    Weights, arguments, masking and outputs match ``keras.layers.LSTM``; the
    extra ``coupled_input_forget=True`` gives the CIFG variant.

    Args:
        units: Positive integer, size of the hidden and cell state.
        activation, recurrent_activation, use_bias, unit_forget_bias,
        kernel_initializer, recurrent_initializer, bias_initializer,
        kernel_regularizer, recurrent_regularizer, bias_regularizer,
        kernel_constraint, recurrent_constraint, bias_constraint, dropout,
        recurrent_dropout, seed, implementation, weight_dropout, coupled_input_forget, qat:
        as in :class:`LSTMCell`.
        return_sequences: Return the whole output sequence. Default ``False``.
        return_state: Also return the final ``h`` and ``c``. Default ``False``.
        go_backwards: Process the sequence backwards (outputs come reversed).
        stateful: Carry the final states of batch ``k`` into batch ``k + 1``;
            needs a static batch size; ``reset_state()`` zeroes them.
        unroll: Force a Python-unrolled loop (short sequences are unrolled anyway).
        use_cudnn: ``"auto"`` (default) runs the backend's fused cuDNN kernel on a GPU
            when the configuration allows it (:mod:`keras_seq.layers.dispatch`),
            ``False`` never, ``True`` always (an error naming the reason when it can't).
        activity_regularizer: Regularizer applied to the layer's output.

    Call arguments:
        sequences: ``(batch, timesteps, features)``.
        initial_state: optional ``[h, c]``, each ``(batch, units)``.
        mask: optional boolean ``(batch, timesteps)``; ``False`` steps are skipped
            (states and output carried over).
        training: Whether dropout is active.

    Returns ``(batch, units)`` or ``(batch, timesteps, units)``; with
    ``return_state`` also ``h`` and ``c``, each ``(batch, units)``.

    Example:

    >>> import numpy as np
    >>> out, h, c = LSTM(4, return_sequences=True, return_state=True)(
    ...     np.zeros((2, 5, 3), "float32"))
    >>> tuple(out.shape), tuple(c.shape)
    ((2, 5, 4), (2, 4))
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
        qat=None,
        coupled_input_forget=False,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        use_cudnn="auto",
        implementation=2,
        **kwargs,
    ):
        cell = LSTMCell(
            units,
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
            qat=qat,
            coupled_input_forget=coupled_input_forget,
            implementation=implementation,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="lstm_cell",
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
