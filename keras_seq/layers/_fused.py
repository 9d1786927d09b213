"""Fused sequence kernels with hand-written gradients (TensorFlow backend).

Each function takes time-major projected inputs ``xs`` ``(T, B, G·U)`` (that is
``x @ kernel + input_bias`` for every step, computed by the caller in one
matmul), the initial states and the recurrent weights as tensors, and returns
the time-major outputs ``(T, B, U)`` and the final states.

Why hand-written gradients: autodiff of a recurrent loop does, per step, one
``dz @ Uᵀ`` (needed, sequential) plus one ``hᵀ @ dz`` for the recurrent
kernel's gradient and a dozen small elementwise kernels. Here the backward loop
does only the sequential part; the recurrent kernel's gradient is one
``(U, T·B) @ (T·B, G·U)`` matmul after the loop, and the input side (``dxs``)
flows back through the caller's single projection matmul. This is the cuDNN
recipe, written in TF ops.

Only the standard activations are supported (tanh/sigmoid; relu for the
SimpleRNN); masks and recurrent dropout use the autodiff loop in
``_fast_rnn.py`` instead.
"""

from __future__ import annotations

import tensorflow as tf

#: The kernels whose loops a training call compiles with XLA (``jit_compile=True``): only
#: where it measured faster on a CPU (``python -m tools.fused_variants --cell lstm|gru``,
#: 2-core AMD EPYC): the LSTM's train step 1.47x -> 1.75x Keras's; the GRU's 1.03x ->
#: 1.33x, once its forward loop stacks the gates (below). docs/backends-and-gpu.md, "What
#: each lever gave".
XLA_WHEN_TRAINING = ("lstm_sequence", "gru_sequence")


def _zeros_if_none(grad, like):
    return tf.zeros_like(like) if grad is None else grad


def _loop(body, elems, carry, num_out, reverse=False, jit_compile=False):
    """``carry, outs_t = body(carry, elems_t)`` over time; only ``outs`` are stacked.

    Leaner than ``tf.scan``, which stacks every carry: the backward loops carry
    ``dh`` (and ``dc``) but only need ``dz`` for every step.

    ``jit_compile``: run the loop as one XLA program (when a graph is being traced;
    eager calls run it as it is): XLA fuses each step's elementwise ops into a few
    kernels where TensorFlow dispatches a dozen (docs/backends-and-gpu.md gives the
    measured gain).

    Returns ``(final_carry, [stacked out (T, ...) for each out])``.
    """

    def run(elems, carry):
        steps = tf.shape(elems[0])[0]
        in_tas = [tf.TensorArray(e.dtype, size=steps).unstack(e) for e in elems]
        out_tas = [tf.TensorArray(elems[0].dtype, size=steps) for _ in range(num_out)]

        def loop_body(t, carry, out_tas):
            i = steps - 1 - t if reverse else t
            carry, outs = body(carry, [ta.read(i) for ta in in_tas])
            return t + 1, tuple(carry), [ta.write(i, o) for ta, o in zip(out_tas, outs)]

        _, carry, out_tas = tf.while_loop(
            lambda t, *_: t < steps,
            loop_body,
            (tf.constant(0), tuple(carry), out_tas),
            maximum_iterations=steps,
        )
        return carry, [ta.stack() for ta in out_tas]

    if jit_compile and not tf.executing_eagerly():
        run = tf.function(run, jit_compile=True, autograph=False)
    return run(list(elems), tuple(carry))


def _flat_matmul_t(a, b):
    """``sum_t a[t]ᵀ @ b[t]`` as one matmul: ``(T, B, M), (T, B, N) -> (M, N)``.

    Computed as ``(bᵀ a)ᵀ`` when ``M < N``: measured ~1.5x faster here for
    ``M=256, N=1024`` (oneDNN prefers the wide operand transposed).
    """
    a2, b2 = tf.reshape(a, (-1, a.shape[-1])), tf.reshape(b, (-1, b.shape[-1]))
    if a.shape[-1] < b.shape[-1]:
        return tf.transpose(tf.matmul(b2, a2, transpose_a=True))
    return tf.matmul(a2, b2, transpose_a=True)


def _shift(h0, hs):
    """``[h0, h_1, ..., h_{T-1}]``: the previous state at every step, ``(T, B, U)``."""
    return tf.concat([tf.expand_dims(h0, 0), hs[:-1]], axis=0)


def _with_final(d_hs, d_final, like):
    """Upstream gradient of every output, with the final state's added to the last."""
    d_hs = _zeros_if_none(d_hs, like)
    if d_final is None:
        return d_hs
    return tf.concat([d_hs[:-1], tf.expand_dims(d_hs[-1] + d_final, 0)], 0)


def simple_rnn_sequence(xs, h0, kernel_rec, relu=False, jit_compile=False):
    """SimpleRNN over time: ``h_t = act(xs_t + h_{t-1} @ U)``; returns ``(hs, h_T)``."""
    act = tf.nn.relu if relu else tf.tanh

    def step(carry, elems):
        h = act(elems[0] + tf.matmul(carry[0], kernel_rec))  # (B, U)
        return (h,), (h,)

    @tf.custom_gradient
    def run(xs, h0, kernel_rec):
        (h_last,), (hs,) = _loop(step, [xs], (h0,), 1, jit_compile=jit_compile)

        def grad(d_hs, d_hT):
            d_hs = _with_final(d_hs, d_hT, hs)
            deriv = tf.cast(hs > 0, hs.dtype) if relu else 1.0 - hs * hs  # (T, B, U)
            kernel_t = tf.transpose(kernel_rec)  # (U, U)

            def back(carry, elems):
                d_out, der = elems
                d_pre = (d_out + carry[0]) * der  # (B, U)
                return (tf.matmul(d_pre, kernel_t),), (d_pre,)

            (d_h0,), (d_pre,) = _loop(back, [d_hs, deriv], (tf.zeros_like(h0),), 1, True,
                                       jit_compile)
            return d_pre, d_h0, _flat_matmul_t(_shift(h0, hs), d_pre)

        return (hs, h_last), grad

    return run(xs, h0, kernel_rec)


def _lstm_gates(z, units, cifg):
    """``(i, f, g, o)`` from pre-activations ``z`` (last axis ``G·U``, gate order i, f, c, o;
    CIFG: f, c, o with ``i = 1 − f``)."""
    sig = tf.sigmoid(z)  # the candidate block's sigmoid is unused
    if cifg:
        f, _, o = tf.split(sig, 3, -1)
        return 1.0 - f, f, tf.tanh(z[..., units : 2 * units]), o
    i, f, _, o = tf.split(sig, 4, -1)
    return i, f, tf.tanh(z[..., 2 * units : 3 * units]), o


def _lstm_backward_factors(zs, cs, c0, units, cifg):
    """Every per-step factor of an LSTM's backward pass, for the whole sequence at once.

    Returns ``(f, o, tanh(c), d_c_from_out, factors)``, each ``(T, B, ·)``: the cell
    gradient gains ``d_out · d_c_from_out`` from the step's output ``o ⊙ tanh(c)``, and
    ``dz = [dc, …, dc, d_out] · factors`` (``G·U`` wide).
    """
    i, f, g, o = _lstm_gates(zs, units, cifg)
    tc, cp = tf.tanh(cs), _shift(c0, cs)
    d_c_from_out = o * (1.0 - tc * tc)
    d_o = tc * o * (1.0 - o)
    if cifg:  # c = f·c_prev + (1 - f)·g
        factors = [(cp - g) * f * (1.0 - f), (1.0 - f) * (1.0 - g * g), d_o]
    else:
        factors = [g * i * (1.0 - i), cp * f * (1.0 - f), i * (1.0 - g * g), d_o]
    return f, o, tc, d_c_from_out, tf.concat(factors, -1)


def lstm_sequence(xs, h0, c0, kernel_rec, cifg=False, jit_compile=False):
    """LSTM (tanh / sigmoid) over time; returns ``(hs, h_T, c_T)``.

    The forward loop keeps only ``h``, ``c`` and the pre-activations ``z``; the
    gate values and every per-step factor of the backward pass are recomputed
    afterwards in a few whole-sequence elementwise ops, so each backward step is
    ~6 small ops plus one ``dz @ Uᵀ``.
    """
    units = h0.shape[-1]
    n = 3 if cifg else 4

    def step(carry, elems):
        h, c = carry
        z = elems[0] + tf.matmul(h, kernel_rec)  # (B, G·U)
        i, f, g, o = _lstm_gates(z, units, cifg)  # 4 × (B, U)
        c = f * c + i * g  # (B, U)
        h = o * tf.tanh(c)  # (B, U)
        return (h, c), (h, c, z)

    @tf.custom_gradient
    def run(xs, h0, c0, kernel_rec):
        (h_last, c_last), (hs, cs, zs) = _loop(step, [xs], (h0, c0), 3,  # (T, B, ·)
                                                jit_compile=jit_compile)

        def grad(d_hs, d_hT, d_cT):
            d_hs = _with_final(d_hs, d_hT, hs)
            # Per-step factors for the whole sequence at once, (T, B, ·).
            f, _, _, d_c_from_h, factors = _lstm_backward_factors(zs, cs, c0, units, cifg)
            kernel_t = tf.transpose(kernel_rec)  # (G·U, U)

            def back(carry, elems):
                d_h_next, d_cf = carry
                d_out, d_c_from_h, fac, f_t = elems
                d_h = d_out + d_h_next
                d_c = d_cf + d_h * d_c_from_h
                d_z = tf.concat([d_c] * (n - 1) + [d_h], 1) * fac  # (B, G·U)
                return (tf.matmul(d_z, kernel_t), d_c * f_t), (d_z,)

            init = (tf.zeros_like(h0), _zeros_if_none(d_cT, c0))
            elems = [d_hs, d_c_from_h, factors, f]
            (d_h0, d_c0), (d_z,) = _loop(back, elems, init, 1, True, jit_compile)
            return d_z, d_h0, d_c0, _flat_matmul_t(_shift(h0, hs), d_z)

        return (hs, h_last, c_last), grad

    return run(xs, h0, c0, kernel_rec)


def gru_sequence(xs, h0, kernel_rec, rec_bias=None, reset_after=True,
                 jit_compile=False):
    """GRU (tanh / sigmoid) over time; returns ``(hs, h_T)``.

    ``rec_bias`` ``(3U,)`` is the recurrent bias row (``reset_after=True`` only). The
    forward loop stacks ``h`` and the gates ``z``, ``r``, ``hh`` with the recurrent
    candidate term; the backward loop carries ``d_h`` alone, every other factor computed
    for the whole sequence from what was stacked.
    """
    if not reset_after:
        return _gru_reset_before(xs, h0, kernel_rec, jit_compile)
    units = h0.shape[-1]
    if rec_bias is None:
        rec_bias = tf.zeros((3 * units,), xs.dtype)

    def gates(x, inner):
        """``z, r, hh`` from projected inputs and ``h @ U + b``; any leading dims."""
        zr = tf.sigmoid(x[..., : 2 * units] + inner[..., : 2 * units])
        z, r = zr[..., :units], zr[..., units:]
        return z, r, tf.tanh(x[..., 2 * units :] + r * inner[..., 2 * units :])

    def step(carry, elems):
        h = carry[0]
        inner = tf.matmul(h, kernel_rec) + rec_bias  # (B, 3U)
        z, r, hh = gates(elems[0], inner)
        h = hh + z * (h - hh)  # = z·h_prev + (1 - z)·hh
        # The gates stacked for the backward pass: under XLA this also splits the step's
        # one large elementwise fusion (slow on XLA:CPU) into small ones: 1.07x -> 1.33x.
        return (h,), (h, z, r, hh, inner[:, 2 * units :])

    @tf.custom_gradient
    def run(xs, h0, kernel_rec, rec_bias):
        (h_last,), (hs, z, r, hh, inner_h) = _loop(step, [xs], (h0,), 5,  # (T, B, U) each
                                                   jit_compile=jit_compile)

        def grad(d_hs, d_hT):
            d_hs = _with_final(d_hs, d_hT, hs)
            # Per-step factors for the whole sequence at once: with d_h the total
            # gradient of h_t, the pre-activations' gradients are d_x = [d_h]*3 · fac_x
            # and the recurrent term's d_inner = [d_h]*3 · fac_inner (z, r, hh blocks),
            # so the backward loop carries d_h alone and stacks only it.
            h_prev = _shift(h0, hs)  # (T, B, U)
            d_z = (h_prev - hh) * z * (1.0 - z)  # d_z_pre / d_h
            d_hh = (1.0 - z) * (1.0 - hh * hh)  # d_hh_pre / d_h
            d_r = d_hh * inner_h * r * (1.0 - r)  # d_r_pre / d_h
            fac_x = tf.concat([d_z, d_r, d_hh], 2)  # (T, B, 3U)
            fac_inner = tf.concat([d_z, d_r, d_hh * r], 2)  # (T, B, 3U)
            kernel_t = tf.transpose(kernel_rec)  # (3U, U)

            def back(carry, elems):
                d_out, fac, z_t = elems  # (B, U), (B, 3U), (B, U)
                d_h = d_out + carry[0]  # (B, U)
                d_inner = tf.tile(d_h, [1, 3]) * fac  # (B, 3U)
                return (d_h * z_t + tf.matmul(d_inner, kernel_t),), (d_h,)

            elems = [d_hs, fac_inner, z]
            (d_h0,), (d_h,) = _loop(back, elems, (tf.zeros_like(h0),), 1, True, jit_compile)
            d_h3 = tf.tile(d_h, [1, 1, 3])  # (T, B, 3U)
            d_inner = d_h3 * fac_inner  # (T, B, 3U)
            d_bias = tf.reduce_sum(d_inner, axis=[0, 1])  # (3U,)
            return d_h3 * fac_x, d_h0, _flat_matmul_t(h_prev, d_inner), d_bias

        return (hs, h_last), grad

    return run(xs, h0, kernel_rec, rec_bias)


def _gru_reset_before(xs, h0, kernel_rec, jit_compile):
    """GRU with the reset gate applied before the recurrent matmul (no recurrent bias)."""
    units = h0.shape[-1]
    k_zr, k_h = kernel_rec[:, : 2 * units], kernel_rec[:, 2 * units :]

    def step(carry, elems):
        h = carry[0]
        zr = tf.sigmoid(elems[0][:, : 2 * units] + tf.matmul(h, k_zr))
        z, r = zr[:, :units], zr[:, units:]
        hh = tf.tanh(elems[0][:, 2 * units :] + tf.matmul(r * h, k_h))
        h = hh + z * (h - hh)
        return (h,), (h, tf.concat([z, r, hh], 1))

    @tf.custom_gradient
    def run(xs, h0, kernel_rec):
        (h_last,), (hs, saved) = _loop(step, [xs], (h0,), 2, jit_compile=jit_compile)
        k_zr_t, k_h_t = tf.transpose(k_zr), tf.transpose(k_h)

        def grad(d_hs, d_hT):
            d_hs = _with_final(d_hs, d_hT, hs)
            h_prev = _shift(h0, hs)

            def back(carry, elems):
                d_out, hp, s = elems
                z, r, hh = tf.split(s, 3, 1)
                d_h = d_out + carry[0]
                d_z = d_h * (hp - hh) * z * (1.0 - z)
                d_hh = d_h * (1.0 - z) * (1.0 - hh * hh)
                d_rh = tf.matmul(d_hh, k_h_t)  # (B, U)
                d_r = d_rh * hp * r * (1.0 - r)
                d_zr = tf.concat([d_z, d_r], 1)
                d_hp = d_h * z + d_rh * r + tf.matmul(d_zr, k_zr_t)
                return (d_hp,), (tf.concat([d_zr, d_hh], 1),)

            elems = [d_hs, h_prev, saved]
            (d_h0,), (d_x,) = _loop(back, elems, (tf.zeros_like(h0),), 1, True, jit_compile)
            r = saved[:, :, units : 2 * units]
            d_kernel = tf.concat(
                [
                    _flat_matmul_t(h_prev, d_x[:, :, : 2 * units]),
                    _flat_matmul_t(r * h_prev, d_x[:, :, 2 * units :]),
                ],
                1,
            )
            return d_x, d_h0, d_kernel

        return (hs, h_last), grad

    return run(xs, h0, kernel_rec)


def lstmp_sequence(xs, h0, c0, kernel_rec, kernel_proj, cifg=False,
                   jit_compile=False):
    """LSTM with a projection layer (LSTMP; tanh / sigmoid) over time.

    ``h_t = (o_t ⊙ tanh(c_t)) @ P`` with ``P`` ``(U, P)``; ``h`` is ``(B, P)`` and
    ``kernel_rec`` ``(P, G·U)``. Returns ``(hs (T, B, P), h_T, c_T)``.

    As in :func:`lstm_sequence`, the forward loop keeps only ``h``, ``c`` and ``z``.
    The backward loop does the sequential part only: per step ``dh @ Pᵀ``, the
    elementwise gate factors and ``dz @ Rᵀ``; it stacks ``dz`` and the total
    ``dh``. The recurrent kernel's gradient (``Σ h_{t-1}ᵀ dz_t``) and the
    projection's (``Σ m_tᵀ dh_t``, ``m_t = o_t ⊙ tanh(c_t)`` recomputed for the
    whole sequence) are one matmul each after the loop.
    """
    units = c0.shape[-1]
    n = 3 if cifg else 4

    def step(carry, elems):
        h, c = carry  # (B, P), (B, U)
        z = elems[0] + tf.matmul(h, kernel_rec)  # (B, G·U)
        i, f, g, o = _lstm_gates(z, units, cifg)  # 4 × (B, U)
        c = f * c + i * g  # (B, U)
        h = tf.matmul(o * tf.tanh(c), kernel_proj)  # (B, U) @ (U, P) -> (B, P)
        return (h, c), (h, c, z)

    @tf.custom_gradient
    def run(xs, h0, c0, kernel_rec, kernel_proj):
        (h_last, c_last), (hs, cs, zs) = _loop(step, [xs], (h0, c0), 3,  # (T, B, ·)
                                                jit_compile=jit_compile)

        def grad(d_hs, d_hT, d_cT):
            d_hs = _with_final(d_hs, d_hT, hs)  # (T, B, P)
            # Per-step factors for the whole sequence at once, (T, B, ·).
            # m_t = o ⊙ tanh(c) is what the projection reads: dc += dm * d_c_from_m
            f, o, tc, d_c_from_m, factors = _lstm_backward_factors(zs, cs, c0, units, cifg)
            kernel_t = tf.transpose(kernel_rec)  # (G·U, P)
            proj_t = tf.transpose(kernel_proj)  # (P, U)

            def back(carry, elems):
                d_h_next, d_cf = carry  # (B, P), (B, U)
                d_out, d_c_from_m, fac, f_t = elems
                d_h = d_out + d_h_next  # (B, P): everything that reaches h_t
                d_m = tf.matmul(d_h, proj_t)  # (B, U)
                d_c = d_cf + d_m * d_c_from_m
                d_z = tf.concat([d_c] * (n - 1) + [d_m], 1) * fac  # (B, G·U)
                return (tf.matmul(d_z, kernel_t), d_c * f_t), (d_z, d_h)

            init = (tf.zeros_like(h0), _zeros_if_none(d_cT, c0))
            elems = [d_hs, d_c_from_m, factors, f]
            (d_h0, d_c0), (d_z, d_h) = _loop(back, elems, init, 2, True, jit_compile)
            d_rec = _flat_matmul_t(_shift(h0, hs), d_z)  # (P, G·U)
            d_proj = _flat_matmul_t(o * tc, d_h)  # (U, P)
            return d_z, d_h0, d_c0, d_rec, d_proj

        return (hs, h_last, c_last), grad

    return run(xs, h0, c0, kernel_rec, kernel_proj)
