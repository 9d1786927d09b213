"""keras_seq.layers.count_params / param_table: exact counts and the seeds' ratios."""

import keras
import pytest

from keras_seq.layers import GRU, LSTM, SimpleRNN, count_params, param_table, weight_shapes

SIZES = [(4, 3), (128, 256), (300, 650)]


@pytest.mark.parametrize("input_dim,units", SIZES)
def test_recurrent_weight_ratios_are_exact(input_dim, units):
    rec = {
        cell: weight_shapes(cell, input_dim, units)["recurrent_kernel"]
        for cell in ("simple_rnn", "gru", "lstm", "cifg")
    }
    base = rec["simple_rnn"][0] * rec["simple_rnn"][1]
    assert base == units * units
    assert rec["lstm"][0] * rec["lstm"][1] == 4 * base  # LSTM: 4x a SimpleRNN
    assert rec["gru"][0] * rec["gru"][1] == 3 * base  # GRU: 3x
    assert rec["cifg"][0] * rec["cifg"][1] == 3 * base
    # Whole cells (without GRU's second bias row) keep the same ratios.
    srnn = count_params("simple_rnn", input_dim, units)
    assert count_params("lstm", input_dim, units) == 4 * srnn
    assert count_params("gru", input_dim, units, reset_after=False) == 3 * srnn
    assert count_params("gru", input_dim, units) == 3 * srnn + 3 * units


@pytest.mark.parametrize(
    "cell,layer,kw",
    [
        ("simple_rnn", keras.layers.SimpleRNN, {}),
        ("lstm", keras.layers.LSTM, {}),
        ("gru", keras.layers.GRU, {}),
        ("gru", keras.layers.GRU, {"reset_after": False}),
        ("lstm", keras.layers.LSTM, {"use_bias": False}),
    ],
)
def test_counts_match_built_layers(cell, layer, kw):
    ours = {"simple_rnn": SimpleRNN, "lstm": LSTM, "gru": GRU}[cell](3, **kw)
    for built in (layer(3, **kw), ours):
        built.build((None, 5, 4))
        assert built.count_params() == count_params(cell, 4, 3, **kw)
        shapes = [tuple(w.shape) for w in built.weights]
        assert shapes == list(weight_shapes(cell, 4, 3, **kw).values())


def test_param_table():
    rows = param_table(SIZES)
    assert [(r["input_dim"], r["units"]) for r in rows] == SIZES
    row = rows[1]
    assert row["lstm"] == 4 * (128 * 256 + 256 * 256 + 256) == 394_240
    assert row["rnn"] == 98_560  # the registry's name; count_params reads "simple_rnn" too
    assert count_params("simple_rnn", 128, 256) == row["rnn"]
    assert row["recurrent_ratio"] == {"rnn": 1.0, "gru": 3.0, "lstm": 4.0, "cifg": 3.0}


def test_bad_arguments():
    with pytest.raises(ValueError, match="cell_type"):
        count_params("transformer", 4, 3)
    with pytest.raises(ValueError, match="units"):
        count_params("lstm", 4, 0)
