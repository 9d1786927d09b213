"""The layers and models on whichever Keras backend this process runs.

``make test`` runs this folder twice: with the TensorFlow backend in the main run and
again with ``KERAS_BACKEND=jax``. Everything here is backend-neutral (numpy in and out,
gradients through ``fit`` rather than a backend's autodiff API).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from keras_seq.layers import GRU, LSTM, LSTMP, SimpleRNN, dispatch
from keras_seq.models import NPLM, ConditionedLM, RecurrentLM, SequenceClassifier, SequenceTagger
from keras_seq.models.seq2seq import Seq2Seq

BACKEND = keras.backend.backend()
PAIRS = {  # keras-seq layer, Keras built-in, constructor arguments both take
    "rnn": (SimpleRNN, keras.layers.SimpleRNN, {}),
    "gru": (GRU, keras.layers.GRU, {}),
    "gru-reset-before": (GRU, keras.layers.GRU, {"reset_after": False}),
    "lstm": (LSTM, keras.layers.LSTM, {}),
}
RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 6, 4)).astype("float32")
RIGHT_PADDED = np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4], bool)
LEFT_PADDED = RIGHT_PADDED[:, ::-1].copy()


def _pair(kind, **kwargs):
    ours_cls, keras_cls, args = PAIRS[kind]
    ours, theirs = ours_cls(5, **args, **kwargs), keras_cls(5, **args, **kwargs)
    ours(X[:1])
    theirs(X[:1])
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def _close(a, b, tol=1e-5):
    for x, y in zip(keras.tree.flatten(a), keras.tree.flatten(b)):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(x),
                                   keras.ops.convert_to_numpy(y), atol=tol, rtol=tol)


@pytest.mark.parametrize("kind", PAIRS)
@pytest.mark.parametrize("mask", [None, "right", "left"])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_layers_equal_keras_builtins(kind, mask, go_backwards):
    ours, theirs = _pair(kind, return_sequences=True, return_state=True,
                         go_backwards=go_backwards)
    m = {"right": RIGHT_PADDED, "left": LEFT_PADDED}.get(mask)
    _close(ours(X, mask=m), theirs(X, mask=m))
    expected = "fused-loop" if mask is None else "loop"  # a kernel per backend, no mask
    assert ours.last_path == expected


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_bidirectional_and_stateful_equal_keras(kind):
    ours, theirs = _pair(kind, return_sequences=True)
    a = keras.layers.Bidirectional(ours)
    b = keras.layers.Bidirectional(theirs)
    a(X)
    b(X)
    b.set_weights(a.get_weights())
    _close(a(X, mask=RIGHT_PADDED), b(X, mask=RIGHT_PADDED))
    ours_cls, keras_cls, args = PAIRS[kind]
    s1, s2 = ours_cls(5, stateful=True, **args), keras_cls(5, stateful=True, **args)
    s1(X[:, :3])
    s2(X[:, :3])
    s2.set_weights(s1.get_weights())
    s1.reset_state()
    s2.reset_state()
    for half in (X[:, :3], X[:, 3:]):  # the second call starts from the first's state
        _close(s1(half), s2(half))


@pytest.mark.parametrize("kind", PAIRS)
def test_one_training_step_equals_keras(kind):
    """SGD from the same weights on the same batch lands on the same weights: the
    gradients of the keras-seq loop equal those of Keras's own layer on this backend."""
    models = []
    for layer in _pair(kind, return_sequences=True):
        model = keras.Sequential([keras.Input((6, 4)), layer, keras.layers.Dense(2)])
        models.append(model)
    models[1].layers[-1].set_weights(models[0].layers[-1].get_weights())
    y = RNG.normal(size=(3, 6, 2)).astype("float32")
    for model in models:
        model.compile(keras.optimizers.SGD(0.5), "mse")
        model.train_on_batch(X, y)
    for a, b in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_weight_drop_trains_and_is_off_at_inference():
    layer = LSTM(5, return_sequences=True, weight_dropout=0.5, seed=1)
    model = keras.Sequential([keras.Input((6, 4)), layer, keras.layers.Dense(1)])
    model.compile("adam", "mse")
    before = model.get_weights()
    loss = model.train_on_batch(X, np.zeros((3, 6, 1), "float32"))
    assert np.isfinite(loss)
    assert not np.allclose(before[1], model.get_weights()[1])
    _close(layer(X), layer(X))  # no mask at inference: deterministic


def test_dispatch_decisions_for_every_config():
    assert dispatch.fused_kernel_blockers(LSTM(4)) == []
    assert dispatch.fused_kernel_blockers(GRU(4)) == []
    cases = {
        "activation='relu'": LSTM(4, activation="relu"),
        "recurrent_activation='hard_sigmoid'": GRU(4, recurrent_activation="hard_sigmoid"),
        "use_bias=False": LSTM(4, use_bias=False),
        "unroll=True": GRU(4, unroll=True),
        "recurrent_dropout=0.1": LSTM(4, recurrent_dropout=0.1),
        "coupled_input_forget=True": LSTM(4, coupled_input_forget=True),
        "reset_after=False": GRU(4, reset_after=False),
        "SimpleRNNCell has no fused cuDNN kernel": SimpleRNN(4),
        "LSTMPCell has no fused cuDNN kernel": LSTMP(4, proj_units=2),
    }
    for reason, layer in cases.items():
        blockers = dispatch.fused_kernel_blockers(layer)
        assert len(blockers) == 1 and blockers[0].startswith(reason), (reason, blockers)
    assert dispatch.fused_kernel_blockers(LSTM(4, weight_dropout=0.3, dropout=0.2)) == []


def test_use_cudnn_argument():
    with pytest.raises(ValueError, match="use_cudnn='maybe'"):
        LSTM(4, use_cudnn="maybe")
    with pytest.raises(ValueError, match="reset_after=False"):
        GRU(4, reset_after=False, use_cudnn=True)
    forced = LSTM(4, use_cudnn=True)
    if not dispatch.gpu_available():
        with pytest.raises(ValueError, match="no GPU visible"):
            forced(X)
    off = LSTM(4, use_cudnn=False)
    off(X)
    assert off.last_path != "cudnn"
    assert LSTM.from_config(forced.get_config()).use_cudnn is True
    assert "use_cudnn" not in SimpleRNN(4).get_config()  # as Keras's SimpleRNN


def test_mixed_bfloat16_computes_in_bfloat16_with_float32_weights():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        layer = LSTM(5, return_sequences=True)
        out = layer(X)
        lm = RecurrentLM(20, 4, 5, cell="gru")
        logits = lm(np.zeros((2, 3), "int32"))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert all(w.dtype == "float32" for w in layer.weights)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"  # loss in float32
    ref = LSTM(5, return_sequences=True)
    ref(X)
    ref.set_weights(layer.get_weights())
    _close(keras.ops.cast(out, "float32"), ref(X), tol=3e-2)


def _ids(vocab, shape, seed=0):
    return np.random.default_rng(seed).integers(1, vocab, shape).astype("int32")


MODELS = {
    "lm-lstm": lambda: (RecurrentLM(30, 8, 8, cell="lstm", weight_dropout=0.2, dropout=0.1),
                        _ids(30, (4, 7)), _ids(30, (4, 7), 1)),
    "lm-lstmp": lambda: (RecurrentLM(30, 4, 8, cell="lstmp", proj_units=4, tie_weights=True),
                         _ids(30, (4, 7)), _ids(30, (4, 7), 1)),
    "nplm": lambda: (NPLM(30, order=3, embed_dim=4, hidden=6), _ids(30, (8, 2)),
                     _ids(30, (8,), 1)),
    "seq2seq": lambda: (Seq2Seq(20, 25, embed_dim=6, units=8, cell="gru"),
                        (_ids(20, (4, 5)), _ids(25, (4, 6))), _ids(25, (4, 6), 1)),
    "classifier": lambda: (SequenceClassifier(30, 3, embed_dim=6, units=6),
                           _ids(30, (4, 7)), _ids(3, (4,), 1)),
    "tagger": lambda: (SequenceTagger(30, 4, embed_dim=6, units=6), _ids(30, (4, 7)),
                       _ids(4, (4, 7), 1)),
    "conditioned": lambda: (ConditionedLM(30, num_conditions=3, embed_dim=6, units=6),
                            (_ids(30, (4, 7)), _ids(3, (4,), 1)), _ids(30, (4, 7), 2)),
}


@pytest.mark.parametrize("name", MODELS)
def test_models_train_save_and_load(name, tmp_path):
    model, x, y = MODELS[name]()
    model.compile(keras.optimizers.Adam(1e-2),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0).history
    assert np.all(np.isfinite(history["loss"]))
    if name.startswith("lm"):
        assert history["grad_norm"][-1] > 0 and any(k.startswith("grad_norm/") for k in history)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    _close(model(x), loaded(x))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_mixed_bfloat16_training_step(kind):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = RecurrentLM(20, 8, 8, cell=kind, weight_dropout=0.2)
        model.compile(keras.optimizers.Adam(1e-2),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        ids = _ids(20, (4, 6))
        before = model(ids)  # builds
        history = model.fit(ids, _ids(20, (4, 6), 1), epochs=2, verbose=0).history
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert np.all(np.isfinite(history["loss"])) and history["grad_norm"][-1] > 0
    assert all(w.dtype == "float32" for w in model.weights)
    assert not np.allclose(keras.ops.convert_to_numpy(before), keras.ops.convert_to_numpy(
        model(ids)))


def test_cudnn_mask_check():
    assert bool(dispatch.cudnn_mask_ok(RIGHT_PADDED))
    assert not bool(dispatch.cudnn_mask_ok(LEFT_PADDED))
    empty_row = RIGHT_PADDED.copy()
    empty_row[2] = False
    assert not bool(dispatch.cudnn_mask_ok(empty_row))


class _FakeKernel:
    """Stands in for the backend's cuDNN call on a CPU: records what it was given and
    answers with the loop (so the outputs stay checkable)."""

    def __init__(self, layer):
        self.layer, self.calls = layer, []

    def __call__(self, sequences, states, mask, params, return_sequences, go_backwards):
        self.calls.append({"mask": mask, "kernel": keras.ops.convert_to_numpy(
            params["recurrent_kernel"])})
        return self.layer._own_loop(sequences, states, mask, params, training=False)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_fused_kernel_dispatch_with_a_gpu(kind, monkeypatch):
    """With a GPU (faked), the kernel gets the batch unless a mask stops it: a mask off
    TensorFlow, a left-padded mask on TensorFlow (checked at run time, no error)."""
    monkeypatch.setattr(dispatch, "gpu_available", lambda: True)
    if BACKEND == "jax" and kind == "gru":
        with pytest.raises(ValueError, match="no fused GRU kernel"):
            GRU(4, use_cudnn=True)(X)
        return
    _, theirs = _pair(kind, return_sequences=True)
    ours_cls, _, args = PAIRS[kind]
    ours = ours_cls(5, return_sequences=True, weight_dropout=0.5, seed=3, **args)
    ours(X[:1])
    ours.set_weights(theirs.get_weights())
    fake = _FakeKernel(ours)
    monkeypatch.setattr(ours.cell, "cudnn_sequence", fake)
    _close(ours(X), theirs(X))
    assert ours.last_path == "cudnn" and len(fake.calls) == 1
    ours(X, training=True)  # weight drop: the kernel gets the masked recurrent kernel
    dropped = fake.calls[-1]["kernel"]
    assert np.mean(dropped == 0) > 0.2
    np.testing.assert_allclose(dropped[dropped != 0],
                               2 * ours.cell.recurrent_kernel.numpy()[dropped != 0], rtol=1e-6)
    calls = len(fake.calls)
    _close(ours(X, mask=LEFT_PADDED), theirs(X, mask=LEFT_PADDED))
    assert len(fake.calls) == calls  # left padding never reaches the kernel
    ours(X, mask=RIGHT_PADDED)
    assert len(fake.calls) == calls + (BACKEND == "tensorflow")
    monkeypatch.setattr(ours, "use_cudnn", False)
    ours(X)
    assert ours.last_path != "cudnn" and len(fake.calls) == calls + (BACKEND == "tensorflow")
