"""keras_seq.layers.LSTM / LSTMCell against keras.layers.LSTM, hand-computed steps and CIFG."""

import keras
import numpy as np
import pytest

from keras_seq.layers import LSTM, LSTMCell, count_params
from keras_seq.layers.testing import compare_with_reference, run_with_gradients

TOL = 1e-5
RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 5, 4)).astype("float32")  # (B, T, D)
MASKS = {
    "none": None,
    "right": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], bool),
    "left": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]], bool),
}


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_matches_keras_lstm(mask, go_backwards, return_sequences):
    kw = dict(return_sequences=return_sequences, return_state=True, go_backwards=go_backwards)
    call = {} if MASKS[mask] is None else {"mask": MASKS[mask]}
    diffs = compare_with_reference(LSTM(3, **kw), keras.layers.LSTM(3, **kw), X, **call)
    assert max(diffs.values()) < TOL, diffs


@pytest.mark.parametrize(
    "kw",
    [{"activation": "relu"}, {"use_bias": False}, {"unroll": True}, {"unit_forget_bias": False}],
)
def test_matches_keras_lstm_other_settings(kw):
    # relu uses the autodiff loop, unroll the Python-unrolled one; with a mask too.
    args = dict(return_sequences=True, return_state=True, **kw)
    for call in ({}, {"mask": MASKS["left"]}):
        diffs = compare_with_reference(LSTM(3, **args), keras.layers.LSTM(3, **args), X, **call)
        assert max(diffs.values()) < TOL, (kw, call, diffs)


def test_initial_state_and_cell_in_keras_rnn():
    h0, c0 = RNG.normal(size=(2, 3, 3)).astype("float32")
    kw = dict(return_sequences=True, return_state=True)
    for mask in (None, MASKS["left"]):
        layer = LSTM(3, **kw)
        ref, _, _ = run_with_gradients(layer, X, initial_state=[h0, c0], mask=mask)
        rnn = keras.layers.RNN(layer.cell, **kw)  # same weights, plain per-step path
        out, _, _ = run_with_gradients(rnn, X, initial_state=[h0, c0], mask=mask)
        for a, b in zip(out, ref):
            np.testing.assert_allclose(a, b, atol=TOL)


def test_stateful_two_calls_and_reset():
    x = X[:2]
    ours = LSTM(3, stateful=True, return_state=True)
    ref = keras.layers.LSTM(3, stateful=True, return_state=True)
    ref(x)
    ours(x)
    ours.set_weights(ref.get_weights())
    ours.reset_state()
    ref.reset_state()
    for _ in range(2):  # the second call starts from the first call's final state
        for a, b in zip(ours(x), ref(x)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=TOL)
    ours.reset_state()
    assert not np.any(np.asarray(ours.states[0]))


def test_bidirectional():
    ours = keras.layers.Bidirectional(LSTM(3, return_sequences=True))
    ref = keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True))
    diffs = compare_with_reference(ours, ref, X, mask=MASKS["right"])
    assert max(diffs.values()) < TOL, diffs


def test_one_step_by_hand_with_constant_weights():
    cell = LSTMCell(
        2,
        kernel_initializer=keras.initializers.Constant(0.1),
        recurrent_initializer=keras.initializers.Constant(0.2),
        bias_initializer=keras.initializers.Constant(0.05),
    )
    x = np.array([[1.0, -2.0, 0.5]], "float32")
    h0, c0 = np.full((1, 2), 0.3, "float32"), np.full((1, 2), -0.4, "float32")
    h, (h1, c1) = cell(x, [h0, c0])
    pre = x.sum() * 0.1 + h0.sum() * 0.2 + 0.05  # same pre-activation for every gate
    i = o = sigmoid(pre)
    f = sigmoid(pre - 0.05 + 1.0)  # unit_forget_bias: the forget block's bias starts at 1
    c = f * c0 + i * np.tanh(pre)
    np.testing.assert_allclose(np.asarray(c1), c, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(h), o * np.tanh(c), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(h1), np.asarray(h))


def test_cifg_input_gate_is_one_minus_forget():
    layer = LSTM(3, coupled_input_forget=True, return_sequences=True, return_state=True)
    out, h, c = layer(X)
    cell = layer.cell
    assert tuple(cell.kernel.shape) == (4, 9) and tuple(cell.bias.shape) == (9,)
    np.testing.assert_allclose(np.asarray(cell.bias)[:3], 1.0)  # forget block first
    kernel, rec, bias = (np.asarray(w) for w in cell.get_weights())
    hp, cp = np.zeros((3, 3), "float32"), np.zeros((3, 3), "float32")
    for t in range(X.shape[1]):  # numpy CIFG: gates f, c, o; i = 1 - f
        z = X[:, t] @ kernel + hp @ rec + bias
        f, g, o = sigmoid(z[:, :3]), np.tanh(z[:, 3:6]), sigmoid(z[:, 6:])
        i = 1.0 - f
        np.testing.assert_allclose(i + f, 1.0, rtol=1e-6)
        cp = f * cp + i * g
        hp = o * np.tanh(cp)
        np.testing.assert_allclose(np.asarray(out)[:, t], hp, atol=TOL)
    np.testing.assert_allclose(np.asarray(c), cp, atol=TOL)
    assert layer.count_params() == count_params("cifg", 4, 3) == 3 * (4 * 3 + 3 * 3 + 3)
    # Fused path (with a hand-written gradient) == autodiff path, CIFG included.
    slow = LSTM(3, coupled_input_forget=True, return_sequences=True, unroll=True)
    diffs = compare_with_reference(
        slow, LSTM(3, coupled_input_forget=True, return_sequences=True), X
    )
    assert max(diffs.values()) < TOL, diffs


def test_dropout_is_variational_and_training_only():
    layer = LSTM(3, dropout=0.5, recurrent_dropout=0.5, seed=1, return_sequences=True)
    base = np.asarray(layer(X))
    np.testing.assert_allclose(np.asarray(layer(X, training=False)), base)
    trained = np.asarray(layer(X, training=True))
    assert trained.shape == base.shape and np.all(np.isfinite(trained))
    assert not np.allclose(trained, base)
    # Inside keras.layers.RNN the same cell creates one mask per sequence.
    out = keras.layers.RNN(layer.cell, return_sequences=True)(X, training=True)
    assert np.all(np.isfinite(np.asarray(out)))


def test_config_and_save_round_trip(tmp_path):
    layer = LSTM(3, coupled_input_forget=True, dropout=0.1, return_sequences=True, seed=2)
    config = layer.get_config()
    ref_config = keras.layers.LSTM(3).get_config()
    assert set(ref_config) - {"use_cudnn", "name"} <= set(config)
    assert LSTM.from_config(config).get_config() == config
    assert LSTM.from_config(ref_config).units == 3  # a Keras LSTM config loads too
    cell = LSTMCell(4, unit_forget_bias=False)
    assert LSTMCell.from_config(cell.get_config()).get_config() == cell.get_config()

    inputs = keras.Input((5, 4))
    model = keras.Model(inputs, LSTM(3, return_sequences=True)(keras.layers.Masking()(inputs)))
    path = tmp_path / "lstm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded.layers[-1]) is LSTM
    np.testing.assert_allclose(np.asarray(loaded(X)), np.asarray(model(X)), atol=1e-6)


def test_bad_arguments_raise_helpful_errors():
    with pytest.raises(ValueError, match="units"):
        LSTM(0)
    with pytest.raises(ValueError, match="dropout"):
        LSTMCell(3, dropout=1.5)
