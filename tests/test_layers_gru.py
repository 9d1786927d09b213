"""keras_seq.layers.GRU / GRUCell against keras.layers.GRU and hand-computed steps."""

import keras
import numpy as np
import pytest

from keras_seq.layers import GRU, GRUCell
from keras_seq.layers.testing import compare_with_reference, run_with_gradients

TOL = 1e-5
RNG = np.random.default_rng(1)
X = RNG.normal(size=(3, 5, 4)).astype("float32")  # (B, T, D)
MASKS = {
    "none": None,
    "right": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], bool),
    "left": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]], bool),
}


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


@pytest.mark.parametrize("reset_after", [True, False])
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("go_backwards", [False, True])
def test_matches_keras_gru(reset_after, mask, go_backwards):
    kw = dict(reset_after=reset_after, go_backwards=go_backwards, return_state=True)
    call = {} if MASKS[mask] is None else {"mask": MASKS[mask]}
    for return_sequences in (True, False):
        ours = GRU(3, return_sequences=return_sequences, **kw)
        ref = keras.layers.GRU(3, return_sequences=return_sequences, **kw)
        diffs = compare_with_reference(ours, ref, X, **call)
        assert max(diffs.values()) < TOL, (return_sequences, diffs)


@pytest.mark.parametrize(
    "kw", [{"activation": "relu"}, {"use_bias": False}, {"unroll": True, "reset_after": False}]
)
def test_matches_keras_gru_other_settings(kw):
    args = dict(return_sequences=True, return_state=True, **kw)
    for call in ({}, {"mask": MASKS["right"]}):
        diffs = compare_with_reference(GRU(3, **args), keras.layers.GRU(3, **args), X, **call)
        assert max(diffs.values()) < TOL, (kw, call, diffs)


@pytest.mark.parametrize("reset_after", [True, False])
def test_cell_in_keras_rnn_and_stateful(reset_after):
    h0 = RNG.normal(size=(3, 3)).astype("float32")
    kw = dict(return_sequences=True, return_state=True)
    layer = GRU(3, reset_after=reset_after, **kw)
    for mask in (None, MASKS["left"]):
        ref, ref_dx, ref_dw = run_with_gradients(layer, X, initial_state=[h0], mask=mask)
        rnn = keras.layers.RNN(layer.cell, **kw)  # plain per-step path, same weights
        out, dx, dw = run_with_gradients(rnn, X, initial_state=[h0], mask=mask)
        for a, b in zip(out + [dx] + dw, ref + [ref_dx] + ref_dw):
            np.testing.assert_allclose(a, b, atol=TOL)

    ours = GRU(3, reset_after=reset_after, stateful=True)
    ref = keras.layers.GRU(3, reset_after=reset_after, stateful=True)
    ref(X)
    ours(X)
    ours.set_weights(ref.get_weights())
    ours.reset_state()
    ref.reset_state()
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(ours(X)), np.asarray(ref(X)), atol=TOL)


def test_bidirectional():
    ours = keras.layers.Bidirectional(GRU(3, return_sequences=True), merge_mode="sum")
    ref = keras.layers.Bidirectional(keras.layers.GRU(3, return_sequences=True), merge_mode="sum")
    diffs = compare_with_reference(ours, ref, X, mask=MASKS["left"])
    assert max(diffs.values()) < TOL, diffs


@pytest.mark.parametrize("reset_after", [True, False])
def test_one_step_by_hand_with_constant_weights(reset_after):
    cell = GRUCell(
        2,
        reset_after=reset_after,
        kernel_initializer=keras.initializers.Constant(0.1),
        recurrent_initializer=keras.initializers.Constant(0.2),
        bias_initializer=keras.initializers.Constant(0.05),
    )
    x = np.array([[1.0, -2.0, 0.5]], "float32")
    h0 = np.array([[0.3, -0.6]], "float32")
    h, (h1,) = cell(x, [h0])
    assert tuple(cell.bias.shape) == ((2, 6) if reset_after else (6,))
    xw = x.sum() * 0.1 + 0.05  # input part of every gate (incl. the input bias)
    hu = h0.sum() * 0.2  # recurrent part
    if reset_after:  # both biases present; r multiplies (h U_h + b_h)
        z = r = sigmoid(xw + hu + 0.05)
        cand = np.tanh(xw + r * (hu + 0.05))
    else:  # r multiplies h before the matmul
        z = r = sigmoid(xw + hu)
        cand = np.tanh(xw + (r * h0).sum() * 0.2)
    expected = z * h0 + (1.0 - z) * cand  # h_t = z ⊙ h_{t-1} + (1 − z) ⊙ h̃_t
    np.testing.assert_allclose(np.asarray(h), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(h1), expected, rtol=1e-6)


def test_config_and_save_round_trip(tmp_path):
    layer = GRU(3, reset_after=False, recurrent_dropout=0.2, seed=3, return_state=True)
    config = layer.get_config()
    assert set(keras.layers.GRU(3).get_config()) - {"use_cudnn", "name"} <= set(config)
    assert GRU.from_config(config).get_config() == config
    cell = GRUCell(4, reset_after=False)
    assert GRUCell.from_config(cell.get_config()).get_config() == cell.get_config()

    inputs = keras.Input((5, 4))
    outputs = keras.layers.Bidirectional(GRU(3))(inputs)
    model = keras.Model(inputs, outputs)
    path = tmp_path / "gru.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(X)), np.asarray(model(X)), atol=1e-6)


def test_dropout_training_only():
    layer = GRU(3, dropout=0.5, recurrent_dropout=0.5, seed=1)
    base = np.asarray(layer(X))
    trained = np.asarray(layer(X, training=True))
    assert np.all(np.isfinite(trained)) and not np.allclose(trained, base)
    np.testing.assert_allclose(np.asarray(layer(X)), base)
