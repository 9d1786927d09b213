"""``Bidirectional``: Keras's wrapper, taking its fused two-direction kernel for keras-seq's
LSTM and GRU as it does for its own.

``keras.layers.Bidirectional`` runs both directions in one backend call
(``backend.bidirectional_lstm`` / ``bidirectional_gru``: cuDNN on a GPU under JAX or
PyTorch) only for layers that are ``keras.layers.LSTM`` or ``GRU``; for any other class it
runs the two layers one after the other. This subclass applies the same rules to keras-seq's
``LSTM`` and ``GRU``, whose cells keep Keras's weight layout, plus keras-seq's own: no CIFG,
no quantization-aware training (the fused call reads the float kernels), nothing
:func:`~keras_seq.layers.dispatch.fused_kernel_blockers` names. Where the backend has no
such kernel (TensorFlow; any backend on a CPU) the call raises ``NotImplementedError`` and
Keras falls back to the two layers, exactly as for its own.
"""

from __future__ import annotations

import keras

from keras_seq.layers._base import FastRNN
from keras_seq.layers.dispatch import fused_kernel_blockers


@keras.saving.register_keras_serializable(package="keras_seq")
class Bidirectional(keras.layers.Bidirectional):
    """``keras.layers.Bidirectional`` whose fused path also takes keras-seq's LSTM and GRU.

    Same arguments and config as Keras's; a drop-in for it around any recurrent layer.

    >>> import numpy as np
    >>> from keras_seq.layers import LSTM
    >>> bi = Bidirectional(LSTM(4, return_sequences=True))
    >>> tuple(bi(np.zeros((2, 5, 3), "float32")).shape)
    (2, 5, 8)
    >>> bi.fused_kind()
    'lstm'
    """

    def fused_kind(self, mask=None, initial_state=None) -> str | None:
        """``"lstm"`` or ``"gru"`` where the wrapped pair may take the fused kernel (Keras's
        rules and keras-seq's), else None."""
        fwd, bwd = self.forward_layer, self.backward_layer
        # the backend's fused kernel each keras-seq cell declares (LSTMCell: "lstm")
        kind = getattr(fwd.cell, "cudnn_kind", None)
        if kind is None or getattr(bwd.cell, "cudnn_kind", None) != kind \
                or not (isinstance(fwd, FastRNN) and isinstance(bwd, FastRNN)):
            return None
        sizes = fwd.cell.state_size
        n_states = 2 * (len(sizes) if isinstance(sizes, (list, tuple)) else 1)  # both ways
        cells = (fwd.cell, bwd.cell)
        eligible = (
            mask is None and not self.stateful
            and (initial_state is None or len(initial_state) == n_states)
            and fwd.use_cudnn in (True, "auto") and bwd.use_cudnn in (True, "auto")
            and not any(c.dropout or c.recurrent_dropout or getattr(c, "qat", None)
                        for c in cells)
            and fwd.cell.units == bwd.cell.units
            and fwd.cell.activation is bwd.cell.activation
            and fwd.cell.recurrent_activation is bwd.cell.recurrent_activation
            and fwd.built and bwd.built
            and not fused_kernel_blockers(fwd) and not fused_kernel_blockers(bwd))
        return kind if eligible else None

    def _can_attempt_fused_lstm(self, mask, initial_state=None):
        return (super()._can_attempt_fused_lstm(mask, initial_state)
                or self.fused_kind(mask, initial_state) == "lstm")

    def _can_attempt_fused_gru(self, mask, initial_state=None):
        return (super()._can_attempt_fused_gru(mask, initial_state)
                or self.fused_kind(mask, initial_state) == "gru")
