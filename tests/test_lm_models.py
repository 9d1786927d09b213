import keras
import numpy as np
import pytest

from keras_seq.models import NPLM, RecurrentLM, nplm_param_count
from keras_seq.models.rnn_lm import reset_recurrent_states


def test_nplm_param_formula_ap_news():
    # Bengio et al. (2003), AP News: |V|=17,964, h=60, n=6, m=100.
    assert nplm_param_count(17_964, order=6, embed_dim=100, hidden=60) == 11_904_264
    small = NPLM(vocab_size=50, order=4, embed_dim=6, hidden=7)
    small(np.zeros((2, 3), "int32"))
    assert small.count_params() == nplm_param_count(50, 4, 6, 7)
    no_direct = NPLM(vocab_size=50, order=4, embed_dim=6, hidden=7, direct=False)
    no_direct(np.zeros((2, 3), "int32"))
    assert no_direct.count_params() == nplm_param_count(50, 4, 6, 7, direct=False)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_recurrent_lm_shapes_and_save(tmp_path, cell):
    lm = RecurrentLM(vocab_size=20, embed_dim=8, units=8, num_layers=2, cell=cell,
                     tie_weights=True, dropout=0.1)
    x = np.random.default_rng(0).integers(0, 20, (3, 6)).astype("int32")
    out = lm(x)
    assert out.shape == (3, 6, 20)
    # tied: no separate output kernel
    assert not any("logits" in w.path and "kernel" in w.path for w in lm.weights)
    lm.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(again(x), out, atol=1e-6)


def test_recurrent_lm_errors():
    with pytest.raises(ValueError, match="tie_weights needs embed_dim == units"):
        RecurrentLM(10, embed_dim=4, units=8, tie_weights=True)
    with pytest.raises(ValueError, match="unknown cell"):
        RecurrentLM(10, cell="transformer")


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_stateful_two_halves_equal_one_stateless_pass(cell):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 20, (2, 10)).astype("int32")
    stateless = RecurrentLM(20, 8, 8, num_layers=2, cell=cell)
    full = stateless(x)
    stateful = stateless.clone_for_batch(2, stateful=True)
    first, second = stateful(x[:, :5]), stateful(x[:, 5:])
    np.testing.assert_allclose(np.concatenate([first, second], 1), full, atol=1e-5)
    # after a reset the second half no longer sees the first
    assert reset_recurrent_states(stateful) == 2
    np.testing.assert_allclose(stateful(x[:, :5]), full[:, :5], atol=1e-5)


def test_untied_output_layer_starts_at_awd_scale():
    # Keras's Glorot default for a (U, |V|) kernel is ~±0.03 at |V| in the thousands: the
    # logits barely depended on h and a two-layer GRU sat on the unigram plateau for 10
    # epochs. The head starts U(±0.1) (AWD-LSTM's decoder init) unless init_scale is set.
    lm = RecurrentLM(5000, 16, 32, num_layers=2, cell="gru")
    lm(np.zeros((1, 2), "int32"))
    kernel = np.asarray(lm.head.kernel)
    assert 0.09 < np.abs(kernel).max() <= 0.1 and np.abs(kernel).mean() > 0.04
    ptb = RecurrentLM(5000, 16, 32, cell="gru", init_scale=0.05)
    ptb(np.zeros((1, 2), "int32"))
    assert np.abs(np.asarray(ptb.head.kernel)).max() <= 0.05



@pytest.mark.parametrize("model", [RecurrentLM(13, 4, 6, cell="lstm"), NPLM(13, order=3)],
                         ids=["RecurrentLM", "NPLM"])
def test_fit_traces_the_train_step_once(model, monkeypatch):
    """The optimizer's and metrics' variables are built before ``fit`` traces its step
    (``BuiltBeforeTracing``): made inside the first trace, they make ``tf.function`` trace
    the step a second time (as Keras does for any model fitted without a strategy)."""
    traces = []
    step = type(model).train_step

    def counted(self, *args):
        traces.append(1)  # runs once per trace (a traced step is not run again in Python)
        return step(self, *args)

    monkeypatch.setattr(type(model), "train_step", counted)
    width = 2 if isinstance(model, NPLM) else 5
    x = np.random.default_rng(0).integers(1, 13, (16, width)).astype("int32")
    y = x[:, -1] if isinstance(model, NPLM) else np.roll(x, -1, axis=1)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert len(traces) == 1
