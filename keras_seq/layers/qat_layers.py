"""``Embedding`` and ``Dense`` that train on their export grid (quantization-aware training).

The recurrent cells take ``qat`` themselves; a language model's embedding table and output
layer hold most of its weights, so they take it too: :class:`QATEmbedding` rounds its table
per row (per token: the rows an ``EMBEDDING_LOOKUP`` and a tied output layer read) and
:class:`QATDense` its kernel per output column, both by
:func:`~keras_seq.layers.quant.fake_quant`. Under ``qat="int8"`` (full integer) their
outputs are rounded too, over tracked ranges (the embedding's rows; the logits). With
``qat=None`` they are Keras's layers. :class:`~keras_seq.layers.TiedLogits` reads the
rounded table of a ``QATEmbedding`` and, under ``"int8"``, rounds its logits.

>>> import numpy as np
>>> embed = QATEmbedding(5, 3, qat="int4")
>>> x = embed(np.array([[0, 4]]))                            # (1, 2, 3): rounded rows
>>> table = np.asarray(embed.quantized_table())
>>> np.allclose(np.asarray(x)[0, 1], table[4]), QATEmbedding.from_config(embed.get_config()).qat
(True, 'int4')
"""

from __future__ import annotations

import keras
from keras import ops

from keras_seq.layers.quant import (
    ActivationRanges,
    check_qat,
    fake_quant,
    quantize_activation,
)


class _SavedRanges:
    """Keras's ``Embedding``/``Dense`` save the variables their
    ``variable_serialization_spec`` names: a layer with tracked activation ranges
    (``qat="int8"``) adds them to it as ``qat_ranges``."""

    @property
    def qat_ranges(self):
        return self.activation_ranges.variable

    @property
    def variable_serialization_spec(self):
        spec = dict(super().variable_serialization_spec)
        if getattr(self, "activation_ranges", None) is not None:
            spec[None] = [*spec[None], "qat_ranges"]
        return spec


@keras.saving.register_keras_serializable(package="keras_seq")
class QATEmbedding(_SavedRanges, keras.layers.Embedding):
    """``keras.layers.Embedding`` whose table is rounded per row under ``qat``.

    Args:
        input_dim, output_dim, **kwargs: as ``keras.layers.Embedding``.
        qat: ``"int8"``, ``"int4"`` or ``None`` (:mod:`keras_seq.layers.quant`).

    Call arguments:
        inputs: int ids ``(...)``.

    Returns ``(..., output_dim)``.

    Example:

    >>> import numpy as np
    >>> tuple(QATEmbedding(10, 4, qat="int8")(np.array([[1, 2]])).shape)
    (1, 2, 4)
    """

    def __init__(self, input_dim, output_dim, qat=None, **kwargs):
        super().__init__(input_dim, output_dim, **kwargs)
        self.qat = check_qat(qat, "QATEmbedding")
        self.activation_ranges = None

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.qat == "int8":  # the rows an int8 GATHER hands on: one tracked range
            self.activation_ranges = ActivationRanges(self, ("rows",))

    def quantized_table(self):
        """The table ``(V, E)`` as the model computes with it: rounded per row under
        ``qat`` (and, for ``"int8"``, to the tracked range of the rows it hands on)."""
        table = fake_quant(ops.convert_to_tensor(self.embeddings), self.qat, axis=0)
        return quantize_activation(self.activation_ranges, "rows", table)

    def weight_table(self):
        """The table as an output layer tied to it reads it: rounded per row (its own
        weight grid), not to the rows' activation range."""
        return fake_quant(ops.convert_to_tensor(self.embeddings), self.qat, axis=0)

    def qat_weights(self) -> list:
        return [(self.embeddings, self.weight_table())]

    def call(self, inputs):
        if not self.qat:
            return super().call(inputs)
        ids = ops.cast(inputs, "int32")
        return ops.take(self.quantized_table(), ids, axis=0)  # (..., E)

    def get_config(self):
        return {**super().get_config(), "qat": self.qat}


@keras.saving.register_keras_serializable(package="keras_seq")
class QATDense(_SavedRanges, keras.layers.Dense):
    """``keras.layers.Dense`` whose kernel is rounded per output column under ``qat``.

    Args:
        units, **kwargs: as ``keras.layers.Dense``.
        qat: ``"int8"``, ``"int4"`` or ``None`` (:mod:`keras_seq.layers.quant`).

    Call arguments:
        inputs: ``(..., in)``.

    Returns ``(..., units)``.

    Example:

    >>> import numpy as np
    >>> tuple(QATDense(3, qat="int4")(np.ones((2, 5), "float32")).shape)
    (2, 3)
    """

    def __init__(self, units, qat=None, **kwargs):
        super().__init__(units, **kwargs)
        self.qat = check_qat(qat, "QATDense")
        self.activation_ranges = None

    def build(self, input_shape):
        super().build(input_shape)
        if self.qat == "int8":  # its output (before the activation): one tracked range
            self.activation_ranges = ActivationRanges(self, ("logits",))

    def quantize_output(self, x):
        """``x`` (this layer's pre-activation output) rounded under ``qat="int8"``."""
        return quantize_activation(self.activation_ranges, "logits", x)

    def quantized_kernel(self):
        """The kernel ``(in, units)`` as the layer computes with it."""
        return fake_quant(ops.convert_to_tensor(self.kernel), self.qat, axis=-1)

    def qat_weights(self) -> list:
        return [(self.kernel, self.quantized_kernel())]

    def call(self, inputs, training=None):
        if not self.qat:
            return super().call(inputs, training=training)
        out = ops.matmul(inputs, self.quantized_kernel())  # (..., units)
        if self.use_bias:
            out = ops.add(out, self.bias)
        out = self.quantize_output(out)
        return self.activation(out) if self.activation is not None else out

    def get_config(self):
        return {**super().get_config(), "qat": self.qat}
