"""``keras-seq bench scaling``: wall time and peak RSS of data prepare, ngram train (beside
KenLM's lmplz) and train lm against corpus size, 1 M to ≥ 100 M tokens."""

from __future__ import annotations

import argparse

from keras_seq.commands._common import add_json_arg, number, print_json
from keras_seq.ranges import AT_LEAST_1, SEED


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scaling", help="wall time and peak RSS against corpus tokens (1M, 16M, 100M) for "
        "data prepare, ngram train (vs lmplz) and train lm start-up and tokens/s; PNG plots")
    p.add_argument("--sizes", default="1M,16M,100M",
                   help="corpus sizes in word tokens, k/M/G suffixes (default: 1M,16M,100M)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="folder for scaling.json, scaling_time.png, scaling_rss.png and the "
                        "stages' work (prepared corpora, ARPA files, logs)")
    p.add_argument("--corpus-dir", default=None, metavar="DIR",
                   help="where the generated corpora are written once and reused (default: "
                        "DIR/corpora under --out)")
    p.add_argument("--roots", nargs="+", default=None, metavar="FOLDER",
                   help="folders whose .py/.md/.rst/.txt files give the natural text (default: "
                        "this Python's standard library and site-packages)")
    p.add_argument("--seed", type=number(int, SEED),
                   default=0, help="seed of the corpus's file order and "
                   "extension (default: 0)")
    p.add_argument("--stages", default="prepare,ngram,ngram-raw,lmplz,prepare-lm,lm",
                   help="stages to run, comma-separated; lmplz runs only with --lmplz "
                        "(default: prepare,ngram,ngram-raw,lmplz,prepare-lm,lm)")
    p.add_argument("--lmplz", default=None, help="path to KenLM's lmplz to compare with")
    p.add_argument("--memory", default="1G", metavar="SIZE",
                   help="--memory of ngram train and -S of lmplz (default: 1G)")
    p.add_argument("--max-vocab", type=number(int, AT_LEAST_1), default=50_000,
                   help="vocabulary of the train lm stages (default: 50000)")
    p.add_argument("--lm-steps", type=number(int, AT_LEAST_1), default=20,
                   help="optimizer steps timed after the first for train lm's tokens/s "
                        "(default: 20)")
    p.add_argument("--text", default=None, metavar="FILE",
                   help="measure this text (space-separated tokens, one size) instead of the "
                        "generated corpora, e.g. the output of keras-seq data tokenize "
                        "--tokenizer word --split train --out FILE")
    p.add_argument("--rounds", type=number(int, AT_LEAST_1), default=1,
                   help="runs of each compared stage (ngram, ngram-raw, lmplz) per size, in "
                        "alternating order; the table shows the median and the spread "
                        "(default: 1)")
    p.add_argument("--keep", action=argparse.BooleanOptionalAction, default=False,
                   help="keep the prepared corpora and ARPA files (several GB at 100M)")
    add_json_arg(p)
    p.set_defaults(func=run_scaling)


def run_scaling(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.corpus_scaling import format_bench, parse_sizes, run_bench
    from keras_seq.errors import DataError

    if args.max_vocab < 4 or args.lm_steps < 1:
        raise DataError(f"--max-vocab must be ≥ 4 and --lm-steps ≥ 1 (got {args.max_vocab}, "
                        f"{args.lm_steps})")
    results = run_bench(parse_sizes(args.sizes), out=args.out, corpus_dir=args.corpus_dir,
                        seed=args.seed, stages=[s.strip() for s in args.stages.split(",")],
                        lmplz=args.lmplz, memory=args.memory, max_vocab=args.max_vocab,
                        lm_steps=args.lm_steps, keep=args.keep, roots=args.roots,
                        rounds=args.rounds, text=args.text,
                        progress=None if args.json else print)
    if args.json:
        print_json(results)
    else:
        print(format_bench(results))
        print(f"results: {args.out}/scaling.json; plots: {', '.join(results['plots'])}")
    return 0 if all(r["rc"] == 0 for r in results["rows"]) else 1
