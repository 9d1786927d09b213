"""One-to-many: a recurrent language model conditioned on a label id or a float vector.

The condition is embedded (a label through an ``Embedding``, a vector through a linear
``Dense``) into ``condition_dim`` features ``z``, which reach the network in one of
three ways (``mode``):

* ``"init"`` — ``z`` sets the initial state of every recurrent layer through its own
  ``Dense(tanh)``: ``h₀ = tanh(W z + b)``; for an LSTM the same Dense has ``2·units``
  outputs and sets both ``h₀`` and ``c₀``.
* ``"input"`` — ``z`` is concatenated to the token embedding at every step (the state
  starts at zero).
* ``"both"`` — both of the above.

Generation (:meth:`ConditionedLM.generate`) carries the recurrent state from step to
step, so each new token costs one step.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops

from keras_seq.cells import cell_spec
from keras_seq.layers.seeds import seeded_dropout
from keras_seq.models._build import BuiltBeforeTracing, logits_dtype
from keras_seq.sampling import Sampler, TopKSampler

MODES = ("init", "input", "both")


@keras.saving.register_keras_serializable(package="keras_seq")
class ConditionedLM(BuiltBeforeTracing, keras.Model):
    """Recurrent language model whose every token is conditioned on a label (or a vector).

    Args:
        vocab_size: number of token ids; id 0 is ``<pad>`` and is masked.
        num_conditions: number of condition labels (ids ``0 … num_conditions − 1``).
            Give this or ``condition_features``, not both.
        embed_dim: token embedding size.
        units: hidden units of every recurrent layer.
        cell: a cell the ``conditioned`` shape offers in
            :data:`keras_seq.cells.CELLS`: ``"rnn"``, ``"gru"`` or ``"lstm"``.
        num_layers: stacked recurrent layers.
        mode: ``"init"`` (the condition sets every layer's initial state; LSTM: ``h`` and
            ``c``), ``"input"`` (the condition joins the token embedding at every step)
            or ``"both"``.
        condition_dim: size of the condition embedding (default ``embed_dim``).
        condition_features: size of a float condition vector, instead of label ids.
        dropout: dropout on the step inputs, between layers and before the output.

    Call arguments:
        inputs: ``(tokens, condition)`` or ``{"tokens": …, "condition": …}``: int token
            ids ``(B, T)`` (0 = padding) and int labels ``(B,)`` (or floats
            ``(B, condition_features)``).
        training: whether dropout is active.

    Returns logits ``(B, T, vocab_size)``; logits at real positions do not depend on
    padding (masked steps carry the state over).

    Example:

    >>> import numpy as np
    >>> lm = ConditionedLM(vocab_size=20, num_conditions=3, embed_dim=8, units=16)
    >>> tokens = np.array([[2, 5, 6, 0], [2, 7, 0, 0]], "int32")
    >>> tuple(lm((tokens, np.array([0, 2], "int32"))).shape)
    (2, 4, 20)
    >>> ids = lm.generate(1, max_tokens=5, seed=0)
    >>> len(ids), all(0 <= i < 20 for i in ids)
    (5, True)
    """

    def __init__(self, vocab_size: int, num_conditions: int | None = None,
                 embed_dim: int = 64, units: int = 128, cell: str = "lstm",
                 num_layers: int = 1, mode: str = "init", condition_dim: int | None = None,
                 condition_features: int | None = None, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        name = type(self).__name__

        def positive(arg, value):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: received {arg}={value!r}; expected a positive "
                                 "integer")

        if (num_conditions is None) == (condition_features is None):
            raise ValueError(
                f"{name}: received num_conditions={num_conditions!r} and condition_features="
                f"{condition_features!r}; expected exactly one: num_conditions for integer "
                "labels, or condition_features for float condition vectors"
            )
        for arg, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim),
                           ("units", units), ("num_layers", num_layers)):
            positive(arg, value)
        for arg, value in (("num_conditions", num_conditions), ("condition_dim", condition_dim),
                           ("condition_features", condition_features)):
            if value is not None:
                positive(arg, value)
        spec = cell_spec(cell, "conditioned", owner=name)
        if mode not in MODES:
            raise ValueError(f"{name}: received mode={mode!r}; expected 'init' (condition "
                             "sets the initial state), 'input' (condition joins every input "
                             "step) or 'both'")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{name}: received dropout={dropout!r}; expected a fraction in "
                             "[0, 1) (0 turns it off)")
        self.vocab_size, self.num_conditions = int(vocab_size), num_conditions
        self.embed_dim, self.units, self.cell = int(embed_dim), int(units), cell
        self.num_layers, self.mode = int(num_layers), mode
        self.condition_dim = int(condition_dim or embed_dim)
        self.condition_features, self.dropout = condition_features, float(dropout)
        self.num_states = len(spec.states)  # h, or h and c

        self.embedding = layers.Embedding(vocab_size, embed_dim, mask_zero=True,
                                          name="embedding")
        if num_conditions is not None:
            self.condition_embedding = layers.Embedding(num_conditions, self.condition_dim,
                                                        name="condition_embedding")
        else:
            self.condition_embedding = layers.Dense(self.condition_dim,
                                                    name="condition_projection")
        self.state_init = []
        if mode in ("init", "both"):
            self.state_init = [layers.Dense(self.num_states * units, activation="tanh",
                                            name=f"state_init_{i}")
                               for i in range(num_layers)]
        self.rnns = [spec.build(units, return_sequences=True, return_state=True,
                                name=f"{cell}_{i}") for i in range(num_layers)]
        self.drops = [seeded_dropout(dropout) for _ in range(num_layers + 1)]
        self.head = layers.Dense(vocab_size, name="logits", dtype=logits_dtype())
        self._step_fn = None

    # -- pieces --------------------------------------------------------------------------
    @staticmethod
    def _unpack(inputs):
        if isinstance(inputs, dict):
            missing = {"tokens", "condition"} - set(inputs)
            if missing:
                raise ValueError(f"ConditionedLM: the input dict has keys {sorted(inputs)}; "
                                 "expected 'tokens' and 'condition'")
            return inputs["tokens"], inputs["condition"]
        if isinstance(inputs, (tuple, list)) and len(inputs) == 2:
            return inputs[0], inputs[1]
        raise ValueError(f"ConditionedLM: received inputs of type {type(inputs).__name__}; "
                         "expected (tokens (B, T), condition (B,)) or a dict with 'tokens' "
                         "and 'condition'")

    def embed_condition(self, condition):
        """Condition → ``(B, condition_dim)`` features."""
        if self.num_conditions is not None:
            condition = ops.reshape(ops.cast(condition, "int32"), (-1,))  # (B,)
        else:
            condition = ops.cast(condition, self.compute_dtype)  # (B, F)
        return self.condition_embedding(condition)  # (B, C)

    def initial_states(self, condition):
        """Per layer, the list of initial state tensors (each ``(B, units)``)."""
        z = self.embed_condition(condition)  # (B, C)
        if self.state_init:
            return [ops.split(dense(z), self.num_states, axis=-1)  # num_states × (B, U)
                    for dense in self.state_init]
        zeros = ops.zeros((ops.shape(z)[0], self.units), self.compute_dtype)  # (B, U)
        return [[zeros] * self.num_states for _ in self.rnns]

    def step(self, tokens, condition, states, training=None):
        """Run ``tokens (B, T)`` from ``states``: ``(logits (B, T, V), new states)``."""
        tokens = ops.convert_to_tensor(tokens, "int32")
        mask = ops.not_equal(tokens, 0)  # (B, T)
        x = self.embedding(tokens)  # (B, T, E)
        if self.mode in ("input", "both"):
            z = self.embed_condition(condition)  # (B, C)
            z = ops.repeat(ops.expand_dims(z, 1), ops.shape(tokens)[1], axis=1)  # (B, T, C)
            x = ops.concatenate([x, ops.cast(z, x.dtype)], axis=-1)  # (B, T, E + C)
        x = self.drops[0](x, training=training)
        new_states = []
        for rnn, drop, state in zip(self.rnns, self.drops[1:], states):
            x, *state = rnn(x, initial_state=list(state), mask=mask,
                            training=training)  # (B, T, U), num_states × (B, U)
            x = drop(x, training=training)
            new_states.append(state)
        return self.head(x), new_states  # (B, T, V)

    def call(self, inputs, training=None):
        tokens, condition = self._unpack(inputs)  # (B, T), (B,) or (B, F)
        logits, _ = self.step(tokens, condition, self.initial_states(condition),
                              training=training)
        return logits  # (B, T, V)

    # -- generation ----------------------------------------------------------------------
    def generate(self, condition, max_tokens: int, sampler: Sampler | None = None,
                 seed: int | None = None, start_id: int = 2, stop_id: int | None = None,
                 prompt_ids=None) -> list[int]:
        """Sample up to ``max_tokens`` ids for one condition, carrying the state.

        Args:
            condition: a label id (or a float vector of ``condition_features``).
            max_tokens: how many ids to sample at most.
            sampler: a :mod:`keras_seq.sampling` sampler (default ``TopKSampler(10)``).
            seed: seeds the sampler's random generator (same seed, same output).
            start_id: the first input id; 2 is ``<eos>`` of the word and subword
                tokenizers, which :func:`~keras_seq.tasks.conditioned.data.encode_conditioned`
                puts at the start of every training sequence.
            stop_id: stop once this id is sampled (it is not returned).
            prompt_ids: ids to read after ``start_id`` before sampling.

        Returns the sampled ids (without ``start_id``, the prompt or ``stop_id``).
        """
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be ≥ 0, got {max_tokens}")
        if self.num_conditions is not None:
            if not isinstance(condition, (int, np.integer)) or isinstance(condition, bool) \
                    or not 0 <= condition < self.num_conditions:
                raise ValueError(f"ConditionedLM.generate: received condition={condition!r}; "
                                 f"expected a label id in [0, {self.num_conditions})")
            cond = np.array([condition], np.int32)  # (1,)
        else:
            cond = np.asarray(condition, np.float32).reshape(1, -1)  # (1, F)
            if cond.shape[1] != self.condition_features:
                raise ValueError(f"ConditionedLM.generate: received a condition vector of "
                                 f"size {cond.shape[1]}; expected {self.condition_features}")
        prompt = [start_id] + [int(i) for i in (prompt_ids if prompt_ids is not None else [])]
        if min(prompt) < 1 or max(prompt) >= self.vocab_size:
            raise ValueError(f"ConditionedLM.generate: the start/prompt ids {prompt} must be in "
                             f"[1, {self.vocab_size}) (0 is padding)")
        sampler = sampler or TopKSampler(10)
        rng = np.random.default_rng(seed)
        if not self.built:
            self.build()
        if self._step_fn is None:
            def last_step(tokens, cond, states):
                logits, states = self.step(tokens, cond, states, training=False)
                return logits[:, -1, :], states  # (1, V)

            self._step_fn, self._init_fn = last_step, self.initial_states
            if keras.backend.backend() == "tensorflow":  # a graph per shape, not eager ops
                # lazy: loads TensorFlow only when this runs
                import tensorflow as tf

                self._step_fn = tf.function(last_step, reduce_retracing=True)
                self._init_fn = tf.function(self.initial_states)
        states = self._init_fn(cond)
        logits, states = self._step_fn(np.array([prompt], np.int32), cond, states)
        out: list[int] = []
        for _ in range(max_tokens):
            token = sampler(ops.convert_to_numpy(logits)[0], rng)
            if stop_id is not None and token == stop_id:
                break
            out.append(token)
            logits, states = self._step_fn(np.array([[token]], np.int32), cond, states)
        return out

    # -- building and config -------------------------------------------------------------
    def build(self, input_shape=None):
        # Run once on a dummy batch so every sub-layer creates its weights (also what
        # `load_model` does before it restores them).
        if self.num_conditions is not None:
            condition = ops.zeros((1,), "int32")
        else:
            condition = ops.zeros((1, self.condition_features), "float32")
        self.call((ops.ones((1, 2), "int32"), condition))
        self.built = True

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "num_conditions": self.num_conditions, "embed_dim": self.embed_dim,
                "units": self.units, "cell": self.cell, "num_layers": self.num_layers,
                "mode": self.mode, "condition_dim": self.condition_dim,
                "condition_features": self.condition_features, "dropout": self.dropout}
