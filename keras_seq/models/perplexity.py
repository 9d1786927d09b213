"""The Keras perplexity metric used in ``fit`` (masked, token-weighted)."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_seq")
class Perplexity(keras.metrics.Metric):
    """Perplexity over all real tokens seen since the last reset.

    Sums the token cross-entropy and the number of real tokens across batches and reports
    ``exp(sum / count)`` — the corpus perplexity, not a mean of per-batch perplexities.

    Args:
        from_logits: ``y_pred`` holds logits (default) rather than probabilities.
        ignore_class: a target id that never counts (e.g. the padding id 0), or ``None``.
        name: metric name.

    Call arguments (``update_state``):
        y_true: int targets, ``(B, T)``.
        y_pred: ``(B, T, V)`` logits or probabilities.
        sample_weight: optional ``(B, T)`` weights (0 drops a token).

    Example:

    >>> import numpy as np
    >>> m = Perplexity(from_logits=False)
    >>> m.update_state(np.array([[0, 1]]), np.array([[[0.5, 0.5], [0.75, 0.25]]]))
    >>> round(float(m.result()), 3)   # exp(-(ln 0.5 + ln 0.25) / 2)
    2.828
    """

    def __init__(self, from_logits: bool = True, ignore_class: int | None = None,
                 name: str = "perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.from_logits = from_logits
        self.ignore_class = ignore_class
        self.total_nats = self.add_variable(shape=(), initializer="zeros", name="total_nats")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        nats = keras.losses.sparse_categorical_crossentropy(
            y_true, y_pred, from_logits=self.from_logits
        )  # (B, T)
        weight = ops.ones_like(nats)
        if self.ignore_class is not None:
            weight = weight * ops.cast(ops.not_equal(y_true, self.ignore_class), nats.dtype)
        if sample_weight is not None:
            weight = weight * ops.cast(ops.reshape(sample_weight, ops.shape(nats)), nats.dtype)
        self.total_nats.assign_add(ops.sum(nats * weight))
        self.count.assign_add(ops.sum(weight))

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total_nats, self.count))

    def get_config(self):
        return {**super().get_config(), "from_logits": self.from_logits,
                "ignore_class": self.ignore_class}
