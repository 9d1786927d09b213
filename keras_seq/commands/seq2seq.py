"""``keras-seq train seq2seq``, ``eval seq2seq`` and ``translate`` (``--export`` writes a
string → string SavedModel; ``keras-seq export`` belongs to the LM exporter)."""

from __future__ import annotations

import argparse
import sys

from keras_seq.commands._common import (
    add_backend_args,
    add_json_arg,
    check_run_arg,
    check_shared_fields,
    check_task_name,
    check_tokenizer_options,
    check_train_dir,
    config_overrides,
    group_parser,
    print_json,
    print_table,
    use_backend,
)


def add_seq2seq_config_args(parser: argparse.ArgumentParser) -> None:
    """Every Seq2SeqConfig field as a --flag (default None: take Seq2SeqConfig's)."""
    g = parser.add_argument_group("data")
    g.add_argument("--task", help="dates | reverse | copy | anki-spa-eng | tsv:PATH "
                                  "(source<TAB>target lines; default dates)")
    g.add_argument("--train-size", type=int, help="generated pairs for training (20000)")
    g.add_argument("--val-size", type=int, help="validation pairs (500)")
    g.add_argument("--test-size", type=int, help="test pairs (2000)")
    g.add_argument("--min-len", type=int, help="reverse/copy: shortest source (1)")
    g.add_argument("--max-len", type=int, help="reverse/copy: longest source (20)")
    g.add_argument("--source-col", type=int, help="TSV column of the source (0)")
    g.add_argument("--target-col", type=int, help="TSV column of the target (1)")
    g.add_argument("--max-pairs", type=int, help="TSV: read at most N pairs")
    g.add_argument("--data-dir", help="folder searched for spa.txt / spa-eng.zip")
    g.add_argument("--tokenizer", choices=("char", "word", "subword"),
                   help="tokenizer of both sides (default char)")
    g.add_argument("--max-vocab", type=int, help="largest vocabulary per side")
    g = parser.add_argument_group("model")
    g.add_argument("--attention", choices=("bahdanau", "none"),
                   help="bahdanau (RNNsearch) or none (RNNenc: only the final encoder state)")
    g.add_argument("--cell", choices=("gru", "lstm"), help="encoder/decoder cell (gru)")
    g.add_argument("--units", type=int, help="encoder units per direction = decoder units (128)")
    g.add_argument("--embed-dim", type=int, help="embedding size (32)")
    g.add_argument("--unidirectional", dest="bidirectional", action="store_false",
                   default=None, help="one-directional encoder (default bidirectional)")
    g.add_argument("--attention-units", type=int, help="alignment size A (units // 4)")
    g.add_argument("--dropout", type=float)
    g.add_argument("--max-source-len", type=int, help="longest accepted source "
                                                      "(default: longest training source)")
    g.add_argument("--max-target-len", type=int, help="longest output (default: longest "
                                                      "training target + 25%%)")
    g = parser.add_argument_group("optimisation")
    g.add_argument("--batch-size", type=int)
    g.add_argument("--epochs", type=int)
    g.add_argument("--steps-per-epoch", type=int, help="default: one pass over the data")
    g.add_argument("--lr", type=float, help="Adam learning rate (3e-3)")
    g.add_argument("--clip-norm", type=float, help="global-norm clipping (5)")
    g.add_argument("--max-minutes", type=float, help="stop once past this time budget")
    g.add_argument("--target-exact-match", type=float,
                   help="stop once val exact match reaches this fraction, e.g. 0.995")
    g.add_argument("--seed", type=int)
    g.add_argument("--eval-size", type=int, help="val pairs decoded each epoch (500)")


def config_from_args(args):
    from keras_seq.tasks.seq2seq.training import Seq2SeqConfig

    return Seq2SeqConfig.from_dict(config_overrides(args, Seq2SeqConfig,
                                                    Seq2SeqConfig().to_dict()))


def register(subparsers) -> None:
    train = group_parser(subparsers, "train", "train a model into a run directory")
    p = train.add_parser("seq2seq", help="encoder–decoder with or without Bahdanau attention",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--run-dir", required=True, help="where config, checkpoints and logs go")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--quiet", action="store_true", help="one line per epoch")
    add_json_arg(p)
    add_seq2seq_config_args(p)
    add_backend_args(p)
    p.set_defaults(func=run_train)

    evaluate = group_parser(subparsers, "eval", "evaluate a trained model")
    p = evaluate.add_parser("seq2seq", help="exact match, token accuracy and BLEU, overall "
                                            "and per source-length bucket")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--split", default="test", choices=("train", "val", "test"))
    p.add_argument("--beam", type=int, default=1, help="beam width (1 = greedy)")
    p.add_argument("--length-penalty", type=float, default=1.0,
                   help="α in log p / len^α for beam search")
    p.add_argument("--limit", type=int, default=None, help="score only the first N pairs")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="write attention_heatmap.png and length_curve.png here")
    add_json_arg(p)
    p.set_defaults(func=run_eval)

    p = subparsers.add_parser("translate", help="decode text with a trained seq2seq model")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--beam", type=int, default=1, help="beam width (1 = greedy)")
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write a SavedModel (signature serving_default: text → translation, "
                        "greedy) to DIR; with texts, translate them with the reloaded export")
    p.add_argument("text", nargs="*", help="source text(s); none: one per line on stdin")
    p.set_defaults(func=run_translate)


def check_args(args) -> None:
    """Refuse bad flags before any work: a misspelt task, the fields every training config
    shares (Seq2SeqConfig lives with the TensorFlow code, so the whole config is checked
    by the trainer once Keras is loaded, still before any pair is made) and the tokenizer
    options."""
    task = args.task or "dates"
    check_task_name("seq2seq task", task, ("dates", "reverse", "copy", "anki-spa-eng"),
                    ("tsv:",))
    check_shared_fields(args, "seq2seq")
    kind = args.tokenizer or "char"
    options = {"max_vocab": args.max_vocab}
    if kind == "subword":  # as train_seq2seq fits it
        options = {"vocab_size": args.max_vocab or 8000}
    check_tokenizer_options(kind, **options)


def run_train(args) -> int:
    check_train_dir(args.run_dir)
    check_args(args)
    use_backend(args)
    from keras_seq.tasks.seq2seq.training import format_results, train_seq2seq

    config = config_from_args(args)
    printer = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    results = train_seq2seq(config, args.run_dir, resume=args.resume,
                            verbose=2 if args.quiet else 1, printer=printer)
    if args.json:
        from keras_seq.tasks.seq2seq.training import json_safe

        print_json(json_safe(results))
    else:
        print(format_results(results))
    return 0


def run_eval(args) -> int:
    check_run_arg(args.run_dir, "seq2seq")
    from keras_seq.tasks.seq2seq.training import evaluate_run

    result = evaluate_run(args.run_dir, args.split, beam=args.beam,
                          length_penalty=args.length_penalty, plot_dir=args.plot,
                          limit=args.limit, progress=not args.json)
    if args.json:
        from keras_seq.tasks.seq2seq.training import json_safe

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
    from keras_seq.tasks.seq2seq.decoding import translate
    from keras_seq.tasks.seq2seq.training import load_run

    if args.export:
        return run_export(args)
    texts = args.text or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
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
    from keras_seq.backend import require_tensorflow_backend

    require_tensorflow_backend("translate --export")
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
