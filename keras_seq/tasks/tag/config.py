"""The ``keras-seq train tag`` config: plain typed values (no TensorFlow import)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.training.config import TrainConfig


@dataclass
class TagConfig(TrainConfig):
    """Everything that decides a tagging run. Saved as ``config.json``."""

    kind = "tag"

    # data
    task: str = "restore-punct"  # restore-punct[:CORPUS] | conll:PATH | conllu:PATH
    data: str | None = None  # restore-punct: the corpus (default python-docs)
    data_dir: str | None = None
    split_ratio: str = "80/10/10"
    max_sentences: int | None = None
    max_len: int = 40  # restore-punct: words per sentence
    token_col: int = 0  # conll columns
    tag_col: int = -1
    tag_field: str = "upos"  # conllu: upos | xpos | deprel
    max_vocab: int | None = None
    min_count: int | None = None
    lower: bool | None = None
    # model
    cell: str = "lstm"
    units: int = 128  # per direction
    embed_dim: int = 64
    num_layers: int = 1
    bidirectional: bool = True
    dropout: float = 0.0
    # optimisation
    batch_size: int = 32
    epochs: int = 10
    lr: float = 2e-3

    def problems(self) -> list[str]:
        problems = super().problems()
        problems += self.recurrent_problems("units", "embed_dim", "num_layers", "max_len")
        return problems
