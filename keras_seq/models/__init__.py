"""Language models built from keras-seq layers (these import TensorFlow/Keras)."""

from keras_seq.models.nplm import NPLM, nplm_param_count
from keras_seq.models.rnn_lm import CELLS, RecurrentLM

__all__ = ["NPLM", "nplm_param_count", "RecurrentLM", "CELLS"]
