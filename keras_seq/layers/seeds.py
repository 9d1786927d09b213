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

import random

import keras
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


def explicit_seed(seed: int | None = None) -> int:
    """``seed``, or one drawn now the way Keras's ``SeedGenerator`` draws its default
    (``random.randint(1, 10**9)`` from Python's generator, which
    ``keras.utils.set_random_seed`` seeds).

    ``SeedGenerator(explicit_seed())`` starts in the state ``SeedGenerator(None)`` would, on
    every backend; the difference is that Keras's torch dropout then draws from that state
    (which a run saves and restores) instead of torch's global generator, so a resumed torch
    run draws the masks an uninterrupted one would.

    >>> import keras
    >>> keras.utils.set_random_seed(0)
    >>> first = explicit_seed()
    >>> keras.utils.set_random_seed(0)
    >>> first == explicit_seed() and explicit_seed(7) == 7
    True
    """
    return random.randint(1, int(1e9)) if seed is None else seed


def seeded_dropout(rate: float, **kwargs):
    """``keras.layers.Dropout(rate, …)`` with an :func:`explicit_seed` (see there why); a
    rate of 0 draws nothing, as Keras's own Dropout does not."""
    seed = kwargs.pop("seed", None)
    return keras.layers.Dropout(rate, seed=explicit_seed(seed) if rate > 0 else seed, **kwargs)
