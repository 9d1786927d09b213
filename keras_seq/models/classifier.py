"""N→1 sequence classifier: embedding → stacked keras-seq RNN layers → pooling → logits.

Id 0 is ``<pad>`` (``Embedding(mask_zero=True)``) and padding never changes the output:
the recurrent layers skip masked steps and every pooling reads only unmasked positions.

Pooling turns the per-step states ``h_1 … h_T`` into one vector:

* ``"last"`` — the state at the last unmasked step; bidirectional: the forward state at
  the last real step concatenated with the backward state at the first real step (the
  backward layer's summary of the whole sequence);
* ``"mean"`` — the masked mean ``Σ m_t h_t / Σ m_t``;
* ``"attention"`` — additive attention pooling (:class:`AttentionPooling`):
  ``e_t = vᵀ tanh(W h_t + b)``, ``α = softmax(e)`` over the unmasked steps,
  ``c = Σ α_t h_t``. :meth:`SequenceClassifier.attention_weights` returns ``α``.
"""

from __future__ import annotations

import keras
from keras import layers, ops

from keras_seq.cells import cell_spec
from keras_seq.layers.seeds import seeded_dropout
from keras_seq.models._build import BuildByCalling, BuiltBeforeTracing, logits_dtype

POOLINGS = ("last", "mean", "attention")

# Score given to masked positions before the softmax; exp(-1e9 - max) is exactly 0 in float32.
_MASKED_SCORE = -1e9


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@keras.saving.register_keras_serializable(package="keras_seq")
class AttentionPooling(layers.Layer):
    """Additive attention pooling ``c = Σ_t α_t h_t`` with ``α = softmax_t(vᵀ tanh(W h_t + b))``.

    Args:
        units: Positive integer, size of the scoring space (rows of ``W``).

    Call arguments:
        values: ``(batch, steps, features)``, the states ``h_t``.
        mask: optional boolean ``(batch, steps)``; ``False`` marks padding, which gets
            exactly zero weight. Defaults to the Keras mask carried by ``values``.

    Returns:
        ``(context, weights)``: ``(batch, features)`` and ``(batch, steps)``; the weights
        are non-negative and sum to 1 over the unmasked steps (all zero for a fully
        masked row, whose context is then zero).

    Example:

    >>> import numpy as np
    >>> pool = AttentionPooling(4)
    >>> h = np.ones((2, 3, 6), "float32")
    >>> context, weights = pool(h, mask=np.array([[1, 1, 0], [1, 1, 1]], bool))
    >>> tuple(context.shape), [round(float(w), 3) for w in np.asarray(weights)[0]]
    ((2, 6), [0.5, 0.5, 0.0])
    """

    def __init__(self, units: int, **kwargs):
        if not _is_positive_int(units):
            raise ValueError(
                f"AttentionPooling: received units={units!r}; expected a positive integer "
                "(the size of the scoring space), e.g. units=64."
            )
        super().__init__(**kwargs)
        self.units = units
        self.hidden = layers.Dense(units, activation="tanh", name="W")
        self.score_dense = layers.Dense(1, use_bias=False, name="v")

    def build(self, values_shape, mask_shape=None):
        self.hidden.build(tuple(values_shape))
        self.score_dense.build((None, None, self.units))
        self.built = True

    def call(self, values, mask=None):
        if mask is None:
            mask = getattr(values, "_keras_mask", None)
        scores = ops.squeeze(self.score_dense(self.hidden(values)), -1)  # (B, T)
        if mask is not None:
            mask = ops.cast(mask, "bool")  # (B, T)
            scores = ops.where(mask, scores, ops.cast(_MASKED_SCORE, scores.dtype))
            weights = ops.softmax(scores, axis=-1)  # (B, T)
            weights = ops.where(mask, weights, ops.zeros_like(weights))  # exact zeros
        else:
            weights = ops.softmax(scores, axis=-1)  # (B, T)
        context = ops.einsum("bt,btd->bd", weights, values)  # (B, D)
        return context, weights

    def compute_mask(self, values, mask=None):
        return None

    def compute_output_shape(self, values_shape, mask_shape=None):
        return (values_shape[0], values_shape[-1]), (values_shape[0], values_shape[1])

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package="keras_seq")
class SequenceClassifier(BuildByCalling, BuiltBeforeTracing, keras.Model):
    """Recurrent classifier of whole sequences (N→1): one label per padded id sequence.

    Args:
        vocab_size: number of token ids (id 0 is ``<pad>`` and is masked).
        num_classes: number of labels (≥ 2); the output has one logit per label.
        embed_dim: embedding size.
        units: hidden units of every recurrent layer (per direction).
        cell: a cell the ``classify`` shape offers in
            :data:`keras_seq.cells.CELLS`: ``"rnn"``, ``"gru"`` or ``"lstm"``.
        num_layers: stacked recurrent layers.
        bidirectional: wrap every recurrent layer in ``keras.layers.Bidirectional``
            (outputs concatenated, so states have ``2·units`` features).
        pooling: ``"last"`` (state at the last unmasked step), ``"mean"`` (masked mean)
            or ``"attention"`` (additive attention pooling, see :class:`AttentionPooling`).
        attention_units: size of the attention scoring space; ``None`` → ``units // 2``
            (at least 1). Only used with ``pooling="attention"``.
        dropout: dropout on the embeddings, between recurrent layers and before the
            output layer.
        residual: add each recurrent layer's input to its output when their shapes match
            (always from the second layer on; the first only if ``embed_dim`` equals the
            layer's output size, ``units`` or ``2·units`` when bidirectional).

    Call arguments:
        inputs: int ids ``(B, T)``, right-padded (or padded anywhere) with 0.
        training: whether dropout is active.
        return_attention: also return the attention weights ``(B, T)``
            (needs ``pooling="attention"``).

    Returns logits ``(B, num_classes)`` (no softmax: pass them to a from-logits loss), or
    ``(logits, weights)`` with ``return_attention=True``.

    Example:

    >>> import numpy as np
    >>> clf = SequenceClassifier(vocab_size=30, num_classes=3, embed_dim=8, units=16,
    ...                          cell="gru", bidirectional=True, pooling="attention")
    >>> ids = np.array([[5, 6, 7, 0, 0], [8, 9, 0, 0, 0]], "int32")
    >>> tuple(clf(ids).shape)
    (2, 3)
    >>> weights = np.asarray(clf.attention_weights(ids))
    >>> weights.shape, [round(float(s), 3) for s in weights.sum(-1)], float(weights[1, 2:].max())
    ((2, 5), [1.0, 1.0], 0.0)
    """

    def __init__(self, vocab_size: int, num_classes: int, embed_dim: int = 64,
                 units: int = 128, cell: str = "lstm", num_layers: int = 1,
                 bidirectional: bool = False, pooling: str = "last",
                 attention_units: int | None = None, dropout: float = 0.0,
                 residual: bool = False, **kwargs):
        super().__init__(**kwargs)
        spec = cell_spec(cell, "classify", owner="SequenceClassifier")
        if pooling not in POOLINGS:
            raise ValueError(f"SequenceClassifier: received pooling={pooling!r}; expected one "
                             f"of {', '.join(POOLINGS)}, e.g. pooling='last'.")
        if not _is_positive_int(vocab_size) or vocab_size < 2:
            raise ValueError(f"SequenceClassifier: received vocab_size={vocab_size!r}; expected "
                             "an integer ≥ 2 (id 0 is <pad>); pass the tokenizer's vocab size.")
        if not _is_positive_int(num_classes) or num_classes < 2:
            raise ValueError(f"SequenceClassifier: received num_classes={num_classes!r}; "
                             "expected an integer ≥ 2 (the number of labels), e.g. 2.")
        for name, value in (("embed_dim", embed_dim), ("units", units),
                            ("num_layers", num_layers)):
            if not _is_positive_int(value):
                raise ValueError(f"SequenceClassifier: received {name}={value!r}; expected a "
                                 f"positive integer, e.g. {name}=" +
                                 ("1." if name == "num_layers" else "64."))
        if attention_units is not None and not _is_positive_int(attention_units):
            raise ValueError(f"SequenceClassifier: received attention_units={attention_units!r};"
                             " expected a positive integer or None (→ units // 2).")
        if not isinstance(dropout, (int, float)) or not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"SequenceClassifier: received dropout={dropout!r}; expected a "
                             "fraction in [0, 1), e.g. dropout=0.2 (0 turns it off).")
        self.vocab_size, self.num_classes = vocab_size, num_classes
        self.embed_dim, self.units, self.cell = embed_dim, units, cell
        self.num_layers, self.bidirectional = num_layers, bool(bidirectional)
        self.pooling, self.attention_units = pooling, attention_units
        self.dropout, self.residual = float(dropout), bool(residual)

        self.embedding = layers.Embedding(vocab_size, embed_dim, mask_zero=True,
                                          name="embedding")
        self.rnns = []
        for i in range(num_layers):
            rnn = spec.build(units, return_sequences=True, name=f"{cell}_{i}")
            if self.bidirectional:
                rnn = layers.Bidirectional(rnn, merge_mode="concat", name=f"bi_{cell}_{i}")
            self.rnns.append(rnn)
        self.state_dim = units * (2 if self.bidirectional else 1)
        self.drops = [seeded_dropout(self.dropout) for _ in range(num_layers + 1)]
        self.attention = None
        if pooling == "attention":
            self.attention = AttentionPooling(attention_units or max(1, units // 2),
                                              name="attention_pooling")
        self.head = layers.Dense(num_classes, name="logits", dtype=logits_dtype())

    def _states(self, inputs, training=None):
        """Per-step states ``(B, T, H)`` of the top layer and the mask ``(B, T)``."""
        mask = ops.not_equal(inputs, 0)  # (B, T)
        x = self.embedding(inputs)  # (B, T, E)
        x = self.drops[0](x, training=training)
        for rnn, drop in zip(self.rnns, self.drops[1:]):
            h = rnn(x, mask=mask, training=training)  # (B, T, H)
            if self.residual and h.shape[-1] == x.shape[-1]:
                h = h + x  # (B, T, H)
            x = drop(h, training=training)
        return x, mask

    def _pool(self, states, mask):
        """``(B, T, H)`` states → ``(B, H)`` summary and the attention weights (or None)."""
        m = ops.cast(mask, states.dtype)  # (B, T)
        if self.pooling == "mean":
            total = ops.sum(states * ops.expand_dims(m, -1), axis=1)  # (B, H)
            count = ops.maximum(ops.sum(m, axis=1, keepdims=True), 1.0)  # (B, 1)
            return total / count, None
        if self.pooling == "attention":
            return self.attention(states, mask=mask)  # (B, H), (B, T)
        steps = ops.shape(states)[1]
        # Last unmasked step: T − 1 − (first True in the reversed mask).
        last = steps - 1 - ops.argmax(ops.flip(m, axis=1), axis=1)  # (B,)
        idx = ops.reshape(ops.cast(last, "int32"), (-1, 1, 1))  # (B, 1, 1)
        forward = ops.squeeze(ops.take_along_axis(states, idx, axis=1), 1)  # (B, H)
        if not self.bidirectional:
            return forward, None
        first = ops.reshape(ops.cast(ops.argmax(m, axis=1), "int32"), (-1, 1, 1))  # (B, 1, 1)
        backward = ops.squeeze(ops.take_along_axis(states, first, axis=1), 1)  # (B, H)
        u = self.units
        # Concatenated Bidirectional output: forward features first, then backward.
        return ops.concatenate([forward[:, :u], backward[:, u:]], axis=-1), None  # (B, 2U)

    def call(self, inputs, training=None, return_attention=False):
        if return_attention and self.pooling != "attention":
            raise ValueError(
                f"SequenceClassifier: return_attention=True needs pooling='attention', but "
                f"this model has pooling={self.pooling!r}; build it with pooling='attention'."
            )
        states, mask = self._states(inputs, training=training)  # (B, T, H), (B, T)
        pooled, weights = self._pool(states, mask)  # (B, H), (B, T) or None
        logits = self.head(pooled)  # (B, C)
        return (logits, weights) if return_attention else logits

    def compute_mask(self, inputs, mask=None):
        return None

    def features(self, inputs, training=False):
        """The pooled sequence vector ``(B, H)`` the output layer reads (for probes/plots)."""
        states, mask = self._states(inputs, training=training)  # (B, T, H), (B, T)
        return self._pool(states, mask)[0]  # (B, H)

    def attention_weights(self, inputs):
        """Attention weights ``(B, T)`` over the steps of ``inputs`` (``pooling="attention"``).

        Zero at padding; each row sums to 1 over its unmasked steps.
        """
        return self(inputs, training=False, return_attention=True)[1]

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "num_classes": self.num_classes, "embed_dim": self.embed_dim,
                "units": self.units, "cell": self.cell, "num_layers": self.num_layers,
                "bidirectional": self.bidirectional, "pooling": self.pooling,
                "attention_units": self.attention_units, "dropout": self.dropout,
                "residual": self.residual}
