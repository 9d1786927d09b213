"""Quantization-aware training on whichever Keras backend this process runs (``make test``
runs this folder under TensorFlow, JAX and PyTorch): the fake-quantized layers against a
reference written by hand in numpy, on fixed weights.

The reference rounds weights symmetric per output channel (``scale = max|w| / q``,
``q`` = 127 or 7) and activations as TensorFlow's ``FakeQuantWithMinMaxVars`` (8 bits, the
range nudged so 0 is a level, ``floor(v / scale + 0.5)``); sigmoid and tanh outputs to the
fixed ranges of TFLite's int8 kernels.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from keras_seq.layers import GRU, LSTM, QATDense, QATEmbedding, SimpleRNN, quant
from keras_seq.models import RecurrentLM
from tests.backends.reference_kernels import grads

RNG = np.random.default_rng(7)


def ref_weight(w, qat, axis=-1):
    w = np.asarray(w, np.float32)
    q = np.float32({"int8": 127, "int4": 7}[qat])
    axes = tuple(i for i in range(w.ndim) if i != axis % w.ndim)
    scale = np.maximum(np.abs(w).max(axis=axes, keepdims=True), np.float32(1e-12)) / q
    return np.clip(np.rint(w / scale), -q, q) * scale


def ref_act(x, lo, hi):
    """In float32, as the layers compute (a value at a half-level tie rounds by its last
    bit)."""
    x, lo, hi = np.float32(x), np.float32(lo), np.float32(hi)
    scale = (hi - lo) / np.float32(255.0)
    level = -lo / scale
    zero = np.clip(np.sign(level) * np.floor(np.abs(level) + 0.5), 0, 255).astype(np.float32)
    n_lo, n_hi = -zero * scale, (np.float32(255) - zero) * scale
    clipped = np.clip(x, n_lo, n_hi)
    return np.floor((clipped - n_lo) * (np.float32(1) / scale) + np.float32(0.5)) * scale + n_lo


SIGMOID, TANH = quant.FIXED_RANGES["sigmoid"], quant.FIXED_RANGES["tanh"]
# _UNROLL: the int8 cells are checked step by step, unrolled: inside JAX's compiled scan
# XLA may rewrite the float arithmetic (a fused multiply-add), and a value at a half-level
# tie then rounds to the neighbouring level. That is the loop's business, not the cell's
# math, which these tests pin; the layer tests in test_any_backend cover the loops.


def sigmoid(x):
    return np.float32(1) / (np.float32(1) + np.exp(-x))


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


@pytest.mark.parametrize("qat", ["int8", "int4"])
def test_fake_quant_is_the_per_channel_grid_with_a_straight_through_gradient(qat):
    w = RNG.normal(size=(5, 3)).astype("float32")
    np.testing.assert_allclose(_numpy(quant.fake_quant(w, qat)), ref_weight(w, qat), atol=1e-6)
    np.testing.assert_allclose(_numpy(quant.fake_quant(w, qat, axis=0)),
                               ref_weight(w, qat, axis=0), atol=1e-6)
    ints, scales = quant.integers(w, qat)
    assert np.abs(ints).max() == {"int8": 127, "int4": 7}[qat]  # the max reaches ±q exactly
    np.testing.assert_allclose(ints * scales, ref_weight(w, qat), atol=1e-6)
    variable = keras.Variable(w)
    [grad] = grads(lambda: keras.ops.sum(quant.fake_quant(variable, qat) * 2.0), [variable])
    np.testing.assert_allclose(grad, np.full_like(w, 2.0))  # straight through


def test_fake_quant_act_matches_tensorflows_arithmetic_and_clips_the_gradient():
    x = np.sort(RNG.uniform(-3, 3, 41)).astype("float32")  # no exact half-level ties
    got = _numpy(quant.fake_quant_act(x, -1.3, 2.1))
    np.testing.assert_allclose(got, ref_act(x.astype(np.float64), -1.3, 2.1), atol=1e-5)
    assert _numpy(quant.fake_quant_act(np.zeros(3, "float32"), -1.3, 2.1)).max() == 0.0  # a level
    variable = keras.Variable(x)
    [grad] = grads(lambda: keras.ops.sum(quant.fake_quant_act(variable, -1.3, 2.1)),
                   [variable])
    lo, hi = -1.3, 2.1
    inside = (x >= lo - 0.02) & (x <= hi + 0.02)
    assert (grad[inside & (np.abs(x) < 1.2)] == 1).all() and (grad[x < -1.5] == 0).all()


def _gru_reference(x, h, kernel, recurrent, bias, qat, ranges):
    """One Keras GRU step (reset_after) with QAT, by hand."""
    k, r = ref_weight(kernel, qat), ref_weight(recurrent, qat)
    act = (lambda name, v: ref_act(v, *ranges[name])) if ranges else (lambda name, v: v)
    fixed = (lambda rng, v: ref_act(v, *rng)) if ranges else (lambda rng, v: v)
    u = h.shape[-1]
    xp = act("xp", x @ k + bias[0])
    h = act("h", h)
    inner = act("hp", h @ r + bias[1])
    zr = fixed(SIGMOID, sigmoid(act("zr", xp[:, :2 * u] + inner[:, :2 * u])))
    z, rr = zr[:, :u], zr[:, u:]
    hh = fixed(TANH, np.tanh(act("hin", xp[:, 2 * u:] + act("rh", rr * inner[:, 2 * u:]))))
    return act("h", act("zh", z * h) + act("omz_hh", act("omz", np.float32(1) - z) * hh))


def _set_ranges(cell, ranges):
    points = cell.activation_points()
    cell.activation_ranges.variable.assign(np.array([ranges[p] for p in points], "float32"))


RANGES = {"xp": (-2.0, 2.5), "h": (-1.0, 1.0), "hp": (-1.5, 1.7), "zr": (-3.0, 3.0),
          "rh": (-1.2, 1.1), "hin": (-2.5, 2.5), "zh": (-1.0, 1.0), "omz": (0.0, 1.0),
          "omz_hh": (-1.0, 1.0), "z": (-3.0, 3.2), "c": (-2.0, 2.0), "fc": (-2.0, 2.0),
          "ig": (-1.0, 1.0)}


@pytest.mark.parametrize("qat", ["int4", "int8"])
def test_gru_cell_step_equals_the_numpy_reference(qat):
    layer = GRU(6, qat=qat, return_sequences=True, unroll=qat == "int8")  # see _UNROLL
    x = RNG.normal(size=(2, 3, 4)).astype("float32")
    layer(x)
    kernel, recurrent, bias = (np.asarray(w, np.float32) for w in layer.get_weights()[:3])
    layer.set_weights([kernel, recurrent, RNG.normal(0, 0.3, bias.shape),
                       *layer.get_weights()[3:]])  # (+ the int8 activation ranges)
    bias = np.asarray(layer.get_weights()[2], np.float32)
    ranges = None
    if qat == "int8":
        _set_ranges(layer.cell, RANGES)
        ranges = RANGES
    h, outs = np.zeros((2, 6), np.float32), []
    for t in range(3):
        h = _gru_reference(x[:, t], h, kernel, recurrent, bias, qat, ranges)
        outs.append(h)
    np.testing.assert_allclose(_numpy(layer(x)), np.stack(outs, 1), atol=2e-5)
    assert layer.last_path == ("loop" if qat == "int8" else "fused-loop")  # int8: no kernel


@pytest.mark.parametrize("qat", ["int4", "int8"])
def test_lstm_cell_step_equals_the_numpy_reference(qat):
    layer = LSTM(5, qat=qat, return_sequences=True, unroll=qat == "int8")  # see _UNROLL
    x = RNG.normal(size=(2, 3, 4)).astype("float32")
    layer(x)
    kernel, recurrent, bias = (np.asarray(w, np.float32) for w in layer.get_weights()[:3])
    # merged: [kernel; recurrent] rounded as one matrix, per output column
    both = ref_weight(np.concatenate([kernel, recurrent]), qat)
    k, r = both[:4], both[4:]
    act = (lambda n, v: ref_act(v, *RANGES[n])) if qat == "int8" else (lambda n, v: v)
    fixed = (lambda rng, v: ref_act(v, *rng)) if qat == "int8" else (lambda rng, v: v)
    if qat == "int8":
        _set_ranges(layer.cell, RANGES)
    h, c, outs = np.zeros((2, 5), np.float32), np.zeros((2, 5), np.float32), []
    for t in range(3):
        h, c = act("h", h), act("c", c)
        z = act("z", x[:, t] @ k + bias + h @ r)
        i, f, g, o = (z[:, j * 5:(j + 1) * 5] for j in range(4))
        i, f, o = (fixed(SIGMOID, sigmoid(v)) for v in (i, f, o))
        c = act("c", act("fc", f * c) + act("ig", i * fixed(TANH, np.tanh(g))))
        h = act("h", o * fixed(TANH, np.tanh(c)))
        outs.append(h)
    np.testing.assert_allclose(_numpy(layer(x)), np.stack(outs, 1), atol=2e-5)


def test_simple_rnn_int8_rounds_its_one_point_and_its_tanh():
    layer = SimpleRNN(4, qat="int8", return_sequences=True, unroll=True)  # see _UNROLL
    x = RNG.normal(size=(1, 2, 3)).astype("float32")
    layer(x)
    kernel, recurrent, bias = (np.asarray(w, np.float32) for w in layer.get_weights()[:3])
    layer.cell.activation_ranges.variable.assign([[-2.0, 2.0]])
    both = ref_weight(np.concatenate([kernel, recurrent]), "int8")
    h, outs = np.zeros((1, 4), np.float32), []
    for t in range(2):
        z = ref_act(x[:, t] @ both[:3] + bias + ref_act(h, *TANH) @ both[3:], -2.0, 2.0)
        h = ref_act(np.tanh(z), *TANH)
        outs.append(h)
    np.testing.assert_allclose(_numpy(layer(x)), np.stack(outs, 1), atol=2e-5)


def test_embedding_and_dense_round_their_tables_per_channel():
    embed = QATEmbedding(7, 3, qat="int4")
    ids = np.array([[0, 6, 3]])
    embed(ids)
    table = np.asarray(embed.get_weights()[0], np.float32)
    np.testing.assert_allclose(_numpy(embed(ids))[0], ref_weight(table, "int4", 0)[[0, 6, 3]],
                               atol=1e-6)
    dense = QATDense(4, qat="int8")
    x = RNG.normal(size=(2, 3)).astype("float32")
    dense(x)
    dense.activation_ranges.variable.assign([[-1.5, 1.0]])
    kernel, bias = (np.asarray(w, np.float32) for w in dense.get_weights()[:2])
    want = ref_act(x @ ref_weight(kernel, "int8") + bias, -1.5, 1.0)
    np.testing.assert_allclose(_numpy(dense(x)), want, atol=1e-5)


# both modes, both output layers (TiedLogits, QATDense): each saves what it tracks (an int8
# QATDense saves its range too: tests/test_web.py's QAT fine-tune of an untied LSTM)
@pytest.mark.parametrize("qat, tied", [("int8", True), ("int4", False)])
def test_a_qat_model_trains_saves_and_loads(qat, tied, tmp_path):
    keras.utils.set_random_seed(0)
    model = RecurrentLM(20, 8, 8, cell="gru", qat=qat, tie_weights=tied)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = RNG.integers(0, 20, (4, 6)).astype("int32")
    model(x)
    before = [np.array(w) for w in model.get_weights()]
    model.fit(x, np.roll(x, -1, 1), epochs=2, verbose=0)
    after = model.get_weights()
    assert any(np.abs(a - b).max() > 0 for a, b in zip(after, before))  # gradients flowed
    path = tmp_path / "qat.keras"
    model.save(path)
    again = keras.saving.load_model(path)
    assert again.qat == qat and again.rnns[0].cell.qat == qat
    np.testing.assert_allclose(_numpy(again(x)), _numpy(model(x)), atol=1e-6)
