"""Fused sequence kernels with hand-written gradients (JAX backend).

The JAX twin of ``_fused.py`` (same four functions, same contract; the derivation of
every gradient is there). Each function takes time-major projected inputs ``xs``
``(T, B, G·U)`` (``x @ kernel + input_bias``, one matmul by the caller), the initial
states and the recurrent weights, and returns the time-major outputs ``(T, B, U)`` and
the final states.

The recipe, as a ``jax.custom_vjp`` over two ``lax.scan`` loops:

- the forward scan keeps only what the backward pass needs (``h``, ``c`` and the
  pre-activations ``z``; for GRU ``h``, the gates and the recurrent candidate term);
- the backward pass computes every per-step factor for the whole sequence at once, in
  elementwise ops, then a reverse scan does only the sequential part (``dz @ Uᵀ`` and a
  few elementwise ops per step);
- the recurrent kernel's gradient is one ``(U, T·B) @ (T·B, G·U)`` matmul after the
  scan (GRU's recurrent bias one sum), and ``dxs`` flows back through the caller's
  single projection matmul.

The GRU's forward stacks its gate values rather than recomputing them afterwards
because of how XLA:CPU fuses (jaxlib 0.10): inside a ``while`` body, one fusion that
reads the step's slice of ``xs`` and computes both sigmoids and the tanh costs ~130 µs
per step at B=32, U=256 (about as much as the recurrent matmul); stacked, the gates are
split into three small fusions of ~25 µs in all. ``unroll`` in ``lax.scan`` measured no
faster (full unrolling only compiles slower), so the scans use none.

Everything computes in ``xs``'s dtype (float32, or bfloat16/float16 under mixed
precision); the other inputs are cast to it, outside the ``custom_vjp``, so that their
gradients come back in their own dtypes. ``relu``, ``cifg`` and ``reset_after`` are
static (``nondiff_argnums``).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def _cast(dtype, *arrays):
    return tuple(jnp.asarray(a).astype(dtype) for a in arrays)


def _flat_matmul_t(a, b):
    """``sum_t a[t]ᵀ @ b[t]`` as one matmul: ``(T, B, M), (T, B, N) -> (M, N)``.

    Accumulates in float32 (T·B terms), returns ``a``'s dtype.
    """
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])  # (T·B, M), (T·B, N)
    out = jnp.matmul(a2.T, b2, preferred_element_type=jnp.float32)  # (M, N)
    return out.astype(a.dtype)


def _shift(h0, hs):
    """``[h0, h_1, ..., h_{T-1}]``: the previous state at every step, ``(T, B, U)``."""
    return jnp.concatenate([h0[None], hs[:-1]], axis=0)


def _with_final(d_hs, d_final):
    """Upstream gradient of every output, with the final state's added to the last."""
    return d_hs.at[-1].add(d_final)  # (T, B, U)


# -- SimpleRNN ------------------------------------------------------------------------


def simple_rnn_sequence(xs, h0, kernel_rec, relu=False):
    """SimpleRNN over time: ``h_t = act(xs_t + h_{t-1} @ U)``; returns ``(hs, h_T)``."""
    xs = jnp.asarray(xs)
    return _simple_rnn(xs, *_cast(xs.dtype, h0, kernel_rec), bool(relu))


@partial(jax.custom_vjp, nondiff_argnums=(3,))
def _simple_rnn(xs, h0, kernel_rec, relu):
    return _simple_rnn_fwd(xs, h0, kernel_rec, relu)[0]


def _simple_rnn_fwd(xs, h0, kernel_rec, relu):
    act = jax.nn.relu if relu else jnp.tanh

    def step(h, x):
        h = act(x + h @ kernel_rec)  # (B, U)
        return h, h

    h_last, hs = jax.lax.scan(step, h0, xs)  # (B, U), (T, B, U)
    return (hs, h_last), (h0, kernel_rec, hs)


def _simple_rnn_bwd(relu, res, grads):
    h0, kernel_rec, hs = res
    d_hs = _with_final(*grads)  # (T, B, U)
    deriv = (hs > 0).astype(hs.dtype) if relu else 1.0 - hs * hs  # (T, B, U)
    kernel_t = kernel_rec.T  # (U, U)

    def back(d_next, elems):
        d_out, der = elems  # (B, U) each
        d_pre = (d_out + d_next) * der  # (B, U)
        return d_pre @ kernel_t, d_pre

    d_h0, d_pre = jax.lax.scan(back, jnp.zeros_like(h0), (d_hs, deriv), reverse=True)
    return d_pre, d_h0, _flat_matmul_t(_shift(h0, hs), d_pre)


_simple_rnn.defvjp(_simple_rnn_fwd, _simple_rnn_bwd)


# -- LSTM and LSTMP ---------------------------------------------------------------------


def _lstm_gates(z, units, cifg):
    """``(i, f, g, o)`` from pre-activations ``z`` (last axis ``G·U``, gate order i, f, c, o;
    CIFG: f, c, o with ``i = 1 − f``)."""
    sig = jax.nn.sigmoid(z)  # (..., G·U); the candidate block's sigmoid is unused
    if cifg:
        f, o = sig[..., :units], sig[..., 2 * units :]  # (..., U) each
        return 1.0 - f, f, jnp.tanh(z[..., units : 2 * units]), o
    i, f, o = sig[..., :units], sig[..., units : 2 * units], sig[..., 3 * units :]
    return i, f, jnp.tanh(z[..., 2 * units : 3 * units]), o


def _lstm_backward_factors(zs, cs, c0, cifg):
    """Every per-step factor of an LSTM's backward pass, for the whole sequence at once.

    Returns ``(f, o, tanh(c), d_c_from_out, factors)``, each ``(T, B, ·)``: the cell
    gradient gains ``d_out · d_c_from_out`` from the step's output ``o ⊙ tanh(c)``, and
    ``dz = [dc, …, dc, d_out] · factors`` (``G·U`` wide).
    """
    i, f, g, o = _lstm_gates(zs, c0.shape[-1], cifg)  # 4 × (T, B, U)
    tc, cp = jnp.tanh(cs), _shift(c0, cs)  # (T, B, U) each
    d_c_from_out = o * (1.0 - tc * tc)  # (T, B, U)
    d_o = tc * o * (1.0 - o)  # (T, B, U)
    if cifg:  # c = f·c_prev + (1 - f)·g
        factors = [(cp - g) * f * (1.0 - f), (1.0 - f) * (1.0 - g * g), d_o]
    else:
        factors = [g * i * (1.0 - i), cp * f * (1.0 - f), i * (1.0 - g * g), d_o]
    return f, o, tc, d_c_from_out, jnp.concatenate(factors, axis=-1)  # ..., (T, B, G·U)


def _lstm_scan(xs, h0, c0, kernel_rec, kernel_proj, cifg):
    """The forward loop of LSTM (``kernel_proj=None``) and LSTMP; returns
    ``((hs, h_T, c_T), (cs, zs))``, the stacked tensors ``(T, B, ·)``."""
    units = c0.shape[-1]

    def step(carry, x):
        h, c = carry  # (B, U or P), (B, U)
        z = x + h @ kernel_rec  # (B, G·U)
        i, f, g, o = _lstm_gates(z, units, cifg)  # 4 × (B, U)
        c = f * c + i * g  # (B, U)
        h = o * jnp.tanh(c)  # (B, U)
        if kernel_proj is not None:
            h = h @ kernel_proj  # (B, U) @ (U, P) -> (B, P)
        return (h, c), (h, c, z)

    (h_last, c_last), (hs, cs, zs) = jax.lax.scan(step, (h0, c0), xs)  # (T, B, ·)
    return (hs, h_last, c_last), (cs, zs)


def lstm_sequence(xs, h0, c0, kernel_rec, cifg=False):
    """LSTM (tanh / sigmoid) over time; returns ``(hs, h_T, c_T)``.

    The forward loop keeps only ``h``, ``c`` and ``z``; the gate values and every
    per-step factor of the backward pass are recomputed afterwards for the whole
    sequence, so each backward step is a few elementwise ops plus one ``dz @ Uᵀ``.
    """
    xs = jnp.asarray(xs)
    return _lstm(xs, *_cast(xs.dtype, h0, c0, kernel_rec), bool(cifg))


@partial(jax.custom_vjp, nondiff_argnums=(4,))
def _lstm(xs, h0, c0, kernel_rec, cifg):
    return _lstm_scan(xs, h0, c0, kernel_rec, None, cifg)[0]


def _lstm_fwd(xs, h0, c0, kernel_rec, cifg):
    out, (cs, zs) = _lstm_scan(xs, h0, c0, kernel_rec, None, cifg)
    return out, (h0, c0, kernel_rec, out[0], cs, zs)


def _lstm_bwd(cifg, res, grads):
    h0, c0, kernel_rec, hs, cs, zs = res
    d_hs_out, d_hT, d_cT = grads
    d_hs = _with_final(d_hs_out, d_hT)  # (T, B, U)
    n = 3 if cifg else 4
    f, _, _, d_c_from_h, factors = _lstm_backward_factors(zs, cs, c0, cifg)  # (T, B, ·)
    kernel_t = kernel_rec.T  # (G·U, U)

    def back(carry, elems):
        d_h_next, d_cf = carry  # (B, U) each
        d_out, d_c_from_h_t, fac, f_t = elems
        d_h = d_out + d_h_next  # (B, U)
        d_c = d_cf + d_h * d_c_from_h_t  # (B, U)
        d_z = jnp.concatenate([d_c] * (n - 1) + [d_h], axis=-1) * fac  # (B, G·U)
        return (d_z @ kernel_t, d_c * f_t), d_z

    init = (jnp.zeros_like(h0), d_cT)
    (d_h0, d_c0), d_z = jax.lax.scan(back, init, (d_hs, d_c_from_h, factors, f), reverse=True)
    return d_z, d_h0, d_c0, _flat_matmul_t(_shift(h0, hs), d_z)


_lstm.defvjp(_lstm_fwd, _lstm_bwd)


def lstmp_sequence(xs, h0, c0, kernel_rec, kernel_proj, cifg=False):
    """LSTM with a projection layer (LSTMP; tanh / sigmoid) over time.

    ``h_t = (o_t ⊙ tanh(c_t)) @ P`` with ``P`` ``(U, P)``; ``h`` is ``(B, P)`` and
    ``kernel_rec`` ``(P, G·U)``. Returns ``(hs (T, B, P), h_T, c_T)``. The backward scan
    stacks ``dz`` and the total ``dh``; the recurrent kernel's and the projection's
    gradients are one matmul each after it.
    """
    xs = jnp.asarray(xs)
    return _lstmp(xs, *_cast(xs.dtype, h0, c0, kernel_rec, kernel_proj), bool(cifg))


@partial(jax.custom_vjp, nondiff_argnums=(5,))
def _lstmp(xs, h0, c0, kernel_rec, kernel_proj, cifg):
    return _lstm_scan(xs, h0, c0, kernel_rec, kernel_proj, cifg)[0]


def _lstmp_fwd(xs, h0, c0, kernel_rec, kernel_proj, cifg):
    out, (cs, zs) = _lstm_scan(xs, h0, c0, kernel_rec, kernel_proj, cifg)
    return out, (h0, c0, kernel_rec, kernel_proj, out[0], cs, zs)


def _lstmp_bwd(cifg, res, grads):
    h0, c0, kernel_rec, kernel_proj, hs, cs, zs = res
    d_hs_out, d_hT, d_cT = grads
    d_hs = _with_final(d_hs_out, d_hT)  # (T, B, P)
    n = 3 if cifg else 4
    # m_t = o ⊙ tanh(c) is what the projection reads: dc += dm * d_c_from_m
    f, o, tc, d_c_from_m, factors = _lstm_backward_factors(zs, cs, c0, cifg)  # (T, B, ·)
    kernel_t = kernel_rec.T  # (G·U, P)
    proj_t = kernel_proj.T  # (P, U)

    def back(carry, elems):
        d_h_next, d_cf = carry  # (B, P), (B, U)
        d_out, d_c_from_m_t, fac, f_t = elems
        d_h = d_out + d_h_next  # (B, P): everything that reaches h_t
        d_m = d_h @ proj_t  # (B, U)
        d_c = d_cf + d_m * d_c_from_m_t  # (B, U)
        d_z = jnp.concatenate([d_c] * (n - 1) + [d_m], axis=-1) * fac  # (B, G·U)
        return (d_z @ kernel_t, d_c * f_t), (d_z, d_h)

    init = (jnp.zeros_like(h0), d_cT)
    elems = (d_hs, d_c_from_m, factors, f)
    (d_h0, d_c0), (d_z, d_h) = jax.lax.scan(back, init, elems, reverse=True)  # (T, B, ·)
    d_rec = _flat_matmul_t(_shift(h0, hs), d_z)  # (P, G·U)
    d_proj = _flat_matmul_t(o * tc, d_h)  # (U, P)
    return d_z, d_h0, d_c0, d_rec, d_proj


_lstmp.defvjp(_lstmp_fwd, _lstmp_bwd)


# -- GRU ---------------------------------------------------------------------------------


def gru_sequence(xs, h0, kernel_rec, rec_bias=None, reset_after=True):
    """GRU (tanh / sigmoid) over time; returns ``(hs, h_T)``.

    ``rec_bias`` ``(3U,)`` is the recurrent bias row (``reset_after=True`` only; None
    means zeros).
    """
    xs = jnp.asarray(xs)
    h0, kernel_rec = _cast(xs.dtype, h0, kernel_rec)
    if not reset_after:
        if rec_bias is not None:
            raise ValueError("gru_sequence: reset_after=False takes no rec_bias "
                             "(Keras's GRU has no recurrent bias then).")
        return _gru_reset_before(xs, h0, kernel_rec)
    if rec_bias is None:
        rec_bias = jnp.zeros((kernel_rec.shape[-1],), xs.dtype)  # (3U,)
    return _gru(xs, h0, kernel_rec, *_cast(xs.dtype, rec_bias))


def _gru_gates(x, inner, units):
    """``z, r, hh`` ``(B, U)`` from projected inputs and ``h @ U + b`` ``(B, 3U)``."""
    zr = jax.nn.sigmoid(x[:, : 2 * units] + inner[:, : 2 * units])  # (B, 2U)
    z, r = zr[:, :units], zr[:, units:]  # (B, U) each
    return z, r, jnp.tanh(x[:, 2 * units :] + r * inner[:, 2 * units :])


@jax.custom_vjp
def _gru(xs, h0, kernel_rec, rec_bias):
    return _gru_fwd(xs, h0, kernel_rec, rec_bias)[0]


def _gru_fwd(xs, h0, kernel_rec, rec_bias):
    units = h0.shape[-1]

    def step(h, x):
        inner = h @ kernel_rec + rec_bias  # (B, 3U)
        z, r, hh = _gru_gates(x, inner, units)  # (B, U) each
        h = hh + z * (h - hh)  # (B, U): z·h_prev + (1 - z)·hh
        # Stacked: the backward pass needs them, and it splits XLA:CPU's per-step fusion,
        # which is ~2x slower as one (module docstring).
        return h, (h, z, r, hh, inner[:, 2 * units :])

    h_last, (hs, *saved) = jax.lax.scan(step, h0, xs)  # (B, U), (T, B, U) each
    return (hs, h_last), (h0, kernel_rec, hs, *saved)


def _gru_bwd(res, grads):
    h0, kernel_rec, hs, z, r, hh, inner_h = res  # (T, B, U) from hs on
    d_hs = _with_final(*grads)  # (T, B, U)
    # Per-step factors for the whole sequence at once: with d_h the total gradient of
    # h_t, the pre-activations' gradients are d_x = [d_h]*3 · fac_x and the recurrent
    # term's d_inner = [d_h]*3 · fac_inner (z, r, hh blocks), (T, B, 3U) each.
    h_prev = _shift(h0, hs)  # (T, B, U)
    d_z = (h_prev - hh) * z * (1.0 - z)  # d_z_pre / d_h
    d_hh = (1.0 - z) * (1.0 - hh * hh)  # d_hh_pre / d_h
    d_r = d_hh * inner_h * r * (1.0 - r)  # d_r_pre / d_h
    fac_x = jnp.concatenate([d_z, d_r, d_hh], axis=-1)  # (T, B, 3U)
    fac_inner = jnp.concatenate([d_z, d_r, d_hh * r], axis=-1)  # (T, B, 3U)
    kernel_t = kernel_rec.T  # (3U, U)

    def back(d_next, elems):
        d_out, fac, z_t = elems  # (B, U), (B, 3U), (B, U)
        d_h = d_out + d_next  # (B, U)
        d_inner = jnp.tile(d_h, (1, 3)) * fac  # (B, 3U)
        return d_h * z_t + d_inner @ kernel_t, d_h

    elems = (d_hs, fac_inner, z)
    d_h0, d_h = jax.lax.scan(back, jnp.zeros_like(h0), elems, reverse=True)  # (B,U), (T,B,U)
    d_h3 = jnp.tile(d_h, (1, 1, 3))  # (T, B, 3U)
    d_inner = d_h3 * fac_inner  # (T, B, 3U)
    d_bias = jnp.sum(d_inner, axis=(0, 1), dtype=jnp.float32).astype(d_h.dtype)  # (3U,)
    return d_h3 * fac_x, d_h0, _flat_matmul_t(h_prev, d_inner), d_bias


_gru.defvjp(_gru_fwd, _gru_bwd)


@jax.custom_vjp
def _gru_reset_before(xs, h0, kernel_rec):
    """GRU with the reset gate applied before the recurrent matmul (no recurrent bias)."""
    return _gru_rb_fwd(xs, h0, kernel_rec)[0]


def _gru_rb_fwd(xs, h0, kernel_rec):
    units = h0.shape[-1]
    k_zr, k_h = kernel_rec[:, : 2 * units], kernel_rec[:, 2 * units :]  # (U, 2U), (U, U)

    def step(h, x):
        zr = jax.nn.sigmoid(x[:, : 2 * units] + h @ k_zr)  # (B, 2U)
        r = zr[:, units:]  # (B, U)
        hh = jnp.tanh(x[:, 2 * units :] + (r * h) @ k_h)  # (B, U)
        h_new = hh + zr[:, :units] * (h - hh)  # (B, U)
        return h_new, (h_new, jnp.concatenate([zr, hh], axis=-1))

    h_last, (hs, saved) = jax.lax.scan(step, h0, xs)  # (B, U), (T, B, U), (T, B, 3U)
    return (hs, h_last), (h0, kernel_rec, hs, saved)


def _gru_rb_bwd(res, grads):
    h0, kernel_rec, hs, saved = res
    units = h0.shape[-1]
    d_hs = _with_final(*grads)  # (T, B, U)
    # Per-step factors for the whole sequence at once, (T, B, U) each.
    h_prev = _shift(h0, hs)
    z, r, hh = saved[..., :units], saved[..., units : 2 * units], saved[..., 2 * units :]
    fac_z = (h_prev - hh) * z * (1.0 - z)  # d_z_pre = d_h * this
    fac_hh = (1.0 - z) * (1.0 - hh * hh)  # d_hh_pre = d_h * this
    fac_r = h_prev * r * (1.0 - r)  # d_r_pre = d_(r·h) * this
    k_zr_t, k_h_t = kernel_rec[:, : 2 * units].T, kernel_rec[:, 2 * units :].T  # (2U|U, U)

    def back(d_next, elems):
        d_out, fz, fhh, fr, r_t, z_t = elems  # (B, U) each
        d_h = d_out + d_next  # (B, U)
        d_hh = d_h * fhh  # (B, U)
        d_rh = d_hh @ k_h_t  # (B, U): gradient of r ⊙ h_prev
        d_zr = jnp.concatenate([d_h * fz, d_rh * fr], axis=-1)  # (B, 2U)
        d_hp = d_h * z_t + d_rh * r_t + d_zr @ k_zr_t  # (B, U)
        return d_hp, jnp.concatenate([d_zr, d_hh], axis=-1)

    elems = (d_hs, fac_z, fac_hh, fac_r, r, z)
    d_h0, d_x = jax.lax.scan(back, jnp.zeros_like(h0), elems, reverse=True)  # (T, B, 3U)
    d_kernel = jnp.concatenate(
        [
            _flat_matmul_t(h_prev, d_x[..., : 2 * units]),  # (U, 2U)
            _flat_matmul_t(r * h_prev, d_x[..., 2 * units :]),  # (U, U)
        ],
        axis=1,
    )
    return d_x, d_h0, d_kernel


_gru_reset_before.defvjp(_gru_rb_fwd, _gru_rb_bwd)
