"""Adaptive softmax (Grave et al. 2017, "Efficient softmax approximation for GPUs").

The vocabulary, ranked by frequency, is cut at ``cutoffs = (c₀, c₁, …)``: the head scores
the ``c₀`` most frequent words (the shortlist) plus one logit per tail cluster; tail
cluster ``i`` holds ids ``[cᵢ, cᵢ₊₁)`` (the last ends at ``V``) and scores them from a
projection of the hidden state to ``d // div_value^(i+1)`` features::

    log p(w) = log softmax(h W_head)[w]                                     w < c₀
    log p(w) = log softmax(h W_head)[c₀ + i] + log softmax(h P_i W_i)[w − cᵢ]  w in cluster i

The design and the weight shapes follow PyTorch's ``torch.nn.AdaptiveLogSoftmaxWithLoss``
(``cutoffs``, ``div_value``, ``head_bias``; its ``Linear`` weights are the transposes of
``head_kernel``, ``tail{i}_projection`` and ``tail{i}_kernel``), so weights copy across.

Training needs only the log-probability of each target (:meth:`AdaptiveSoftmax.loss`);
scoring and suggestions use the full distribution (:meth:`~AdaptiveSoftmax.log_prob`,
which ``call`` returns, and :meth:`~AdaptiveSoftmax.top_k`).
"""

from __future__ import annotations

import keras
from keras import ops

LOSS_PATHS = ("dense", "gather")
# log(1 − p) is clamped here in two_outcome_logits: far below any real log-probability,
# so log softmax([log p, clamp]) equals log p to within e^-100.
_COMPLEMENT_FLOOR = -100.0


def check_cutoffs(cutoffs, vocab_size: int) -> list[int]:
    """``cutoffs`` as a list of ints, after checking they are increasing and inside the
    vocabulary; raises ``ValueError`` saying what was received and what is expected.

    >>> check_cutoffs("2000,10000", 50000)
    [2000, 10000]
    """
    if isinstance(cutoffs, str):
        try:
            cutoffs = [int(c) for c in cutoffs.split(",") if c.strip()]
        except ValueError:
            raise ValueError(f"cutoffs must be comma-separated integers such as 2000,10000, "
                             f"got {cutoffs!r}") from None
    cutoffs = list(cutoffs or [])
    if not cutoffs or any(isinstance(c, bool) or int(c) != c for c in cutoffs):
        raise ValueError(f"cutoffs must be one or more integers, e.g. [2000, 10000], got "
                         f"{cutoffs!r}")
    cutoffs = [int(c) for c in cutoffs]
    if any(b <= a for a, b in zip(cutoffs, cutoffs[1:])) or cutoffs[0] < 1 \
            or cutoffs[-1] >= vocab_size:
        raise ValueError(
            f"cutoffs must increase strictly and lie in [1, vocab_size − 1] = [1, "
            f"{vocab_size - 1}], got {cutoffs}; the first is the shortlist size, each next "
            "one starts a tail cluster (e.g. 2000,10000 for a 50k vocabulary)")
    return cutoffs


def two_outcome_logits(target_log_probs):
    """``(…)`` log p(target) → ``(…, 2)`` logits of {target, any other token} whose log
    softmax at index 0 is log p(target): how a metric that reads logits (``Perplexity``)
    scores targets of an adaptive softmax without the full distribution."""
    lp = ops.minimum(target_log_probs, 0.0)
    rest = ops.maximum(ops.log(-ops.expm1(lp)), _COMPLEMENT_FLOOR)  # log(1 − p)
    return ops.stack([lp, rest], axis=-1)


@keras.saving.register_keras_serializable(package="keras_seq")
class AdaptiveSoftmax(keras.layers.Layer):
    """Adaptive softmax output layer: a frequent-word head and projected tail clusters.

    Args:
        vocab_size: number of token ids ``V``; ids must be ranked by frequency (id 0 the
            most frequent), as keras-seq's char and word tokenizers rank them.
        cutoffs: increasing ids ``[c₀, c₁, …]`` (or ``"c₀,c₁"``), each in ``[1, V)``:
            ``c₀`` is the shortlist size, each ``cᵢ`` starts tail cluster ``i``.
        div_value: tail cluster ``i`` projects the ``d`` input features to
            ``d // div_value^(i+1)`` (PyTorch's rule; must stay ≥ 1).
        head_bias: add a bias to the head's logits (PyTorch's ``head_bias``).
        kernel_initializer: initializer of every weight matrix.
        loss_path: how :meth:`loss` computes the tails. ``"dense"``: each cluster's log
            softmax at every position, kept where the target falls in it (static shapes:
            works under XLA and JAX's jit). ``"gather"``: each cluster only for the
            positions whose target is in it (dynamic shapes: TensorFlow without XLA and
            PyTorch only).

    Call arguments:
        hidden: ``(…, d)`` features.

    Returns the full log-probabilities ``(…, V)`` (their ``exp`` sums to 1), what a
    logits layer would return after ``log_softmax``.

    Example:

    >>> import numpy as np
    >>> head = AdaptiveSoftmax(vocab_size=10, cutoffs=[4, 7], div_value=2.0)
    >>> h = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    >>> logp = head(h)                                      # (2, 3, 10)
    >>> bool(np.allclose(np.exp(keras.ops.convert_to_numpy(logp)).sum(-1), 1.0, atol=1e-5))
    True
    >>> loss = head.loss(h, np.array([[0, 5, 9], [3, 4, 8]]))   # mean nats of the targets
    >>> values, ids = head.top_k(h, 3)                      # (2, 3, 3) each
    >>> tuple(ids.shape), head.tail_sizes(8)
    ((2, 3, 3), [(4, 3), (2, 3)])
    """

    def __init__(self, vocab_size: int, cutoffs, div_value: float = 4.0,
                 head_bias: bool = False, kernel_initializer="glorot_uniform",
                 loss_path: str = "dense", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an integer ≥ 2, got {vocab_size!r}")
        self.vocab_size = vocab_size
        self.cutoffs = check_cutoffs(cutoffs, vocab_size)
        if not float(div_value) > 0:
            raise ValueError(f"div_value must be > 0, got {div_value!r} (PyTorch's default: 4)")
        if loss_path not in LOSS_PATHS:
            raise ValueError(f"loss_path must be one of {', '.join(LOSS_PATHS)}, got "
                             f"{loss_path!r}")
        self.div_value = float(div_value)
        self.head_bias = bool(head_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.loss_path = loss_path
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs)
        self.head_size = self.shortlist_size + self.n_clusters
        self._bounds = self.cutoffs + [vocab_size]  # cluster i: [bounds[i], bounds[i+1])

    def tail_sizes(self, input_dim: int) -> list[tuple[int, int]]:
        """``[(projection size, cluster size)]`` of every tail cluster for ``input_dim``."""
        return [(int(input_dim // (self.div_value ** (i + 1))),
                 self._bounds[i + 1] - self._bounds[i]) for i in range(self.n_clusters)]

    def build(self, input_shape):
        d = int(input_shape[-1])
        self.input_dim = d
        sizes = self.tail_sizes(d)
        if any(p < 1 for p, _ in sizes):
            raise ValueError(
                f"tail cluster projections d // div_value^(i+1) = {[p for p, _ in sizes]} for "
                f"d={d}, div_value={self.div_value}: each must be ≥ 1; use a smaller "
                "div_value or fewer cutoffs")
        self.head_kernel = self.add_weight(name="head_kernel", shape=(d, self.head_size),
                                           initializer=self.kernel_initializer)
        self.head_bias_weight = (self.add_weight(name="head_bias", shape=(self.head_size,),
                                                 initializer="zeros")
                                 if self.head_bias else None)
        self.tail_projections, self.tail_kernels = [], []
        for i, (proj, size) in enumerate(sizes):
            self.tail_projections.append(self.add_weight(
                name=f"tail{i}_projection", shape=(d, proj), initializer=self.kernel_initializer))
            self.tail_kernels.append(self.add_weight(
                name=f"tail{i}_kernel", shape=(proj, size), initializer=self.kernel_initializer))

    # -- pieces --------------------------------------------------------------------------
    def _prepare(self, hidden):
        if not self.built:
            self.build(tuple(hidden.shape))
        return ops.cast(hidden, self.compute_dtype)

    def _head_log_probs(self, hidden):
        logits = ops.matmul(hidden, self.head_kernel)  # (…, c₀ + clusters)
        if self.head_bias_weight is not None:
            logits = logits + self.head_bias_weight
        return ops.log_softmax(logits, axis=-1)

    def _cluster_log_probs(self, hidden, i: int):
        z = ops.matmul(ops.matmul(hidden, self.tail_projections[i]),  # (…, d) → (…, pᵢ)
                       self.tail_kernels[i])  # → (…, |cluster i|)
        return ops.log_softmax(z, axis=-1)

    # -- the full distribution -------------------------------------------------------------
    def log_prob(self, hidden):
        """``(…, d)`` → ``(…, V)`` log-probabilities of every token (exact)."""
        hidden = self._prepare(hidden)
        head = self._head_log_probs(hidden)  # (…, c₀ + clusters)
        parts = [head[..., : self.shortlist_size]]  # (…, c₀)
        for i in range(self.n_clusters):
            gate = head[..., self.shortlist_size + i: self.shortlist_size + i + 1]  # (…, 1)
            parts.append(self._cluster_log_probs(hidden, i) + gate)  # (…, |cluster i|)
        return ops.concatenate(parts, axis=-1)  # (…, V)

    def call(self, hidden):
        return self.log_prob(hidden)  # (…, d) → (…, V)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.vocab_size)

    def top_k(self, hidden, k: int = 5):
        """``(values, ids)``, each ``(…, k)``: the ``k`` most likely next tokens and their
        log-probabilities, most likely first (from the full distribution)."""
        return ops.top_k(self.log_prob(hidden), k)

    def predict(self, hidden):
        """``(…)`` id of the most likely token at each position."""
        return ops.argmax(self.log_prob(hidden), axis=-1)

    # -- targets only (training) -----------------------------------------------------------
    def _cluster_of(self, targets):
        """``(…)`` 0 for shortlist targets, ``i + 1`` for targets in tail cluster ``i``."""
        cluster = ops.zeros_like(targets)
        for c in self.cutoffs:
            cluster = cluster + ops.cast(targets >= c, targets.dtype)
        return cluster

    def target_log_prob(self, hidden, targets):
        """``(…, d)``, int ``(…)`` → ``(…)`` log p(target), computing only what the targets
        need (see ``loss_path``)."""
        hidden = self._prepare(hidden)
        targets = ops.cast(targets, "int32")
        cluster = self._cluster_of(targets)  # (…)
        head = self._head_log_probs(hidden)  # (…, c₀ + clusters)
        head_index = ops.where(cluster == 0, targets, self.shortlist_size + cluster - 1)
        out = ops.take_along_axis(head, ops.expand_dims(head_index, -1), axis=-1)[..., 0]
        if self.loss_path == "gather":
            return out + self._gathered_tails(hidden, targets, cluster)
        for i in range(self.n_clusters):
            low, size = self._bounds[i], self._bounds[i + 1] - self._bounds[i]
            relative = ops.clip(targets - low, 0, size - 1)  # (…)
            logp = self._cluster_log_probs(hidden, i)  # (…, |cluster i|)
            picked = ops.take_along_axis(logp, ops.expand_dims(relative, -1), axis=-1)[..., 0]
            out = out + ops.where(cluster == i + 1, picked, ops.zeros_like(picked))
        return out

    def _gathered_tails(self, hidden, targets, cluster):
        """The tail terms for the rows whose target is in each cluster (dynamic shapes)."""
        if keras.backend.backend() == "jax":
            raise ValueError("loss_path='gather' needs dynamic shapes, which JAX's jit does "
                             "not allow; use loss_path='dense' on JAX (and under XLA)")
        shape = ops.shape(targets)
        flat_h = ops.reshape(hidden, (-1, hidden.shape[-1]))  # (N, d)
        flat_t, flat_c = ops.reshape(targets, (-1,)), ops.reshape(cluster, (-1,))  # (N,)
        n = ops.shape(flat_t)[0]
        total = ops.zeros((n,), hidden.dtype)
        for i in range(self.n_clusters):
            rows = ops.reshape(ops.nonzero(flat_c == i + 1)[0], (-1,))  # (nᵢ,)
            logp = self._cluster_log_probs(ops.take(flat_h, rows, axis=0), i)  # (nᵢ, |cᵢ|)
            relative = ops.take(flat_t, rows, axis=0) - self._bounds[i]  # (nᵢ,)
            picked = ops.take_along_axis(logp, ops.expand_dims(relative, -1), axis=-1)[:, 0]
            total = total + ops.scatter(ops.expand_dims(rows, -1), picked, (n,))
        return ops.reshape(total, shape)

    def loss(self, hidden, targets, sample_weight=None):
        """Mean negative log-likelihood (nats) of ``targets``: ``Σ nats · w / N`` over the
        ``N`` positions, as Keras's ``SparseCategoricalCrossentropy`` reduces."""
        return self.nll(self.target_log_prob(hidden, targets), sample_weight)

    @staticmethod
    def nll(target_log_probs, sample_weight=None):
        """``Σ −log p · w / N`` of target log-probabilities ``(…)`` (see :meth:`loss`)."""
        nats = -target_log_probs
        if sample_weight is not None:
            nats = nats * ops.cast(ops.reshape(sample_weight, ops.shape(nats)), nats.dtype)
        return ops.mean(nats)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "cutoffs": list(self.cutoffs), "div_value": self.div_value,
                "head_bias": self.head_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "loss_path": self.loss_path}
