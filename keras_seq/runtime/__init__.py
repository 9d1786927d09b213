"""On-device runtime: LiteRT interpreter, tokenizer JSON, numpy samplers — no TensorFlow.

Nothing under ``keras_seq.runtime`` imports ``tensorflow`` (tested in a subprocess).
"""

from keras_seq.runtime.classifier import StreamingClassifier
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.runtime.metadata import read_metadata
from keras_seq.runtime.mixture import MixedLM, MixSpec

__all__ = ["LiteRTLM", "MixSpec", "MixedLM", "StreamingClassifier", "read_metadata"]
