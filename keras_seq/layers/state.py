"""Recurrent state held by stateful layers (truncated BPTT, streaming).

>>> import keras, numpy as np
>>> from keras_seq.layers import LSTM
>>> model = keras.Sequential([keras.Input((3, 2), batch_size=1), LSTM(4, stateful=True)])
>>> _ = model(np.ones((1, 3, 2), "float32"))
>>> reset_recurrent_states(model)
1
"""

from __future__ import annotations


def stateful_layers(model) -> list:
    """Every stateful recurrent layer inside ``model`` (those with ``reset_state``)."""
    return [layer for layer in model._flatten_layers(include_self=False, recursive=True)
            if getattr(layer, "stateful", False) and hasattr(layer, "reset_state")]


def state_variables(model) -> list:
    """The state variables of every stateful recurrent layer inside ``model``, in order."""
    return [v for layer in stateful_layers(model) for v in (layer.states or ())]


def reset_recurrent_states(model) -> int:
    """Reset every stateful layer inside ``model`` (Keras 3 has no ``Model.reset_states``).

    Returns the number of layers reset.
    """
    layers = stateful_layers(model)
    # Inside JAX's fit the live state is the trainer's, not the variables': write it back
    # first, and fit reads the variables again before the next step.
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None and layers:
        sync()
    for layer in layers:
        layer.reset_state()
    return len(layers)
