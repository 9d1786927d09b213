import keras
import numpy as np
import pytest

from keras_seq.models.seq2seq import AttentionDecoderCell, Seq2Seq

SRC = np.array([[3, 4, 5, 6, 0], [2, 7, 0, 0, 0]], "int32")


def _dec(model):
    return np.array([[model.bos_id, 2, 3, 4], [model.bos_id, 5, 5, 1]], "int32")


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("attention", ["bahdanau", "none"])
def test_step_by_step_equals_teacher_forced(cell, attention):
    model = Seq2Seq(12, 9, embed_dim=4, units=6, cell=cell, attention=attention,
                    bidirectional=cell == "gru")
    dec = _dec(model)
    full = np.asarray(model((SRC, dec)))  # keras.layers.RNN over the whole target
    stepped, weights = model.teacher_forced_attention(SRC, dec)
    np.testing.assert_allclose(full, np.asarray(stepped), atol=1e-5)
    assert full.shape == (2, 4, 11)
    if attention == "bahdanau":
        w = np.asarray(weights)  # (B, T, S)
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
        assert (w[:, :, SRC[0] == 0][0] == 0).all() and (w[1][:, 2:] == 0).all()
    else:
        assert weights is None


def test_cell_runs_in_keras_rnn_with_memory_set():
    cell = AttentionDecoderCell(5, memory_dim=3)
    memory = np.random.default_rng(0).normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1]], bool)
    cell.set_memory(memory, mask=mask)
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    x = np.random.default_rng(1).normal(size=(2, 3, 2)).astype("float32")
    out, state = rnn(x)
    # The same by hand with step()
    mem = cell.make_memory(memory, mask=mask)
    states = [np.zeros((2, 5), "float32")]
    for t in range(3):
        o, states, w = cell.step(x[:, t], states, mem)
        np.testing.assert_allclose(np.asarray(out)[:, t], np.asarray(o), atol=1e-5)
        assert (np.asarray(w)[0, 2:] == 0).all()
    np.testing.assert_allclose(np.asarray(state), np.asarray(states[0]), atol=1e-5)
    cell.clear_memory()
    with pytest.raises(ValueError, match="set_memory"):
        rnn(x)
    assert AttentionDecoderCell.from_config(cell.get_config()).get_config() == cell.get_config()


def test_keras_round_trip(tmp_path):
    model = Seq2Seq(12, 9, embed_dim=4, units=6, cell="lstm", attention="bahdanau")
    dec = _dec(model)
    expected = np.asarray(model((SRC, dec)))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded, Seq2Seq) and loaded.get_config() == model.get_config()
    np.testing.assert_allclose(np.asarray(loaded((SRC, dec))), expected, atol=1e-6)


def test_parameter_counts_differ_only_by_the_attention():
    sizes = dict(source_vocab=60, target_vocab=14, embed_dim=32, units=128)
    with_att = Seq2Seq(**sizes, attention="bahdanau")
    without = Seq2Seq(**sizes, attention="none")
    with_att.build()
    without.build()
    a, b = with_att.param_report(), without.param_report()
    assert a["total"] == with_att.count_params() and b["total"] == without.count_params()
    assert a["total"] - b["total"] == a["attention"]
    # W_s (128, 32) + W_h (256, 32) + bias (32) + v (32): under 4 % of the model
    assert a["attention"] == 128 * 32 + 256 * 32 + 32 + 32
    assert a["attention"] / b["total"] < 0.04


def test_bad_arguments_are_explained():
    with pytest.raises(ValueError, match="cell='rnn'"):
        Seq2Seq(5, 5, cell="rnn")
    with pytest.raises(ValueError, match="bahdanau or none"):
        Seq2Seq(5, 5, attention="luong")


def test_training_logs_a_gradient_norm_per_part():
    model = Seq2Seq(12, 9, embed_dim=4, units=6, attention="bahdanau")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    dec = _dec(model)
    logs = model.fit((SRC, dec), np.roll(dec, -1, axis=1), epochs=1, verbose=0).history
    parts = {k.split("/", 1)[1] for k in logs if k.startswith("grad_norm/")}
    assert parts == {"source_embedding", "target_embedding", "encoder", "bridge", "decoder",
                     "attention", "readout"}
    assert logs["grad_norm"][0] > 0
