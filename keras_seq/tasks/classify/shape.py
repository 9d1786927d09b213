"""The ``classify`` shape's protocol record (light: no TensorFlow): ``train classify``,
``eval classify``, ``predict`` and ``export classifier``."""

from __future__ import annotations

import argparse

from keras_seq.tables import add_json_arg
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.protocol import Command, TaskShape
from keras_seq.tasks.use import PREDICT

STEP_VARIANTS = ("float32", "float16", "dynamic")


def add_export_args(p) -> None:
    p.add_argument("--run-dir", required=True, help="a `keras-seq train classify` run "
                   "directory")
    p.add_argument("--out", required=True, help="SavedModel folder to write")
    p.add_argument("--tflite", nargs="?", const="", default=None, metavar="DIR",
                   help="also export the streaming TFLite step model (token + state in, "
                   "label scores + state out) to DIR (default OUT/tflite); needs a "
                   "unidirectional pooling=last classifier")
    p.add_argument("--variants", nargs="+", default=["float32", "dynamic"],
                   choices=STEP_VARIANTS, help="TFLite variants (with --tflite)")
    p.add_argument("--parity", action=argparse.BooleanOptionalAction, default=True,
                   help="compare TFLite with Keras (--no-parity skips it)")
    add_json_arg(p)


SHAPE = TaskShape(
    name="classify", config_cls=ClassifyConfig,
    train_help="N→1 sequence classifier (RNN/GRU/LSTM, uni/bi, last/mean/attention pooling)",
    eval_help="accuracy, macro-F1, confusion matrix (table + PNG), accuracy per group",
    task="keras_seq.tasks.classify.task", use=PREDICT,
    exports=(Command("classifier", "a classify run as a SavedModel whose classify / "
                     "serving_default signature maps texts to labels sorted by score (TF "
                     "Serving's Classify shape); --tflite adds the streaming step model",
                     add_export_args, run="keras_seq.export.classifier_tagger:run_classifier"),),
    data_names=("reviews-negation",), data_prefixes=("tsv:",),
)
