"""Export trained models: SavedModel serving signatures and TFLite streaming models.

``saved_model.py`` (score / next_tokens / generate / step signatures), ``tflite.py``
(step and sequence models in float32 / float16 / dynamic / int8 / int16x8, parity checks),
``lm_stack.py`` (which Keras models stream: a ``RecurrentLM`` or your own Sequential or
functional model, read as embedding → recurrent and per-token layers → output layer),
``graphs.py`` (their explicit-state step and sequence graphs), ``fused_lstm.py`` (the
composite function TFLite fuses into ``UNIDIRECTIONAL_SEQUENCE_LSTM``),
``classifier_tagger.py`` (classifier and tagger SavedModels, the streaming classifier)
and ``streaming.py`` (the exported models' per-token latency, which the main job
measures before it ships a model and ``keras-seq bench streaming`` reports).

The public names load on first use: importing this package does not import TensorFlow;
the modules do. The TensorFlow-free side lives in :mod:`keras_seq.runtime`.

>>> from keras_seq.export import export_tflite
>>> export_tflite.__module__
'keras_seq.export.tflite'
"""

from keras_seq.lazy import lazy_exports

_EXPORTS = {
    "export_tflite": "keras_seq.export.tflite",
    "export_saved_model": "keras_seq.export.saved_model",
    "export_classifier": "keras_seq.export.classifier_tagger",
    "export_classifier_tflite": "keras_seq.export.classifier_tagger",
    "export_tagger": "keras_seq.export.classifier_tagger",
    "export_web": "keras_seq.export.web",
    "read_lm": "keras_seq.export.lm_stack",
    "LMStack": "keras_seq.export.lm_stack",
    "UnsupportedModelError": "keras_seq.export.lm_stack",
    "LMGraphs": "keras_seq.export.graphs",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
