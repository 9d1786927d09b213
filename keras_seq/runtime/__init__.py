"""On-device runtime: LiteRT interpreter, tokenizer JSON, numpy samplers — no TensorFlow.

Nothing under ``keras_seq.runtime`` imports ``tensorflow`` (tested in a subprocess).
"""

from keras_seq.lazy import lazy_exports
from keras_seq.runtime.classifier import StreamingClassifier
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.runtime.metadata import read_metadata

# the keyboard's mixture loads on first use (it imports the n-gram package: ~45 ms that
# every other LiteRT user would pay)
_LAZY = {"MixedLM": "keras_seq.runtime.mixture", "MixSpec": "keras_seq.runtime.mixture"}
__all__ = ["LiteRTLM", "MixSpec", "MixedLM", "StreamingClassifier", "read_metadata"]
__getattr__ = lazy_exports(__name__, _LAZY)[0]


def __dir__():
    return sorted(set(__all__) | set(globals()))
