"""Weight drop (DropConnect on recurrent kernels), locked and embedding dropout."""

import keras
import numpy as np
import pytest

from keras_seq.layers import GRU, LSTM, SimpleRNN
from keras_seq.models import RecurrentLM

X = np.random.default_rng(0).normal(size=(3, 6, 4)).astype("float32")
REFERENCE = {LSTM: keras.layers.LSTM, GRU: keras.layers.GRU, SimpleRNN: keras.layers.SimpleRNN}


@pytest.mark.parametrize("layer_cls", [LSTM, GRU, SimpleRNN])
@pytest.mark.parametrize("per_step", [False, True])
def test_weight_drop_equals_keras_with_masked_recurrent_kernel(layer_cls, per_step):
    layer = layer_cls(5, weight_dropout=0.5, return_sequences=True, seed=3)
    layer(X)
    ref = REFERENCE[layer_cls](5, return_sequences=True)
    ref(X)
    kernel, rec, *bias = layer.get_weights()
    mask = np.random.default_rng(1).integers(0, 2, size=rec.shape).astype("float32") * 2.0
    ref.set_weights([kernel, rec * mask, *bias])
    # Fused path (the layer) and per-step path (keras.layers.RNN over the cell) both use
    # the cached mask for a whole sequence; pre-seed the cache with a known mask.
    layer.cell._weight_dropout_mask = keras.ops.convert_to_tensor(mask)
    run = keras.layers.RNN(layer.cell, return_sequences=True) if per_step else layer
    out = np.asarray(run(X, training=True))
    np.testing.assert_allclose(out, np.asarray(ref(X)), atol=1e-5)
    assert layer.cell._weight_dropout_mask is None  # reset after the sequence
    # Inference never drops weights.
    np.testing.assert_allclose(np.asarray(layer(X)), np.asarray(layer(X, training=False)))


FUSED = {LSTM: "lstm_sequence", GRU: "gru_sequence", SimpleRNN: "simple_rnn_sequence"}


@pytest.mark.parametrize("layer_cls", [LSTM, GRU, SimpleRNN])
def test_weight_drop_samples_its_own_mask_on_the_fused_path(layer_cls, monkeypatch):
    import inspect

    from keras_seq.layers import _fast_rnn, _fused

    rate, units = 0.3, 64
    x = np.random.default_rng(2).normal(size=(4, 7, 5)).astype("float32")
    layer = layer_cls(units, weight_dropout=rate, return_sequences=True, seed=5)
    layer(x)
    # Spy on the fused kernel (what it gets as the recurrent kernel) and make the per-step
    # autodiff loop, the other path, fail loudly.
    fused = getattr(_fused, FUSED[layer_cls])
    kernels = []

    def spy(*args, **kwargs):
        kernels.append(np.asarray(inspect.signature(fused).bind(*args, **kwargs)
                                  .arguments["kernel_rec"]))
        return fused(*args, **kwargs)

    def per_step_loop(*args, **kwargs):
        raise AssertionError("weight dropout left the fused path")

    monkeypatch.setattr(_fused, FUSED[layer_cls], spy)
    monkeypatch.setattr(_fast_rnn, "fast_rnn", per_step_loop)
    kernel, rec, *bias = layer.get_weights()

    out = np.asarray(layer(x, training=True))
    assert len(kernels) == 1  # one fused call for the whole sequence
    assert kernels[0].shape == rec.shape  # one mask over the kernel: no batch or time axis
    mask = kernels[0] / rec
    kept = mask != 0
    np.testing.assert_allclose(mask[kept], 1 / (1 - rate), rtol=1e-5)  # scaled by 1/(1-p)
    assert kept.mean() == pytest.approx(1 - rate, abs=0.03)  # over ≥ 4096 weights
    # Every timestep of every row used that one masked kernel: Keras's layer with the
    # recurrent kernel multiplied by the mask gives the same outputs throughout.
    ref = REFERENCE[layer_cls](units, return_sequences=True)
    ref(x)
    ref.set_weights([kernel, rec * mask, *bias])
    np.testing.assert_allclose(out, np.asarray(ref(x)), atol=1e-5)
    # The next sequence draws a new mask; inference uses the kernel as it is (still fused).
    layer(x, training=True)
    assert len(kernels) == 2 and not np.array_equal(kernels[1] != 0, kept)
    infer = np.asarray(layer(x, training=False))
    assert len(kernels) == 3
    np.testing.assert_array_equal(kernels[2], rec)
    ref.set_weights([kernel, rec, *bias])
    np.testing.assert_allclose(infer, np.asarray(ref(x)), atol=1e-5)


def test_weight_drop_gradient_reaches_only_kept_weights():
    import tensorflow as tf

    layer = LSTM(4, weight_dropout=0.5, return_sequences=True, seed=0)
    layer(X)
    mask = np.zeros((4, 16), "float32")
    mask[:2] = 2.0  # keep the first two rows only
    with tf.GradientTape() as tape:
        layer.cell._weight_dropout_mask = tf.constant(mask)
        loss = tf.reduce_sum(layer(X, training=True) ** 2)
    grad = tape.gradient(loss, layer.cell.recurrent_kernel)
    grad = np.asarray(grad)
    assert np.all(grad[2:] == 0) and np.any(grad[:2] != 0)


def test_weight_drop_config_and_validation():
    layer = GRU(3, weight_dropout=0.25)
    assert GRU.from_config(layer.get_config()).cell.weight_dropout == 0.25
    with pytest.raises(ValueError, match="weight_dropout"):
        LSTM(3, weight_dropout=1.0)


def test_locked_dropout_shares_the_mask_over_time():
    lm = RecurrentLM(20, embed_dim=6, units=6, dropout=0.5, variational_dropout=True)
    out = np.asarray(lm.drops[0](np.ones((4, 9, 6), "float32"), training=True))
    assert np.all(out == out[:, :1, :])  # same mask at every timestep
    assert 0 < (out == 0).mean() < 1
    plain = RecurrentLM(20, embed_dim=6, units=6, dropout=0.5)
    out = np.asarray(plain.drops[0](np.ones((4, 9, 6), "float32"), training=True))
    assert not np.all(out == out[:, :1, :])


def test_embedding_dropout_drops_word_types_and_round_trips(tmp_path):
    lm = RecurrentLM(8, embed_dim=4, units=4, embed_dropout=0.5, weight_dropout=0.3,
                     variational_dropout=True)
    ids = np.tile(np.arange(8, dtype="int32"), (3, 4))  # every word 12 times
    captured = {}
    original = lm.drops[0].call

    def spy(x, training=False):
        captured["x"] = np.asarray(x)
        return original(x, training=training)

    lm.drops[0].call = spy
    lm(ids, training=True)
    x = captured["x"]
    zero = np.all(x == 0, axis=-1)  # (B, T) positions whose word was dropped
    for word in range(8):
        column = zero[ids == word]
        assert column.all() or not column.any()  # a word is dropped everywhere or nowhere
    assert zero.any() and not zero.all()
    lm.drops[0].call = original

    config = lm.get_config()
    assert config["embed_dropout"] == 0.5 and config["weight_dropout"] == 0.3
    lm.save(tmp_path / "lm.keras")
    loaded = keras.saving.load_model(tmp_path / "lm.keras")
    np.testing.assert_allclose(np.asarray(loaded(ids)), np.asarray(lm(ids)), atol=1e-6)
    clone = lm.clone_for_batch(2)
    assert clone.embed_dropout == 0.0 and clone.weight_dropout == 0.0
    with pytest.raises(ValueError, match="embed_dropout"):
        RecurrentLM(8, embed_dropout=-0.1)
    with pytest.raises(ValueError, match="keras-seq cell"):
        RecurrentLM(8, cell="keras-lstm", weight_dropout=0.2)
