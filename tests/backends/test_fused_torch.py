"""The PyTorch fused kernels (``_fused_torch.py``) against plain step loops under autograd.

Every kernel and variant must give the reference's outputs, final states and gradients
w.r.t. every tensor input, with a nonzero upstream gradient on the outputs and on each
final state; ``gradcheck`` checks the hand-written gradients in float64 too. The layers
must take the kernel on torch and equal Keras's own LSTM/GRU through a training step.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "torch":
    pytest.skip("the PyTorch fused kernels run under the torch backend only",
                allow_module_level=True)

import numpy as np  # noqa: E402

from keras_seq.layers import GRU, LSTM, _fused_torch  # noqa: E402

B, T, D, U, P = 3, 5, 4, 6, 2


# -- references: the cells' step math, differentiated by autograd ----------------------
def ref_simple_rnn(xs, h0, kernel_rec, relu=False):
    act = torch.relu if relu else torch.tanh
    hs, h = [], h0
    for x in xs:
        h = act(x + h @ kernel_rec)
        hs.append(h)
    return torch.stack(hs), h


def _ref_lstm_step(x, h, c, kernel_rec, cifg):
    z = x + h @ kernel_rec
    if cifg:
        z_f, z_c, z_o = z.chunk(3, -1)
        f = torch.sigmoid(z_f)
        i = 1.0 - f
    else:
        z_i, z_f, z_c, z_o = z.chunk(4, -1)
        i, f = torch.sigmoid(z_i), torch.sigmoid(z_f)
    c = f * c + i * torch.tanh(z_c)
    return torch.sigmoid(z_o) * torch.tanh(c), c


def ref_lstm(xs, h0, c0, kernel_rec, cifg=False):
    hs, h, c = [], h0, c0
    for x in xs:
        h, c = _ref_lstm_step(x, h, c, kernel_rec, cifg)
        hs.append(h)
    return torch.stack(hs), h, c


def ref_lstmp(xs, h0, c0, kernel_rec, kernel_proj, cifg=False):
    hs, h, c = [], h0, c0
    for x in xs:
        m, c = _ref_lstm_step(x, h, c, kernel_rec, cifg)
        h = m @ kernel_proj
        hs.append(h)
    return torch.stack(hs), h, c


def ref_gru(xs, h0, kernel_rec, rec_bias=None, reset_after=True):
    u = h0.shape[-1]
    hs, h = [], h0
    for x in xs:
        if reset_after:
            inner = h @ kernel_rec
            if rec_bias is not None:
                inner = inner + rec_bias
            zr = torch.sigmoid(x[:, : 2 * u] + inner[:, : 2 * u])
            z, r = zr[:, :u], zr[:, u:]
            hh = torch.tanh(x[:, 2 * u :] + r * inner[:, 2 * u :])
        else:
            zr = torch.sigmoid(x[:, : 2 * u] + h @ kernel_rec[:, : 2 * u])
            z, r = zr[:, :u], zr[:, u:]
            hh = torch.tanh(x[:, 2 * u :] + (r * h) @ kernel_rec[:, 2 * u :])
        h = z * h + (1.0 - z) * hh
        hs.append(h)
    return torch.stack(hs), h


# -- cases: (kernel, reference, inputs, flags) ------------------------------------------
def _inputs(gates, dtype, proj=False, rec_bias=False, cell=False):
    gen = torch.Generator().manual_seed(gates * 10 + proj + 2 * rec_bias + 4 * cell)

    def rand(*shape):
        return (0.5 * torch.randn(*shape, generator=gen)).to(dtype)

    h = P if proj else U
    tensors = [rand(T, B, gates * U), rand(B, h)]
    if cell:
        tensors.append(rand(B, U))
    tensors.append(rand(h, gates * U))
    if proj:
        tensors.append(rand(U, P))
    if rec_bias:
        tensors.append(rand(gates * U))
    return tensors


CASES = {
    "simple_rnn-tanh": ("simple_rnn_sequence", ref_simple_rnn, 1, {}, {}),
    "simple_rnn-relu": ("simple_rnn_sequence", ref_simple_rnn, 1, {}, {"relu": True}),
    "lstm": ("lstm_sequence", ref_lstm, 4, {"cell": True}, {}),
    "lstm-cifg": ("lstm_sequence", ref_lstm, 3, {"cell": True}, {"cifg": True}),
    "gru-reset-after-bias": ("gru_sequence", ref_gru, 3, {"rec_bias": True}, {}),
    "gru-reset-after-no-bias": ("gru_sequence", ref_gru, 3, {}, {}),
    "gru-reset-before": ("gru_sequence", ref_gru, 3, {}, {"reset_after": False}),
    "lstmp": ("lstmp_sequence", ref_lstmp, 4, {"cell": True, "proj": True}, {}),
    "lstmp-cifg": ("lstmp_sequence", ref_lstmp, 3, {"cell": True, "proj": True},
                   {"cifg": True}),
}


def _run_with_grads(fn, tensors, flags, upstream=None):
    """Outputs of ``fn`` and the gradients of ``sum(outputs · upstream)`` w.r.t. inputs."""
    leaves = [t.detach().clone().requires_grad_(True) for t in tensors]
    outs = fn(*leaves, **flags)
    if upstream is None:
        gen = torch.Generator().manual_seed(7)
        upstream = [torch.randn(o.shape, generator=gen).to(o.dtype) for o in outs]
    loss = sum((o * g).sum() for o, g in zip(outs, upstream))
    grads = torch.autograd.grad(loss, leaves)
    return [o.detach() for o in outs], grads, upstream


@pytest.mark.parametrize("case", CASES)
def test_kernel_equals_autograd_reference(case):
    name, ref, gates, shape_args, flags = CASES[case]
    tensors = _inputs(gates, torch.float32, **shape_args)
    outs, grads, upstream = _run_with_grads(getattr(_fused_torch, name), tensors, flags)
    ref_outs, ref_grads, _ = _run_with_grads(ref, tensors, flags, upstream)
    assert len(outs) == len(ref_outs) and len(grads) == len(tensors)
    for got, want in zip(outs + list(grads), ref_outs + list(ref_grads)):
        assert got.shape == want.shape and got.dtype == torch.float32
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_kernel_gradcheck_float64(case):
    name, _, gates, shape_args, flags = CASES[case]
    tensors = [t.requires_grad_(True) for t in _inputs(gates, torch.float64, **shape_args)]
    fn = getattr(_fused_torch, name)
    assert torch.autograd.gradcheck(lambda *args: fn(*args, **flags), tensors)


@pytest.mark.parametrize("case", ["lstm", "gru-reset-after-bias", "gru-reset-before"])
def test_kernel_takes_non_contiguous_and_partly_frozen_inputs(case):
    """Inputs as views (a transposed kernel, a strided sequence), and gradients asked
    for the sequence and the kernel only."""
    name, ref, gates, shape_args, flags = CASES[case]
    tensors = _inputs(gates, torch.float32, **shape_args)
    tensors[0] = tensors[0].transpose(0, 1).contiguous().transpose(0, 1)  # (T, B, G·U)
    kernel_index = 3 if shape_args.get("cell") else 2
    tensors[kernel_index] = tensors[kernel_index].t().contiguous().t()
    xs = tensors[0].detach().clone().requires_grad_(True)
    kernel = tensors[kernel_index].detach().clone().requires_grad_(True)
    args = [xs, *tensors[1:kernel_index], kernel, *tensors[kernel_index + 1 :]]
    got = getattr(_fused_torch, name)(*args, **flags)
    want = ref(*args, **flags)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    grads = torch.autograd.grad(sum(o.sum() for o in got), [xs, kernel])
    ref_grads = torch.autograd.grad(sum(o.sum() for o in want), [xs, kernel])
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", ["lstm", "gru-reset-after-bias", "lstmp"])
def test_kernel_computes_in_bfloat16_with_float32_weights(case):
    """Mixed precision: bfloat16 inputs, float32 states and weights; the result is
    bfloat16, every gradient comes back in its input's dtype."""
    name, ref, gates, shape_args, flags = CASES[case]
    tensors = _inputs(gates, torch.float32, **shape_args)
    leaves = [tensors[0].to(torch.bfloat16)] + tensors[1:]
    outs, grads, upstream = _run_with_grads(getattr(_fused_torch, name), leaves, flags)
    ref_outs, ref_grads, _ = _run_with_grads(ref, tensors, flags, upstream)
    for got, want in zip(outs, ref_outs):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want, atol=5e-2, rtol=5e-2)
    for leaf, got, want in zip(leaves, grads, ref_grads):
        assert got.dtype == leaf.dtype
        torch.testing.assert_close(got.float(), want, atol=1e-1, rtol=1e-1)


# -- the layers -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_layers_take_the_kernel_and_equal_keras(kind, go_backwards):
    ours_cls, keras_cls = {"lstm": (LSTM, keras.layers.LSTM), "gru": (GRU, keras.layers.GRU)}[kind]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    y = rng.normal(size=(B, T, 2)).astype("float32")
    models = []
    for cls in (ours_cls, keras_cls):
        layer = cls(U, return_sequences=True, go_backwards=go_backwards, use_cudnn=False)
        model = keras.Sequential([keras.Input((T, D)), layer, keras.layers.Dense(2)])
        model.compile(keras.optimizers.SGD(0.5), "mse")
        models.append(model)
    models[1].set_weights(models[0].get_weights())
    np.testing.assert_allclose(models[0].predict_on_batch(x), models[1].predict_on_batch(x),
                               atol=1e-5)
    assert models[0].layers[0].last_path == "fused-loop"
    for model in models:
        model.train_on_batch(x, y)
    assert models[0].layers[0].last_path == "fused-loop"
    for a, b in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)
