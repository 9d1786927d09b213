import keras
import numpy as np
import pytest

from keras_seq import layers as seq_layers
from keras_seq.models.classifier import AttentionPooling, SequenceClassifier

SHORT = np.array([[5, 3, 7, 9], [4, 2, 0, 0], [6, 0, 0, 0]], "int32")
PADDED = np.concatenate([SHORT, np.zeros((3, 3), "int32")], axis=1)  # 3 more pad steps


def tiny(**kwargs):
    args = {"vocab_size": 12, "num_classes": 3, "embed_dim": 6, "units": 5, "cell": "gru"}
    return SequenceClassifier(**{**args, **kwargs})


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # 1-step rows
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("pooling", ["last", "mean", "attention"])
def test_padding_does_not_change_the_output(pooling, bidirectional):
    model = tiny(pooling=pooling, bidirectional=bidirectional, num_layers=2, residual=True)
    out = np.asarray(model(SHORT))
    assert out.shape == (3, 3)
    np.testing.assert_allclose(np.asarray(model(PADDED)), out, atol=1e-5)
    # Each row alone (no padding at all) gives its row of the batch.
    for row, length in zip(range(3), (4, 2, 1)):
        alone = np.asarray(model(SHORT[row:row + 1, :length]))
        np.testing.assert_allclose(alone[0], out[row], atol=1e-5)


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_bidirectional_last_is_forward_end_and_backward_start(cell):
    model = tiny(cell=cell, bidirectional=True, pooling="last")
    model(PADDED)
    ref = keras.layers.Bidirectional(
        {"rnn": seq_layers.SimpleRNN, "lstm": seq_layers.LSTM}[cell](5))
    for row, length in zip(range(3), (4, 2, 1)):
        emb = model.embedding(SHORT[row:row + 1, :length])
        if not ref.built:
            ref(emb)
            ref.set_weights(model.rnns[0].get_weights())
        expected = np.asarray(ref(emb))[0]  # (2U,): forward final ‖ backward final
        got = np.asarray(model.features(PADDED[row:row + 1]))[0]
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_unidirectional_last_and_mean_read_the_right_steps():
    for pooling in ("last", "mean"):
        model = tiny(cell="lstm", pooling=pooling)
        model(PADDED)
        states = np.asarray(model.rnns[0](model.embedding(SHORT[1:2, :2])))  # (1, 2, U)
        want = states[0, -1] if pooling == "last" else states[0].mean(0)
        np.testing.assert_allclose(np.asarray(model.features(PADDED[1:2]))[0], want, atol=1e-5)


def test_attention_weights_are_masked_and_normalised():
    model = tiny(pooling="attention", attention_units=4)
    weights = np.asarray(model.attention_weights(PADDED))
    assert weights.shape == PADDED.shape
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[PADDED == 0] == 0.0)
    logits, again = model(PADDED, return_attention=True)
    np.testing.assert_allclose(np.asarray(again), weights)
    assert model.attention.units == 4
    assert tiny(pooling="attention", units=8).attention.units == 4  # default units // 2


def test_attention_pooling_uniform_on_equal_scores():
    pool = AttentionPooling(3)
    h = np.ones((1, 4, 2), "float32")
    context, weights = pool(h, mask=np.array([[True, True, True, False]]))
    np.testing.assert_allclose(np.asarray(weights), [[1 / 3, 1 / 3, 1 / 3, 0.0]], atol=1e-6)
    np.testing.assert_allclose(np.asarray(context), [[1.0, 1.0]], atol=1e-6)


def test_config_round_trip_and_keras_file(tmp_path):
    model = tiny(cell="lstm", bidirectional=True, pooling="attention", num_layers=2,
                 attention_units=3, dropout=0.1, residual=True)
    config = model.get_config()
    for key, value in {"vocab_size": 12, "num_classes": 3, "embed_dim": 6, "units": 5,
                       "cell": "lstm", "num_layers": 2, "bidirectional": True,
                       "pooling": "attention", "attention_units": 3, "dropout": 0.1,
                       "residual": True}.items():
        assert config[key] == value, key
    clone = SequenceClassifier.from_config(config)
    assert clone.get_config() == config
    out = np.asarray(model(PADDED))
    model.save(tmp_path / "clf.keras")
    again = keras.saving.load_model(tmp_path / "clf.keras")
    assert isinstance(again, SequenceClassifier)
    np.testing.assert_allclose(np.asarray(again(PADDED)), out, atol=1e-6)
    np.testing.assert_allclose(np.asarray(again.attention_weights(PADDED)),
                               np.asarray(model.attention_weights(PADDED)), atol=1e-6)


def test_one_fit_step_lowers_the_loss():
    # Class = whether token 2 or token 3 appears; sequences of different lengths.
    rng = np.random.default_rng(0)
    x = rng.integers(4, 10, (32, 6)).astype("int32")
    y = rng.integers(0, 2, 32).astype("int32")
    x[np.arange(32), rng.integers(0, 3, 32)] = np.where(y == 1, 2, 3)
    x[::2, 4:] = 0
    model = tiny(num_classes=2, pooling="mean")
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    assert model.evaluate(x, y, verbose=0) < before


@pytest.mark.parametrize("kwargs, match", [
    ({"cell": "transformer"}, r"cell='transformer'.*rnn, gru, lstm"),
    ({"pooling": "max"}, r"pooling='max'.*last, mean, attention"),
    ({"num_classes": 1}, r"num_classes=1.*≥ 2"),
    ({"vocab_size": 0}, r"vocab_size=0"),
    ({"units": 0}, r"units=0.*positive integer"),
    ({"num_layers": 0}, r"num_layers=0"),
    ({"attention_units": -1}, r"attention_units=-1"),
    ({"dropout": 1.0}, r"dropout=1.0.*\[0, 1\)"),
])
def test_bad_arguments_say_what_and_how(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tiny(**kwargs)


def test_return_attention_needs_attention_pooling():
    with pytest.raises(ValueError, match="needs pooling='attention'"):
        tiny(pooling="last").attention_weights(SHORT)
