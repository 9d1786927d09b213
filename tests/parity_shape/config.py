"""The parity shape's typed config (light: no Keras)."""

from dataclasses import dataclass

from keras_seq.training.config import TrainConfig, option


@dataclass
class ParityConfig(TrainConfig):
    kind = "parity"  # config.json says "kind": "parity"
    length: int = option(8, "bits per sequence")
    train_size: int = option(512, "training sequences")
    units: int = option(16, "GRU units")

    def problems(self):
        problems = super().problems()
        if self.length < 1:
            problems.append(f"length must be ≥ 1 (got {self.length})")
        return problems
