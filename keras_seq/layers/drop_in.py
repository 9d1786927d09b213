"""A model built with Keras's recurrent layers, rebuilt on keras-seq's.

keras-seq's ``LSTM``, ``GRU``, ``SimpleRNN`` and their cells take the built-ins' arguments
with the same meaning and keep their weight layout, so a Sequential or functional model's
config can name keras-seq's classes instead and take the same weights, wrappers
(``Bidirectional``, ``TimeDistributed``, ``RNN(cell)``) included; ``Bidirectional`` becomes
keras-seq's, which takes Keras's fused two-direction kernel for keras-seq's LSTM and GRU.
"""

from __future__ import annotations

import keras

from keras_seq.layers.bidirectional import Bidirectional
from keras_seq.layers.gru import GRU, GRUCell
from keras_seq.layers.lstm import LSTM, LSTMCell
from keras_seq.layers.simple_rnn import SimpleRNN, SimpleRNNCell

#: Keras's class name -> the keras-seq class that replaces it
REPLACEMENTS = {cls.__name__: cls for cls in
                (LSTM, GRU, SimpleRNN, LSTMCell, GRUCell, SimpleRNNCell, Bidirectional)}


def _is_builtin(config: dict) -> bool:
    return (config.get("class_name") in REPLACEMENTS
            and str(config.get("module", "")).startswith("keras.")
            and config.get("registered_name") in (None, config.get("class_name")))


def _swap(config):
    """``config`` with every serialized built-in recurrent layer or cell renamed to
    keras-seq's (same arguments: keras-seq's take the built-ins' config)."""
    if isinstance(config, list):
        return [_swap(item) for item in config]
    if not isinstance(config, dict):
        return config
    swapped = {key: _swap(value) for key, value in config.items()}
    if _is_builtin(config):
        cls = REPLACEMENTS[config["class_name"]]
        swapped["module"] = cls.__module__
        swapped["registered_name"] = keras.saving.get_registered_name(cls)
    return swapped


def from_builtins(model: keras.Model) -> keras.Model:
    """The same model with Keras's ``LSTM``/``GRU``/``SimpleRNN`` (and cells) replaced by
    keras-seq's, weights copied: equal outputs, keras-seq's loop.

    Args:
        model: a built Sequential or functional ``keras.Model``, e.g. one read with
            ``keras.saving.load_model`` from a file saved with the built-ins.

    Returns:
        A new model of the same class and layer names; the input model is unchanged.

    Example:

    >>> import keras, numpy as np
    >>> builtin = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4)])
    >>> model = from_builtins(builtin)
    >>> type(model.layers[0]).__module__
    'keras_seq.layers.lstm'
    >>> x = np.ones((2, 5, 3), "float32")
    >>> bool(np.allclose(model(x), builtin(x), atol=1e-5))
    True
    """
    if not isinstance(model, keras.Model) or not (
            isinstance(model, keras.Sequential) or type(model).__name__ == "Functional"):
        raise ValueError(
            f"from_builtins: received {type(model).__name__}, which is not a Sequential or "
            "functional keras.Model; expected one of those, whose config names its layers. "
            "For a subclassed model, build its layers from keras_seq.layers instead.")
    rebuilt = keras.saving.deserialize_keras_object(
        _swap(keras.saving.serialize_keras_object(model)))
    weights = model.get_weights()
    if len(rebuilt.get_weights()) != len(weights):
        raise ValueError(
            f"from_builtins: the rebuilt model has {len(rebuilt.get_weights())} weight "
            f"arrays, {model.name!r} has {len(weights)}; expected equal counts (is the model "
            "built? call it once on data or give it an Input).")
    rebuilt.set_weights(weights)
    return rebuilt
