"""Models built from keras-seq layers (these import TensorFlow/Keras): the language models
(``RecurrentLM``, ``NPLM``, ``ConditionedLM``), ``Seq2Seq``, and the N→1 and aligned N→N
models ``SequenceClassifier`` and ``SequenceTagger``. ``CELLS`` is the cell registry
(:mod:`keras_seq.cells`) every model builds its recurrent layers from."""

from keras_seq.cells import CELLS
from keras_seq.models.classifier import SequenceClassifier
from keras_seq.models.conditioned_lm import ConditionedLM
from keras_seq.models.nplm import NPLM, nplm_param_count
from keras_seq.models.rnn_lm import RecurrentLM
from keras_seq.models.seq2seq import Seq2Seq
from keras_seq.models.tagger import SequenceTagger

__all__ = ["NPLM", "nplm_param_count", "RecurrentLM", "CELLS", "ConditionedLM",
           "Seq2Seq", "SequenceClassifier", "SequenceTagger"]
