"""Aligned N→N sequence tagger: embedding → (bidirectional) keras-seq RNNs → per-token logits.

One output per input token (POS tags, BIO entity tags, punctuation/case restoration). A
bidirectional tagger sees the whole sentence at every position, so it suits tagging but
cannot run left-to-right online; ``bidirectional=False`` gives the causal variant, and
:func:`units_for_equal_params` picks its width so the two can be compared at (about) the
same number of parameters.

Id 0 is ``<pad>``: the embedding masks it, the mask reaches every recurrent layer (both
directions), and the model's output carries it, so Keras losses and metrics skip padded
positions. Padding at the end never changes the logits of real tokens.
"""

from __future__ import annotations

import keras
from keras import layers, ops

from keras_seq.cells import cell_spec
from keras_seq.layers.params import count_params
from keras_seq.layers.seeds import seeded_dropout
from keras_seq.models._build import BuildByCalling, BuiltBeforeTracing, logits_dtype


def _check_cell(cell: str):
    """The registry row of ``cell``, one the ``tag`` shape offers."""
    return cell_spec(cell, "tag", owner="SequenceTagger")


def tagger_param_count(vocab_size: int, num_tags: int, embed_dim: int = 64, units: int = 128,
                       cell: str = "lstm", num_layers: int = 1,
                       bidirectional: bool = True) -> int:
    """Trainable parameters of a :class:`SequenceTagger`, computed without building it.

    ``V·E`` (embedding) + per layer and direction the recurrent cell's weights
    (:func:`keras_seq.layers.count_params`) + ``(D·U + 1)·num_tags`` (output layer), where
    ``D`` is 2 for a bidirectional tagger and 1 otherwise.

    Example:

    >>> tagger_param_count(100, 5, embed_dim=8, units=16, cell="gru", bidirectional=False)
    2133
    """
    _check_cell(cell)
    dirs = 2 if bidirectional else 1
    total = vocab_size * embed_dim
    input_dim = embed_dim
    for _ in range(num_layers):
        total += dirs * count_params(cell, input_dim, units)
        input_dim = dirs * units
    return total + input_dim * num_tags + num_tags


def units_for_equal_params(vocab_size: int, num_tags: int, embed_dim: int, units_bi: int,
                           cell: str = "lstm", num_layers: int = 1) -> int:
    """Units of a unidirectional tagger with about as many parameters as a bidirectional one.

    Returns the width ``u`` whose :func:`tagger_param_count` (``bidirectional=False``) is
    closest to that of the bidirectional tagger with ``units_bi`` units per direction (same
    vocabulary, tags, embedding, cell and depth). The embedding is the same in both, so the
    match is really between the recurrent and output weights. For one layer the result is
    a bit under ``√2·units_bi`` when the input projection is small next to the recurrent one.

    Example:

    >>> units_for_equal_params(1000, 10, embed_dim=32, units_bi=64, cell="lstm")
    96
    """
    _check_cell(cell)
    if not isinstance(units_bi, int) or units_bi <= 0:
        raise ValueError(
            f"units_for_equal_params: received units_bi={units_bi!r}; expected a positive "
            "integer (units per direction of the bidirectional tagger)."
        )
    target = tagger_param_count(vocab_size, num_tags, embed_dim, units_bi, cell, num_layers,
                                bidirectional=True)

    def count(u: int) -> int:
        return tagger_param_count(vocab_size, num_tags, embed_dim, u, cell, num_layers,
                                  bidirectional=False)

    lo, hi = 1, 2 * units_bi + 1
    while count(hi) < target:  # counts grow with u; make sure the target is bracketed
        hi *= 2
    while hi - lo > 1:  # invariant: count(lo) ≤ target or lo == 1; count(hi) ≥ target
        mid = (lo + hi) // 2
        if count(mid) < target:
            lo = mid
        else:
            hi = mid
    return min((lo, hi), key=lambda u: (abs(count(u) - target), u))


@keras.saving.register_keras_serializable(package="keras_seq")
class SequenceTagger(BuildByCalling, BuiltBeforeTracing, keras.Model):
    """Per-token tagger: embedding → stacked (bidirectional) keras-seq RNNs → tag logits.

    Args:
        vocab_size: number of token ids; id 0 is ``<pad>`` and is masked.
        num_tags: number of tags (output classes per token).
        embed_dim: embedding size.
        units: hidden units of every recurrent layer, per direction.
        cell: a cell the ``tag`` shape offers in :data:`keras_seq.cells.CELLS`:
            ``"rnn"``, ``"gru"`` or ``"lstm"`` (``keras_seq.layers`` SimpleRNN/GRU/LSTM).
        num_layers: stacked recurrent layers.
        bidirectional: wrap each layer in ``keras.layers.Bidirectional`` (outputs of the
            two directions concatenated, ``2·units`` features); ``False`` gives a causal
            left-to-right tagger.
        dropout: dropout on the embeddings, between layers and before the output layer.

    Call arguments:
        inputs: int token ids ``(B, T)``, padded with 0 at the end.
        training: whether dropout is active.

    Returns tag logits ``(B, T, num_tags)`` (no softmax: use a from-logits loss). The
    output carries the padding mask, so Keras losses and metrics skip padded positions.

    Example:

    >>> tagger = SequenceTagger(vocab_size=30, num_tags=4, embed_dim=8, units=6, cell="gru")
    >>> import numpy as np
    >>> ids = np.array([[5, 7, 2, 0, 0], [3, 1, 4, 9, 8]])  # row 0: 3 tokens, then <pad>
    >>> tuple(tagger(ids).shape)
    (2, 5, 4)
    >>> SequenceTagger.param_count_for(30, 4, embed_dim=8, units=6, cell="gru") == \\
    ...     tagger.count_params()
    True
    """

    param_count_for = staticmethod(tagger_param_count)

    def __init__(self, vocab_size: int, num_tags: int, embed_dim: int = 64, units: int = 128,
                 cell: str = "lstm", num_layers: int = 1, bidirectional: bool = True,
                 dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        spec = _check_cell(cell)
        for name, value, least in (("vocab_size", vocab_size, 2), ("num_tags", num_tags, 1),
                                   ("embed_dim", embed_dim, 1), ("units", units, 1),
                                   ("num_layers", num_layers, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                hint = " (id 0 is <pad>, so at least one real token needs id 1)" \
                    if name == "vocab_size" else ""
                raise ValueError(
                    f"SequenceTagger: received {name}={value!r}; expected an integer "
                    f"≥ {least}{hint}."
                )
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(
                f"SequenceTagger: received dropout={dropout!r}; expected a fraction in "
                "[0, 1), e.g. dropout=0.2 (0 turns it off)."
            )
        self.vocab_size, self.num_tags, self.embed_dim = vocab_size, num_tags, embed_dim
        self.units, self.cell, self.num_layers = units, cell, num_layers
        self.bidirectional, self.dropout = bool(bidirectional), float(dropout)

        self.embedding = layers.Embedding(vocab_size, embed_dim, mask_zero=True,
                                          name="embedding")
        self.rnns = []
        for i in range(num_layers):
            rnn = spec.build(units, return_sequences=True, name=f"{cell}_{i}")
            if self.bidirectional:
                rnn = layers.Bidirectional(rnn, merge_mode="concat", name=f"bi_{cell}_{i}")
            self.rnns.append(rnn)
        self.drops = [seeded_dropout(self.dropout, name=f"dropout_{i}")
                      for i in range(num_layers + 1)]
        self.head = layers.Dense(num_tags, name="logits", dtype=logits_dtype())

    def call(self, inputs, training=None):
        mask = ops.not_equal(inputs, 0)  # (B, T) bool, False at <pad>
        x = self.embedding(inputs)  # (B, T, E)
        x = self.drops[0](x, training=training)
        for rnn, drop in zip(self.rnns, self.drops[1:]):
            # Passing the mask explicitly: the backward direction must skip the padding
            # (which it meets first), or it would leak into the real tokens' outputs.
            x = rnn(x, mask=mask, training=training)  # (B, T, D·U), D = 2 if bidirectional
            x = drop(x, training=training)
        return self.head(x)  # (B, T, num_tags)

    def compute_mask(self, inputs, mask=None):
        return ops.not_equal(inputs, 0)  # (B, T): the output's padding mask

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "num_tags": self.num_tags, "embed_dim": self.embed_dim, "units": self.units,
                "cell": self.cell, "num_layers": self.num_layers,
                "bidirectional": self.bidirectional, "dropout": self.dropout}
