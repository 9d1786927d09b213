"""Inference graphs of a recurrent language model with explicit state.

:class:`LMGraphs` wraps a trained model (a ``RecurrentLM`` or your own Keras model that
:func:`~keras_seq.export.lm_stack.read_lm` reads; any cell: keras-seq
``rnn``/``gru``/``lstm``/``lstmp`` or the Keras built-ins, stacked or not) and builds the
functions every exporter uses:

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

from keras_seq.cells import CELLS
from keras_seq.errors import KerasSeqError
from keras_seq.export.fused_lstm import fused_lstm
from keras_seq.export.lm_stack import read_lm, state_sizes
from keras_seq.layers.quant import baked, baked_values


class FrozenWeights(tf.Module):
    """Plain ``tf.Variable`` copies of a Keras model's weights, swapped in while tracing.

    Functions wrapped with :meth:`wrap` read these variables instead of the Keras ones
    (through ``keras.StatelessScope``). Two things follow: the SavedModel holds ordinary
    variables (it reloads without keras-seq installed), and the TFLite converter freezes
    them into constants (Keras 3 variables stay ``VAR_HANDLE``/``READ_VARIABLE`` resources
    and force ``BATCH_MATMUL`` instead of ``FULLY_CONNECTED``). The fused-LSTM composite
    then receives tensors read from variables, the form the converter fuses.

    A weight that a quantization-aware layer rounds (``qat``) is copied rounded, and the
    functions are traced with the rounding off (:func:`~keras_seq.layers.quant.baked`):
    the exported graph holds the rounded matrices as they are, which the quantizers then
    store as exactly the trained integers.
    """

    def __init__(self, model, name: str = "frozen_weights"):
        super().__init__(name=name)
        rounded = baked_values(model)
        self.values = [tf.Variable(rounded.get(id(v), np.asarray(v.numpy())), trainable=False,
                                   name=v.path.replace("/", "__"))
                       for v in model.weights]
        self._keras_variables = tuple(model.weights)

    def wrap(self, fn):
        def frozen(*args, **kwargs):
            mapping = [(kv, tf.convert_to_tensor(tv))
                       for kv, tv in zip(self._keras_variables, self.values)]
            with keras.StatelessScope(state_mapping=mapping), baked():
                return fn(*args, **kwargs)

        return frozen


class LMGraphs:
    """Explicit-state step and sequence functions of a trained recurrent language model.

    Args:
        model: a built ``RecurrentLM``, or any Keras model
            :func:`~keras_seq.export.lm_stack.read_lm` reads (your own Sequential or
            functional model: embedding → recurrent and per-token layers → output layer),
            or its :class:`~keras_seq.export.lm_stack.LMStack`. Its layers are used
            directly (no copy), so the functions read its current weights; dropout is off
            (``training=False``). A unidirectional
            :class:`~keras_seq.models.classifier.SequenceClassifier` works too (same
            ``embedding`` / ``rnns`` / ``head``; its ``residual`` connections are applied):
            its step gives the label scores after each token.
        output: ``"logits"`` (the output layer's values before its activation, named
            ``logits``) or ``"scores"`` (their softmax, named ``scores``: a streaming
            classifier's label probabilities).
    """

    def __init__(self, model, output: str = "logits"):
        if output not in ("logits", "scores"):
            raise KerasSeqError(f"unknown output {output!r}; expected 'logits' or 'scores'")
        # "scores" is the streaming classifier's output: an N→1 model is read as one
        self.stack = read_lm(model, task="classify" if output == "scores" else "lm")
        self.model = self.stack.model
        self.output = output
        self.residual = self.stack.residual
        described = self.stack.describe()
        self.kind = described["cell"]
        self.units = int(described["units"])
        rnns = self.stack.recurrent
        self.spec = CELLS.get(self.kind)  # None for a cell the registry lacks
        projects = self.spec is not None and self.spec.projects
        proj = getattr(rnns[0].cell, "proj_units", None) if projects else None
        self.proj_units = None if proj is None else int(proj)
        self.num_layers = len(rnns)
        self.vocab_size = int(self.stack.vocab_size)
        layout = self.stack.state_layout()
        self.state_names = [name for name, _ in layout]
        self._state_sizes = dict(layout)
        self._per_layer = [len(state_sizes(rnn)) for rnn in rnns]

    # -- description ------------------------------------------------------------------
    def state_shapes(self, batch: int = 1) -> dict[str, list[int]]:
        """``{name: [batch, size]}``; sizes differ per state for ``lstmp`` (``h``: proj)."""
        return {name: [batch, self._state_sizes[name]] for name in self.state_names}

    def zero_states(self, batch: int = 1) -> dict[str, np.ndarray]:
        return {name: np.zeros(shape, np.float32)
                for name, shape in self.state_shapes(batch).items()}

    def describe(self) -> dict:
        out = {**self.stack.describe(), "state_names": self.state_names}
        if self.stack.source in ("RecurrentLM", "SequenceClassifier"):
            out["keras_cell"] = self.model.cell
        if self.proj_units is not None:
            out["proj_units"] = self.proj_units
        if getattr(self.model, "softmax", "full") == "adaptive":
            out.update(softmax="adaptive", cutoffs=list(self.model.cutoffs),
                       div_value=float(self.model.div_value),
                       logits_are="log_probs: the adaptive softmax's full log-probabilities "
                                  "(exp sums to 1; their softmax is the same distribution)")
        return out

    def fusable(self) -> bool:
        """Whether every recurrent layer can go through the fused-LSTM composite function
        (cells whose registry row computes what ``keras.layers.LSTM`` does, without a
        projection: TFLite's fused op here has no CIFG and no projection, so never
        ``lstmp``)."""
        spec = self.spec
        if spec is None or spec.builtin_cls is not keras.layers.LSTM or spec.projects \
                or self.residual:
            return False
        for rnn in self.stack.recurrent:
            cell = rnn.cell
            names = (getattr(cell.activation, "__name__", ""),
                     getattr(cell.recurrent_activation, "__name__", ""))
            if names != ("tanh", "sigmoid") or getattr(cell, "coupled_input_forget", False) \
                    or not getattr(cell, "use_bias", True):
                return False
        return True

    def _embed(self, ids):
        """Ids ``(...)`` → ``(..., E)``: a plain gather (Keras's Embedding adds negative-index
        handling, LESS/SELECT on the ids, that the int16x8 quantizer cannot calibrate), or
        the one-hot row of a model that reads one-hot input."""
        ids = tf.cast(ids, tf.int32)
        if self.stack.embedding is None:
            return tf.one_hot(ids, self.vocab_size)  # (..., V)
        table = tf.convert_to_tensor(self.stack.table())  # (V, E)
        return tf.gather(table, ids)

    def _split_states(self, states: dict) -> list[list]:
        """The flat ``{name: state}`` as one list per recurrent layer."""
        flat, out = [states[name] for name in self.state_names], []
        for count in self._per_layer:
            out.append(flat[:count])
            flat = flat[count:]
        return out

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
        """The output layer's logits on rows: ``(B, F)`` → ``(B, V)`` as is, ``(B, T, F)``
        reshaped to ``(B·T, F)`` and back. XNNPACK leaves a rank-3 ``FULLY_CONNECTED``
        (``keep_num_dims``) to LiteRT's builtin kernel: a step took 2–3× as long that way
        (docs/export-and-on-device.md, "The output layer on rows"). The step graphs keep
        the 2-D layer; in the sequence graphs the converter folds the reshapes back into a
        rank-3 one."""
        if x.shape.rank == 2:
            return self.stack.logits(x)  # (B, V)
        rows = self.stack.logits(tf.reshape(x, (-1, x.shape[-1])))  # (B·T, V)
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
            h, new = cell.merged_step(x, states)
        else:  # as keras.layers.RNN calls its cell: the states as a list
            kwargs = {"training": False} if getattr(cell, "_call_has_training_arg", True) \
                else {}
            h, new = cell.call(x, list(states), **kwargs)
        return h, list(new) if isinstance(new, (list, tuple)) else [new]

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
        x = self._embed(token)  # (B, E)
        layer_states, new = iter(self._split_states(states)), []
        for stage in self.stack.stages:
            if stage.kind != "recurrent":
                x = self.stack.pointwise(stage, x)  # (B, F)
                continue
            # h: (B, U), or (B, P) for lstmp
            h, next_states = self._cell_step(stage.layer.cell, x, list(next(layer_states)))
            x = self._layer_output(x, h)
            new.append(next_states)
        return {**self._outputs(self._head(x)), **self._join_states(new)}  # logits (B, V)

    def sequence(self, tokens, **states):
        """``tokens (B, T)`` + states → ``{"logits": (B, T, V), **final states}``.

        The static length is unrolled step by step through the cells (no ``WHILE``): the
        layers' own ``tf.while_loop`` converts to a TFLite ``WHILE`` whose body XNNPACK
        cannot reshape and whose TensorArray concatenation fails to prepare in TFLite.
        """
        x = self._embed(tokens)  # (B, T, E)
        steps = x.shape[1]
        layer_states, new = iter(self._split_states(states)), []
        for stage in self.stack.stages:
            if stage.kind != "recurrent":
                x = self.stack.pointwise(stage, x)  # (B, T, F)
                continue
            carried, outs = list(next(layer_states)), []
            for t in range(steps):
                h, carried = self._cell_step(stage.layer.cell, x[:, t], carried)
                outs.append(h)
            x = self._layer_output(x, tf.stack(outs, axis=1))  # (B, T, U)
            new.append(carried)
        return {**self._outputs(self._head(x)), **self._join_states(new)}

    # -- fused (internal state) graphs ---------------------------------------------------
    @staticmethod
    def _fused_weights(rnn):
        cell = rnn.cell
        kernel = tf.convert_to_tensor(cell.kernel)
        rk = tf.convert_to_tensor(cell.recurrent_kernel)
        return kernel, rk, tf.convert_to_tensor(cell.bias)

    def fused_sequence(self, tokens):
        """``tokens (B, T)`` → ``{"logits": (B, T, V)}`` through fused-LSTM composites.

        In TensorFlow each call starts from a zero state; after TFLite conversion the state
        carries over between ``invoke()`` calls (reset with ``reset_all_variables()``).
        """
        if not self.fusable():
            raise KerasSeqError(
                f"the fused TFLite LSTM needs plain LSTM layers (tanh/sigmoid, bias, no CIFG, "
                f"no projection); this model has {self.kind!r} layers; export the "
                "explicit-state step model")
        return {"logits": self._head(self._fused_hidden(tokens))}

    def _fused_hidden(self, tokens):
        """The last stage's outputs ``(B, T, F)``."""
        x = self._embed(tokens)  # (B, T, E)
        batch = x.shape[0]
        for stage in self.stack.stages:
            if stage.kind != "recurrent":
                x = self.stack.pointwise(stage, x)
                continue
            zeros = tf.zeros((batch, state_sizes(stage.layer)[0]), tf.float32)
            _, x, _, _, _ = fused_lstm(x, zeros, zeros, *self._fused_weights(stage.layer))
        return x  # (B, T, U)

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

