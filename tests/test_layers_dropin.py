"""keras_seq.layers as a drop-in for Keras's LSTM, GRU and SimpleRNN (and their cells).

The argument list is read from Keras itself (the constructor's signature, the legacy
arguments it pops from ``**kwargs`` and, for a layer, what it passes on to
``keras.layers.RNN``), so an argument a new Keras adds fails here until keras-seq takes it
and :data:`SAMPLES` gives it a value. Each argument, set away from its default, must be
accepted, serialize as Keras serializes it and give Keras's outputs and gradients with
copied weights; then the same inside ``Bidirectional`` and ``TimeDistributed``, and a
model file saved with the built-ins loaded into keras-seq's layers.
"""

import inspect
import re
import warnings

import keras
import numpy as np
import pytest

import keras_seq.layers as ours
from keras_seq.layers.testing import compare_with_reference

TOL = 1e-5
X = np.random.default_rng(0).normal(size=(2, 5, 3)).astype("float32")  # (B, T, D)
MASK = np.array([[1, 1, 1, 1, 1], [0, 1, 1, 1, 0]], bool)
LAYERS = ("LSTM", "GRU", "SimpleRNN")
CELLS = ("LSTMCell", "GRUCell", "SimpleRNNCell")

#: a value away from Keras's default for every argument the built-ins take
SAMPLES = {
    "activation": "relu", "recurrent_activation": "hard_sigmoid", "use_bias": False,
    "kernel_initializer": "he_normal", "recurrent_initializer": "glorot_normal",
    "bias_initializer": "ones", "unit_forget_bias": False, "kernel_regularizer": "l2",
    "recurrent_regularizer": "l1", "bias_regularizer": "l2", "activity_regularizer": "l1",
    "kernel_constraint": "non_neg", "recurrent_constraint": "unit_norm",
    "bias_constraint": "non_neg", "dropout": 0.25, "recurrent_dropout": 0.25, "seed": 7,
    "return_sequences": True, "return_state": True, "go_backwards": True, "stateful": True,
    "unroll": True, "use_cudnn": False, "reset_after": False, "implementation": 1,
    "zero_output_for_mask": True,
}


def _popped(cls) -> set[str]:
    """The arguments ``cls.__init__`` takes out of ``**kwargs`` by name (``implementation``)."""
    return set(re.findall(r"kwargs\.pop\(\s*[\"'](\w+)[\"']", inspect.getsource(cls.__init__)))


def builtin_arguments(name: str) -> list[str]:
    """Every constructor argument of ``keras.layers.<name>`` but ``units``."""
    cls = getattr(keras.layers, name)
    names = set(inspect.signature(cls.__init__).parameters) | _popped(cls)
    if not name.endswith("Cell"):  # a layer passes **kwargs on to keras.layers.RNN
        names |= set(inspect.signature(keras.layers.RNN.__init__).parameters) - {"cell"}
    return sorted(names - {"self", "units", "kwargs"})


#: arguments Keras 3.15 takes but loses: left out of its get_config (so a saved model forgets
#: them), and SimpleRNN never hands activity_regularizer to keras.layers.RNN (no loss).
#: keras-seq keeps each with its documented meaning.
KERAS_LOSES = {("LSTM", "use_cudnn"), ("GRU", "use_cudnn"), ("SimpleRNN", "seed"),
               ("SimpleRNN", "activity_regularizer")}


def _pairs(names):
    return [(name, arg) for name in names for arg in builtin_arguments(name)]


def _config_value(layer, arg):
    config = layer.get_config()
    return config.get(arg, config.get("cell", {}).get("config", {}).get(arg))


def _quiet(build):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # implementation=1's one line: tested below
        return build()


def test_every_argument_has_a_sample():
    missing = sorted({arg for _, arg in _pairs(LAYERS + CELLS)} - set(SAMPLES))
    assert not missing, (f"Keras's recurrent layers take {missing}, which keras-seq's are "
                         "not tested with: give each a value in SAMPLES and make it work")


@pytest.mark.parametrize("name,arg", _pairs(LAYERS))
def test_each_layer_argument_means_what_it_means_in_keras(name, arg):
    kw = {arg: SAMPLES[arg]}
    if arg == "stateful":
        kw["return_state"] = True
    reference = getattr(keras.layers, name)(4, **kw)
    layer = _quiet(lambda: getattr(ours, name)(4, **kw))
    mine = _config_value(layer, arg)
    if (name, arg) in KERAS_LOSES:  # Keras's config drops it; keras-seq's keeps it
        assert _config_value(reference, arg) is None, f"Keras keeps {arg} now: drop it here"
        again = type(layer).from_config(layer.get_config())
        assert mine is not None and _config_value(again, arg) == mine, arg
    else:
        assert mine == _config_value(reference, arg), arg
    call = {"mask": MASK} if arg == "zero_output_for_mask" else {}
    diffs = compare_with_reference(layer, reference, X, **call)
    assert max(diffs.values()) < TOL, (arg, diffs)
    # regularizers: one loss each (and the activity regularizer Keras's SimpleRNN drops)
    extra = int((name, arg) == ("SimpleRNN", "activity_regularizer"))
    assert len(layer.losses) == len(reference.losses) + extra


@pytest.mark.parametrize("name,arg", _pairs(CELLS))
def test_each_cell_argument_means_what_it_means_in_keras(name, arg):
    kw = {arg: SAMPLES[arg]}
    reference = keras.layers.RNN(getattr(keras.layers, name)(4, **kw), return_sequences=True)
    layer = keras.layers.RNN(_quiet(lambda: getattr(ours, name)(4, **kw)),
                             return_sequences=True)
    assert _config_value(layer, arg) == _config_value(reference, arg), arg
    diffs = compare_with_reference(layer, reference, X)
    assert max(diffs.values()) < TOL, (arg, diffs)


@pytest.mark.parametrize("name", LAYERS + CELLS)
def test_call_takes_every_argument_the_builtins_call_takes(name):
    def arguments(cls):
        return set(inspect.signature(cls.call).parameters) - {"self"}

    theirs, mine = arguments(getattr(keras.layers, name)), arguments(getattr(ours, name))
    if name == "SimpleRNNCell":  # Keras names the input `sequence`, others `inputs`;
        theirs = theirs - {"sequence"} | {"inputs"}  # keras.layers.RNN passes it positionally
    assert theirs <= mine, theirs - mine


@pytest.mark.parametrize("name", LAYERS)
def test_implementation_1_is_said_in_one_line_and_changes_nothing(name):
    if name == "SimpleRNN":
        pytest.skip("keras.layers.SimpleRNN takes no implementation argument")
    with pytest.warns(UserWarning, match="implementation=1") as said:
        getattr(ours, name)(4, implementation=1)
    assert len(said) == 1 and "\n" not in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(ours, name)(4, implementation=2)  # Keras's default: nothing to say
        getattr(ours, name)(4, implementation=0)  # Keras 3 takes the legacy 0 and runs 2
        getattr(keras.layers, name)(4, implementation=0)  # (as it does)
    with pytest.raises(ValueError, match=r"implementation=3.*expected 0, 1 or 2"):
        getattr(ours, name)(4, implementation=3)


@pytest.mark.parametrize("name", LAYERS)
def test_inside_bidirectional_and_time_distributed(name):
    def wrapped(module, wrapper, **kw):
        return wrapper(getattr(module, name)(4, return_sequences=True, **kw))

    bi = compare_with_reference(wrapped(ours, keras.layers.Bidirectional),
                                wrapped(keras.layers, keras.layers.Bidirectional), X, mask=MASK)
    x4 = np.stack([X, X[::-1]], axis=1)  # (B, 2, T, D): one sequence per step of the outer time
    td = compare_with_reference(wrapped(ours, keras.layers.TimeDistributed),
                                wrapped(keras.layers, keras.layers.TimeDistributed), x4)
    assert max(bi.values()) < TOL and max(td.values()) < TOL, (bi, td)


def _builtin_model():
    inputs = keras.Input((5, 3))
    x = keras.layers.Masking()(inputs)
    x = keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True))(x)
    x = keras.layers.GRU(4, return_sequences=True, reset_after=False)(x)
    x = keras.layers.TimeDistributed(keras.layers.Dense(2))(x)
    return keras.Model(inputs, keras.layers.SimpleRNN(3, activation="relu")(x))


def test_a_model_saved_with_the_builtins_loads_into_keras_seq_layers(tmp_path):
    path = tmp_path / "builtins.keras"
    _builtin_model().save(path)
    builtin = keras.saving.load_model(path)
    model = ours.from_builtins(builtin)
    recurrent = [layer for layer in model.layers if "rnn" in type(layer).__name__.lower()
                 or type(layer).__name__ in ("LSTM", "GRU", "Bidirectional")]
    kinds = [type(getattr(layer, "forward_layer", layer)) for layer in recurrent]
    assert kinds == [ours.LSTM, ours.GRU, ours.SimpleRNN], kinds
    x = X.copy()
    x[1, :2] = 0.0  # masked steps
    np.testing.assert_allclose(model.predict(x, verbose=0), builtin.predict(x, verbose=0),
                               atol=TOL)
    again = tmp_path / "keras_seq.keras"
    model.save(again)  # and it saves and loads as a keras-seq model
    loaded = keras.saving.load_model(again)
    assert type(loaded.layers[-1]) is ours.SimpleRNN
    np.testing.assert_allclose(loaded.predict(x, verbose=0), builtin.predict(x, verbose=0),
                               atol=TOL)


def test_from_builtins_says_what_it_cannot_convert():
    class Subclassed(keras.Model):
        def call(self, x):
            return x

    with pytest.raises(ValueError, match="Subclassed.*Sequential or functional"):
        ours.from_builtins(Subclassed())


@pytest.mark.parametrize("name", LAYERS)
def test_a_traced_call_keeps_the_static_number_of_timesteps(name):
    # TensorFlow's loops lose it in a graph; with it unknown, Keras 3.15's TimeDistributed
    # maps over the batch size instead of the timesteps: (2, 2, 2) here, not (2, 5, 2)
    model = keras.Sequential([keras.Input((5, 3)), getattr(ours, name)(4, return_sequences=True),
                              keras.layers.TimeDistributed(keras.layers.Dense(2))])
    assert model.predict(X, verbose=0).shape == (2, 5, 2)
