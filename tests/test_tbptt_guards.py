"""Truncated BPTT cannot be broken silently (issue 53): a stateful model's ``fit`` with
``shuffle=True`` or batches of other rows than its state holds is refused in one line
before anything trains, the stream datasets refuse to be read out of order, and a stateful
layer without a static batch says how to give it one."""

import random

import keras
import numpy as np
import pytest

from keras_seq.data.batching import stream_arrays, stream_dataset
from keras_seq.data.pydatasets import StreamBatches
from keras_seq.errors import DataError, KerasSeqError
from keras_seq.layers import LSTM
from keras_seq.tasks.lm.task import StreamFrom
from keras_seq.training.callbacks import ResetStatesCallback
from keras_seq.training.fit_checks import check_stateful_fit

V, T = 11, 5
IDS = np.arange(400) % V


def stateful_model(batch: int, stateful: bool = True):
    model = keras.Sequential([
        keras.Input((T,), batch_size=batch if stateful else None),
        keras.layers.Embedding(V, 4),
        LSTM(6, stateful=stateful, return_sequences=True, name="lstm"),
        keras.layers.Dense(V),
    ])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)  # XLA would compile longer than these tiny fits run
    return model


def weights(model):
    return [np.array(w) for w in model.get_weights()]


def fit(model, *data, **kwargs):
    return model.fit(*data, epochs=1, verbose=0, callbacks=[ResetStatesCallback()], **kwargs)


# JAX's and torch's fit call the model on a first batch before any callback runs, where
# Keras's own check refuses a batch of other rows (in its own words); TensorFlow's traces
# it with the batch dimension None, and only the callback's check catches it.
keras_checks_first = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                        reason="Keras's own batch check refuses it first")


def assert_one_line(err, *words):
    message = str(err.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, message


# -- the fit check (ResetStatesCallback.on_train_begin) ------------------------------------

@pytest.mark.parametrize("data", ["stream_dataset", "stream_arrays"])
def test_fit_shuffle_is_refused_before_training(data):
    model = stateful_model(4)
    before = weights(model)
    args = ((stream_dataset(IDS, 4, T),) if data == "stream_dataset"
            else stream_arrays(IDS, 4, T))
    kwargs = {} if data == "stream_dataset" else {"batch_size": 4}
    with pytest.raises(KerasSeqError) as err:
        fit(model, *args, **kwargs)  # Keras's default: shuffle=True
    assert_one_line(err, "shuffle=True", "shuffle=False", "'lstm'")
    for a, b in zip(before, weights(model)):
        np.testing.assert_array_equal(a, b)  # nothing trained


@pytest.mark.parametrize("data", ["stream_dataset", "stream_arrays"])
def test_fit_in_stream_order_trains(data):
    model = stateful_model(4)
    before = weights(model)
    args = ((stream_dataset(IDS, 4, T),) if data == "stream_dataset"
            else stream_arrays(IDS, 4, T))
    kwargs = {} if data == "stream_dataset" else {"batch_size": 4}
    history = fit(model, *args, shuffle=False, **kwargs)
    assert np.isfinite(history.history["loss"][0])
    assert any(not np.array_equal(a, b) for a, b in zip(before, weights(model)))


@keras_checks_first
@pytest.mark.parametrize("data", ["stream_dataset", "stream_arrays"])
def test_batch_mismatch_is_one_line(data):
    model = stateful_model(8)
    args = ((stream_dataset(IDS, 4, T),) if data == "stream_dataset"
            else stream_arrays(IDS, 4, T))
    kwargs = {} if data == "stream_dataset" else {"batch_size": 4}
    with pytest.raises(KerasSeqError) as err:
        fit(model, *args, shuffle=False, **kwargs)
    assert_one_line(err, "'lstm'", "batches of 8", "batches of 4", "batch_size=8",
                    "keras.Input(shape=(T,), batch_size=4)")


@keras_checks_first
def test_arrays_without_batch_size_get_keras_default():
    with pytest.raises(KerasSeqError) as err:
        fit(stateful_model(4), *stream_arrays(IDS, 4, T), shuffle=False)
    assert_one_line(err, "without batch_size", "batches of 32")


def test_a_short_last_array_batch_is_refused():
    x, y = stream_arrays(IDS, 4, T)
    with pytest.raises(KerasSeqError) as err:
        fit(stateful_model(4), x[:-2], y[:-2], batch_size=4, shuffle=False)
    assert_one_line(err, f"the {len(x) - 2} rows", "last batch of 2")


@pytest.mark.filterwarnings("ignore:`shuffle=True` was passed")
def test_endless_stream_from_trains_with_keras_default_shuffle():
    stream = stream_dataset(IDS, 4, T)
    model = stateful_model(4)
    n = len(stream)
    history = model.fit(StreamFrom(stream, start=3), steps_per_epoch=n, epochs=2, verbose=0,
                        callbacks=[ResetStatesCallback(n, n)])  # Keras ignores shuffle here
    assert len(history.history["loss"]) == 2


def test_direct_check_and_models_without_state():
    x, _ = stream_arrays(IDS, 4, T)
    check_stateful_fit(stateful_model(4, stateful=False), x, shuffle=True)  # not stateful
    check_stateful_fit(stateful_model(4), x, batch_size=4)
    check_stateful_fit(stateful_model(4), x, steps_per_epoch=len(x) // 4)  # Keras: 4 rows
    with pytest.raises(KerasSeqError, match="shuffle"):
        check_stateful_fit(stateful_model(4), StreamBatches(x, x, 4), shuffle=True)
    with pytest.raises(KerasSeqError, match="batches of 8 rows, but fit.batch_size=4."):
        check_stateful_fit(stateful_model(8), x, batch_size=4)
    ResetStatesCallback().on_train_begin()  # outside a fit: nothing to check, no model


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.data")
def test_tf_dataset_batch_is_checked():
    import tensorflow as tf

    x, y = stream_arrays(IDS, 4, T)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True)
    check_stateful_fit(stateful_model(4), data, shuffle=True)  # Keras does not shuffle it
    with pytest.raises(KerasSeqError) as err:
        check_stateful_fit(stateful_model(8), data)
    assert_one_line(err, "tf.data.Dataset feeds batches of 4")
    check_stateful_fit(stateful_model(8), data.unbatch().batch(4))  # batch None: unchecked


# -- the datasets' own order check --------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: stream_dataset(IDS, 4, T),
                                  lambda: StreamBatches(*stream_arrays(IDS, 4, T), 4)])
def test_stream_datasets_refuse_out_of_order_items(make):
    ds = make()
    ds[0], ds[1]  # Keras's spec peeks, then its pass from 0
    for k in range(len(ds)):
        ds[k]
    ds[0], ds[1], ds[0]  # a new pass may start at any time
    with pytest.raises(DataError) as err:
        ds[5]
    assert_one_line(err, "batch 5 was requested after batch 0", "shuffle=False",
                    "check_order=False")
    ds.batch(7)  # the unchecked accessor
    np.testing.assert_array_equal(ds.batch(3)[0], stream_arrays(IDS, 4, T)[0][12:16])


def test_check_order_false_allows_any_order():
    ds = stream_dataset(IDS, 4, T, check_order=False)
    for k in (0, 1, 8, 3, 0, 7):
        ds[k]
    model = stateful_model(4, stateful=False)
    model.fit(ds, epochs=1, verbose=0)  # shuffled by Keras, as asked


def test_shuffled_fit_without_the_callback_meets_the_dataset_check():
    random.seed(0)  # Keras's shuffle
    model = stateful_model(4, stateful=False)
    with pytest.raises(Exception, match="shuffle=False"):  # under TF: inside a tf.data error
        model.fit(stream_dataset(IDS, 4, T), epochs=1, verbose=0)


def test_stream_from_reads_the_stream_unchecked():
    ring = StreamFrom(stream_dataset(np.arange(41), batch_size=2, bptt=4), start=3)
    assert [int(ring[i][0][0, 0]) for i in (0, 1, 0, 1, 2, 3, 4)] == [12, 0, 12, 0, 4, 8, 12]


# -- the static-batch message ---------------------------------------------------------------

def test_stateful_layer_without_static_batch_says_how():
    with pytest.raises(ValueError) as err:
        keras.Sequential([keras.Input((T,)), keras.layers.Embedding(V, 4),
                          LSTM(6, stateful=True, name="lstm")])
    assert_one_line(err, "lstm", "(None, 5, 4)", "keras.Input(shape=(T, ...), batch_size=B)",
                    "(B, T) batch")
