"""The ``keras-seq train classify`` config: plain typed values (no TensorFlow import)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.cells import CellChoices
from keras_seq.data.splits import DEFAULT_SPLIT, split_problems
from keras_seq.options import option
from keras_seq.ranges import AT_LEAST_1, FRACTION, NON_NEGATIVE, SHARE
from keras_seq.training.config import TrainConfig

POOLINGS = ("last", "mean", "attention")


@dataclass
class ClassifyConfig(TrainConfig):
    """Everything that decides a classification run. Saved as ``config.json``."""

    kind = "classify"
    renamed = {"task": "data"}  # run directories written before `--data`

    # data
    data: str = option("reviews-negation", "reviews-negation (generated) or tsv:PATH "
                       "(text<TAB>label lines)")
    train_size: int | None = option(None, "training examples (generated) or a cap (TSV)",
                                    default_help="generated: 4000; TSV: all", range=AT_LEAST_1)
    val_size: int | None = option(None, "validation examples (generated) or a cap (TSV)",
                                  default_help="generated: 500; TSV: all", range=AT_LEAST_1)
    test_size: int | None = option(None, "test examples (generated) or a cap (TSV)",
                                   default_help="generated: 1500; TSV: all", range=AT_LEAST_1)
    split_ratio: str = option(DEFAULT_SPLIT, "TSV: train/val/test shares of a seeded shuffle",
                              metavar="TRAIN/VAL/TEST")
    length: int | None = option(None, "reviews-negation: words per review", default_help="80",
                                range=AT_LEAST_1)
    negator_pos: int | None = option(None, "reviews-negation: position of the negator",
                                     default_help="5", range=NON_NEGATIVE)
    sentiment_pos: int | None = option(None, "reviews-negation: position of the sentiment word",
                                       default_help="75", range=NON_NEGATIVE)
    distances: str | None = option(None, "reviews-negation: comma-separated negator-sentiment "
                                   "distances to mix, e.g. 10,35,70", metavar="N,N,…",
                                   default_help="10,35,70")
    hard: bool = option(False, "reviews-negation: the bag of words carries no label "
                        "information")
    negated_share: float | None = option(None, "reviews-negation: share of reviews with a "
                                         "negator", default_help="0.25", range=SHARE)
    max_len: int | None = option(None, "keep at most this many words of a text",
                                 default_help="all", range=AT_LEAST_1)
    max_vocab: int | None = option(None, "largest word vocabulary, special tokens included",
                                   default_help="no limit", range=AT_LEAST_1)
    min_count: int | None = option(None, "keep words seen at least this often in train",
                                   default_help="1, every word", range=AT_LEAST_1)
    lower: bool | None = option(None, "lower-case the text first", default_help="on")
    # model
    cell: str = option("lstm", "recurrent layer", choices=CellChoices("classify"))
    units: int = option(128, "hidden units per recurrent layer (and direction)", range=AT_LEAST_1)
    embed_dim: int = option(64, "word embedding size", range=AT_LEAST_1)
    num_layers: int = option(1, "stacked recurrent layers", range=AT_LEAST_1)
    bidirectional: bool = option(False, "read the text in both directions")
    pooling: str = option("last", "how the sequence becomes one vector: the last state, the "
                          "mean, or attention", choices=POOLINGS)
    attention_units: int | None = option(None, "attention pooling: alignment size",
                                         default_help="units // 2", range=AT_LEAST_1)
    dropout: float = option(0.0, "dropout between layers", range=FRACTION)
    residual: bool = option(False, "residual connections between stacked layers")
    # optimisation
    batch_size: int = 32
    epochs: int = 10
    lr: float = 2e-3

    def problems(self) -> list[str]:
        problems = super().problems()
        problems += split_problems(self.split_ratio, parts=(3,))  # evaluation needs a test split
        return problems

    def task_options(self) -> dict:
        options = {k: getattr(self, k) for k in ("length", "negator_pos", "sentiment_pos")
                   if getattr(self, k) is not None}
        if self.data == "reviews-negation":
            if self.distances is not None:
                options["distances"] = [int(d) for d in str(self.distances).split(",")]
            options["hard"] = self.hard
            if self.negated_share is not None:
                options["negated_share"] = self.negated_share
        return options
