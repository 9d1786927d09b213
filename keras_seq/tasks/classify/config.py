"""The ``keras-seq train classify`` config: plain typed values (no TensorFlow import)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.training.config import TrainConfig

POOLINGS = ("last", "mean", "attention")


@dataclass
class ClassifyConfig(TrainConfig):
    """Everything that decides a classification run. Saved as ``config.json``."""

    kind = "classify"

    # data
    task: str = "reviews-negation"  # reviews-negation | tsv:PATH (text<TAB>label)
    train_size: int | None = None  # generated: 4000/500/1500; TSV: caps
    val_size: int | None = None
    test_size: int | None = None
    split_ratio: str = "80/10/10"  # TSV: seeded shuffled split
    length: int | None = None  # reviews-negation: words per review (80)
    negator_pos: int | None = None  # reviews-negation: position of the negator (5)
    sentiment_pos: int | None = None  # reviews-negation: position of the sentiment word (75)
    distances: str | None = None  # reviews-negation: "10,35,70" mixes distances
    hard: bool = False  # reviews-negation: bag of words carries no label information
    negated_share: float | None = None  # reviews-negation: reviews with a negator (0.25)
    max_len: int | None = None  # keep at most this many words of a text (None: all)
    max_vocab: int | None = None
    min_count: int | None = None
    lower: bool | None = None
    # model
    cell: str = "lstm"
    units: int = 128
    embed_dim: int = 64
    num_layers: int = 1
    bidirectional: bool = False
    pooling: str = "last"  # last | mean | attention
    attention_units: int | None = None
    dropout: float = 0.0
    residual: bool = False
    # optimisation
    batch_size: int = 32
    epochs: int = 10
    lr: float = 2e-3

    def problems(self) -> list[str]:
        problems = super().problems()
        problems += self.recurrent_problems("units", "embed_dim", "num_layers")
        if self.pooling not in POOLINGS:
            problems.append(f"pooling must be one of {', '.join(POOLINGS)} (got "
                            f"{self.pooling!r})")
        if self.max_len is not None and self.max_len < 1:
            problems.append(f"max_len must be ≥ 1 or unset (got {self.max_len})")
        return problems

    def task_options(self) -> dict:
        options = {k: getattr(self, k) for k in ("length", "negator_pos", "sentiment_pos")
                   if getattr(self, k) is not None}
        if self.task == "reviews-negation":
            if self.distances is not None:
                options["distances"] = [int(d) for d in str(self.distances).split(",")]
            options["hard"] = self.hard
            if self.negated_share is not None:
                options["negated_share"] = self.negated_share
        return options
