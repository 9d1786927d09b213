"""keras_seq.layers.Bidirectional: Keras's wrapper, attempting its fused two-direction
kernel (``backend.bidirectional_lstm`` / ``_gru``) for keras-seq's LSTM and GRU under the
rules it applies to its own layers; on this CPU the backend refuses and both fall back to
the two layers, with the same outputs."""

import keras
import numpy as np
import pytest
from keras.src.layers.rnn import bidirectional as keras_bidirectional

import keras_seq.layers as ks
from keras_seq.layers import Bidirectional, from_builtins

X = np.random.default_rng(0).normal(size=(2, 6, 3)).astype("float32")
# (arguments, whether Keras attempts the fused kernel for its own layer)
CASES = {
    "lstm": [({}, True), ({"dropout": 0.2}, False), ({"recurrent_dropout": 0.2}, False),
             ({"use_cudnn": False}, False), ({"use_bias": False}, False)],
    "gru": [({}, True), ({"reset_after": False}, False), ({"dropout": 0.2}, False),
            ({"use_cudnn": False}, False)],
}
CLASS = {"lstm": "LSTM", "gru": "GRU"}


def _attempts(monkeypatch, kind: str, layer) -> bool:
    """Whether calling ``layer`` on X asks the backend for the fused kernel (recorded, then
    refused as a CPU backend does)."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(kwargs["fwd_kernel"].shape)
        raise NotImplementedError

    monkeypatch.setattr(keras_bidirectional.backend, f"bidirectional_{kind}", refuse)
    layer(X)
    return bool(calls)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_the_fused_kernel_is_attempted_where_keras_attempts_it(monkeypatch, kind):
    for arguments, expected in CASES[kind]:
        builtin = keras.layers.Bidirectional(
            getattr(keras.layers, CLASS[kind])(4, return_sequences=True, **arguments))
        ours = Bidirectional(getattr(ks, CLASS[kind])(4, return_sequences=True, **arguments))
        assert _attempts(monkeypatch, kind, builtin) == expected, arguments
        assert _attempts(monkeypatch, kind, ours) == expected, arguments
        # the fallback: the two layers, with Keras's outputs given Keras's weights
        ours.set_weights(builtin.get_weights())
        np.testing.assert_allclose(ours(X), builtin(X), atol=1e-5)
    # Keras's own wrapper never attempts it for keras-seq's layers: why this class exists
    plain = keras.layers.Bidirectional(getattr(ks, CLASS[kind])(4, return_sequences=True))
    assert not _attempts(monkeypatch, kind, plain)


def test_keras_seqs_own_limits_keep_the_two_layers(monkeypatch):
    for layer in (ks.LSTM(4, coupled_input_forget=True), ks.LSTM(4, qat="int4"),
                  ks.LSTM(4, unroll=True)):
        bi = Bidirectional(layer)
        assert not _attempts(monkeypatch, "lstm", bi) and bi.fused_kind() is None, layer


def test_from_builtins_and_saving_keep_keras_seqs_wrapper(tmp_path):
    model = keras.Sequential([keras.Input((6, 3)),
                              keras.layers.Bidirectional(keras.layers.GRU(4))])
    rebuilt = from_builtins(model)
    wrapper = rebuilt.layers[0]
    assert type(wrapper) is Bidirectional and type(wrapper.forward_layer) is ks.GRU
    np.testing.assert_allclose(rebuilt(X), model(X), atol=1e-5)
    rebuilt.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert type(loaded.layers[0]) is Bidirectional
    np.testing.assert_allclose(loaded(X), model(X), atol=1e-5)
