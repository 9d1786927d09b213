"""The dropout RNG state of a model's layers: read, restored, shifted per replica.

``.keras`` files do not store Keras's ``SeedGenerator`` states, so an exact ``--resume``
saves them apart (``state.json``) and puts them back.

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dropout(0.5, seed=1)])
>>> states = seed_generator_states(model)
>>> _ = model(np.ones((2, 4)), training=True)   # draws a mask: the state moves on
>>> restore_seed_generator_states(model, states)
>>> seed_generator_states(model) == states
True
"""

from __future__ import annotations

import numpy as np


def seed_generators(model) -> list:
    """Every dropout ``SeedGenerator`` of ``model``'s layers, in layer order."""
    return [sg for layer in model._flatten_layers(include_self=True, recursive=True)
            for sg in getattr(layer, "_seed_generators", [])]


def seed_generator_states(model) -> list:
    """The state of every dropout RNG in ``model`` (``.keras`` files do not store them)."""
    return [np.asarray(sg.state.numpy()).tolist() for sg in seed_generators(model)]


def restore_seed_generator_states(model, states: list) -> None:
    """Put back the states :func:`seed_generator_states` read (same model, same layers)."""
    generators = seed_generators(model)
    if len(generators) != len(states):
        raise ValueError(
            f"checkpoint has {len(states)} RNG states but the model has {len(generators)} "
            "random layers; the checkpoint belongs to a different model"
        )
    for sg, state in zip(generators, states):
        sg.state.assign(np.asarray(state, dtype=sg.state.dtype))
