"""XLA (``jit_compile=True``) on the TensorFlow backend: the keras-seq loops and their
hand-written gradients compile, and give the eager graph's outputs and gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_seq.layers import GRU, LSTM, LSTMP, SimpleRNN
from keras_seq.models import RecurrentLM

X = np.random.default_rng(0).normal(size=(3, 7, 4)).astype("float32")
MASK = np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4], bool)


@pytest.mark.parametrize("make", [lambda: LSTM(5, return_sequences=True),
                                  lambda: GRU(5, return_sequences=True),
                                  lambda: GRU(5, return_sequences=True, reset_after=False),
                                  lambda: SimpleRNN(5, return_sequences=True),
                                  lambda: LSTMP(6, proj_units=3, return_sequences=True)])
@pytest.mark.parametrize("mask", [None, MASK])
def test_xla_equals_graph(make, mask):
    layer = make()
    layer(X)

    def outputs_and_grads(x):
        with tf.GradientTape() as tape:
            y = layer(x, mask=None if mask is None else tf.constant(mask))
            loss = tf.reduce_sum(y * tf.cos(y))
        return y, tape.gradient(loss, layer.trainable_variables)

    compiled = tf.function(outputs_and_grads, jit_compile=True)(X)
    path = layer.last_path
    graph = tf.function(outputs_and_grads)(X)
    assert path == ("fused-loop" if mask is None else "loop")
    for a, b in zip(tf.nest.flatten(compiled), tf.nest.flatten(graph)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, rtol=1e-5)


def test_fit_with_jit_compile_matches_without():
    ids = np.random.default_rng(1).integers(0, 30, (4, 8)).astype("int32")
    weights, losses = None, []
    for jit in (False, True):
        keras.utils.set_random_seed(0)
        lm = RecurrentLM(30, 8, 8, cell="lstm", stateful=True)
        lm(ids)
        weights = weights or lm.get_weights()
        lm.set_weights(weights)
        lm.reset_state()
        lm.compile(keras.optimizers.SGD(0.5), jit_compile=jit,
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        losses.append(lm.fit(ids, ids, batch_size=4, epochs=3, shuffle=False,
                             verbose=0).history["loss"])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_xla_gives_way_to_cudnn_on_a_tensorflow_gpu(monkeypatch):
    from keras_seq.layers import dispatch
    from keras_seq.training.trainer import _recurrent_paths, _xla_or_cudnn

    lm = RecurrentLM(30, 8, 8, cell="lstm", num_layers=2)
    lm(np.zeros((2, 3), "int32"))
    assert set(_recurrent_paths(lm).values()) == {"fused-loop"}
    lm.jit_compile = True
    computing, notes = {"backend": "tensorflow", "jit_compile": True}, []
    assert not _xla_or_cudnn(lm, computing, notes, print)  # no GPU: XLA stays
    monkeypatch.setattr(dispatch, "gpu_available", lambda: True)
    assert _xla_or_cudnn(lm, computing, notes, print)
    assert computing["jit_compile"] is False and lm.jit_compile is False
    assert notes[0][0] == "xla-off-for-cudnn"
    rnn_only = RecurrentLM(30, 8, 8, cell="rnn")
    rnn_only(np.zeros((2, 3), "int32"))
    computing = {"backend": "tensorflow", "jit_compile": True}
    assert not _xla_or_cudnn(rnn_only, computing, [], print)  # no cuDNN kernel: XLA stays


def _xla_functions(fn):
    """Names of the functions in ``fn``'s graph that XLA must compile."""
    library = fn.get_concrete_function(tf.constant(X)).graph.as_graph_def().library
    return [f.signature.name for f in library.function if f.attr["_XlaMustCompile"].b]


@pytest.mark.parametrize("make, compiled", [
    (lambda: LSTM(5, return_sequences=True), True),
    (lambda: GRU(5, return_sequences=True), True),
    (lambda: GRU(5, return_sequences=True, reset_after=False), True),
    (lambda: SimpleRNN(5, return_sequences=True), False),
])
def test_training_compiles_the_fused_loops_with_xla_and_inference_does_not(make, compiled):
    """A training call runs TensorFlow's fused LSTM and GRU loops as XLA programs (faster
    on a CPU); inference, which export and serving trace, carries no XLA-only function;
    both give the same outputs and gradients."""
    layer = make()
    layer(X)

    def outputs_and_grads(x, training):
        with tf.GradientTape() as tape:
            y = layer(x, training=training)
            loss = tf.reduce_sum(y * tf.cos(y))
        return y, tape.gradient(loss, layer.trainable_variables)

    train = tf.function(lambda x: outputs_and_grads(x, True))
    infer = tf.function(lambda x: outputs_and_grads(x, False))
    assert len(_xla_functions(train)) == (2 if compiled else 0)  # the forward and backward loop
    assert _xla_functions(infer) == []
    for a, b in zip(tf.nest.flatten(train(X)), tf.nest.flatten(infer(X))):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, rtol=1e-5)
