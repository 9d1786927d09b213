"""The ``keras-seq train seq2seq`` config: plain typed values (no TensorFlow import)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.cells import CellChoices
from keras_seq.data.splits import DEFAULT_SPLIT, split_problems
from keras_seq.options import option
from keras_seq.ranges import AT_LEAST_1, COLUMN, FRACTION, NON_NEGATIVE, OPEN_SHARE, POSITIVE
from keras_seq.training.config import TrainConfig


@dataclass
class Seq2SeqConfig(TrainConfig):
    """Everything that decides a seq2seq run. Saved as ``config.json`` in the run dir."""

    kind = "seq2seq"

    renamed = {"task": "data"}  # run directories written before `--data`

    # data
    data: str = option("dates", "dates, reverse, copy (generated), anki-spa-eng or tsv:PATH "
                       "(source<TAB>target lines)")
    train_size: int = option(20000, "generated tasks: training pairs", range=AT_LEAST_1)
    val_size: int = option(500, "generated tasks: validation pairs", range=AT_LEAST_1)
    test_size: int = option(2000, "generated tasks: test pairs", range=AT_LEAST_1)
    min_len: int = option(1, "reverse/copy: shortest source (lengths uniform in [min, max])",
                          range=AT_LEAST_1)
    max_len: int = option(20, "reverse/copy: longest source", range=AT_LEAST_1)
    source_col: int = option(0, "TSV: column of the source", range=COLUMN)
    target_col: int = option(1, "TSV: column of the target", range=COLUMN)
    max_pairs: int | None = option(None, "TSV: read at most this many pairs",
                                   default_help="all", range=AT_LEAST_1)
    split_ratio: str = option(DEFAULT_SPLIT, "TSV / anki-spa-eng: train/val/test shares of a "
                              "seeded shuffle", metavar="TRAIN/VAL[/TEST]")
    data_dir: str | None = option(None, "folder searched for spa.txt / spa-eng.zip",
                                  metavar="DIR", default_help="$KERAS_SEQ_DATA_DIR")
    tokenizer: str = option("char", "tokenizer of both sides, fitted on the training pairs",
                            choices=("char", "word", "subword"))
    max_vocab: int | None = option(None, "largest vocabulary per side (subword: the WordPiece "
                                   "size)", default_help="no limit; subword 8000", range=AT_LEAST_1)
    # model
    cell: str = option("gru", "encoder and decoder cell", choices=CellChoices("seq2seq"))
    units: int = option(128, "encoder units per direction = decoder units", range=AT_LEAST_1)
    embed_dim: int = option(32, "embedding size of both sides", range=AT_LEAST_1)
    bidirectional: bool = option(True, "bidirectional encoder (--unidirectional: one "
                                 "direction)")
    attention: str = option("bahdanau", "bahdanau (RNNsearch) or none (RNNenc: only the final "
                            "encoder state)", choices=("bahdanau", "none"))
    attention_units: int | None = option(None, "alignment size A", default_help="units // 4",
                                         range=AT_LEAST_1)
    dropout: float = option(0.0, "dropout on the encoder and decoder", range=FRACTION)
    max_source_len: int | None = option(None, "longest accepted source",
                                        default_help="the longest training source",
                                        range=AT_LEAST_1)
    max_target_len: int | None = option(None, "longest output",
                                        default_help="the longest training target + 25%",
                                        range=AT_LEAST_1)
    # optimisation
    batch_size: int = 64
    epochs: int = 20
    steps_per_epoch: int | None = option(None, "batches per epoch",
                                         default_help="one pass over the training pairs",
                                         range=AT_LEAST_1)
    lr: float = 3e-3  # Adam
    clip_norm: float | None = 5.0
    max_minutes: float | None = option(None, "stop (mid-epoch if need be) once past this many "
                                       "minutes", default_help="no limit", range=POSITIVE)
    target_exact_match: float | None = option(None, "stop once validation exact match reaches "
                                              "this fraction, e.g. 0.995",
                                              default_help="never", range=OPEN_SHARE)
    seed: int = 1234
    # logging
    eval_size: int = option(500, "validation pairs greedily decoded each epoch for exact match",
                            range=AT_LEAST_1)
    attention_images: int = option(1, "attention heatmaps written to TensorBoard each epoch",
                                   range=NON_NEGATIVE)

    @classmethod
    def migrate(cls, data: dict) -> dict:
        data = super().migrate(data)
        data.setdefault("split_ratio", DEFAULT_SPLIT)  # older runs: the 90/5/5 it had fixed
        return data

    def problems(self) -> list[str]:
        problems = super().problems()
        problems += split_problems(self.split_ratio)
        return problems
