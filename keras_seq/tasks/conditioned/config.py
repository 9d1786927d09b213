"""The ``keras-seq train conditioned`` config: plain typed values (no TensorFlow import)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.training.config import TrainConfig


@dataclass
class ConditionedConfig(TrainConfig):
    """Everything that decides a conditioned-LM run. Saved as ``config.json``."""

    kind = "conditioned"

    # data
    task: str = "python-docs-topics"  # python-docs-topics | shapes | tsv:PATH
    grouping: str = "topics"  # python-docs-topics: topics (30 conditions) | groups (10)
    shuffle: bool = False  # tsv: shuffle each condition's rows before the 80/10/10 cut
    unconditioned: bool = False  # the baseline: every condition mapped to one label
    max_len: int = 64  # tokens per training chunk
    max_vocab: int | None = None
    min_count: int | None = 2  # words seen once become <unk>, so <unk> is learned
    # model
    cell: str = "lstm"
    units: int = 128
    embed_dim: int = 64
    num_layers: int = 1
    mode: str = "both"  # init (condition → initial state) | input (every step) | both
    dropout: float = 0.3
    # optimisation
    batch_size: int = 16
    epochs: int = 10
    lr: float = 5e-3

    def problems(self) -> list[str]:
        problems = super().problems()
        problems += self.recurrent_problems("units", "embed_dim", "num_layers", "max_len")
        if self.mode not in ("init", "input", "both"):
            problems.append(f"mode must be init, input or both (got {self.mode!r})")
        if self.grouping not in ("topics", "groups"):
            problems.append(f"grouping must be topics or groups (got {self.grouping!r})")
        return problems
