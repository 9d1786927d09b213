"""``keras-seq train seq2seq``, ``eval seq2seq`` and ``translate`` (``--export`` writes a
string → string SavedModel; ``keras-seq export`` belongs to the LM exporter)."""

from __future__ import annotations

import argparse
import sys

from keras_seq.commands._common import (
    add_eval_command,
    add_train_command,
    check_run_arg,
    check_task_name,
    check_tokenizer_options,
    check_train_dir,
    config_overrides,
    number,
    print_json,
    print_table,
    print_train_results,
    train_printer,
    use_backend,
)
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig


def config_from_args(args):
    return Seq2SeqConfig.from_dict(config_overrides(args, Seq2SeqConfig,
                                                    Seq2SeqConfig().to_dict()))


def register(subparsers) -> None:
    p = add_train_command(subparsers, "seq2seq", "encoder–decoder with or without Bahdanau "
                          "attention", Seq2SeqConfig, run_train,
                          data_is_corpus=False)  # --data names a task: check_args
    p.add_argument("--unidirectional", dest="bidirectional", action="store_false",
                   default=None, help=argparse.SUPPRESS)  # the older name of --no-bidirectional

    p = add_eval_command(subparsers, "seq2seq", "exact match, token accuracy and BLEU, overall "
                         "and per source-length bucket", run_eval)
    p.add_argument("--beam", type=number(int, AT_LEAST_1),
                   default=1, help="beam width (1 = greedy)")
    p.add_argument("--length-penalty", type=number(float, NON_NEGATIVE), default=1.0,
                   help="α in log p / len^α for beam search")
    p.add_argument("--limit", type=number(int, AT_LEAST_1),
                   default=None, help="score only the first N pairs")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="write attention_heatmap.png and length_curve.png here")

    p = subparsers.add_parser("translate", help="decode text with a trained seq2seq model")
    p.add_argument("--run-dir", required=True, help="the seq2seq run that translates")
    p.add_argument("--beam", type=number(int, AT_LEAST_1),
                   default=1, help="beam width (1 = greedy)")
    p.add_argument("--length-penalty", type=number(float, NON_NEGATIVE), default=1.0,
                   help="α in log p / len^α for beam search")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write a SavedModel (signature serving_default: text → translation, "
                        "greedy) to DIR; with texts, translate them with the reloaded export")
    p.add_argument("text", nargs="*", help="source text(s); none: one per line on stdin")
    p.set_defaults(func=run_translate)


def check_args(args) -> None:
    """Refuse bad flags before any work: a misspelt task, the config's own checks and the
    tokenizer options."""
    task = args.data or "dates"
    check_task_name("seq2seq data", task, ("dates", "reverse", "copy", "anki-spa-eng"),
                    ("tsv:",))
    config_from_args(args).validate()
    kind = args.tokenizer or "char"
    options = {"max_vocab": args.max_vocab}
    if kind == "subword":  # as train_seq2seq fits it
        options = {"vocab_size": args.max_vocab or 8000}
    check_tokenizer_options(kind, **options)


def run_train(args) -> int:
    check_train_dir(args.run_dir)
    check_args(args)
    use_backend(args)
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.tasks.seq2seq.task import format_results, train_seq2seq

    config = config_from_args(args)
    results = train_seq2seq(config, args.run_dir, resume=args.resume,
                            verbose=2 if args.quiet else 1, printer=train_printer(args))
    print_train_results(args, results, format_results)
    return 0


def run_eval(args) -> int:
    check_run_arg(args.run_dir, "seq2seq")
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.tasks.seq2seq.evaluation import evaluate_run

    result = evaluate_run(args.run_dir, args.split, beam=args.beam,
                          length_penalty=args.length_penalty, plot_dir=args.plot,
                          limit=args.limit, progress=not args.json)
    if args.json:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.atomic import json_safe

        print_json(json_safe(result))
        return 0
    print(f"{args.split} ({result['n']:,} pairs, beam {args.beam}, {result['params']:,} "
          f"parameters): exact match {100 * result['exact_match']:.2f}%, token accuracy "
          f"{100 * result['token_accuracy']:.2f}%, BLEU {result['bleu']:.2f}")
    rows = [{"source length": r["bucket"], "n": r["n"],
             "exact %": round(100 * r["exact_match"], 2),
             "token acc %": round(100 * r["token_accuracy"], 2)}
            for r in result["by_length"] if r["n"]]
    print_table(rows)
    for ex in result["examples"][:3]:
        print(f"  {ex['source']!r} → {ex['output']!r} (reference {ex['reference']!r})")
    for name, path in result.get("plots", {}).items():
        print(f"{name}: {path}")
    return 0


def run_translate(args) -> int:
    check_run_arg(args.run_dir, "seq2seq")
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.tasks.seq2seq.decoding import translate
    from keras_seq.tasks.seq2seq.evaluation import load_run

    if args.export:
        return run_export(args)
    texts = args.text or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.errors import KerasSeqError

        raise KerasSeqError("nothing to translate; pass the text as an argument or on stdin")
    _, src_tok, tgt_tok, model = load_run(args.run_dir)

    def warn(i, count):
        print(f"note: source {i} has {count} {src_tok.kind} token(s) outside the vocabulary; "
              "they were read as <unk>", file=sys.stderr)

    for out in translate(model, src_tok, tgt_tok, texts, beam=args.beam,
                         length_penalty=args.length_penalty, on_unknown=warn):
        print(out)
    return 0


def run_export(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.backend import require_tensorflow_backend

    require_tensorflow_backend("translate --export")
    # lazy: keeps `keras-seq --help` fast (loads TensorFlow)
    import tensorflow as tf

    from keras_seq.tasks.seq2seq.export import export_run

    path = export_run(args.run_dir, args.export)
    print(f"SavedModel written to {path} (signature serving_default: text → translation)",
          file=sys.stderr)
    if args.text:
        reloaded = tf.saved_model.load(str(path))
        for out in reloaded.translate(tf.constant(args.text)).numpy():
            print(out.decode("utf-8"))
    return 0
