"""keras-seq: recurrent sequence models on TensorFlow/Keras.

Importing ``keras_seq`` is cheap: it does not import TensorFlow. Sub-packages that
need TensorFlow (``keras_seq.layers``, ``keras_seq.models``, ...) import it themselves;
``keras_seq.ngram``, ``keras_seq.data.corpus`` and ``keras_seq.runtime`` never do.
"""

__version__ = "0.1.0"
