"""The parity shape's typed config (light: no Keras)."""

from dataclasses import dataclass

from keras_seq.options import option
from keras_seq.ranges import AT_LEAST_1
from keras_seq.training.config import TrainConfig


@dataclass
class ParityConfig(TrainConfig):
    kind = "parity"  # config.json says "kind": "parity"
    length: int = option(8, "bits per sequence", range=AT_LEAST_1)
    train_size: int = option(512, "training sequences", range=AT_LEAST_1)
    units: int = option(16, "GRU units", range=AT_LEAST_1)
