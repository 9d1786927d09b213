"""Inference graphs of a :class:`~keras_seq.models.rnn_lm.RecurrentLM` with explicit state.

:class:`LMGraphs` wraps a trained model (any cell: keras-seq ``rnn``/``gru``/``lstm``/``lstmp``
or the Keras built-ins, stacked or not) and builds the functions every exporter uses:

* ``step(token (B,), *states) → logits (B, V), *states``: one token, the state passed in
  and out explicitly (each layer's ``h`` and, for an LSTM, ``c``). It calls the layers'
  own cells, so it is the model's math exactly; in TFLite it becomes a few
  ``FULLY_CONNECTED`` ops that XNNPACK accelerates.
* ``sequence(tokens (B, T), *states) → logits (B, T, V), *states``: a static window,
  unrolled through the cells, for scoring a stream window by window.
* ``fused_*``: the same two with every LSTM layer replaced by the composite function of
  :mod:`keras_seq.export.fused_lstm` (TFLite fuses it into ``UNIDIRECTIONAL_SEQUENCE_LSTM``
  whose state is internal: no state inputs or outputs).

With an adaptive softmax (``RecurrentLM(softmax="adaptive")``) the ``logits`` output holds
the full log-probabilities ``(B, V)`` (every cluster computed), which every reader of logits
(softmax, top-k, perplexity) uses unchanged; :meth:`LMGraphs.describe` says so.

State names are ``h0``, ``c0``, ``h1``, … (layer index; ``c`` only for LSTMs). Each state
has its layer's own size: ``(B, units)``, except an ``lstmp`` layer's ``h``, which is
``(B, proj_units)`` (its ``c`` stays ``(B, units)``).

Example:

>>> from keras_seq.models import RecurrentLM
>>> lm = RecurrentLM(20, 4, 6, num_layers=2, cell="lstm"); _ = lm(np.zeros((1, 2), "int32"))
>>> g = LMGraphs(lm)
>>> g.state_names, g.state_shapes(1)["h0"]
(['h0', 'c0', 'h1', 'c1'], [1, 6])
>>> out = g.step(np.array([3], "int32"), **g.zero_states(1))
>>> tuple(out["logits"].shape)
(1, 20)
>>> lmp = RecurrentLM(20, 4, 6, cell="lstmp", proj_units=2); _ = lmp(np.zeros((1, 2), "int32"))
>>> LMGraphs(lmp).state_shapes(1)
{'h0': [1, 2], 'c0': [1, 6]}
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_seq.errors import KerasSeqError
from keras_seq.export.fused_lstm import fused_lstm


class FrozenWeights(tf.Module):
    """Plain ``tf.Variable`` copies of a Keras model's weights, swapped in while tracing.

    Functions wrapped with :meth:`wrap` read these variables instead of the Keras ones
    (through ``keras.StatelessScope``). Two things follow: the SavedModel holds ordinary
    variables (it reloads without keras-seq installed), and the TFLite converter freezes
    them into constants (Keras 3 variables stay ``VAR_HANDLE``/``READ_VARIABLE`` resources
    and force ``BATCH_MATMUL`` instead of ``FULLY_CONNECTED``). The fused-LSTM composite
    then receives tensors read from variables, the form the converter fuses.
    """

    def __init__(self, model, name: str = "frozen_weights"):
        super().__init__(name=name)
        self.values = [tf.Variable(np.asarray(v.numpy()), trainable=False,
                                   name=v.path.replace("/", "__"))
                       for v in model.weights]
        self._keras_variables = tuple(model.weights)

    def wrap(self, fn):
        def frozen(*args, **kwargs):
            mapping = [(kv, tf.convert_to_tensor(tv))
                       for kv, tv in zip(self._keras_variables, self.values)]
            with keras.StatelessScope(state_mapping=mapping):
                return fn(*args, **kwargs)

        return frozen


def cell_kind(model) -> str:
    """``rnn``, ``gru``, ``lstm`` or ``lstmp`` (built-in Keras cells map to the same names)."""
    return model.cell.replace("keras-", "")


class LMGraphs:
    """Explicit-state step and sequence functions of a trained ``RecurrentLM``.

    Args:
        model: a built ``RecurrentLM``. Its layers are used directly (no copy), so the
            functions read its current weights; dropout is off (``training=False``).
            A unidirectional :class:`~keras_seq.models.classifier.SequenceClassifier`
            works too (same ``embedding`` / ``rnns`` / ``head``; its ``residual``
            connections are applied): its step gives the label scores after each token.
        output: ``"logits"`` (the head's output, named ``logits``) or ``"scores"`` (its
            softmax, named ``scores``: a streaming classifier's label probabilities).
    """

    def __init__(self, model, output: str = "logits"):
        if not getattr(model, "built", False):
            raise KerasSeqError("the model is not built yet; call it once on token ids "
                                "(or load it from a run directory) before exporting")
        if output not in ("logits", "scores"):
            raise KerasSeqError(f"unknown output {output!r}; expected 'logits' or 'scores'")
        self.model = model
        self.output = output
        self.residual = bool(getattr(model, "residual", False))
        self.kind = cell_kind(model)
        self.units = int(model.units)
        proj = getattr(model, "proj_units", None) if self.kind == "lstmp" else None
        self.proj_units = None if proj is None else int(proj)
        self.num_layers = len(model.rnns)
        self.vocab_size = int(model.vocab_size)
        per_layer = ("h", "c") if self.kind in ("lstm", "lstmp") else ("h",)
        self.state_names = [f"{s}{i}" for i in range(self.num_layers) for s in per_layer]
        # Each state's size, from its layer's cell: (h, c) = (proj_units, units) for lstmp.
        self._state_sizes = {}
        for i, rnn in enumerate(model.rnns):
            sizes = getattr(getattr(rnn, "cell", None), "state_size", None)
            if sizes is None:  # not a plain RNN layer (e.g. Bidirectional): no step graph
                sizes = [self.units] * len(per_layer)
            sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
            if len(sizes) != len(per_layer):
                raise KerasSeqError(f"layer {i} ({rnn.name}) has {len(sizes)} states, a "
                                    f"{self.kind} layer {len(per_layer)}; cannot export it")
            self._state_sizes.update({f"{s}{i}": int(n) for s, n in zip(per_layer, sizes)})

    # -- description ------------------------------------------------------------------
    def state_shapes(self, batch: int = 1) -> dict[str, list[int]]:
        """``{name: [batch, size]}``; sizes differ per state for ``lstmp`` (``h``: proj)."""
        return {name: [batch, self._state_sizes[name]] for name in self.state_names}

    def zero_states(self, batch: int = 1) -> dict[str, np.ndarray]:
        return {name: np.zeros(shape, np.float32)
                for name, shape in self.state_shapes(batch).items()}

    def describe(self) -> dict:
        out = {"cell": self.kind, "keras_cell": self.model.cell, "units": self.units,
               "num_layers": self.num_layers, "vocab_size": self.vocab_size,
               "embed_dim": int(self.model.embed_dim), "state_names": self.state_names}
        if self.proj_units is not None:
            out["proj_units"] = self.proj_units
        if getattr(self.model, "softmax", "full") == "adaptive":
            out.update(softmax="adaptive", cutoffs=list(self.model.cutoffs),
                       div_value=float(self.model.div_value),
                       logits_are="log_probs: the adaptive softmax's full log-probabilities "
                                  "(exp sums to 1; their softmax is the same distribution)")
        return out

    def fusable(self) -> bool:
        """Whether every layer can go through the fused-LSTM composite function (plain
        LSTMs only: TFLite's fused op here has no CIFG and no projection, so never
        ``lstmp``)."""
        if self.kind != "lstm" or self.residual:
            return False
        for rnn in self.model.rnns:
            cell = rnn.cell
            names = (getattr(cell.activation, "__name__", ""),
                     getattr(cell.recurrent_activation, "__name__", ""))
            if names != ("tanh", "sigmoid") or getattr(cell, "coupled_input_forget", False):
                return False
        return True

    def _embed(self, ids):
        # A plain gather: Keras's Embedding adds negative-index handling (LESS/SELECT on the
        # int ids) that the int16x8 quantizer cannot calibrate.
        table = tf.convert_to_tensor(self.model.embedding.embeddings)  # (V, E)
        return tf.gather(table, tf.cast(ids, tf.int32))

    def _split_states(self, states: dict) -> list[list]:
        per = 2 if self.kind in ("lstm", "lstmp") else 1
        flat = [states[name] for name in self.state_names]
        return [flat[i * per:(i + 1) * per] for i in range(self.num_layers)]

    def _join_states(self, layers: list[list]) -> dict:
        flat = [s for layer in layers for s in layer]
        return dict(zip(self.state_names, flat))

    def _layer_output(self, x, h):
        """A layer's output: ``h``, plus its input for residual models (when shapes match,
        as in :class:`~keras_seq.models.classifier.SequenceClassifier`)."""
        if self.residual and h.shape[-1] == x.shape[-1]:
            return h + x
        return h

    def _head(self, x):
        """The output layer applied to rows: ``(B, F)`` → ``(B, V)`` as is, ``(B, T, F)``
        reshaped to ``(B·T, F)`` and back. XNNPACK leaves a rank-3 ``FULLY_CONNECTED``
        (``keep_num_dims``) to LiteRT's builtin kernel: a step took 2–3× as long that way
        (docs/export-and-on-device.md, "The output layer on rows"). The step graphs keep
        the 2-D layer; in the sequence graphs the converter folds the reshapes back into a
        rank-3 one."""
        if x.shape.rank == 2:
            return self.model.head(x)  # (B, V)
        rows = self.model.head(tf.reshape(x, (-1, x.shape[-1])))  # (B·T, V)
        lead = [d if d is not None else tf.shape(x)[i] for i, d in enumerate(x.shape[:-1])]
        return tf.reshape(rows, [*lead, rows.shape[-1]])  # (B, T, V)

    @staticmethod
    def _cell_step(cell, x, states: list):
        """One step of ``cell``: ``x (B, D)`` + states → ``(h, states)``. keras-seq's LSTM,
        LSTMP and SimpleRNN cells take their input and recurrent matmuls as one
        (``merged_step``): one ``FULLY_CONNECTED`` instead of two and an ``ADD``, and in
        the step graph XNNPACK gets one partition (the recurrent matmul no longer runs
        before the embedding lookup it does not take). Other cells: their own ``call``."""
        if getattr(cell, "merges_recurrent_matmul", False):  # keras-seq's own cells
            return cell.merged_step(x, states)
        return cell.call(x, states, training=False)

    def _outputs(self, logits) -> dict:
        """``{"logits": …}``, or ``{"scores": softmax}`` for ``output="scores"``."""
        if self.output == "scores":
            return {"scores": tf.nn.softmax(logits, axis=-1)}
        return {"logits": logits}

    # -- explicit-state graphs ----------------------------------------------------------
    def step(self, token, **states):
        """``token (B,)`` int32 + states (see :meth:`state_shapes`) →
        ``{"logits": (B, V), **states}``
        (``"scores"`` instead of ``"logits"`` with ``output="scores"``)."""
        m = self.model
        x = self._embed(token)  # (B, E)
        new = []
        for rnn, layer_states in zip(m.rnns, self._split_states(states)):
            # h: (B, U), or (B, P) for lstmp
            h, next_states = self._cell_step(rnn.cell, x, list(layer_states))
            x = self._layer_output(x, h)
            next_states = next_states if isinstance(next_states, (list, tuple)) \
                else [next_states]
            new.append(list(next_states))
        return {**self._outputs(self._head(x)), **self._join_states(new)}  # logits (B, V)

    def sequence(self, tokens, **states):
        """``tokens (B, T)`` + states → ``{"logits": (B, T, V), **final states}``.

        The static length is unrolled step by step through the cells (no ``WHILE``): the
        layers' own ``tf.while_loop`` converts to a TFLite ``WHILE`` whose body XNNPACK
        cannot reshape and whose TensorArray concatenation fails to prepare in TFLite.
        """
        m = self.model
        x = self._embed(tokens)  # (B, T, E)
        steps = x.shape[1]
        new = []
        for rnn, layer_states in zip(m.rnns, self._split_states(states)):
            layer_states, outs = list(layer_states), []
            for t in range(steps):
                h, layer_states = self._cell_step(rnn.cell, x[:, t], layer_states)
                layer_states = list(layer_states) if isinstance(layer_states, (list, tuple)) \
                    else [layer_states]
                outs.append(h)
            x = self._layer_output(x, tf.stack(outs, axis=1))  # (B, T, U)
            new.append(layer_states)
        return {**self._outputs(self._head(x)), **self._join_states(new)}

    # -- fused (internal state) graphs ---------------------------------------------------
    def _fused_weights(self, rnn):
        cell = rnn.cell
        kernel = tf.convert_to_tensor(cell.kernel)
        rk = tf.convert_to_tensor(cell.recurrent_kernel)
        bias = (tf.convert_to_tensor(cell.bias) if cell.bias is not None
                else tf.zeros((4 * self.units,), tf.float32))
        return kernel, rk, bias

    def fused_sequence(self, tokens):
        """``tokens (B, T)`` → ``{"logits": (B, T, V)}`` through fused-LSTM composites.

        In TensorFlow each call starts from a zero state; after TFLite conversion the state
        carries over between ``invoke()`` calls (reset with ``reset_all_variables()``).
        """
        if not self.fusable():
            raise KerasSeqError(
                f"the fused TFLite LSTM needs plain LSTM layers (tanh/sigmoid, no CIFG, no "
                f"projection); this "
                f"model has cell {self.model.cell!r}; export the explicit-state step model")
        return {"logits": self._head(self._fused_hidden(tokens))}

    def _fused_hidden(self, tokens):
        """The last fused layer's outputs ``(B, T, U)``."""
        m = self.model
        x = self._embed(tokens)  # (B, T, E)
        batch = x.shape[0]
        for rnn in m.rnns:
            zeros = tf.zeros((batch, self.units), tf.float32)
            _, x, _, _, _ = fused_lstm(x, zeros, zeros, *self._fused_weights(rnn))  # (B,T,U)
        return x

    def fused_step(self, token):
        """``token (B,)`` → ``{"logits": (B, V)}``: a length-1 fused sequence."""
        hidden = self._fused_hidden(tf.reshape(token, (-1, 1)))[:, 0]  # (B, U)
        return {"logits": self._head(hidden)}  # (B, V)

    # -- concrete functions with static signatures ------------------------------------------
    def _state_specs(self, batch):
        return {n: tf.TensorSpec(shape, tf.float32, name=n)
                for n, shape in self.state_shapes(batch).items()}

    def concrete(self, graph: str, batch: int = 1, length: int = 1,
                 frozen: FrozenWeights | None = None):
        """A concrete function of ``graph`` (``step``, ``sequence``, ``step_fused``,
        ``sequence_fused``) with static ``batch`` (and ``length`` for sequences)."""
        wrap = frozen.wrap if frozen is not None else (lambda f: f)
        if graph == "step":
            specs = {"token": tf.TensorSpec((batch,), tf.int32, name="token"),
                     **self._state_specs(batch)}
            fn = wrap(lambda **kw: self.step(**kw))
        elif graph == "sequence":
            specs = {"tokens": tf.TensorSpec((batch, length), tf.int32, name="tokens"),
                     **self._state_specs(batch)}
            fn = wrap(lambda **kw: self.sequence(**kw))
        elif graph == "step_fused":
            specs = {"token": tf.TensorSpec((batch,), tf.int32, name="token")}
            fn = wrap(lambda token: self.fused_step(token))
        elif graph == "sequence_fused":
            specs = {"tokens": tf.TensorSpec((batch, length), tf.int32, name="tokens")}
            fn = wrap(lambda tokens: self.fused_sequence(tokens))
        else:
            raise KerasSeqError(f"unknown graph {graph!r}; expected step, sequence, "
                                "step_fused or sequence_fused")
        return tf.function(fn).get_concrete_function(**specs)
