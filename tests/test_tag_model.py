"""SequenceTagger: exact masking (both directions), causality, saving, training, param counts."""

import keras
import numpy as np
import pytest

from keras_seq.models.tagger import (
    SequenceTagger,
    tagger_param_count,
    units_for_equal_params,
)

SMALL = {"vocab_size": 20, "num_tags": 5, "embed_dim": 6, "units": 7}


def _logits(model, ids):
    return keras.ops.convert_to_numpy(model(np.asarray(ids, "int32")))


@pytest.mark.parametrize(
    "cell,bidirectional,num_layers",
    [("lstm", True, 1), ("gru", True, 2), ("rnn", True, 1), ("lstm", False, 2)],
)
def test_padding_at_the_end_does_not_change_real_logits(cell, bidirectional, num_layers):
    keras.utils.set_random_seed(0)
    model = SequenceTagger(**SMALL, cell=cell, bidirectional=bidirectional,
                           num_layers=num_layers)
    sentence = [5, 7, 2, 9]
    alone = _logits(model, [sentence])[0]  # (4, num_tags), no padding at all
    padded = _logits(model, [sentence + [0, 0, 0], [3, 1, 4, 1, 5, 9, 2]])[0]
    assert padded.shape == (7, SMALL["num_tags"])
    np.testing.assert_allclose(padded[:4], alone, atol=1e-5)
    # Different amounts of padding agree too.
    more = _logits(model, [sentence + [0] * 9])[0]
    np.testing.assert_allclose(more[:4], alone, atol=1e-5)


def test_bidirectional_sees_the_future_and_unidirectional_does_not():
    keras.utils.set_random_seed(1)
    a, b = [[4, 6, 8, 3, 0]], [[4, 6, 8, 11, 0]]  # differ only at position 3
    bi = SequenceTagger(**SMALL, cell="gru", bidirectional=True)
    uni = SequenceTagger(**SMALL, cell="gru", bidirectional=False)
    la, lb = _logits(bi, a)[0], _logits(bi, b)[0]
    assert np.abs(la[:3] - lb[:3]).max() > 1e-4  # earlier positions depend on the future
    ua, ub = _logits(uni, a)[0], _logits(uni, b)[0]
    np.testing.assert_allclose(ua[:3], ub[:3], atol=1e-6)  # causal: they do not
    assert np.abs(ua[3] - ub[3]).max() > 1e-4


def test_loss_ignores_padded_positions():
    keras.utils.set_random_seed(2)
    model = SequenceTagger(**SMALL, cell="lstm")
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.array([[5, 7, 2], [3, 4, 0]], "int32")
    y = np.array([[1, 2, 3], [0, 4, 0]], "int32")
    x_pad = np.pad(x, ((0, 0), (0, 3)))
    y_pad = np.concatenate([y, np.full((2, 3), 4, "int32")], axis=1)  # junk at the padding
    y_junk = y.copy()
    y_junk[1, 2] = 3  # the label at x[1, 2] (padding) must not count either
    loss = model.evaluate(x, y, verbose=0)
    assert model.evaluate(x_pad, y_pad, verbose=0) == pytest.approx(loss, rel=1e-5)
    assert model.evaluate(x, y_junk, verbose=0) == pytest.approx(loss, rel=1e-5)


def test_config_and_keras_file_round_trip(tmp_path):
    keras.utils.set_random_seed(3)
    model = SequenceTagger(**SMALL, cell="gru", num_layers=2, bidirectional=True, dropout=0.1)
    ids = np.array([[1, 2, 3, 0], [4, 5, 6, 7]], "int32")
    expected = _logits(model, ids)
    config = model.get_config()
    for key, value in {**SMALL, "cell": "gru", "num_layers": 2, "bidirectional": True,
                       "dropout": 0.1}.items():
        assert config[key] == value
    clone = SequenceTagger.from_config(config)
    assert clone.get_config() == config
    path = tmp_path / "tagger.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, SequenceTagger)
    np.testing.assert_allclose(_logits(loaded, ids), expected, atol=1e-6)


def test_a_few_fit_steps_lower_the_loss():
    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 7, size=48)
    x = np.zeros((48, 6), "int32")
    for row, n in enumerate(lengths):
        x[row, :n] = rng.integers(1, SMALL["vocab_size"], size=n)
    y = np.where(x > 0, x % SMALL["num_tags"], 0).astype("int32")  # tag = token id mod 5
    model = SequenceTagger(**{**SMALL, "units": 16}, cell="lstm")
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, batch_size=16, epochs=6, verbose=0).history["loss"]
    assert history[-1] < 0.6 * history[0]


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_param_counts_match_built_models_and_equal_params_helper(cell):
    args = {"vocab_size": 50, "num_tags": 9, "embed_dim": 16}
    for bidirectional, layers_ in ((True, 2), (False, 1)):
        model = SequenceTagger(**args, units=12, cell=cell, num_layers=layers_,
                               bidirectional=bidirectional)
        model(np.ones((1, 3), "int32"))
        assert model.count_params() == tagger_param_count(
            **args, units=12, cell=cell, num_layers=layers_, bidirectional=bidirectional)
    for num_layers in (1, 2):
        bi = tagger_param_count(**args, units=64, cell=cell, num_layers=num_layers)
        units = units_for_equal_params(**args, units_bi=64, cell=cell, num_layers=num_layers)
        uni = tagger_param_count(**args, units=units, cell=cell, num_layers=num_layers,
                                 bidirectional=False)
        embedding = args["vocab_size"] * args["embed_dim"]
        # Within 3% on the weights that differ (recurrent + output), not just in total.
        assert abs(uni - bi) <= 0.03 * (bi - embedding)
        assert units > 64  # one direction needs more units to match two
        # And it is the best integer width: one more or one less is no closer.
        for other in (units - 1, units + 1):
            other_count = tagger_param_count(**args, units=other, cell=cell,
                                             num_layers=num_layers, bidirectional=False)
            assert abs(other_count - bi) >= abs(uni - bi)
    assert SequenceTagger.param_count_for(**args, units=8, cell=cell) == \
        tagger_param_count(**args, units=8, cell=cell)


def test_bad_arguments_say_what_was_received():
    with pytest.raises(ValueError, match=r"cell='cnn'.*rnn, gru, lstm"):
        SequenceTagger(**SMALL, cell="cnn")
    with pytest.raises(ValueError, match=r"dropout=1\.5.*\[0, 1\)"):
        SequenceTagger(**SMALL, dropout=1.5)
    with pytest.raises(ValueError, match=r"vocab_size=1.*<pad>"):
        SequenceTagger(vocab_size=1, num_tags=3)
    with pytest.raises(ValueError, match=r"units_bi=0"):
        units_for_equal_params(10, 3, 4, units_bi=0)
