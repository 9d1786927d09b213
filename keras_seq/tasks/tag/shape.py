"""The ``tag`` shape's protocol record (light: no TensorFlow): ``train tag``, ``eval tag``,
``predict`` and ``export tagger``."""

from __future__ import annotations

from keras_seq.tasks.protocol import Command, TaskShape
from keras_seq.tasks.tag.config import TagConfig
from keras_seq.tasks.use import PREDICT


def add_export_args(p) -> None:
    p.add_argument("--run-dir", required=True, help="a `keras-seq train tag` run directory")
    p.add_argument("--out", required=True, help="SavedModel folder to write")


SHAPE = TaskShape(
    name="tag", config_cls=TagConfig,
    train_help="aligned N→N tagger (bidirectional by default): CoNLL, CoNLL-U, restore-punct",
    eval_help="token accuracy, per-tag and micro/macro F1, span F1 for BIO tags",
    task="keras_seq.tasks.tag.task", use=PREDICT,
    exports=(Command("tagger", "a tag run as a SavedModel whose tag / serving_default "
                     "signature maps whitespace-separated words to one tag each",
                     add_export_args, run="keras_seq.export.classifier_tagger:run_tagger"),),
    data_names=("restore-punct",), data_prefixes=("restore-punct:", "conll:", "conllu:"),
)
