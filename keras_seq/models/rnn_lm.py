"""Recurrent language model: embedding → stacked keras-seq RNN layers → logits.

Every training step logs the global gradient norm (before clipping) and one norm per
layer (``grad_norm``, ``grad_norm/<layer>``: :mod:`keras_seq.models.train_step`), on
every Keras backend; clipping itself is the optimizer's ``global_clipnorm``.
"""

from __future__ import annotations

import keras
from keras import layers, ops

from keras_seq.cells import cell_spec, cells_for
from keras_seq.layers.adaptive_softmax import (
    AdaptiveSoftmax,
    check_cutoffs,
    two_outcome_logits,
)
from keras_seq.layers.qat_layers import QATDense, QATEmbedding
from keras_seq.layers.quant import check_qat
from keras_seq.layers.seeds import explicit_seed, seeded_dropout
from keras_seq.layers.state import reset_recurrent_states
from keras_seq.layers.tied_logits import TiedLogits
from keras_seq.models._build import BuildByCalling, BuiltBeforeTracing, logits_dtype
from keras_seq.models.train_step import GradNormLogs


@keras.saving.register_keras_serializable(package="keras_seq")
class RecurrentLM(GradNormLogs, BuildByCalling, BuiltBeforeTracing, keras.Model):
    """Word- or character-level recurrent language model.

    Args:
        vocab_size: number of token ids.
        embed_dim: embedding size.
        units: hidden units of every recurrent layer (the cell state's size for ``lstmp``).
        num_layers: stacked recurrent layers.
        cell: a cell of :data:`keras_seq.cells.CELLS` that the ``lm`` shape
            offers: ``"rnn"``, ``"gru"``, ``"lstm"`` or ``"lstmp"`` (keras-seq layers;
            ``lstmp`` is an LSTM with a recurrent projection, Sak et al. 2014);
            ``"keras-lstm"`` etc. use Keras's built-ins for comparison.
        proj_units: ``lstmp`` only (and required there): the projection size ``P ≤ units``;
            each layer outputs ``P`` features (its ``h``), which is what the next layer
            and the output layer read.
        coupled_input_forget: CIFG (``i = 1 − f``) for the keras-seq ``lstm`` and
            ``lstmp`` cells; with ``lstmp`` this is the Gboard on-device cell.
        dropout: dropout on the embeddings, between layers and before the output (Zaremba).
        variational_dropout: use one ``dropout`` mask per sequence for those three places
            ("locked" dropout, Gal & Ghahramani 2016) instead of a fresh mask per step.
        embed_dropout: drop whole word types from the input embedding for a batch (every
            occurrence of a dropped word becomes a zero vector; Gal & Ghahramani 2016).
        weight_dropout: DropConnect on each layer's ``recurrent_kernel`` (Merity et al.
            2017); the mask is shared by all timesteps of a batch.
        tie_weights: share the embedding matrix with the output layer (needs
            ``embed_dim == units``, or ``embed_dim == proj_units`` for ``lstmp``).
        stateful: carry the recurrent state from batch to batch (truncated BPTT); the
            batch size is then fixed by the first call.
        softmax: ``"full"`` (a dense logits layer) or ``"adaptive"``
            (:class:`~keras_seq.layers.adaptive_softmax.AdaptiveSoftmax`: the model then
            returns log-probabilities, which every logits consumer can read as logits;
            in ``fit`` the training step computes only the targets' log-probabilities).
        cutoffs: ``adaptive`` only (and required there): the cluster boundaries, e.g.
            ``[2000, 10000]`` (token ids are ranked by frequency).
        div_value: ``adaptive`` only: tail cluster ``i`` projects to
            ``features // div_value^(i+1)``.
        init_scale: if set, initialise every weight uniformly in ``[-s, s]`` (PTB recipe).
        unit_forget_bias: LSTM forget-gate bias starts at 1.
        qat: quantization-aware training, ``"int8"`` or ``"int4"``: the embedding table,
            every recurrent layer's kernels and a dense output layer are rounded in each
            pass to the per-channel grid the TFLite export stores
            (:mod:`keras_seq.layers.quant`); usually a fine-tune of a float model
            (``keras-seq train lm --init-from RUN --qat int4``). Keras-seq cells and the
            full softmax only.

    Call arguments:
        inputs: int ids ``(B, T)``.

    Returns logits ``(B, T, vocab_size)`` (log-probabilities for ``softmax="adaptive"``;
    in training mode an adaptive model returns its last features ``(B, T, features)``,
    which :meth:`compute_loss` and :meth:`compute_metrics` score against the targets).

    Example:

    >>> lm = RecurrentLM(vocab_size=30, embed_dim=8, units=16, num_layers=2, cell="gru")
    >>> tuple(lm(keras.ops.zeros((2, 5), "int32")).shape)
    (2, 5, 30)
    >>> lstmp = RecurrentLM(30, embed_dim=4, units=16, proj_units=4, cell="lstmp",
    ...                     coupled_input_forget=True, tie_weights=True)
    >>> tuple(lstmp(keras.ops.zeros((2, 5), "int32")).shape), lstmp.rnns[0].cell.state_size
    ((2, 5, 30), [4, 16])
    >>> adaptive = RecurrentLM(30, embed_dim=4, units=16, softmax="adaptive", cutoffs=[10, 20])
    >>> tuple(adaptive(keras.ops.zeros((2, 5), "int32")).shape)
    (2, 5, 30)
    """

    def __init__(self, vocab_size: int, embed_dim: int = 128, units: int = 256,
                 num_layers: int = 1, cell: str = "lstm", dropout: float = 0.0,
                 tie_weights: bool = False, stateful: bool = False,
                 init_scale: float | None = None, unit_forget_bias: bool = True,
                 variational_dropout: bool = False, embed_dropout: float = 0.0,
                 weight_dropout: float = 0.0, proj_units: int | None = None,
                 coupled_input_forget: bool = False, softmax: str = "full",
                 cutoffs=None, div_value: float = 4.0, qat: str | None = None, **kwargs):
        super().__init__(**kwargs)
        _check_cell(cell, units, proj_units, coupled_input_forget)
        _check_qat(qat, cell, softmax)
        _check_sizes(vocab_size, embed_dim, units, num_layers, cell, tie_weights, proj_units,
                     softmax, cutoffs)
        _check_rates(cell, dropout, embed_dropout, weight_dropout)
        self.vocab_size, self.embed_dim, self.units = vocab_size, embed_dim, units
        self.num_layers, self.cell, self.dropout = num_layers, cell, dropout
        self.tie_weights, self.stateful = tie_weights, stateful
        self.init_scale, self.unit_forget_bias = init_scale, unit_forget_bias
        self.variational_dropout = variational_dropout
        self.embed_dropout, self.weight_dropout = float(embed_dropout), float(weight_dropout)
        self.proj_units, self.coupled_input_forget = proj_units, bool(coupled_input_forget)
        self.softmax = softmax
        self.cutoffs = None if cutoffs is None else check_cutoffs(cutoffs, vocab_size)
        self.div_value = float(div_value)
        self.qat = qat

        # The sub-layers in the order their weights are saved (and the seeds drawn):
        # embedding, recurrent layers, dropouts, embedding-dropout seed, output head.
        embedding_init = _embedding_init(init_scale)
        self.embedding = (QATEmbedding(vocab_size, embed_dim, qat=qat, name="embedding",
                                       embeddings_initializer=embedding_init) if qat else
                          layers.Embedding(vocab_size, embed_dim, name="embedding",
                                           embeddings_initializer=embedding_init))
        self.rnns = _recurrent_stack(cell, units, proj_units, num_layers, stateful, init_scale,
                                     unit_forget_bias, weight_dropout, coupled_input_forget,
                                     qat)
        # Locked dropout: the mask has shape (B, 1, features), shared over time.
        noise_shape = (None, 1, None) if variational_dropout else None
        self.drops = [seeded_dropout(dropout, noise_shape=noise_shape)
                      for _ in range(num_layers + 1)]
        if self.embed_dropout > 0:
            self.embed_drop_seed = keras.random.SeedGenerator(explicit_seed())
        self.head = _output_head(softmax, vocab_size, self.cutoffs, self.div_value, tie_weights,
                                 self.embedding, init_scale, cell, qat)

    def call(self, inputs, training=None):
        x = self.embedding(inputs)  # (B, T, E)
        if training and self.embed_dropout > 0:
            keep = keras.random.dropout(ops.ones((self.vocab_size,)), self.embed_dropout,
                                        seed=self.embed_drop_seed)  # (V,), 0 or 1/(1-p)
            x = x * ops.expand_dims(ops.take(keep, inputs), -1)  # (B, T, E)
        x = self.drops[0](x, training=training)
        for rnn, drop in zip(self.rnns, self.drops[1:]):
            x = rnn(x, training=training)  # (B, T, U), or (B, T, P) for lstmp
            x = drop(x, training=training)
        if training and self.softmax == "adaptive":
            return x  # (B, T, F): compute_loss/compute_metrics score only the targets
        return self.head(x)  # (B, T, V)

    # -- adaptive softmax in fit -----------------------------------------------------------
    def _is_features(self, y_pred) -> bool:
        """Whether ``y_pred`` is the training-mode features of an adaptive model (its last
        axis is the head's input size, which differs from ``vocab_size`` by construction)."""
        return self.softmax == "adaptive" and y_pred.shape[-1] != self.vocab_size

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if not self._is_features(y_pred):
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        target_log_probs = self.head.target_log_prob(y_pred, y)  # (B, T): targets' clusters
        loss = _per_replica(self.head.nll(target_log_probs, sample_weight))
        for extra in self.losses:
            loss = loss + ops.sum(ops.cast(extra, loss.dtype))
        # The compiled metrics (perplexity) are updated here, where the weights are at
        # hand (JAX's compute_metrics sees only metric variables), from the targets'
        # log-probs written as logits of {target, any other token}.
        if self._compile_metrics is not None:
            self._compile_metrics.update_state(
                ops.zeros_like(y), two_outcome_logits(ops.stop_gradient(target_log_probs)),
                sample_weight)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if self._is_features(y_pred):  # already updated by compute_loss
            return self.get_metrics_result()
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def _after_build(self) -> None:
        reset_recurrent_states(self)  # building must not leave a state behind

    # -- state ---------------------------------------------------------------------------
    def reset_state(self) -> None:
        """Zero the carried state of every stateful recurrent layer."""
        reset_recurrent_states(self)

    def clone_for_batch(self, batch_size: int, stateful: bool = True) -> RecurrentLM:
        """A copy with the same weights built for a fixed ``batch_size`` (e.g. 1 to generate)."""
        config = {**self.get_config(), "stateful": stateful, "dropout": 0.0,
                  "embed_dropout": 0.0, "weight_dropout": 0.0}
        clone = RecurrentLM.from_config(config)
        clone(ops.zeros((batch_size, 1), "int32"))
        clone.set_weights(self.get_weights())
        clone.reset_state()
        return clone

    # -- training ------------------------------------------------------------------------
    def grad_norm_groups(self):
        groups = {"embedding": self.embedding}
        for rnn in self.rnns:
            groups[rnn.name] = rnn
        groups["logits"] = self.head
        return groups

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim, "units": self.units,
                "num_layers": self.num_layers, "cell": self.cell, "dropout": self.dropout,
                "tie_weights": self.tie_weights, "stateful": self.stateful,
                "init_scale": self.init_scale, "unit_forget_bias": self.unit_forget_bias,
                "variational_dropout": self.variational_dropout,
                "embed_dropout": self.embed_dropout, "weight_dropout": self.weight_dropout,
                "proj_units": self.proj_units,
                "coupled_input_forget": self.coupled_input_forget, "softmax": self.softmax,
                "cutoffs": self.cutoffs, "div_value": self.div_value, "qat": self.qat}


def _per_replica(loss):
    """``loss / R`` under ``tf.distribute`` with ``R`` replicas, as Keras scales a compiled
    loss (its all-reduce sums the replicas' gradients; the logged loss is unscaled again)."""
    if keras.backend.backend() != "tensorflow":
        return loss
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss if replicas == 1 else loss * (1.0 / replicas)


def _check_softmax(softmax, cutoffs, tie_weights, vocab_size, out_features) -> None:
    """``softmax``/``cutoffs``: raise ``ValueError`` saying what is wrong and how to fix it."""
    if softmax not in ("full", "adaptive"):
        raise ValueError(f"softmax must be 'full' or 'adaptive', got {softmax!r}")
    if softmax == "full":
        if cutoffs is not None:
            raise ValueError(f"cutoffs {cutoffs!r} are for softmax='adaptive'; set it or drop "
                             "cutoffs")
        return
    if cutoffs is None:
        raise ValueError("softmax='adaptive' needs cutoffs, the cluster boundaries over the "
                         f"frequency-ranked ids of the {vocab_size}-token vocabulary, e.g. "
                         f"cutoffs=[{max(1, vocab_size // 20)}, {max(2, vocab_size // 5)}]")
    if tie_weights:
        raise ValueError("tie_weights shares the embedding with a full softmax; the adaptive "
                         "softmax has its own head and tails: turn one of them off")
    if out_features == vocab_size:
        raise ValueError(f"softmax='adaptive' with features == vocab_size ({vocab_size}) "
                         "cannot tell training features from log-probs; change the units")


# ----------------------------------------------------------------------------------------
# RecurrentLM's constructor: argument checks and sub-layers


def _check_cell(cell, units, proj_units, coupled_input_forget) -> None:
    """``cell`` and the options that belong to some cells only (``proj_units``, CIFG): raise
    ``ValueError`` saying what is wrong and how to fix it."""
    spec = cell_spec(cell, "lm")
    if spec.projects:
        if proj_units is None:
            raise ValueError(f"cell={cell!r} needs proj_units (the projection size, "
                             f"≤ units={units}), e.g. proj_units={max(1, units // 4)}")
        if not isinstance(proj_units, int) or isinstance(proj_units, bool) \
                or not 0 < proj_units <= units:
            raise ValueError(f"proj_units must be a positive integer ≤ units={units}, "
                             f"got {proj_units!r}; the projection maps the units down")
    elif proj_units is not None:
        projected = cells_for("lm", projects=True)
        raise ValueError(f"proj_units is for {' or '.join(f'cell={n!r}' for n in projected)} "
                         f"only, got cell={cell!r} with proj_units={proj_units}; use cell="
                         f"{projected[0]!r} or drop proj_units")
    if coupled_input_forget and "coupled_input_forget" not in spec.options:
        raise ValueError(f"coupled_input_forget (CIFG) needs a keras-seq LSTM cell "
                         f"({', '.join(map(repr, cells_for('lm', option='coupled_input_forget')))}"
                         f"), got cell={cell!r}")


def _check_qat(qat, cell, softmax) -> None:
    """``qat`` and what it goes with: raise ``ValueError`` saying what is wrong and how to
    fix it."""
    check_qat(qat, "RecurrentLM")
    twin = cell_spec(cell).twin
    if qat and twin:
        raise ValueError(f"qat={qat!r} rounds keras-seq cells' weights; cell={cell!r} is Keras's "
                         f"own layer: use cell={twin!r}")
    if qat and softmax != "full":
        raise ValueError(f"qat={qat!r} exports the full softmax's output layer; "
                         f"softmax={softmax!r} has no quantized export: use softmax='full'")


def _check_sizes(vocab_size, embed_dim, units, num_layers, cell, tie_weights, proj_units,
                 softmax, cutoffs) -> None:
    """Weight tying against the recurrent output size, the softmax and the layer count:
    raise ``ValueError`` saying what is wrong and how to fix it."""
    projects = cell_spec(cell).projects
    out_name, out_size = ("proj_units", proj_units) if projects else ("units", units)
    if tie_weights and embed_dim != out_size:
        raise ValueError(
            f"tie_weights needs embed_dim == {out_name} (the recurrent output size), got "
            f"embed_dim={embed_dim}, {out_name}={out_size}; set them equal or turn tying "
            "off"
        )
    out_features = proj_units if projects else units
    _check_softmax(softmax, cutoffs, tie_weights, vocab_size, out_features)
    if num_layers < 1:
        raise ValueError(f"num_layers must be ≥ 1, got {num_layers}")


def _check_rates(cell, dropout, embed_dropout, weight_dropout) -> None:
    """The dropout rates (``weight_dropout``'s range is checked by the cells themselves, its
    cell here): raise ``ValueError`` saying what is wrong and how to fix it."""
    for name, rate in (("dropout", dropout), ("embed_dropout", embed_dropout)):
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"{name} must be a fraction in [0, 1), got {rate!r}; "
                             "0 turns it off")
    if weight_dropout and cell_spec(cell).keras_own:
        raise ValueError(f"weight_dropout needs a keras-seq cell "
                         f"({', '.join(cells_for('lm', comparisons=False))}), got cell={cell!r}")


def _uniform_inits(init_scale, cell) -> dict:
    """The recurrent layers' ``U(±init_scale)`` initializer arguments (``{}`` when
    ``init_scale`` is None). Each call makes new initializers, each drawing its seed from
    Python's generator, so the calls' number and order fix the weights of a seeded run."""
    if init_scale is None:
        return {}
    u = keras.initializers.RandomUniform(-init_scale, init_scale)
    inits = {"kernel_initializer": u, "recurrent_initializer": u, "bias_initializer": u}
    return {**inits, "projection_initializer": u} if cell_spec(cell).projects else inits


def _embedding_init(init_scale):
    """The embedding's initializer: ``U(±init_scale)``, or Keras's ``"uniform"``."""
    return (keras.initializers.RandomUniform(-init_scale, init_scale)
            if init_scale is not None else "uniform")


def _recurrent_stack(cell, units, proj_units, num_layers, stateful, init_scale,
                     unit_forget_bias, weight_dropout, coupled_input_forget,
                     qat=None) -> list:
    """The ``num_layers`` recurrent layers ``{cell}_0``, ``{cell}_1``…, in order."""
    spec = cell_spec(cell)
    rnn_kwargs = {"return_sequences": True, "stateful": stateful}
    if qat:
        rnn_kwargs["qat"] = qat
    if "unit_forget_bias" in spec.options:
        rnn_kwargs["unit_forget_bias"] = unit_forget_bias and init_scale is None
    if weight_dropout:
        rnn_kwargs["weight_dropout"] = weight_dropout
    if coupled_input_forget:
        rnn_kwargs["coupled_input_forget"] = True
    # Each layer builds on its input: the previous layer's proj_units for lstmp.
    return [spec.build(units, proj_units, name=f"{cell}_{i}", **rnn_kwargs,
                       **_uniform_inits(init_scale, cell))
            for i in range(num_layers)]


def _output_head(softmax, vocab_size, cutoffs, div_value, tie_weights, embedding, init_scale,
                 cell, qat=None):
    """The output layer ``logits``: an adaptive softmax, the embedding tied, or a dense layer."""
    if softmax == "adaptive":  # the same U(±0.1) start as the dense head below
        return AdaptiveSoftmax(vocab_size, cutoffs, div_value=div_value,
                               name="logits", dtype=logits_dtype(),
                               kernel_initializer=_uniform_inits(init_scale, cell).get(
                                   "kernel_initializer",
                                   keras.initializers.RandomUniform(-0.1, 0.1)))
    if tie_weights:
        return TiedLogits(embedding, name="logits", dtype=logits_dtype())
    # Keras's Dense default (Glorot) scales by fan_in + fan_out: with a vocabulary
    # in the thousands the logits barely depend on h at first, and two-layer models
    # sit on the unigram plateau (a two-layer GRU for 10 epochs; docs/language-models.md,
    # "Why the two-layer GRU stalled"). U(±0.1), the AWD-LSTM decoder's init, lets
    # them learn. (_uniform_inits is called three times, as it always was: each call
    # draws seeds, which a seeded run's weights depend on.)
    out_init = ({"kernel_initializer": _uniform_inits(init_scale, cell)["kernel_initializer"],
                 "bias_initializer": _uniform_inits(init_scale, cell)["bias_initializer"]}
                if _uniform_inits(init_scale, cell) else
                {"kernel_initializer": keras.initializers.RandomUniform(-0.1, 0.1)})
    if qat:
        return QATDense(vocab_size, qat=qat, name="logits", dtype=logits_dtype(), **out_init)
    return layers.Dense(vocab_size, name="logits", dtype=logits_dtype(), **out_init)
