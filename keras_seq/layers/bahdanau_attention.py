"""Additive (Bahdanau) attention with learned query and key projections.

For a decoder state ``s_{t-1}`` (the query) and encoder outputs ``h_1 … h_S``
(the values)::

    e_{t,i} = vᵀ tanh(W_s s_{t-1} + W_h h_i)      alignment scores
    α_{t,i} = softmax_i(e_{t,i})                   (masked positions: exactly 0)
    c_t     = Σ_i α_{t,i} h_i                      context vector

``W_h h_i`` does not depend on the decoder step, so :meth:`BahdanauAttention.precompute_keys`
computes it once per source sequence and every decoder step passes it back as ``keys``.
Keras's ``AdditiveAttention`` has no ``W_s`` / ``W_h`` (it adds query and key directly),
which is why this layer exists.
"""

from __future__ import annotations

import keras
from keras import ops

# Score given to masked positions before the softmax; exp(-1e9 - max) is exactly 0 in float32.
_MASKED_SCORE = -1e9


@keras.saving.register_keras_serializable(package="keras_seq")
class BahdanauAttention(keras.layers.Layer):
    """Additive attention ``vᵀ tanh(W_s s + W_h h)`` (Bahdanau et al. 2015).

    Args:
        units: Positive integer, size of the alignment space (rows of ``v``).
        use_bias: Whether ``W_h h`` gets a bias vector (``W_s s`` and ``v`` never do;
            a bias there would be redundant). Default ``True``.
        kernel_initializer: Initializer for ``W_s``, ``W_h`` and ``v``.
            Default ``"glorot_uniform"``.
        bias_initializer: Initializer for the key bias. Default ``"zeros"``.

    Call arguments:
        query: ``(batch, query_dim)`` — one decoder state per example — or
            ``(batch, steps, query_dim)`` to score several queries at once.
        values: ``(batch, source_len, value_dim)``, the encoder outputs ``h_i``.
        values_mask: optional boolean ``(batch, source_len)``; ``False`` marks padding,
            which receives exactly zero weight. Defaults to the Keras mask carried by
            ``values`` (e.g. from ``Embedding(mask_zero=True)``), if any.
        keys: optional ``(batch, source_len, units)`` from :meth:`precompute_keys`, so a
            decoder loop projects the values once instead of once per step.

    Returns:
        ``(context, weights)``: ``(batch, value_dim)`` and ``(batch, source_len)`` for a
        2-D query; ``(batch, steps, value_dim)`` and ``(batch, steps, source_len)`` for a
        3-D one. Weights are non-negative and sum to 1 over the unmasked positions.

    Example:

    >>> import numpy as np
    >>> attention = BahdanauAttention(8)
    >>> state = np.zeros((2, 16), "float32")          # s_{t-1}
    >>> outputs = np.ones((2, 5, 12), "float32")       # h_1 … h_5
    >>> mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    >>> context, weights = attention(state, outputs, values_mask=mask)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 12), (2, 5))
    >>> [round(float(w), 3) for w in np.asarray(weights)[0]]
    [0.333, 0.333, 0.333, 0.0, 0.0]
    """

    def __init__(
        self,
        units,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        if not isinstance(units, int) or isinstance(units, bool) or units <= 0:
            raise ValueError(
                f"BahdanauAttention: received units={units!r}; expected a positive integer "
                "(the size of the alignment space), e.g. units=64."
            )
        super().__init__(**kwargs)
        self.units = units
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        init = {"kernel_initializer": self.kernel_initializer}
        self.query_dense = keras.layers.Dense(units, use_bias=False, name="W_s", **init)
        self.key_dense = keras.layers.Dense(
            units, use_bias=use_bias, bias_initializer=self.bias_initializer, name="W_h", **init
        )
        self.score_dense = keras.layers.Dense(1, use_bias=False, name="v", **init)

    def build(self, query_shape, values_shape=None):
        # Sub-layers already built (precompute_keys may run first) are left alone.
        if not self.query_dense.built:
            self.query_dense.build(tuple(query_shape))
        if values_shape is not None and not self.key_dense.built:
            self.key_dense.build(tuple(values_shape))
        if not self.score_dense.built:
            self.score_dense.build((None, self.units))
        self.built = True

    def precompute_keys(self, values):
        """``W_h h_i (+ b)`` for every source position: ``(B, S, D) -> (B, S, units)``."""
        return self.key_dense(values)

    def score(self, query, keys):
        """Unnormalised alignment scores ``e``: ``(B, [T,] S)``."""
        q = self.query_dense(query)  # (B, A) or (B, T, A)
        if len(q.shape) == 2:
            hidden = ops.tanh(ops.expand_dims(q, 1) + keys)  # (B, S, A)
        else:
            hidden = ops.tanh(ops.expand_dims(q, 2) + ops.expand_dims(keys, 1))  # (B, T, S, A)
        return ops.squeeze(self.score_dense(hidden), -1)  # (B, [T,] S)

    def call(self, query, values, values_mask=None, keys=None):
        if values_mask is None:
            values_mask = getattr(values, "_keras_mask", None)
        if keys is None:
            keys = self.precompute_keys(values)  # (B, S, A)
        scores = self.score(query, keys)  # (B, [T,] S)
        if values_mask is not None:
            mask = ops.cast(values_mask, "bool")
            if len(scores.shape) == 3:
                mask = ops.expand_dims(mask, 1)  # (B, 1, S)
            scores = ops.where(mask, scores, ops.cast(_MASKED_SCORE, scores.dtype))
            weights = ops.softmax(scores, axis=-1)
            weights = ops.where(mask, weights, ops.zeros_like(weights))  # exact zeros
        else:
            weights = ops.softmax(scores, axis=-1)
        if len(weights.shape) == 2:
            context = ops.einsum("bs,bsd->bd", weights, values)  # (B, D)
        else:
            context = ops.einsum("bts,bsd->btd", weights, values)  # (B, T, D)
        return context, weights

    def compute_output_shape(self, query_shape, values_shape=None):
        values_shape = values_shape or (None, None, None)
        lead = tuple(query_shape[:-1])
        return lead + (values_shape[-1],), lead + (values_shape[1],)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
