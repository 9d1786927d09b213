"""The ``keras-seq train conditioned`` config: plain typed values (no TensorFlow import)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.cells import CellChoices
from keras_seq.data.splits import split_problems
from keras_seq.options import option
from keras_seq.ranges import AT_LEAST_1, FRACTION
from keras_seq.training.config import TrainConfig


@dataclass
class ConditionedConfig(TrainConfig):
    """Everything that decides a conditioned-LM run. Saved as ``config.json``."""

    kind = "conditioned"
    renamed = {"task": "data"}  # run directories written before `--data`

    # data
    data: str = option("python-docs-topics", "python-docs-topics, shapes or tsv:PATH "
                       "(condition<TAB>text lines)")
    grouping: str = option("topics", "python-docs-topics: 30 topics or 10 groups of them as "
                           "the conditions", choices=("topics", "groups"))
    # data.TOPIC_SPLIT (80/10/10), not the shared 90/5/5: the measured
    # python-docs-topics results use it
    split_ratio: str = option("80/10/10", "python-docs-topics, tsv: train/val/test shares of "
                              "each topic's (condition's) items, cut in order",
                              metavar="TRAIN/VAL/TEST")
    shuffle: bool = option(False, "tsv: shuffle each condition's rows before the cut")
    unconditioned: bool = option(False, "train the baseline: every condition mapped to one "
                                 "label")
    max_len: int = option(64, "tokens per training chunk", range=AT_LEAST_1)
    max_vocab: int | None = option(None, "largest word vocabulary, special tokens included",
                                   default_help="no limit", range=AT_LEAST_1)
    min_count: int | None = option(2, "keep words seen at least this often in train (words "
                                   "seen once become <unk>, so <unk> is learned)", range=AT_LEAST_1)
    # model
    cell: str = option("lstm", "recurrent layer", choices=CellChoices("conditioned"))
    units: int = option(128, "hidden units per recurrent layer", range=AT_LEAST_1)
    embed_dim: int = option(64, "word and condition embedding size", range=AT_LEAST_1)
    num_layers: int = option(1, "stacked recurrent layers", range=AT_LEAST_1)
    mode: str = option("both", "where the condition enters: the initial state (init), every "
                       "step's input (input), or both", choices=("init", "input", "both"))
    dropout: float = option(0.3, "dropout between layers", range=FRACTION)
    # optimisation
    batch_size: int = 16
    epochs: int = 10
    lr: float = 5e-3

    def problems(self) -> list[str]:
        problems = super().problems()
        problems += split_problems(self.split_ratio, parts=(3,))  # every condition in test
        return problems

    @classmethod
    def migrate(cls, data: dict) -> dict:
        data = super().migrate(data)
        data.setdefault("split_ratio", "80/10/10")  # older runs: the cut they had fixed
        return data
