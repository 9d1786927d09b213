"""The JAX fused kernels (``_fused_jax.py``) against autodiff of the same step math.

Each kernel's outputs, final states and gradients with respect to every input (a
nonzero cotangent on the outputs and on every final state) must equal those of a plain
``lax.scan`` of the step, differentiated by ``jax.vjp``; and keras-seq's LSTM and GRU
must take the fused path on JAX and train exactly as Keras's own layers.
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

if keras.backend.backend() != "jax":
    pytest.skip("the JAX fused kernels run on the JAX backend only", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402

from keras_seq.layers import GRU, LSTM, _fused_jax  # noqa: E402

B, T, D, U, P = 3, 5, 4, 6, 4
TOL = 1e-5


def _rand(rng, *shape, scale=0.5):
    return jnp.asarray(rng.normal(scale=scale, size=shape).astype("float32"))


def _check(fused, reference, args, seed):
    """Outputs and the vjp of every input of ``fused(*args)`` equal ``reference``'s."""
    out, vjp = jax.vjp(fused, *args)
    ref_out, ref_vjp = jax.vjp(reference, *args)
    rng = np.random.default_rng(seed)
    cotangents = tuple(_rand(rng, *o.shape, scale=1.0) for o in ref_out)
    for got, want in zip(out, ref_out):
        np.testing.assert_allclose(got, want, atol=TOL, rtol=TOL)
    for got, want in zip(vjp(cotangents), ref_vjp(cotangents)):
        assert np.any(want != 0)
        np.testing.assert_allclose(got, want, atol=TOL, rtol=TOL)


def _ref_scan(step, carry, xs):
    """Plain ``lax.scan`` whose stacked outputs are the first carry: ``(hs, *final)``."""
    def body(c, x):
        c = step(c, x)
        return c, c[0]

    final, hs = jax.lax.scan(body, carry, xs)
    return (hs, *final)


def _ref_lstm_step(kernel_rec, kernel_proj, cifg):
    def step(carry, x):
        h, c = carry
        z = x + h @ kernel_rec
        if cifg:
            z_f, z_c, z_o = jnp.split(z, 3, axis=-1)
            f = jax.nn.sigmoid(z_f)
            i = 1.0 - f
        else:
            z_i, z_f, z_c, z_o = jnp.split(z, 4, axis=-1)
            i, f = jax.nn.sigmoid(z_i), jax.nn.sigmoid(z_f)
        c = f * c + i * jnp.tanh(z_c)
        h = jax.nn.sigmoid(z_o) * jnp.tanh(c)
        return (h if kernel_proj is None else h @ kernel_proj, c)

    return step


def _ref_gru_step(kernel_rec, rec_bias, reset_after):
    def step(carry, x):
        (h,) = carry
        x_z, x_r, x_h = jnp.split(x, 3, axis=-1)
        if reset_after:
            in_z, in_r, in_h = jnp.split(h @ kernel_rec + rec_bias, 3, axis=-1)
            z, r = jax.nn.sigmoid(x_z + in_z), jax.nn.sigmoid(x_r + in_r)
            hh = jnp.tanh(x_h + r * in_h)
        else:
            k_z, k_r, k_h = jnp.split(kernel_rec, 3, axis=-1)
            z, r = jax.nn.sigmoid(x_z + h @ k_z), jax.nn.sigmoid(x_r + h @ k_r)
            hh = jnp.tanh(x_h + (r * h) @ k_h)
        return (z * h + (1.0 - z) * hh,)

    return step


@pytest.mark.parametrize("relu", [False, True])
def test_simple_rnn_matches_autodiff(relu):
    rng = np.random.default_rng(1)
    args = (_rand(rng, T, B, U), _rand(rng, B, U), _rand(rng, U, U))

    def reference(xs, h0, kernel_rec):
        act = jax.nn.relu if relu else jnp.tanh
        return _ref_scan(lambda c, x: (act(x + c[0] @ kernel_rec),), (h0,), xs)

    def fused(*a):
        return _fused_jax.simple_rnn_sequence(*a, relu=relu)

    _check(fused, reference, args, seed=2)


@pytest.mark.parametrize("cifg", [False, True])
def test_lstm_matches_autodiff(cifg):
    rng = np.random.default_rng(3)
    g = 3 if cifg else 4
    args = (_rand(rng, T, B, g * U), _rand(rng, B, U), _rand(rng, B, U), _rand(rng, U, g * U))

    def reference(xs, h0, c0, kernel_rec):
        return _ref_scan(_ref_lstm_step(kernel_rec, None, cifg), (h0, c0), xs)

    def fused(*a):
        return _fused_jax.lstm_sequence(*a, cifg=cifg)

    _check(fused, reference, args, seed=4)


@pytest.mark.parametrize("cifg", [False, True])
def test_lstmp_matches_autodiff(cifg):
    rng = np.random.default_rng(5)
    g = 3 if cifg else 4
    args = (_rand(rng, T, B, g * U), _rand(rng, B, P), _rand(rng, B, U),
            _rand(rng, P, g * U), _rand(rng, U, P))

    def reference(xs, h0, c0, kernel_rec, kernel_proj):
        return _ref_scan(_ref_lstm_step(kernel_rec, kernel_proj, cifg), (h0, c0), xs)

    def fused(*a):
        return _fused_jax.lstmp_sequence(*a, cifg=cifg)

    _check(fused, reference, args, seed=6)


@pytest.mark.parametrize("with_bias", [True, False])
def test_gru_reset_after_matches_autodiff(with_bias):
    rng = np.random.default_rng(7)
    args = (_rand(rng, T, B, 3 * U), _rand(rng, B, U), _rand(rng, U, 3 * U))
    if with_bias:
        args += (_rand(rng, 3 * U),)

    def reference(xs, h0, kernel_rec, rec_bias=0.0):
        return _ref_scan(_ref_gru_step(kernel_rec, rec_bias, True), (h0,), xs)

    _check(_fused_jax.gru_sequence, reference, args, seed=8)


def test_gru_reset_before_matches_autodiff():
    rng = np.random.default_rng(9)
    args = (_rand(rng, T, B, 3 * U), _rand(rng, B, U), _rand(rng, U, 3 * U))

    def reference(xs, h0, kernel_rec):
        return _ref_scan(_ref_gru_step(kernel_rec, None, False), (h0,), xs)

    def fused(*a):
        return _fused_jax.gru_sequence(*a, reset_after=False)

    _check(fused, reference, args, seed=10)


def test_gru_reset_before_refuses_a_recurrent_bias():
    rng = np.random.default_rng(11)
    with pytest.raises(ValueError, match="rec_bias"):
        _fused_jax.gru_sequence(_rand(rng, T, B, 3 * U), _rand(rng, B, U),
                                _rand(rng, U, 3 * U), _rand(rng, 3 * U), reset_after=False)


def test_mixed_precision_computes_in_the_inputs_dtype():
    """bfloat16 ``xs`` with float32 states and kernel: outputs in bfloat16, each gradient
    in its input's dtype, all close to the float32 run."""
    rng = np.random.default_rng(12)
    args = (_rand(rng, T, B, 4 * U), _rand(rng, B, U), _rand(rng, B, U), _rand(rng, U, 4 * U))
    half = (args[0].astype(jnp.bfloat16), *args[1:])
    out, vjp = jax.vjp(_fused_jax.lstm_sequence, *half)
    ref_out, ref_vjp = jax.vjp(_fused_jax.lstm_sequence, *args)
    assert all(o.dtype == jnp.bfloat16 for o in out)
    cotangents = tuple(jnp.ones_like(o) for o in out)
    for got, want in zip(out, ref_out):
        np.testing.assert_allclose(got.astype("float32"), want, atol=0.05)
    for got, want, arg in zip(vjp(cotangents), ref_vjp(tuple(jnp.ones_like(o) for o in ref_out)),
                              half):
        assert got.dtype == arg.dtype
        np.testing.assert_allclose(got.astype("float32"), want, atol=0.1, rtol=0.05)


@pytest.mark.parametrize("ours_cls, theirs_cls", [(LSTM, keras.layers.LSTM),
                                                  (GRU, keras.layers.GRU)])
def test_layers_take_the_fused_path_and_equal_keras(ours_cls, theirs_cls):
    """Outputs, then one SGD step (so the gradients) of keras-seq's layer on its fused path
    equal Keras's own layer's with the same weights."""
    rng = np.random.default_rng(13)
    x = rng.normal(size=(B, T, D)).astype("float32")
    y = rng.normal(size=(B, T, 2)).astype("float32")
    models = []
    for cls in (ours_cls, theirs_cls):
        model = keras.Sequential([keras.Input((T, D)), cls(U, return_sequences=True),
                                  keras.layers.Dense(2)])
        models.append(model)
    models[1].set_weights(models[0].get_weights())
    ours = models[0].layers[0]
    np.testing.assert_allclose(models[0](x), models[1](x), atol=TOL)
    assert ours.last_path == "fused-loop"
    for model in models:
        model.compile(keras.optimizers.SGD(0.5), "mse")
        model.train_on_batch(x, y)
    assert ours.last_path == "fused-loop"
    for a, b in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_allclose(a, b, atol=TOL)
