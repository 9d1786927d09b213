"""The output layer of a language model that reuses its embedding matrix (weight tying)."""

from __future__ import annotations

import keras
from keras import layers, ops

from keras_seq.layers.quant import ActivationRanges, quantize_activation


@keras.saving.register_keras_serializable(package="keras_seq")
class TiedLogits(layers.Layer):
    """Logits from the embedding matrix: ``logits = h · Eᵀ + b`` (Press & Wolf 2017).

    The layer holds a reference to an ``Embedding`` layer and owns only the bias, so the
    ``(V, E)`` table is stored and trained once. Because that reference cannot be written
    into a layer config, a functional or Sequential model saved to ``.keras`` should tie
    with Keras's own ``keras.layers.ReversibleEmbedding`` (called with ``reverse=True`` as
    the output layer) instead; :class:`~keras_seq.models.RecurrentLM` (whose config
    rebuilds the tie) uses this layer. Both stream through keras-seq's export.

    Args:
        embedding: the ``keras.layers.Embedding`` whose matrix ``E`` is shared.

    Call arguments:
        hidden: features ``(..., E)``.

    Returns logits ``(..., V)``.

    Example:

    >>> import numpy as np
    >>> embed = keras.layers.Embedding(10, 4)
    >>> x = embed(np.array([[1, 2, 3]]))            # (1, 3, 4)
    >>> tuple(TiedLogits(embed)(x).shape)
    (1, 3, 10)
    """

    def __init__(self, embedding: layers.Embedding, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding

    def build(self, input_shape):
        self.bias = self.add_weight(
            name="bias", shape=(self.embedding.input_dim,), initializer="zeros"
        )
        self.activation_ranges = None
        if getattr(self.embedding, "qat", None) == "int8":  # full-integer QAT: the logits
            self.activation_ranges = ActivationRanges(self, ("logits",))

    def table(self):
        """The shared ``(V, E)`` matrix as this layer multiplies by it (rounded per row for
        a :class:`~keras_seq.layers.QATEmbedding` under ``qat``)."""
        rounded = getattr(self.embedding, "weight_table", None)
        return rounded() if rounded is not None else self.embedding.embeddings

    def quantize_output(self, logits):
        """The logits rounded to their tracked range (full-integer QAT), else as they are."""
        return quantize_activation(getattr(self, "activation_ranges", None), "logits", logits)

    def call(self, hidden):
        # (..., E) · (V, E)ᵀ → (..., V)
        return self.quantize_output(
            ops.matmul(hidden, ops.transpose(self.table())) + self.bias)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.embedding.input_dim)
