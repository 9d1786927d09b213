"""The parity shape's data: bit strings and their parity, generated from the seed."""

import numpy as np


def parity_data(config, n, offset):
    """``(bits (n, length, 1), parity (n,))``, generated from the seed."""
    bits = np.random.default_rng(config.seed + offset).integers(0, 2, (n, config.length))
    return bits[..., None].astype("float32"), bits.sum(axis=1) % 2


def task_data(config):
    """``{split: (bits, parity)}``: 128 val and test sequences beside the training ones."""
    return {"train": parity_data(config, config.train_size, 0),
            "val": parity_data(config, 128, 1), "test": parity_data(config, 128, 2)}
