import keras
import numpy as np
import pytest

from keras_seq.layers.bahdanau_attention import BahdanauAttention


def _inputs(seed=0, batch=3, steps=6, qdim=5, vdim=4):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, qdim)).astype("float32")
    values = rng.normal(size=(batch, steps, vdim)).astype("float32")
    mask = np.ones((batch, steps), bool)
    mask[0, 4:] = False
    mask[1, 1:] = False
    return query, values, mask


def test_weights_sum_to_one_and_are_zero_on_padding():
    query, values, mask = _inputs()
    context, weights = BahdanauAttention(7)(query, values, values_mask=mask)
    w = np.asarray(weights)
    assert w.shape == (3, 6) and tuple(context.shape) == (3, 4)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    assert (w[~mask] == 0.0).all()  # exactly zero, not just small
    assert w[1, 0] == pytest.approx(1.0)
    np.testing.assert_allclose(np.asarray(context), np.einsum("bs,bsd->bd", w, values),
                               atol=1e-6)


def test_matches_the_formula():
    query, values, mask = _inputs(1)
    layer = BahdanauAttention(7)
    _, weights = layer(query, values, values_mask=mask)
    W_s = np.asarray(layer.query_dense.kernel)
    W_h, b = np.asarray(layer.key_dense.kernel), np.asarray(layer.key_dense.bias)
    v = np.asarray(layer.score_dense.kernel)[:, 0]
    e = np.tanh((query @ W_s)[:, None, :] + values @ W_h + b) @ v  # (B, S)
    e = np.where(mask, e, -np.inf)
    alpha = np.exp(e - e.max(-1, keepdims=True))
    alpha /= alpha.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(weights), alpha, atol=1e-6)


def test_precomputed_keys_and_3d_queries_agree():
    query, values, mask = _inputs(2)
    layer = BahdanauAttention(4)
    keys = layer.precompute_keys(values)
    c1, w1 = layer(query, values, values_mask=mask)
    c2, w2 = layer(query, values, values_mask=mask, keys=keys)
    c3, w3 = layer(np.stack([query, query], 1), values, values_mask=mask)
    np.testing.assert_allclose(np.asarray(w1), np.asarray(w2), atol=1e-6)
    np.testing.assert_allclose(np.asarray(w3)[:, 1], np.asarray(w1), atol=1e-6)
    np.testing.assert_allclose(np.asarray(c3)[:, 0], np.asarray(c1), atol=1e-6)


def test_uses_the_keras_mask_of_the_values():
    ids = np.array([[3, 4, 0, 0]])
    values = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    _, weights = BahdanauAttention(3)(np.zeros((1, 2), "float32"), values)
    assert (np.asarray(weights)[0, 2:] == 0).all()


def test_config_round_trip_and_weight_count():
    layer = BahdanauAttention(6, use_bias=False, name="att")
    layer(*_inputs()[:2])
    clone = BahdanauAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    # W_s (5, 6) + W_h (4, 6) + v (6, 1), no bias
    assert layer.count_params() == 5 * 6 + 4 * 6 + 6


def test_keras_file_round_trip(tmp_path):
    q = keras.Input((5,))
    v = keras.Input((6, 4))
    context, weights = BahdanauAttention(3)(q, v)
    model = keras.Model([q, v], [context, weights])
    query, values, _ = _inputs()
    path = tmp_path / "att.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    for a, b in zip(model([query, values]), loaded([query, values])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_bad_units_says_what_to_do():
    with pytest.raises(ValueError, match="positive integer"):
        BahdanauAttention(0)
