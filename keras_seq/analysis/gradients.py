"""Gradient diagnostics: how fast ‖∂L_T/∂h_k‖ decays with the distance ``d = T − k``.

The loss is measured at the last step only (the next-token cross-entropy after
``T`` tokens of real text), and its gradient is taken with respect to every
earlier recurrent state ``s_k`` (``h_k``; for the LSTM the pair ``(h_k, c_k)``). The
cell is run step by step under one ``tf.GradientTape`` with every state watched,
so one backward pass gives all ``T + 1`` gradients; their norms are averaged over
a batch of sequences.

Next to the measured curve of a SimpleRNN (``h_j = φ(a_j)``, ``a_j = x_j W_xh +
h_{j−1} W_hh + b``) sit two upper bounds on ``‖∂L/∂h_{T−d}‖ / ‖∂L/∂h_T‖``:

- the textbook one (seed 002), ``(L_w L_σ)^d`` with ``L_w = σ_max(W_hh)`` and
  ``L_σ = max φ′ = 1`` for tanh, which also gives Pascanu et al.'s (2013)
  sufficient condition for vanishing, ``σ_max(W_hh) < 1/γ`` (γ = 1 for tanh);
- the data-dependent product ``∏_j ‖diag φ′(a_j)‖ · σ_max(W_hh)`` over the ``d``
  steps actually taken, which shows how much of the decay saturation supplies.

The exploding-gradient experiment (:func:`clipping_experiment`) trains a
SimpleRNN whose recurrent matrix starts at a large scale, once plainly and once
with global-norm clipping ``g ← g·θ/‖g‖ if ‖g‖ > θ``, logging the loss and the
pre-clipping gradient norm at every step.
"""

from __future__ import annotations

import math
import time

import numpy as np

from keras_seq.analysis._common import (
    CELLS,
    COLORS,
    LABELS,
    Progress,
    check_cells,
    recurrent_layer,
)
from keras_seq.data.corpus import load_corpus
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.extras import pyplot

REPORT_DISTANCES = (5, 25, 70)
REACH_LEVEL = 1e-3  # "reach": first distance where the relative gradient drops below this

# -- the core measurement --------------------------------------------------------------


def _as_list(states):
    return list(states) if isinstance(states, (list, tuple)) else [states]


def state_gradient_norms(cell, inputs, loss_fn, initial_states=None) -> dict:
    """Norms of ``∂L/∂s_k`` for every state ``s_0 … s_T`` of ``cell`` over ``inputs``.

    Args:
        cell: a built keras-seq cell (``SimpleRNNCell``, ``GRUCell``, ``LSTMCell``).
        inputs: float ``(B, T, D)``: the sequence fed to the cell.
        loss_fn: ``loss_fn(output_T) -> (B,)`` per-sequence loss of the last output
            ``(B, U)``; it is summed, so sequence ``b``'s gradients are ``∂L_b/∂s_k``.
        initial_states: list of ``(B, S)`` tensors; zeros by default.

    Returns:
        dict with ``norms`` ``(B, T + 1)`` (column ``k`` is ``‖∂L/∂s_k‖``, all state
        parts concatenated; ``d = T − k``), ``h_norms`` (the ``h`` part alone) and,
        for cells with one state, ``pre_activation_grad`` ``(B, T)``: the
        largest ``φ′(a_j)`` per step (for the data-dependent bound).
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    inputs = tf.convert_to_tensor(inputs, tf.float32)
    batch, steps = int(inputs.shape[0]), int(inputs.shape[1])
    if initial_states is None:
        initial_states = cell.get_initial_state(batch)
    states = [tf.convert_to_tensor(s) for s in _as_list(initial_states)]
    params = cell.step_params()
    # A plain RNN: one state and a square recurrent kernel (no gates).
    plain = len(states) == 1 and params["recurrent_kernel"].shape[-1] == states[0].shape[-1]
    pre_acts = []
    with tf.GradientTape(persistent=False) as tape:
        x_proj = cell.project_inputs(inputs)  # (B, T, G·U)
        history = []
        for t in range(steps):
            for s in states:
                tape.watch(s)
            history.append(states)
            if plain:  # this step's pre-activation a_t, for the bound (SimpleRNN only)
                with tape.stop_recording():
                    pre_acts.append(x_proj[:, t] + tf.matmul(states[0],
                                                             params["recurrent_kernel"]))
            output, states = cell.recurrent_step(x_proj[:, t], states, params)
            states = _as_list(states)
        for s in states:
            tape.watch(s)
        history.append(states)
        loss = tf.reduce_sum(loss_fn(output))
    flat = [s for step_states in history for s in step_states]
    grads = tape.gradient(loss, flat)
    n = len(states)
    norms, h_norms = [], []
    for k in range(steps + 1):
        parts = [g if g is not None else tf.zeros_like(s)
                 for g, s in zip(grads[k * n:(k + 1) * n], flat[k * n:(k + 1) * n])]
        sq = [tf.reduce_sum(tf.square(p), axis=-1) for p in parts]
        norms.append(tf.sqrt(tf.add_n(sq)))
        h_norms.append(tf.sqrt(sq[0]))
    out = {"norms": tf.stack(norms, axis=1).numpy(), "h_norms": tf.stack(h_norms, axis=1).numpy()}
    if pre_acts:
        pre = tf.stack(pre_acts, axis=1)  # (B, T, U)
        with tf.GradientTape() as inner:
            inner.watch(pre)
            total = tf.reduce_sum(cell.activation(pre))
        slope = inner.gradient(total, pre)  # φ′(a), (B, T, U)
        out["pre_activation_grad"] = tf.reduce_max(tf.abs(slope), axis=-1).numpy()
    return out


def recurrent_matrix(cell) -> np.ndarray:
    """The square ``W_hh`` block that feeds the candidate/new state.

    SimpleRNN: the whole ``recurrent_kernel``; GRU: the candidate block (gate
    order z, r, h); LSTM: the cell-candidate block (order i, f, c, o).
    """
    rk = np.asarray(cell.recurrent_kernel.numpy())
    units = rk.shape[0]
    gates = rk.shape[1] // units
    if gates == 1:
        return rk
    block = 2 if gates in (3, 4) else 0
    if gates == 3 and getattr(cell, "coupled_input_forget", False):
        block = 1  # CIFG: f, c, o
    return rk[:, block * units:(block + 1) * units]


def spectral_stats(matrix) -> dict:
    """Spectral radius ``max |λ|`` and largest singular value ``σ_max`` of a square matrix."""
    matrix = np.asarray(matrix, np.float64)
    return {
        "spectral_radius": float(np.max(np.abs(np.linalg.eigvals(matrix)))),
        "sigma_max": float(np.linalg.norm(matrix, 2)),
    }


def analytic_linear_decay(w_hh, grad_T, max_distance: int) -> np.ndarray:
    """``‖g_T (W_hhᵀ)^d‖`` for ``d = 0..max_distance``: a linear RNN's exact gradient norms.

    For ``h_t = x_t W_xh + h_{t−1} W_hh`` (row vectors, no activation, no bias),
    ``∂L/∂h_{t−1} = ∂L/∂h_t · W_hhᵀ``, hence ``∂L/∂h_{T−d} = g_T (W_hhᵀ)^d``.
    """
    g = np.asarray(grad_T, np.float64)
    w_t = np.asarray(w_hh, np.float64).T
    out = []
    for _ in range(max_distance + 1):
        out.append(np.linalg.norm(g, axis=-1))
        g = g @ w_t
    return np.stack(out, axis=-1)


# -- probe language models on real text ------------------------------------------------


def corpus_windows(data: str = "python-docs", tokenizer: str = "word", seq_len: int = 80,
                   num: int = 64, seed: int = 0, max_vocab: int | None = 2000,
                   split: str = "train", data_dir=None):
    """``num`` random windows of ``seq_len + 1`` token ids from ``data``.

    Returns ``(windows int32 (num, seq_len + 1), tokenizer, corpus)``.
    """
    corpus = load_corpus(data, data_dir=data_dir)
    tok = make_tokenizer(tokenizer, max_vocab=max_vocab).fit(corpus.text("train"))
    ids = np.asarray(tok.encode(corpus.text(split)), np.int32)
    if len(ids) < seq_len + 2:
        raise KerasSeqError(
            f"the {split} split of {data!r} has {len(ids)} tokens; expected more than "
            f"seq_len + 1 = {seq_len + 1}. Use a shorter --seq-len or a bigger corpus."
        )
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(ids) - seq_len - 1, size=num)
    windows = np.stack([ids[s:s + seq_len + 1] for s in starts]).astype(np.int32)
    return windows, tok, corpus


def build_probe(cell: str, vocab: int, embed_dim: int = 32, units: int = 64, seed: int = 0,
                **layer_kwargs):
    """Embedding → keras-seq recurrent layer (all steps) → Dense(vocab) logits."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input((None,), dtype="int32"),
        keras.layers.Embedding(vocab, embed_dim, name="embedding"),
        recurrent_layer(cell, units, return_sequences=True, name=cell, **layer_kwargs),
        keras.layers.Dense(vocab, name="logits"),
    ])
    return model


def train_probe(model, windows, steps: int, batch: int = 32, lr: float = 1e-3,
                seed: int = 0, progress: bool = False) -> list[float]:
    """Train a probe LM for ``steps`` Adam steps on next-token prediction; returns losses."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    if steps <= 0:
        return []
    model.compile(optimizer=keras.optimizers.Adam(lr, global_clipnorm=5.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(seed)
    bar = Progress(steps, progress, "step")
    losses = []
    for _ in range(steps):
        rows = windows[rng.integers(0, len(windows), size=batch)]
        losses.append(float(model.train_on_batch(rows[:, :-1], rows[:, 1:])))
        bar.add(1, [("loss", losses[-1])])
    return losses


def probe_gradient_decay(model, windows) -> dict:
    """Gradient norms of the last-step next-token loss w.r.t. every state of a probe LM.

    Returns ``distances`` (0..T), ``mean_norm`` (batch mean of ``‖∂L/∂s_{T−d}‖``),
    ``relative`` (``mean_norm / mean_norm[0]``), spectral stats of ``W_hh`` and, for
    a SimpleRNN, the two bounds (``bound_sigma`` and ``bound_product``), relative.
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    embedding, layer, head = model.get_layer("embedding"), model.layers[1], model.get_layer(
        "logits")
    cell = layer.cell
    windows = np.asarray(windows)
    x = embedding(tf.constant(windows[:, :-1]))  # (B, T, E)
    target = tf.constant(windows[:, -1])  # (B,)

    def loss_fn(h_last):
        logits = head(h_last)  # (B, V)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(target, logits)

    out = state_gradient_norms(cell, x, loss_fn)
    norms = out["norms"][:, ::-1]  # column d = T − k
    mean = norms.mean(axis=0)
    result = {
        "distances": list(range(norms.shape[1])),
        "mean_norm": mean.tolist(),
        "relative": (mean / max(mean[0], 1e-30)).tolist(),
        "median_relative": np.median(norms / np.maximum(norms[:, :1], 1e-30), axis=0).tolist(),
        "batch": int(norms.shape[0]),
        **spectral_stats(recurrent_matrix(cell)),
    }
    if "pre_activation_grad" in out:
        sigma = result["sigma_max"]
        d = np.arange(norms.shape[1])
        result["bound_sigma"] = (sigma ** d.astype(np.float64)).tolist()
        slopes = out["pre_activation_grad"][:, ::-1]  # (B, T), column j: step T − j
        with np.errstate(over="ignore", divide="ignore"):  # a bound may overflow to inf
            log_prod = np.cumsum(np.log(slopes.astype(np.float64) * sigma), axis=1)
            prod = np.concatenate([np.ones((slopes.shape[0], 1)), np.exp(log_prod)], axis=1)
        result["bound_product"] = prod.mean(axis=0).tolist()
    return result


def measure_gradients(cells=CELLS, data: str = "python-docs", tokenizer: str = "word",
                      seq_len: int = 80, batch: int = 32, units: int = 64, embed_dim: int = 32,
                      train_steps: int = 0, max_vocab: int | None = 2000, seed: int = 0,
                      data_dir=None, progress: bool = True) -> dict:
    """Gradient-decay curves of each cell on ``data``, at initialisation (and trained).

    With ``train_steps > 0`` each probe is also trained that many steps and measured
    again. Returns ``{"config": …, "init": {cell: curve}, "trained": {cell: curve}}``
    (see :func:`probe_gradient_decay` for a curve's fields).
    """
    cells = check_cells(cells)
    started = time.monotonic()
    windows, tok, corpus = corpus_windows(data, tokenizer, seq_len, batch, seed, max_vocab,
                                          data_dir=data_dir)
    train_windows = None
    if train_steps > 0:
        train_windows, _, _ = corpus_windows(data, tokenizer, seq_len, 2048, seed + 1,
                                             max_vocab, data_dir=data_dir)
    result = {"config": {"cells": list(cells), "data": data, "tokenizer": tokenizer,
                         "vocab": tok.vocab_size, "seq_len": seq_len, "batch": batch,
                         "units": units, "embed_dim": embed_dim, "train_steps": train_steps,
                         "seed": seed, "corpus_sha256": corpus.sha256},
              "init": {}, "trained": {}}
    bar = Progress(len(cells) * (2 if train_steps else 1), progress, "probe")
    for cell in cells:
        model = build_probe(cell, tok.vocab_size, embed_dim, units, seed)
        result["init"][cell] = probe_gradient_decay(model, windows)
        bar.add(1)
        if train_steps > 0:
            losses = train_probe(model, train_windows, train_steps, seed=seed)
            curve = probe_gradient_decay(model, windows)
            curve["train_loss"] = [losses[0], losses[-1]]
            result["trained"][cell] = curve
            bar.add(1)
    result["seconds"] = time.monotonic() - started
    return result


def gradient_reach(curve: dict, level: float | None = None) -> int:
    """The first distance ``d`` at which the relative gradient falls below ``level``.

    ``len(curve) − 1`` (the longest distance measured) if it never does.
    """
    level = REACH_LEVEL if level is None else level
    rel = np.asarray(curve["relative"])
    below = np.flatnonzero(rel < level)
    return int(below[0]) if below.size else len(rel) - 1


def decay_table(result: dict, distances=REPORT_DISTANCES) -> list[dict]:
    """Rows ``cell, state, σ_max, ρ, rel@d…``: relative gradient norm at chosen distances."""
    rows = []
    for state in ("init", "trained"):
        for cell, curve in result.get(state, {}).items():
            row = {"cell": LABELS[cell], "weights": state,
                   "sigma_max(W_hh)": curve["sigma_max"],
                   "spectral_radius": curve["spectral_radius"]}
            for d in distances:
                rel = curve["relative"]
                row[f"d={d}"] = rel[d] if d < len(rel) else None
            row[f"reach (rel<{REACH_LEVEL:g})"] = gradient_reach(curve)
            if "bound_sigma" in curve:
                d = distances[-1] if distances[-1] < len(curve["bound_sigma"]) else -1
                row[f"bound σ^d (d={distances[-1]})"] = curve["bound_sigma"][d]
                row[f"bound ∏ (d={distances[-1]})"] = curve["bound_product"][d]
            rows.append(row)
    return rows


def plot_gradient_decay(result: dict, path: str) -> str:
    """One log-scale panel per weight state: mean relative ‖∂L/∂s_{T−d}‖ against ``d``."""
    plt = pyplot("the gradient plot")
    states = [s for s in ("init", "trained") if result.get(s)]
    fig, axes = plt.subplots(1, len(states), figsize=(6.5 * len(states), 4.5), squeeze=False)
    for ax, state in zip(axes[0], states):
        for cell, curve in result[state].items():
            d = curve["distances"]
            ax.semilogy(d, curve["relative"], color=COLORS[cell], label=f"{LABELS[cell]} measured")
            if "bound_sigma" in curve:
                ax.semilogy(d, np.maximum(curve["bound_sigma"], 1e-30), "--", color=COLORS[cell],
                            label=f"bound σ_max^d (σ_max={curve['sigma_max']:.2f})")
                ax.semilogy(d, np.maximum(curve["bound_product"], 1e-30), ":",
                            color=COLORS[cell], label="bound ∏ max φ′·σ_max")
        measured = np.concatenate([np.asarray(c["relative"]) for c in result[state].values()])
        positive = measured[measured > 0]
        ax.set_ylim(max(positive.min() / 10, 1e-30) if positive.size else 1e-30, 1e3)
        ax.set_xlabel("distance d = T − k (steps)")
        ax.set_ylabel("‖∂L_T/∂h_{T−d}‖ / ‖∂L_T/∂h_T‖ (batch mean)")
        ax.set_title("at initialisation" if state == "init" else
                     f"after {result['config']['train_steps']} training steps")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    cfg = result["config"]
    fig.suptitle(f"gradient decay on {cfg['data']} ({cfg['tokenizer']}, T={cfg['seq_len']}, "
                 f"{cfg['units']} units)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# -- exploding gradients and clipping --------------------------------------------------


def clipping_experiment(scale: float = 3.0, clip_norm: float = 1.0, steps: int = 200,
                        data: str = "python-docs", tokenizer: str = "char",
                        seq_len: int = 50, batch: int = 32, units: int = 64,
                        embed_dim: int = 32, lr: float = 0.5, seed: int = 0,
                        data_dir=None, progress: bool = True) -> dict:
    """Train a SimpleRNN with ``recurrent_kernel = scale × orthogonal`` by SGD, twice.

    Both runs start from the same weights and see the same batches; one applies
    global-norm clipping (``g ← g·θ/‖g‖`` when ``‖g‖ > θ``, θ = ``clip_norm``), the
    other none. Returns ``{"config", "runs": {"no clipping": hist, "clip θ": hist}}``
    with ``loss`` and ``grad_norm`` (before clipping) per step; a run whose loss
    turns non-finite stops there (the rest is NaN).
    """
    # lazy: loads Keras, TensorFlow only when this runs
    import keras
    import tensorflow as tf

    if clip_norm <= 0 or scale <= 0:
        raise KerasSeqError(
            f"received scale={scale}, clip_norm={clip_norm}; expected both > 0 "
            "(e.g. --scale 3 --clip-norm 1)"
        )
    windows, tok, _ = corpus_windows(data, tokenizer, seq_len, 4096, seed, None,
                                     data_dir=data_dir)
    rng = np.random.default_rng(seed + 1)
    order = rng.integers(0, len(windows), size=(steps, batch))
    runs = {}
    bar = Progress(2 * steps, progress, "step")
    for label, theta in (("no clipping", None), (f"clip θ={clip_norm:g}", clip_norm)):
        model = build_probe("rnn", tok.vocab_size, embed_dim, units, seed,
                            recurrent_initializer=keras.initializers.Orthogonal(gain=scale,
                                                                               seed=seed))
        step = _clipped_sgd_step(model, keras.optimizers.SGD(lr), theta)
        losses = np.full(steps, np.nan)
        norms = np.full(steps, np.nan)
        for i in range(steps):
            rows = windows[order[i]]
            loss, norm = step(tf.constant(rows[:, :-1]), tf.constant(rows[:, 1:]))
            losses[i], norms[i] = float(loss), float(norm)
            bar.add(1)
            if not (math.isfinite(losses[i]) and math.isfinite(norms[i])):
                bar.add(steps - i - 1)
                break
        w = recurrent_matrix(model.layers[1].cell)
        runs[label] = {"loss": losses.tolist(), "grad_norm": norms.tolist(),
                       "clip_norm": theta, "final_sigma_max": spectral_stats(w)["sigma_max"]}
    return {"config": {"scale": scale, "clip_norm": clip_norm, "steps": steps, "data": data,
                       "tokenizer": tokenizer, "vocab": tok.vocab_size, "seq_len": seq_len,
                       "batch": batch, "units": units, "lr": lr, "optimizer": "sgd",
                       "seed": seed, "initial_sigma_max": scale},
            "runs": runs}


def _clipped_sgd_step(model, optimizer, theta: float | None):
    """A compiled train step returning ``(loss, ‖g‖ before clipping)``.

    With ``theta``: ``g ← g·θ/‖g‖`` when the global norm ``‖g‖ > θ`` (else unchanged).
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    variables = model.trainable_variables
    optimizer.build(variables)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)  # (B, T, V)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        norm = tf.linalg.global_norm(grads)
        if theta is not None:
            factor = tf.minimum(1.0, theta / tf.maximum(norm, 1e-12))
            grads = [g * factor for g in grads]
        optimizer.apply(grads, variables)
        return loss, norm

    return step


def clipping_table(result: dict) -> list[dict]:
    rows = []
    for label, run in result["runs"].items():
        loss, norm = np.asarray(run["loss"]), np.asarray(run["grad_norm"])
        finite = np.isfinite(loss)
        tail = loss[finite][-max(1, len(loss) // 10):] if finite.any() else np.array([np.nan])
        theta = run["clip_norm"]
        rows.append({
            "run": label,
            "steps run": int(finite.sum()),
            "first loss": float(loss[0]),
            "final loss (last 10%)": float(np.mean(tail)),
            "median ‖g‖": float(np.nanmedian(norm)),
            "max ‖g‖": float(np.nanmax(norm)),
            "steps ‖g‖>θ": int(np.sum(norm > (theta or result["config"]["clip_norm"]))),
            "diverged": bool(not finite.all()),
        })
    return rows


def plot_clipping(result: dict, path: str) -> str:
    """Loss (left) and pre-clipping gradient norm (right, log scale) per step."""
    plt = pyplot("the gradient plot")
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    for (label, run), color in zip(result["runs"].items(), ("tab:red", "tab:blue")):
        a.plot(run["loss"], color=color, label=label)
        b.semilogy(run["grad_norm"], color=color, label=label)
    b.axhline(result["config"]["clip_norm"], color="gray", ls="--", label="θ")
    a.set_xlabel("step")
    a.set_ylabel("training loss (nats/token)")
    b.set_xlabel("step")
    b.set_ylabel("global gradient norm before clipping")
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
        ax.legend()
    cfg = result["config"]
    fig.suptitle(f"SimpleRNN, recurrent init {cfg['scale']:g}× orthogonal, SGD lr {cfg['lr']:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
