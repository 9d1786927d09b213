"""On-device runtime: LiteRT interpreter, tokenizer JSON, numpy samplers — no TensorFlow.

Nothing under ``keras_seq.runtime`` imports ``tensorflow`` (tested in a subprocess).
"""

from keras_seq.runtime.classifier import StreamingClassifier
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.runtime.metadata import read_metadata

__all__ = ["LiteRTLM", "StreamingClassifier", "read_metadata"]
