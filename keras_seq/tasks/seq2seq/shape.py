"""The ``seq2seq`` shape's protocol record (light: no TensorFlow): ``train seq2seq``,
``eval seq2seq``, ``translate`` and ``export seq2seq``."""

from __future__ import annotations

import argparse

from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE, number
from keras_seq.tasks.protocol import Command, TaskShape
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig


def add_train_args(p) -> None:
    p.add_argument("--unidirectional", dest="bidirectional", action="store_false",
                   default=None, help=argparse.SUPPRESS)  # the older name of --no-bidirectional


def add_eval_args(p) -> None:
    p.add_argument("--beam", type=number(int, AT_LEAST_1), default=1,
                   help="beam width (1 = greedy)")
    p.add_argument("--length-penalty", type=number(float, NON_NEGATIVE), default=1.0,
                   help="α in log p / len^α for beam search")
    p.add_argument("--limit", type=number(int, AT_LEAST_1), default=None,
                   help="score only the first N pairs")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="write attention_heatmap.png and length_curve.png here")


def eval_options(args) -> dict:
    return {"beam": args.beam, "length_penalty": args.length_penalty, "plot_dir": args.plot,
            "limit": args.limit, "progress": not args.json}


def add_translate_args(p) -> None:
    p.add_argument("--run-dir", required=True, help="the seq2seq run that translates")
    p.add_argument("--beam", type=number(int, AT_LEAST_1), default=1,
                   help="beam width (1 = greedy)")
    p.add_argument("--length-penalty", type=number(float, NON_NEGATIVE), default=1.0,
                   help="α in log p / len^α for beam search")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write a SavedModel (signature serving_default: text → translation, "
                        "greedy) to DIR; with texts, translate them with the reloaded export")
    p.add_argument("text", nargs="*", help="source text(s); none: one per line on stdin")


def add_export_args(p) -> None:
    p.add_argument("--run-dir", required=True, help="a `keras-seq train seq2seq` run directory")
    p.add_argument("--out", required=True, help="SavedModel folder to write")


def tokenizer(config: Seq2SeqConfig) -> tuple[str, dict]:
    if config.tokenizer == "subword":  # as train_seq2seq fits it
        return "subword", {"vocab_size": config.max_vocab or 8000}
    return config.tokenizer, {"max_vocab": config.max_vocab}


SHAPE = TaskShape(
    name="seq2seq", config_cls=Seq2SeqConfig,
    train_help="encoder–decoder with or without Bahdanau attention",
    eval_help="exact match, token accuracy and BLEU, overall and per source-length bucket",
    task="keras_seq.tasks.seq2seq.task",
    use=Command("translate", "decode text with a trained seq2seq model", add_translate_args),
    exports=(Command("seq2seq", "a seq2seq run as a SavedModel whose serving_default "
                     "signature maps strings to strings (greedy)", add_export_args,
                     run="keras_seq.tasks.seq2seq.export:run_export"),),
    data_names=("dates", "reverse", "copy", "anki-spa-eng"), data_prefixes=("tsv:",),
    tokenizer=tokenizer, add_train_args=add_train_args, add_eval_args=add_eval_args,
    eval_options=eval_options,
)
