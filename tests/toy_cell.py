"""A toy cell for tests/test_cell_registry.py: one file and one registry row.

A minimal gated RNN, ``z = σ(x W_z + h R_z + b_z)``, ``h̃ = tanh(x W_h + (h) R_h + b_h)``,
``h_t = (1 − z)·h_{t−1} + z·h̃``: two gate blocks, one state. Registered for the ``lm`` and
``classify`` shapes with ``registered(TOY)``.
"""

import keras
from keras import ops

from keras_seq.cells import CellSpec
from keras_seq.layers import CELL_ARGS, BaseCell, FastRNN


@keras.saving.register_keras_serializable(package="keras_seq_tests")
class ToyCell(BaseCell):
    ARGS = CELL_ARGS
    num_gates = 2  # kernel (D, 2U): update gate z, candidate h̃

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.state_size = units

    def recurrent_step(self, x_proj, states, params, rec_mask=None):
        h_tm1 = states[0]  # (B, U)
        dropped = h_tm1 if rec_mask is None else h_tm1 * rec_mask
        zx, hx = ops.split(x_proj, 2, axis=-1)  # 2 × (B, U)
        zr, hr = ops.split(ops.matmul(dropped, params["recurrent_kernel"]), 2, axis=-1)
        z = ops.sigmoid(zx + zr)  # (B, U)
        h = (1 - z) * h_tm1 + z * self.activation(hx + hr)  # (B, U)
        return h, [h]


@keras.saving.register_keras_serializable(package="keras_seq_tests")
class ToyRNN(FastRNN):
    def __init__(self, units, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, **kwargs):
        cell_args = {k: kwargs.pop(k) for k in ToyCell.ARGS if k in kwargs}
        cell = ToyCell(units, dtype=kwargs.get("dtype"), name="toy_cell", **cell_args)
        super().__init__(cell, return_sequences=return_sequences, return_state=return_state,
                         go_backwards=go_backwards, stateful=stateful, unroll=unroll, **kwargs)


#: the one row
TOY = CellSpec("toy", layer=ToyRNN, cell=ToyCell, gates=2, states=("h",),
               shapes={"lm", "classify"})
