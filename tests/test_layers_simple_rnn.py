"""keras_seq.layers.SimpleRNN / SimpleRNNCell against keras.layers.SimpleRNN and by hand."""

import keras
import numpy as np
import pytest

from keras_seq.layers import SimpleRNN, SimpleRNNCell
from keras_seq.layers.testing import compare_with_reference, run_with_gradients

TOL = 1e-5
RNG = np.random.default_rng(2)
X = RNG.normal(size=(3, 5, 4)).astype("float32")  # (B, T, D)
MASKS = {
    "none": None,
    "right": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], bool),
    "left": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]], bool),
}


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("go_backwards", [False, True])
def test_matches_keras_simple_rnn(activation, mask, go_backwards):
    kw = dict(activation=activation, go_backwards=go_backwards, return_state=True)
    call = {} if MASKS[mask] is None else {"mask": MASKS[mask]}
    for return_sequences in (True, False):
        ours = SimpleRNN(3, return_sequences=return_sequences, **kw)
        ref = keras.layers.SimpleRNN(3, return_sequences=return_sequences, **kw)
        diffs = compare_with_reference(ours, ref, X, **call)
        assert max(diffs.values()) < TOL, (return_sequences, diffs)


@pytest.mark.parametrize("kw", [{"activation": "sigmoid"}, {"use_bias": False}, {"unroll": True}])
def test_matches_keras_simple_rnn_other_settings(kw):
    args = dict(return_sequences=True, return_state=True, **kw)
    for call in ({}, {"mask": MASKS["left"]}):
        diffs = compare_with_reference(
            SimpleRNN(3, **args), keras.layers.SimpleRNN(3, **args), X, **call
        )
        assert max(diffs.values()) < TOL, (kw, call, diffs)


def test_cell_in_keras_rnn_stateful_and_bidirectional():
    h0 = RNG.normal(size=(3, 3)).astype("float32")
    kw = dict(return_sequences=True, return_state=True)
    layer = SimpleRNN(3, activation="relu", **kw)
    for mask in (None, MASKS["right"]):
        ref, _, ref_dw = run_with_gradients(layer, X, initial_state=[h0], mask=mask)
        out, _, dw = run_with_gradients(
            keras.layers.RNN(layer.cell, **kw), X, initial_state=[h0], mask=mask
        )
        for a, b in zip(out + dw, ref + ref_dw):
            np.testing.assert_allclose(a, b, atol=TOL)

    ours, ref = SimpleRNN(3, stateful=True), keras.layers.SimpleRNN(3, stateful=True)
    ref(X)
    ours(X)
    ours.set_weights(ref.get_weights())
    ours.reset_state()
    ref.reset_state()
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(ours(X)), np.asarray(ref(X)), atol=TOL)

    bi_ours = keras.layers.Bidirectional(SimpleRNN(3, return_sequences=True))
    bi_ref = keras.layers.Bidirectional(keras.layers.SimpleRNN(3, return_sequences=True))
    diffs = compare_with_reference(bi_ours, bi_ref, X, mask=MASKS["left"])
    assert max(diffs.values()) < TOL, diffs


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_one_step_by_hand_with_constant_weights(activation):
    cell = SimpleRNNCell(
        2,
        activation=activation,
        kernel_initializer=keras.initializers.Constant(0.1),
        recurrent_initializer=keras.initializers.Constant(-0.2),
        bias_initializer=keras.initializers.Constant(0.05),
    )
    x = np.array([[1.0, 2.0, 0.5]], "float32")
    h0 = np.array([[0.3, -0.6]], "float32")
    h, (h1,) = cell(x, [h0])
    pre = x.sum() * 0.1 + h0.sum() * -0.2 + 0.05  # x W_xh + h W_hh + b
    expected = np.tanh(pre) if activation == "tanh" else max(pre, 0.0)
    np.testing.assert_allclose(np.asarray(h), np.full((1, 2), expected), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(h1), np.asarray(h))


def test_config_and_save_round_trip(tmp_path):
    layer = SimpleRNN(3, activation="relu", dropout=0.1, return_sequences=True, go_backwards=True)
    config = layer.get_config()
    assert set(keras.layers.SimpleRNN(3).get_config()) - {"name"} <= set(config)
    assert SimpleRNN.from_config(config).get_config() == config
    cell = SimpleRNNCell(4, use_bias=False)
    assert SimpleRNNCell.from_config(cell.get_config()).get_config() == cell.get_config()

    inputs = keras.Input((5, 4))
    model = keras.Model(inputs, keras.layers.RNN(SimpleRNNCell(3))(inputs))
    path = tmp_path / "rnn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(X)), np.asarray(model(X)), atol=1e-6)
