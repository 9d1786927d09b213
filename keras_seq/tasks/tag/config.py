"""The ``keras-seq train tag`` config: plain typed values (no TensorFlow import)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.cells import CellChoices
from keras_seq.data.splits import split_problems
from keras_seq.options import option
from keras_seq.ranges import AT_LEAST_1, COLUMN, FRACTION
from keras_seq.training.config import TrainConfig


@dataclass
class TagConfig(TrainConfig):
    """Everything that decides a tagging run. Saved as ``config.json``."""

    kind = "tag"

    # data
    data: str = option("restore-punct", "restore-punct[:CORPUS] (punctuation and case as "
                       "tags of a corpus: a registry name, a .txt file or folder; "
                       "python-docs unless named), conll:PATH or conllu:PATH")
    data_dir: str | None = option(None, "folder searched for registry files before "
                                  "downloading", metavar="DIR",
                                  default_help="$KERAS_SEQ_DATA_DIR")
    # 80/10/10, not the shared 90/5/5: docs/task-shapes.md's restore-punct results use it
    split_ratio: str = option("80/10/10", "train/val/test shares of the sentences",
                              metavar="TRAIN/VAL[/TEST]")
    max_sentences: int | None = option(None, "read at most this many sentences",
                                       default_help="all", range=AT_LEAST_1)
    max_len: int = option(40, "restore-punct: words per sentence", range=AT_LEAST_1)
    token_col: int = option(0, "conll: column of the token (-1: the last)", range=COLUMN)
    tag_col: int = option(-1, "conll: column of the tag (-1: the last)", range=COLUMN)
    tag_field: str = option("upos", "conllu: the field tagged", choices=("upos", "xpos",
                                                                         "deprel"))
    max_vocab: int | None = option(None, "largest word vocabulary, special tokens included",
                                   default_help="no limit", range=AT_LEAST_1)
    min_count: int | None = option(None, "keep words seen at least this often in train",
                                   default_help="1, every word", range=AT_LEAST_1)
    lower: bool | None = option(None, "lower-case the text first", default_help="on")
    # model
    cell: str = option("lstm", "recurrent layer", choices=CellChoices("tag"))
    units: int = option(128, "hidden units per recurrent layer and direction", range=AT_LEAST_1)
    embed_dim: int = option(64, "word embedding size", range=AT_LEAST_1)
    num_layers: int = option(1, "stacked recurrent layers", range=AT_LEAST_1)
    bidirectional: bool = option(True, "read the sentence in both directions")
    dropout: float = option(0.0, "dropout between layers", range=FRACTION)
    # optimisation
    batch_size: int = 32
    epochs: int = 10
    lr: float = 2e-3

    def problems(self) -> list[str]:
        problems = super().problems()
        problems += split_problems(self.split_ratio)
        return problems

    @classmethod
    def migrate(cls, data: dict) -> dict:
        """Older run directories: ``task`` named the source and ``data`` restore-punct's
        corpus; both are now ``data`` (``restore-punct:CORPUS``)."""
        data = dict(data)
        if "task" in data:
            task, corpus = data.pop("task"), data.pop("data", None)
            data["data"] = f"{task}:{corpus}" if task == "restore-punct" and corpus else task
        return data
