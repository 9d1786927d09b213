"""Bengio et al. (2003) fixed-window feed-forward neural language model.

``y = b + W·x + U·tanh(d + H·x)`` where ``x`` is the concatenation of the embeddings of
the ``n−1`` previous words; ``W·x`` are the optional direct connections.
"""

from __future__ import annotations

import keras
from keras import layers, ops

from keras_seq.layers.seeds import seeded_dropout
from keras_seq.models._build import BuildByCalling, BuiltBeforeTracing, logits_dtype


def nplm_param_count(vocab_size: int, order: int, embed_dim: int, hidden: int,
                     direct: bool = True) -> int:
    """Parameters of an NPLM: ``|V|(1 + n·m + h) + h(1 + (n−1)·m)`` with direct connections.

    >>> nplm_param_count(17_964, order=6, embed_dim=100, hidden=60)
    11904264
    """
    context = (order - 1) * embed_dim
    total = vocab_size * embed_dim  # embedding table C
    total += hidden * context + hidden  # H, d
    total += vocab_size * hidden + vocab_size  # U, b
    if direct:
        total += vocab_size * context  # W
    return total


@keras.saving.register_keras_serializable(package="keras_seq")
class NPLM(BuildByCalling, BuiltBeforeTracing, keras.Model):
    """Feed-forward n-gram neural language model (Bengio et al. 2003).

    Args:
        vocab_size: ``|V|``.
        order: ``n``; the model reads ``n−1`` previous tokens.
        embed_dim: ``m``, size of each word vector.
        hidden: ``h``, tanh hidden units.
        direct: add the direct connections ``W`` from the embeddings to the output.
        dropout: dropout on the concatenated embeddings while training.

    Call arguments:
        inputs: int ids ``(B, n−1)``, the context window, oldest first.

    Returns logits ``(B, |V|)`` (no softmax: pass them to a from-logits loss).

    Example:

    >>> model = NPLM(vocab_size=50, order=3, embed_dim=8, hidden=16)
    >>> tuple(model(keras.ops.zeros((4, 2), "int32")).shape)
    (4, 50)
    """

    def __init__(self, vocab_size: int, order: int = 5, embed_dim: int = 100,
                 hidden: int = 60, direct: bool = True, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if order < 2:
            raise ValueError(f"NPLM order must be ≥ 2 (it reads order−1 tokens), got {order}")
        self.vocab_size, self.order, self.embed_dim = vocab_size, order, embed_dim
        self.hidden, self.direct, self.dropout = hidden, direct, dropout
        self.embedding = layers.Embedding(vocab_size, embed_dim, name="C")
        self.flatten = layers.Reshape(((order - 1) * embed_dim,))
        self.drop = seeded_dropout(dropout)
        self.hidden_layer = layers.Dense(hidden, activation="tanh", name="H")
        self.output_layer = layers.Dense(vocab_size, name="U", dtype=logits_dtype())
        self.direct_layer = layers.Dense(vocab_size, use_bias=False, name="W",
                                         dtype=logits_dtype()) if direct else None

    def call(self, inputs, training=None):
        x = self.flatten(self.embedding(inputs))  # (B, (n−1)·m)
        x = self.drop(x, training=training)
        logits = self.output_layer(self.hidden_layer(x))  # (B, V)
        if self.direct_layer is not None:
            logits = ops.add(logits, self.direct_layer(x))
        return logits

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "order": self.order,
                "embed_dim": self.embed_dim, "hidden": self.hidden, "direct": self.direct,
                "dropout": self.dropout}
