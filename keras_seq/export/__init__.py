"""Export trained models: SavedModel serving signatures and TFLite streaming models.

``saved_model.py`` (score / next_tokens / generate / step signatures), ``tflite.py``
(step and sequence models in float32 / float16 / dynamic / int8 / int16x8, parity checks),
``graphs.py`` (explicit-state step and sequence graphs of a ``RecurrentLM``) and
``fused_lstm.py`` (the composite function TFLite fuses into
``UNIDIRECTIONAL_SEQUENCE_LSTM``) and ``streaming.py`` (the exported models' per-token
latency, which the main job measures before it ships a model and ``keras-seq bench
streaming`` reports). Importing this package does not import TensorFlow; the
modules do. The TensorFlow-free side lives in :mod:`keras_seq.runtime`.
"""
