"""Encoder–decoder models: RNNsearch (Bahdanau attention) and RNNenc (no attention).

Both share every piece but the context the decoder reads at step ``t``::

    encoder   h_1 … h_S = (Bi)GRU/LSTM(embed(x))                 # (B, S, H), H = U or 2U
    bridge    s_0 = tanh(W_b [h_S→; h_1←])                       # (B, U)
    context   c_t = Σ_i α_{t,i} h_i   (attention="bahdanau", α from s_{t-1})
              c_t = [h_S→; h_1←]      (attention="none": the fixed final encoder state)
    decoder   s_t = GRU/LSTM(s_{t-1}, [embed(y_{t-1}); c_t])      # (B, U)
    readout   p(y_t | …) = softmax(W_o [s_t; c_t; embed(y_{t-1})] + b_o)

So the two variants have exactly the same weights except the attention's ``W_s``
``(U, A)``, ``W_h`` ``(H, A)``, its bias ``(A,)`` and ``v`` ``(A,)``; with the default
``attention_units = U // 4`` that is a few percent of the model (``Seq2Seq.param_report``).

Target sequences use two extra ids after the target tokenizer's vocabulary: ``bos_id =
V`` starts every decoder input and ``eos_id = V + 1`` ends every target.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_seq.cells import cell_spec
from keras_seq.layers.bahdanau_attention import BahdanauAttention
from keras_seq.layers.seeds import seeded_dropout
from keras_seq.models._build import BuiltBeforeTracing, logits_dtype
from keras_seq.models.train_step import GradNormLogs

ATTENTIONS = ("bahdanau", "none")


@keras.saving.register_keras_serializable(package="keras_seq")
class AttentionDecoderCell(keras.layers.Layer):
    """A decoder step ``s_t = cell(s_{t-1}, [y_{t-1}; c_t])`` with Bahdanau attention.

    The context ``c_t`` is computed from the previous state ``s_{t-1}`` before the
    recurrent update, as in Bahdanau et al.; with ``attention="none"`` it is the fixed
    ``summary`` vector (RNNenc). The encoder outputs are handed over with
    :meth:`set_memory` before running the cell in ``keras.layers.RNN`` (Keras 3's RNN
    has no ``constants``), or passed explicitly to :meth:`step`.

    Args:
        units: Positive integer, decoder state size.
        memory_dim: Size of each encoder output ``h_i`` (``2·encoder units`` when
            bidirectional).
        cell: ``"gru"`` or ``"lstm"`` (keras-seq's :class:`GRUCell` / :class:`LSTMCell`).
        attention: ``"bahdanau"`` or ``"none"``.
        attention_units: Size of the alignment space ``A`` (default ``units // 4``).

    Call arguments:
        inputs: ``(batch, embed_dim)``, the embedding of ``y_{t-1}``.
        states: ``[s]`` (GRU) or ``[h, c]`` (LSTM), each ``(batch, units)``.

    Returns ``([s_t; c_t], new_states)``: ``(batch, units + memory_dim)`` and the states.

    Example:

    >>> import numpy as np
    >>> cell = AttentionDecoderCell(8, memory_dim=6)
    >>> memory = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")
    >>> cell.set_memory(memory, mask=np.ones((2, 5), bool))
    >>> out = keras.layers.RNN(cell, return_sequences=True)(np.zeros((2, 3, 4), "float32"))
    >>> tuple(out.shape)
    (2, 3, 14)
    """

    def __init__(self, units, memory_dim, cell="gru", attention="bahdanau",
                 attention_units=None, **kwargs):
        super().__init__(**kwargs)
        spec = cell_spec(cell, "seq2seq", owner="AttentionDecoderCell")
        if attention not in ATTENTIONS:
            raise ValueError(f"AttentionDecoderCell: received attention={attention!r}; "
                             f"expected one of {', '.join(ATTENTIONS)}.")
        self.units = units
        self.memory_dim = memory_dim
        self.cell_type = cell
        self.num_states = len(spec.states)  # h, or h and c
        self.attention_type = attention
        self.attention_units = attention_units or max(1, units // 4)
        self.cell = spec.cell_cls(units, **spec.kwargs, name=f"{cell}_cell")
        self.attention = (BahdanauAttention(self.attention_units, name="attention")
                          if attention == "bahdanau" else None)
        self.state_size = self.cell.state_size
        self.output_size = units + memory_dim
        object.__setattr__(self, "_memory", None)

    def build(self, input_shape):
        embed_dim = input_shape[-1]
        if self.attention is not None and not self.attention.built:
            self.attention.build((None, self.units), (None, None, self.memory_dim))
        if not self.cell.built:
            self.cell.build((None, embed_dim + self.memory_dim))
        self.built = True

    # -- memory ------------------------------------------------------------------------
    def make_memory(self, values, mask=None, summary=None):
        """``{"values", "keys", "mask", "summary"}`` for :meth:`step` (keys precomputed once)."""
        memory = {"values": values, "mask": mask, "summary": summary}
        if self.attention is not None:
            memory["keys"] = self.attention.precompute_keys(values)  # (B, S, A)
        elif summary is None:
            raise ValueError("AttentionDecoderCell(attention='none') needs the `summary` "
                             "vector (the final encoder state); pass summary=...")
        return memory

    def set_memory(self, values, mask=None, summary=None):
        """Attach encoder outputs (and mask, summary) for the next ``RNN`` call."""
        object.__setattr__(self, "_memory", self.make_memory(values, mask, summary))

    def clear_memory(self):
        object.__setattr__(self, "_memory", None)

    # -- one step ----------------------------------------------------------------------
    def context(self, state, memory):
        """``(c_t, α_t)`` from the previous state; ``α`` is ``None`` without attention."""
        if self.attention is None:
            return memory["summary"], None
        return self.attention(state, memory["values"], values_mask=memory["mask"],
                              keys=memory["keys"])

    def step(self, inputs, states, memory, training=False):
        """One decoder step: returns ``(output, new_states, weights)``."""
        states = list(states)
        ctx, weights = self.context(states[0], memory)  # (B, H), (B, S)
        x = ops.concatenate([inputs, ops.cast(ctx, inputs.dtype)], axis=-1)  # (B, E + H)
        out, new_states = self.cell(x, states, training=training)
        return ops.concatenate([out, ctx], axis=-1), list(new_states), weights

    def call(self, inputs, states, training=False):
        if self._memory is None:
            raise ValueError(
                "AttentionDecoderCell: no encoder memory; call cell.set_memory(encoder_outputs, "
                "mask) before running it in keras.layers.RNN, or use cell.step(...)."
            )
        if not isinstance(states, (list, tuple)):
            states = [states]
        out, new_states, _ = self.step(inputs, states, self._memory, training=training)
        return out, new_states

    def get_initial_state(self, batch_size=None):
        return self.cell.get_initial_state(batch_size)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "memory_dim": self.memory_dim,
                "cell": self.cell_type, "attention": self.attention_type,
                "attention_units": self.attention_units}


@keras.saving.register_keras_serializable(package="keras_seq")
class Seq2Seq(GradNormLogs, BuiltBeforeTracing, keras.Model):
    """Recurrent encoder–decoder, with Bahdanau attention (RNNsearch) or without (RNNenc).

    Args:
        source_vocab: number of source ids (0 is padding).
        target_vocab: number of target-tokenizer ids; the model adds ``bos_id`` and
            ``eos_id`` after them.
        embed_dim: embedding size (source and target).
        units: state size of the encoder (per direction) and of the decoder.
        cell: a cell the ``seq2seq`` shape offers in
            :data:`keras_seq.cells.CELLS`: ``"gru"`` or ``"lstm"``.
        bidirectional: bidirectional encoder (``H = 2·units``).
        attention: ``"bahdanau"`` or ``"none"``.
        attention_units: alignment size ``A`` (default ``units // 4``).
        dropout: dropout on the embeddings and before the readout.
        max_source_len: longest source (in tokens) the model accepts at inference.
        max_target_len: longest output (tokens, without ``<eos>``) decoding produces.

    Call arguments:
        inputs: ``(source_ids (B, S), decoder_inputs (B, T))`` int ids; source id 0 is
            padding; decoder inputs start with ``bos_id`` (teacher forcing).

    Returns logits ``(B, T, target_vocab + 2)``. Training logs carry ``grad_norm`` and
    ``grad_norm/<part>`` (:mod:`keras_seq.models.train_step`, parts as in
    :meth:`grad_norm_groups`).

    Example:

    >>> import numpy as np
    >>> model = Seq2Seq(source_vocab=10, target_vocab=8, embed_dim=4, units=8)
    >>> src = np.array([[3, 4, 5, 0]], "int32")
    >>> dec = np.array([[model.bos_id, 2, 3]], "int32")
    >>> tuple(model((src, dec)).shape)
    (1, 3, 10)
    """

    @staticmethod
    def special_ids(target_vocab: int) -> tuple[int, int]:
        """``(bos_id, eos_id)``: the two ids after the target tokenizer's vocabulary."""
        return int(target_vocab), int(target_vocab) + 1

    def __init__(self, source_vocab, target_vocab, embed_dim=64, units=128, cell="gru",
                 bidirectional=True, attention="bahdanau", attention_units=None, dropout=0.0,
                 max_source_len=64, max_target_len=64, **kwargs):
        super().__init__(**kwargs)
        spec = cell_spec(cell, "seq2seq", owner="Seq2Seq")
        if attention not in ATTENTIONS:
            raise ValueError(f"Seq2Seq: received attention={attention!r}; expected "
                             f"{' or '.join(ATTENTIONS)}.")
        self.source_vocab, self.target_vocab = int(source_vocab), int(target_vocab)
        self.embed_dim, self.units, self.cell_type = embed_dim, units, cell
        self.bidirectional, self.attention_type = bidirectional, attention
        self.attention_units = attention_units or max(1, units // 4)
        self.dropout_rate = float(dropout)
        self.max_source_len, self.max_target_len = int(max_source_len), int(max_target_len)
        self.bos_id, self.eos_id = self.special_ids(self.target_vocab)
        self.output_vocab = self.target_vocab + 2
        self.memory_dim = units * (2 if bidirectional else 1)

        self.source_embedding = keras.layers.Embedding(source_vocab, embed_dim, mask_zero=True,
                                                       name="source_embedding")
        self.target_embedding = keras.layers.Embedding(self.output_vocab, embed_dim,
                                                       name="target_embedding")
        rnn = spec.build(units, return_sequences=True, return_state=True, name="encoder")
        self.encoder = keras.layers.Bidirectional(rnn, name="bi_encoder") if bidirectional \
            else rnn
        self.bridge = keras.layers.Dense(units, activation="tanh", name="bridge")
        self.decoder_cell = AttentionDecoderCell(units, self.memory_dim, cell=cell,
                                                 attention=attention,
                                                 attention_units=self.attention_units,
                                                 name="decoder_cell")
        self.decoder = keras.layers.RNN(self.decoder_cell, return_sequences=True,
                                        name="decoder")
        self.dropout = seeded_dropout(self.dropout_rate)
        self.readout = keras.layers.Dense(self.output_vocab, name="readout",
                                          dtype=logits_dtype())

    # -- encoder -----------------------------------------------------------------------
    def encode(self, source_ids, training=False):
        """Encoder outputs → ``(memory, initial_states)`` for :meth:`decode_step`."""
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        mask = ops.not_equal(source_ids, 0)  # (B, S)
        x = self.dropout(self.source_embedding(source_ids), training=training)  # (B, S, E)
        results = self.encoder(x, mask=mask, training=training)
        values = results[0]  # (B, S, H)
        finals = results[1:]
        num_states = self.decoder_cell.num_states
        finals = finals[0::num_states]  # (h[, c]) per direction: keep the h's
        summary = ops.concatenate(list(finals), axis=-1) if len(finals) > 1 else finals[0]
        s0 = self.bridge(summary)  # (B, U)
        states = [s0] + [ops.zeros_like(s0)] * (num_states - 1)
        memory = self.decoder_cell.make_memory(values, mask=mask, summary=summary)
        return memory, states

    # -- decoder -----------------------------------------------------------------------
    def readout_logits(self, outputs, prev_embedded, training=False):
        features = ops.concatenate([outputs, prev_embedded], axis=-1)  # (…, U + H + E)
        return self.readout(self.dropout(features, training=training))

    def decode_step(self, prev_ids, states, memory):
        """One inference step: ``(logits (B, V), new_states, attention (B, S) or None)``."""
        y = self.target_embedding(ops.convert_to_tensor(prev_ids, "int32"))  # (B, E)
        out, new_states, weights = self.decoder_cell.step(y, states, memory)
        return self.readout_logits(out, y), new_states, weights

    def call(self, inputs, training=False):
        source_ids, decoder_inputs = inputs
        memory, states = self.encode(source_ids, training=training)
        y = self.dropout(self.target_embedding(decoder_inputs), training=training)  # (B, T, E)
        self.decoder_cell.set_memory(memory["values"], memory["mask"], memory["summary"])
        try:
            outputs = self.decoder(y, initial_state=states, training=training)  # (B, T, U+H)
        finally:
            self.decoder_cell.clear_memory()
        return self.readout_logits(outputs, y, training=training)  # (B, T, V)

    def teacher_forced_attention(self, source_ids, decoder_inputs):
        """Logits and attention weights ``(B, T, S)`` of a teacher-forced pass, step by step."""
        memory, states = self.encode(source_ids)
        logits, weights = [], []
        for t in range(decoder_inputs.shape[1]):
            lg, states, w = self.decode_step(decoder_inputs[:, t], states, memory)
            logits.append(lg)
            weights.append(w)
        w = None if weights[0] is None else ops.stack(weights, axis=1)
        return ops.stack(logits, axis=1), w

    # -- building and config -----------------------------------------------------------
    def build(self, input_shape=None):
        # Run the model once on a dummy batch so every sub-layer creates its weights.
        self.call((ops.ones((1, 2), "int32"), ops.ones((1, 2), "int32")))
        self.built = True

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()

    def grad_norm_groups(self) -> dict:
        """``{part: layer}`` whose gradient norms the training logs carry."""
        groups = {"source_embedding": self.source_embedding,
                  "target_embedding": self.target_embedding, "encoder": self.encoder,
                  "bridge": self.bridge, "decoder": self.decoder_cell.cell,
                  "readout": self.readout}
        if self.decoder_cell.attention is not None:
            groups["attention"] = self.decoder_cell.attention
        return groups

    def param_report(self) -> dict:
        """Parameter counts by part (the model must be built)."""
        parts = {
            "embeddings": self.source_embedding.count_params()
            + self.target_embedding.count_params(),
            "encoder": self.encoder.count_params(),
            "bridge": self.bridge.count_params(),
            "decoder_rnn": self.decoder_cell.cell.count_params(),
            "attention": (self.decoder_cell.attention.count_params()
                          if self.decoder_cell.attention is not None else 0),
            "readout": self.readout.count_params(),
        }
        parts["total"] = sum(parts.values())
        return parts

    def get_config(self):
        return {
            **super().get_config(),
            "source_vocab": self.source_vocab, "target_vocab": self.target_vocab,
            "embed_dim": self.embed_dim, "units": self.units, "cell": self.cell_type,
            "bidirectional": self.bidirectional, "attention": self.attention_type,
            "attention_units": self.attention_units, "dropout": self.dropout_rate,
            "max_source_len": self.max_source_len, "max_target_len": self.max_target_len,
        }
