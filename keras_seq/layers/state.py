"""Recurrent state held by stateful layers (truncated BPTT, streaming).

>>> import keras, numpy as np
>>> from keras_seq.layers import LSTM
>>> model = keras.Sequential([keras.Input((3, 2), batch_size=1), LSTM(4, stateful=True)])
>>> _ = model(np.ones((1, 3, 2), "float32"))
>>> reset_recurrent_states(model)
1
"""

from __future__ import annotations


def reset_recurrent_states(model) -> int:
    """Reset every stateful layer inside ``model`` (Keras 3 has no ``Model.reset_states``).

    Returns the number of layers reset.
    """
    count = 0
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if getattr(layer, "stateful", False) and hasattr(layer, "reset_state"):
            layer.reset_state()
            count += 1
    return count
