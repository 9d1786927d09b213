"""Recurrent cells and layers with Keras's weight layout and a fast loop.

``SimpleRNNCell``, ``LSTMCell`` (with a CIFG option), ``LSTMPCell`` (an LSTM with a
recurrent projection, CIFG optional) and ``GRUCell`` run inside
``keras.layers.RNN``; the layers ``SimpleRNN``, ``LSTM``, ``LSTMP`` and ``GRU`` subclass it
and replace only the loop (all inputs projected in one matmul, one recurrent
matmul per step). ``count_params`` / ``param_table`` count weights without
building anything. ``AdaptiveSoftmax`` is an output layer for large vocabularies
(Grave et al. 2017). ``from_builtins`` rebuilds a model made with Keras's recurrent
layers on these, weights copied. ``BaseCell``, ``FastRNN`` and ``CELL_ARGS`` are what a new
cell is built from (docs/architecture.md, "How to add a cell"). ``TiedLogits`` is an output
layer sharing the embedding matrix; ``Bidirectional`` is Keras's wrapper, taking its fused
two-direction kernel for these LSTM and GRU layers too; ``reset_recurrent_states`` zeroes
every stateful layer of a model (Keras 3 has no ``Model.reset_states``). Every cell,
``QATEmbedding`` and ``QATDense`` take ``qat="int8"|"int4"``: quantization-aware training
on the grid the TFLite export stores (:mod:`keras_seq.layers.quant`). ``CELLS``,
``cell_spec``, ``cells_for`` and ``CellSpec`` are the table of cells every model, config and
exporter reads (:mod:`keras_seq.cells`, which loads no Keras).
"""

from keras_seq.cells import CELLS, CellSpec, cell_spec, cells_for
from keras_seq.layers._base import BaseCell, FastRNN
from keras_seq.layers.adaptive_softmax import AdaptiveSoftmax
from keras_seq.layers.bahdanau_attention import BahdanauAttention
from keras_seq.layers.bidirectional import Bidirectional
from keras_seq.layers.drop_in import from_builtins
from keras_seq.layers.gru import GRU, GRUCell
from keras_seq.layers.lstm import LSTM, LSTMCell
from keras_seq.layers.lstmp import LSTMP, LSTMPCell
from keras_seq.layers.params import count_params, param_table, weight_shapes
from keras_seq.layers.qat_layers import QATDense, QATEmbedding
from keras_seq.layers.quant import fake_quant
from keras_seq.layers.simple_rnn import CELL_ARGS, SimpleRNN, SimpleRNNCell
from keras_seq.layers.state import reset_recurrent_states, stateful_layers
from keras_seq.layers.tied_logits import TiedLogits

__all__ = [
    "CELLS",
    "CELL_ARGS",
    "CellSpec",
    "AdaptiveSoftmax",
    "BahdanauAttention",
    "BaseCell",
    "Bidirectional",
    "FastRNN",
    "GRU",
    "GRUCell",
    "LSTM",
    "LSTMCell",
    "LSTMP",
    "LSTMPCell",
    "QATDense",
    "QATEmbedding",
    "SimpleRNN",
    "SimpleRNNCell",
    "TiedLogits",
    "cell_spec",
    "cells_for",
    "count_params",
    "fake_quant",
    "from_builtins",
    "param_table",
    "reset_recurrent_states",
    "stateful_layers",
    "weight_shapes",
]
