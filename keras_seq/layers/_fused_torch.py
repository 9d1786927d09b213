"""Fused sequence kernels with hand-written gradients (PyTorch backend).

The same four functions and contract as ``_fused.py`` (TensorFlow), whose docstrings
derive the gradients: time-major projected inputs ``xs`` ``(T, B, G·U)``, the initial
states and the recurrent weights in; time-major outputs ``(T, B, U)`` and the final
states out. Each is a ``torch.autograd.Function``:

- forward: a Python loop over time of a few torch ops per step (``addmm`` for the
  recurrent matmul, activations on the packed gates, results written with ``out=`` into
  preallocated ``(T, ...)`` buffers), keeping the gate activations it computed anyway;
- backward: every per-step factor for the whole sequence in a few elementwise ops, then a
  backward loop of only the sequential part (``dz @ Rᵀ`` and two to five elementwise
  ops writing ``dz`` into a ``(T, B, G·U)`` buffer); the recurrent kernel's gradient is
  one ``(U, T·B) @ (T·B, G·U)`` matmul after the loop.

Everything computes in ``xs``'s dtype (bfloat16 under mixed precision); the other
tensors are cast to it before the Function, so their gradients come back in their own.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


def _prev(h0, hs):
    """``[h0, h_1, ..., h_{T-1}]``: the previous state at every step, ``(T, B, U)``."""
    return torch.cat([h0[None], hs[:-1]])


def _flat_matmul_t(a, b):
    """``sum_t a[t]ᵀ @ b[t]`` as one matmul: ``(T, B, M), (T, B, N) -> (M, N)``.

    Computed as ``(bᵀ a)ᵀ`` when ``M < N``: ~1.2x faster here for ``M=256, N=1024``
    (as in ``_fused.py``).
    """
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])  # (T·B, M), (T·B, N)
    if a2.shape[1] < b2.shape[1]:
        return torch.mm(b2.t(), a2).t()  # (M, N)
    return torch.mm(a2.t(), b2)  # (M, N)


def _addmm_t(acc, d, kernel):
    """``acc + d @ kernelᵀ`` ``(B, P)`` for ``d`` ``(B, G·U)``, ``kernel`` ``(P, G·U)``.

    Computed as ``(accᵀ + kernel @ dᵀ)ᵀ`` (a column-major result): MKL runs that ~1.25x
    faster here for an LSTM's ``G·U = 1024, U = 256, B = 32``; for GRU- and
    SimpleRNN-sized kernels it is as fast or slower, so only the LSTMs use it.
    """
    return torch.addmm(acc.t(), kernel, d.t()).t()


def _tanh(x, out):
    """``tanh(x)`` into ``out`` (which may be ``x``), as ``2·σ(2x) − 1`` in float32/64.

    PyTorch runs ``tanh`` on a step's few thousand elements on every thread (``sigmoid``
    on one): as fast on a quiet machine, but a stall when another process holds a core,
    twice per LSTM step. bfloat16/float16 keep ``tanh``: ``2·σ − 1`` would lose their few
    bits near 0.
    """
    if x.dtype in (torch.bfloat16, torch.float16):
        return torch.tanh(x, out=out)
    return torch.mul(x, 2.0, out=out).sigmoid_().mul_(2.0).sub_(1.0)


def _lstm_gates(acts, units, cifg):
    """``(i, f, g, o)`` from the saved activations ``acts`` ``(..., G·U)`` (gate order i, f,
    c, o; CIFG: f, c, o with ``i = 1 − f``)."""
    if cifg:
        f, g, o = acts.split(units, -1)  # 3 × (..., U)
        return 1.0 - f, f, g, o
    return acts.split(units, -1)  # 4 × (..., U)


def _lstm_forward(xs, h0, c0, kernel_rec, cifg, kernel_proj=None):
    """The LSTM (or LSTMP) forward loop.

    Returns ``hs (T, B, P or U)``, the activations ``acts (T, B, G·U)`` (sigmoid gates,
    tanh candidate), ``cs``, ``tanh(cs)`` and, for LSTMP, ``ms = o ⊙ tanh(c)``, each
    ``(T, B, U)``.
    """
    steps, batch, width = xs.shape
    units = c0.shape[-1]
    cand = slice(units, 2 * units) if cifg else slice(2 * units, 3 * units)  # tanh block
    acts = xs.new_empty((steps, batch, width))  # (T, B, G·U)
    cs, tcs = xs.new_empty((2, steps, batch, units))  # 2 × (T, B, U)
    ms = None if kernel_proj is None else torch.empty_like(cs)  # (T, B, U)
    hs = xs.new_empty((steps, batch, h0.shape[-1]))  # (T, B, P or U)
    z = xs.new_empty((batch, width))  # (B, G·U) scratch
    z_cand = z[:, cand]  # (B, U)
    # Per-step views, made once: indexing inside the loop costs as much as a small op.
    blocks = [b.unbind() for b in acts.split(units, -1)]  # G lists of T × (B, U)
    if cifg:
        blocks.insert(0, [None] * steps)  # i = 1 − f: not needed here
    i_s, f_s, g_s, o_s = blocks
    ms_or_hs = hs if ms is None else ms  # (T, B, U)
    per_step = zip(xs.unbind(), acts.unbind(), i_s, f_s, g_s, o_s, cs.unbind(), tcs.unbind(),
                   ms_or_hs.unbind(), hs.unbind())
    h, c = h0, c0
    for x_t, a_t, i_t, f_t, g_t, o_t, c_t, tc_t, m_t, h_t in per_step:  # (B, ·) each
        torch.addmm(x_t, h, kernel_rec, out=z)  # (B, G·U)
        torch.sigmoid(z, out=a_t)  # (B, G·U); the candidate block is overwritten next
        _tanh(z_cand, out=g_t)  # (B, U)
        if cifg:  # c = f·c + (1 − f)·g = g + f·(c − g)
            c = torch.addcmul(g_t, f_t, c - g_t, out=c_t)  # (B, U)
        else:
            c = torch.mul(f_t, c, out=c_t).addcmul_(i_t, g_t)  # (B, U)
        h = torch.mul(o_t, _tanh(c, out=tc_t), out=m_t)  # (B, U)
        if kernel_proj is not None:
            h = torch.mm(h, kernel_proj, out=h_t)  # (B, U) @ (U, P) -> (B, P)
    return hs, acts, cs, tcs, ms


def _lstm_factors(acts, cs, tcs, ms, c0, cifg):
    """Per-step backward factors of an LSTM for the whole sequence, ``(T, B, ·)``.

    ``ms = o ⊙ tanh(c)`` (the LSTM's outputs). Returns ``(f, d_c_from_out, fac_c, fac_o)``:
    the cell gradient gains ``d_out · d_c_from_out`` from the step's output, and
    ``dz = [dc·fac_c[:, :, 0], …, d_out·fac_o]`` with ``fac_c`` ``(T, B, G−1, U)``. Each
    ``x·(1 − y)`` is one ``addcmul(x, x, y, value=-1)``: every op here is one pass over
    the sequence.
    """
    steps, batch, units = cs.shape
    i, f, g, o = _lstm_gates(acts, units, cifg)  # 4 × (T, B, U)
    d_c_from_out = torch.addcmul(o, ms, tcs, value=-1.0)  # (T, B, U): o·(1 − tanh²c)
    fac_o = torch.addcmul(ms, ms, o, value=-1.0)  # (T, B, U): tanh(c)·o·(1 − o)
    fac_c = cs.new_empty((steps, batch, 2 if cifg else 3, units))  # (T, B, G−1, U)
    fac_i, fac_f, fac_g = [None, *fac_c.unbind(2)] if cifg else fac_c.unbind(2)
    i_g = i * g  # (T, B, U)
    if not cifg:
        torch.addcmul(i_g, i_g, i, value=-1.0, out=fac_i)  # g·i·(1 − i)
    d_f = _prev(c0, cs) - g if cifg else _prev(c0, cs)  # (T, B, U): ∂c/∂f
    torch.mul(d_f, torch.addcmul(f, f, f, value=-1.0), out=fac_f)  # d_f·f·(1 − f)
    torch.addcmul(i, i_g, g, value=-1.0, out=fac_g)  # i·(1 − g²)
    return f, d_c_from_out, fac_c, fac_o


def _lstm_backward(d_hs, d_hT, d_cT, factors, kernel_rec, kernel_proj=None):
    """The LSTM (or LSTMP) backward loop over ``d_hs`` ``(T, B, P or U)``.

    Returns ``d_z (T, B, G·U)``, the total ``d_h`` reaching every output (LSTMP only,
    else None) and ``d_c0``.
    """
    f, d_c_from_out, fac_c, fac_o = factors
    steps, batch, cell_gates, units = fac_c.shape
    d_z = d_hs.new_empty((steps, batch, (cell_gates + 1) * units))  # (T, B, G·U)
    d_z_gates = d_z.view(steps, batch, cell_gates + 1, units)  # (T, B, G, U)
    d_hs_total = None if kernel_proj is None else torch.empty_like(d_hs)  # (T, B, P)
    proj_t = None if kernel_proj is None else kernel_proj.t()  # (P, U)
    # Per-step views, made once: indexing inside the loop costs as much as a small op.
    per_step = zip(d_hs.unbind(), d_c_from_out.unbind(), fac_c.unbind(), fac_o.unbind(),
                   f.unbind(), d_z_gates[:, :, :-1].unbind(), d_z_gates[:, :, -1].unbind(),
                   d_z.unbind(), [None] * steps if d_hs_total is None else d_hs_total.unbind())
    d_c_carry = d_cT  # (B, U): d_c_{t+1} · f_{t+1}
    d_z_next = None  # (B, G·U)
    for d_out, d_c_from_out_t, fac_c_t, fac_o_t, f_t, d_zc_t, d_zo_t, d_z_t, total_t in reversed(
            list(per_step)):  # (B, ·) each
        if d_z_next is None:
            d_h = d_out + d_hT  # (B, P or U)
        else:
            d_h = _addmm_t(d_out, d_z_next, kernel_rec)  # (B, P or U)
        if kernel_proj is not None:
            total_t.copy_(d_h)  # (B, P)
            d_h = torch.mm(d_h, proj_t)  # (B, U): the gradient of m_t
        d_c = torch.addcmul(d_c_carry, d_h, d_c_from_out_t)  # (B, U)
        torch.mul(fac_c_t, d_c[:, None], out=d_zc_t)  # (B, G−1, U)
        torch.mul(fac_o_t, d_h, out=d_zo_t)  # (B, U)
        d_c_carry, d_z_next = d_c * f_t, d_z_t  # (B, U), (B, G·U)
    return d_z, d_hs_total, d_c_carry


class _SimpleRNN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xs, h0, kernel_rec, relu):
        act_ = torch.relu_ if relu else (lambda pre: _tanh(pre, out=pre))
        hs = torch.empty_like(xs, memory_format=torch.contiguous_format)  # (T, B, U)
        h = h0
        for x_t, h_t in zip(xs.unbind(), hs.unbind()):  # (B, U) each
            h = act_(torch.addmm(x_t, h, kernel_rec, out=h_t))  # (B, U)
        ctx.relu = relu
        ctx.save_for_backward(h0, kernel_rec, hs)
        return hs, h.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_hs, d_hT):
        h0, kernel_rec, hs = ctx.saved_tensors
        deriv = (hs > 0).to(hs.dtype) if ctx.relu else 1.0 - hs * hs  # (T, B, U)
        d_pre = torch.empty_like(hs)  # (T, B, U)
        kernel_t = kernel_rec.t()  # (U, U)
        # step t gets d_hs[t] + d_pre[t + 1] @ Uᵀ; the last one d_hs[-1] + d_hT
        d_pres = d_pre.unbind()  # T × (B, U)
        per_step = zip(d_hs.unbind(), deriv.unbind(), d_pres, [*d_pres[1:], None])
        for d_out, deriv_t, d_pre_t, d_pre_next in reversed(list(per_step)):  # (B, U) each
            if d_pre_next is None:
                d_h = d_out + d_hT  # (B, U)
            else:
                d_h = torch.addmm(d_out, d_pre_next, kernel_t)  # (B, U)
            torch.mul(d_h, deriv_t, out=d_pre_t)  # (B, U)
        need_xs, need_h0, need_rec, _ = ctx.needs_input_grad
        d_h0 = torch.mm(d_pre[0], kernel_t) if need_h0 else None  # (B, U)
        d_rec = _flat_matmul_t(_prev(h0, hs), d_pre) if need_rec else None  # (U, U)
        return d_pre if need_xs else None, d_h0, d_rec, None


class _LSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xs, h0, c0, kernel_rec, cifg):
        hs, acts, cs, tcs, _ = _lstm_forward(xs, h0, c0, kernel_rec, cifg)  # (T, B, ·)
        ctx.cifg = cifg
        ctx.save_for_backward(h0, c0, kernel_rec, hs, acts, cs, tcs)
        return hs, hs[-1].clone(), cs[-1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_hs, d_hT, d_cT):
        h0, c0, kernel_rec, hs, acts, cs, tcs = ctx.saved_tensors
        factors = _lstm_factors(acts, cs, tcs, hs, c0, ctx.cifg)
        d_z, _, d_c0 = _lstm_backward(d_hs, d_hT, d_cT, factors, kernel_rec)  # (T, B, G·U)
        need_xs, need_h0, need_c0, need_rec, _ = ctx.needs_input_grad
        d_h0 = torch.mm(d_z[0], kernel_rec.t()) if need_h0 else None  # (B, U)
        d_rec = _flat_matmul_t(_prev(h0, hs), d_z) if need_rec else None  # (U, G·U)
        return d_z if need_xs else None, d_h0, d_c0 if need_c0 else None, d_rec, None


class _LSTMP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xs, h0, c0, kernel_rec, kernel_proj, cifg):
        hs, acts, cs, tcs, ms = _lstm_forward(xs, h0, c0, kernel_rec, cifg, kernel_proj)
        ctx.cifg = cifg
        ctx.save_for_backward(h0, c0, kernel_rec, kernel_proj, hs, acts, cs, tcs, ms)
        return hs, hs[-1].clone(), cs[-1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_hs, d_hT, d_cT):
        h0, c0, kernel_rec, kernel_proj, hs, acts, cs, tcs, ms = ctx.saved_tensors
        factors = _lstm_factors(acts, cs, tcs, ms, c0, ctx.cifg)
        d_z, d_h, d_c0 = _lstm_backward(d_hs, d_hT, d_cT, factors, kernel_rec, kernel_proj)
        need_xs, need_h0, need_c0, need_rec, need_proj, _ = ctx.needs_input_grad
        d_h0 = torch.mm(d_z[0], kernel_rec.t()) if need_h0 else None  # (B, P)
        d_rec = _flat_matmul_t(_prev(h0, hs), d_z) if need_rec else None  # (P, G·U)
        d_proj = _flat_matmul_t(ms, d_h) if need_proj else None  # (U, P)
        return (d_z if need_xs else None, d_h0, d_c0 if need_c0 else None, d_rec, d_proj,
                None)


def _gru_update_factors(h_prev, z, hh, out):
    """For ``h = z·h_prev + (1 − z)·hh``: writes ``∂h/∂z_pre = (h_prev − hh)·z·(1 − z)`` and
    ``∂h/∂hh_pre = (1 − z)·(1 − hh²)`` into ``out``'s two ``(T, B, U)`` tensors."""
    fac_z, fac_hh = out
    torch.mul(h_prev - hh, torch.addcmul(z, z, z, value=-1.0), out=fac_z)  # (T, B, U)
    keep = 1.0 - z  # (T, B, U)
    torch.addcmul(keep, keep * hh, hh, value=-1.0, out=fac_hh)  # (T, B, U)


class _GRU(torch.autograd.Function):
    """Reset gate after the recurrent matmul, with a recurrent bias."""

    @staticmethod
    def forward(ctx, xs, h0, kernel_rec, rec_bias):
        steps, batch, width = xs.shape
        units = width // 3
        # [x_zr + b_zr, b_h] per step, so the matmul gives [zr_pre, h @ U_h + b_h] at once.
        xb = torch.cat([xs[..., : 2 * units] + rec_bias[: 2 * units],
                        rec_bias[2 * units :].expand(steps, batch, units)], -1)  # (T, B, 3U)
        pre = torch.empty_like(xb)  # (T, B, 3U)
        acts = torch.empty_like(xb)  # (T, B, 3U): z, r, hh
        hs = xs.new_empty((steps, batch, units))  # (T, B, U)
        # Per-step views, made once: indexing inside the loop costs as much as a small op.
        z, r, hh = (b.unbind() for b in acts.split(units, -1))  # 3 × T × (B, U)
        per_step = zip(xb.unbind(), xs[..., 2 * units :].unbind(), pre.unbind(),
                       pre[..., : 2 * units].unbind(), pre[..., 2 * units :].unbind(),
                       acts[..., : 2 * units].unbind(), z, r, hh, hs.unbind())
        h = h0
        for xb_t, x_h, pre_t, pre_zr, inner_h, zr_t, z_t, r_t, hh_t, h_t in per_step:
            torch.addmm(xb_t, h, kernel_rec, out=pre_t)  # (B, 3U)
            torch.sigmoid(pre_zr, out=zr_t)  # (B, 2U)
            _tanh(torch.addcmul(x_h, r_t, inner_h, out=hh_t), out=hh_t)  # (B, U)
            h = torch.addcmul(hh_t, z_t, h - hh_t, out=h_t)  # (B, U)
        ctx.save_for_backward(h0, kernel_rec, hs, pre, acts)
        return hs, h.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_hs, d_hT):
        h0, kernel_rec, hs, pre, acts = ctx.saved_tensors
        steps, batch, units = hs.shape
        z, r, hh = acts.split(units, -1)  # 3 × (T, B, U)
        h_prev = _prev(h0, hs)  # (T, B, U)
        # d_inner = [d_z_pre, d_r_pre, d_hh_pre · r] = d_h · factors
        factors = hs.new_empty((steps, batch, 3, units))  # (T, B, 3, U)
        fac_z, fac_r, fac_rh = factors.unbind(2)  # 3 × (T, B, U)
        fac_hh = torch.empty_like(hs)  # (T, B, U): d_hh_pre = d_h · fac_hh
        _gru_update_factors(h_prev, z, hh, out=(fac_z, fac_hh))
        torch.mul(fac_hh, r, out=fac_rh)  # (T, B, U)
        rh_inner = fac_rh * pre[..., 2 * units :]  # (T, B, U)
        torch.addcmul(rh_inner, rh_inner, r, value=-1.0, out=fac_r)  # fac_hh·inner_h·r(1 − r)
        d_inner = hs.new_empty((steps, batch, 3 * units))  # (T, B, 3U)
        d_h = torch.empty_like(hs)  # (T, B, U): everything that reaches h_t
        kernel_t = kernel_rec.t()  # (3U, U)
        per_step = zip(d_hs.unbind(), z.unbind(), factors.unbind(), d_h.unbind(),
                       d_h[:, :, None].unbind(), d_inner.unbind(),
                       d_inner.view(steps, batch, 3, units).unbind())
        d_h_next = z_next = d_inner_next = None  # (B, U), (B, U), (B, 3U)
        for d_out, z_t, fac_t, d_h_t, d_h_col, d_inner_t, d_inner_gates in reversed(
                list(per_step)):  # (B, ·) each
            if d_h_next is None:
                torch.add(d_out, d_hT, out=d_h_t)  # (B, U)
            else:
                d_direct = torch.addcmul(d_out, d_h_next, z_next)  # (B, U)
                torch.addmm(d_direct, d_inner_next, kernel_t, out=d_h_t)  # (B, U)
            torch.mul(fac_t, d_h_col, out=d_inner_gates)  # (B, 3, U)
            d_h_next, z_next, d_inner_next = d_h_t, z_t, d_inner_t
        need_xs, need_h0, need_rec, need_bias = ctx.needs_input_grad
        d_xs = None
        if need_xs:
            d_xs = torch.cat([d_inner[..., : 2 * units], d_h * fac_hh], -1)  # (T, B, 3U)
        d_h0 = None
        if need_h0:
            d_h0 = torch.addmm(d_h[0] * z[0], d_inner[0], kernel_t)  # (B, U)
        d_rec = _flat_matmul_t(h_prev, d_inner) if need_rec else None  # (U, 3U)
        d_bias = d_inner.sum((0, 1)) if need_bias else None  # (3U,)
        return d_xs, d_h0, d_rec, d_bias


class _GRUResetBefore(torch.autograd.Function):
    """Reset gate applied before the recurrent matmul (no recurrent bias)."""

    @staticmethod
    def forward(ctx, xs, h0, kernel_rec):
        steps, batch, width = xs.shape
        units = width // 3
        k_zr, k_h = kernel_rec[:, : 2 * units], kernel_rec[:, 2 * units :]  # (U, 2U), (U, U)
        acts = torch.empty_like(xs, memory_format=torch.contiguous_format)  # (T, B, 3U)
        rhs = xs.new_empty((steps, batch, units))  # (T, B, U): r ⊙ h_prev
        hs = torch.empty_like(rhs)  # (T, B, U)
        # Per-step views, made once: indexing inside the loop costs as much as a small op.
        z, r, hh = (b.unbind() for b in acts.split(units, -1))  # 3 × T × (B, U)
        per_step = zip(xs[..., : 2 * units].unbind(), xs[..., 2 * units :].unbind(),
                       acts[..., : 2 * units].unbind(), z, r, hh, rhs.unbind(), hs.unbind())
        h = h0
        for x_zr, x_h, zr_t, z_t, r_t, hh_t, rh_t, h_t in per_step:  # (B, ·) each
            torch.addmm(x_zr, h, k_zr, out=zr_t).sigmoid_()  # (B, 2U)
            torch.mul(r_t, h, out=rh_t)  # (B, U)
            _tanh(torch.addmm(x_h, rh_t, k_h, out=hh_t), out=hh_t)  # (B, U)
            h = torch.addcmul(hh_t, z_t, h - hh_t, out=h_t)  # (B, U)
        ctx.save_for_backward(h0, kernel_rec, hs, acts, rhs)
        return hs, h.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_hs, d_hT):
        h0, kernel_rec, hs, acts, rhs = ctx.saved_tensors
        steps, batch, units = hs.shape
        k_zr_t, k_h_t = kernel_rec[:, : 2 * units].t(), kernel_rec[:, 2 * units :].t()
        z, r, hh = acts.split(units, -1)  # 3 × (T, B, U)
        h_prev = _prev(h0, hs)  # (T, B, U)
        # [d_z_pre, ·, d_hh_pre] = d_h · [fac_z, ·, fac_hh]; d_r_pre = (d_hh_pre @ U_hᵀ) · fac_r
        factors = hs.new_empty((steps, batch, 2, units))  # (T, B, 2, U)
        _gru_update_factors(h_prev, z, hh, out=factors.unbind(2))
        fac_r = torch.addcmul(rhs, rhs, r, value=-1.0)  # (T, B, U): h_prev·r·(1 − r)
        d_x = torch.empty_like(acts)  # (T, B, 3U): d_z_pre, d_r_pre, d_hh_pre
        d_outs = d_hs.unbind()  # T × (B, U)
        per_step = zip([None, *d_outs[:-1]], factors.unbind(), fac_r.unbind(), z.unbind(),
                       r.unbind(), d_x.view(steps, batch, 3, units)[:, :, ::2].unbind(),
                       d_x[..., : 2 * units].unbind(), d_x[..., units : 2 * units].unbind(),
                       d_x[..., 2 * units :].unbind())
        d_h = d_outs[-1] + d_hT  # (B, U)
        for d_out_prev, fac_t, fac_r_t, z_t, r_t, d_zh, d_zr, d_r, d_hh in reversed(
                list(per_step)):  # (B, ·) each
            torch.mul(fac_t, d_h[:, None], out=d_zh)  # (B, 2, U): d_z_pre, d_hh_pre
            d_rh = torch.mm(d_hh, k_h_t)  # (B, U)
            torch.mul(d_rh, fac_r_t, out=d_r)  # (B, U)
            if d_out_prev is None:
                d_direct = d_h * z_t  # (B, U)
            else:
                d_direct = torch.addcmul(d_out_prev, d_h, z_t)  # (B, U)
            d_direct.addcmul_(d_rh, r_t)  # (B, U)
            d_h = torch.addmm(d_direct, d_zr, k_zr_t)  # (B, U)
        need_xs, need_h0, need_rec = ctx.needs_input_grad
        d_rec = None
        if need_rec:
            d_rec = torch.cat([_flat_matmul_t(h_prev, d_x[..., : 2 * units]),
                               _flat_matmul_t(rhs, d_x[..., 2 * units :])], 1)  # (U, 3U)
        return d_x if need_xs else None, d_h if need_h0 else None, d_rec


def simple_rnn_sequence(xs, h0, kernel_rec, relu=False):
    """SimpleRNN over time: ``h_t = act(xs_t + h_{t-1} @ U)``; returns ``(hs, h_T)``."""
    return _SimpleRNN.apply(xs, h0.to(xs.dtype), kernel_rec.to(xs.dtype), bool(relu))


def lstm_sequence(xs, h0, c0, kernel_rec, cifg=False):
    """LSTM (tanh / sigmoid) over time; returns ``(hs, h_T, c_T)``."""
    dtype = xs.dtype
    return _LSTM.apply(xs, h0.to(dtype), c0.to(dtype), kernel_rec.to(dtype), bool(cifg))


def gru_sequence(xs, h0, kernel_rec, rec_bias=None, reset_after=True):
    """GRU (tanh / sigmoid) over time; returns ``(hs, h_T)``.

    ``rec_bias`` ``(3U,)`` is the recurrent bias row (``reset_after=True`` only; None
    means zeros).
    """
    dtype = xs.dtype
    if not reset_after:
        return _GRUResetBefore.apply(xs, h0.to(dtype), kernel_rec.to(dtype))
    if rec_bias is None:
        rec_bias = xs.new_zeros((xs.shape[-1],))  # (3U,)
    return _GRU.apply(xs, h0.to(dtype), kernel_rec.to(dtype), rec_bias.to(dtype))


def lstmp_sequence(xs, h0, c0, kernel_rec, kernel_proj, cifg=False):
    """LSTM with a projection layer (LSTMP): ``h_t = (o_t ⊙ tanh(c_t)) @ P``.

    ``h`` is ``(B, P)``, ``kernel_rec`` ``(P, G·U)``, ``kernel_proj`` ``(U, P)``. Returns
    ``(hs (T, B, P), h_T, c_T)``.
    """
    dtype = xs.dtype
    return _LSTMP.apply(xs, h0.to(dtype), c0.to(dtype), kernel_rec.to(dtype),
                        kernel_proj.to(dtype), bool(cifg))
