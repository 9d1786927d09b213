"""``keras-seq bench scaling``: wall time and peak RSS of data prepare, ngram train (beside
KenLM's lmplz) and train lm against corpus size, 1 M to ≥ 100 M tokens."""

from __future__ import annotations

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import number
from keras_seq.ranges import AT_LEAST_1, SEED, Range

OPTIONS = (
    Option("--sizes", None, "1M,16M,100M",
           "corpus sizes in word tokens, k/M/G suffixes (default: 1M,16M,100M)"),
    Option("--out", required=True, metavar="DIR",
           help="folder for scaling.json, scaling_time.png, scaling_rss.png and the stages' "
                "work (prepared corpora, ARPA files, logs)"),
    Option("--corpus-dir", metavar="DIR",
           help="where the generated corpora are written once and reused (default: "
                "DIR/corpora under --out)"),
    Option("--roots", nargs="+", metavar="FOLDER",
           help="folders whose .py/.md/.rst/.txt files give the natural text (default: this "
                "Python's standard library and site-packages)"),
    Option("--seed", number(int, SEED), 0,
           "seed of the corpus's file order and extension (default: 0)"),
    Option("--stages", None, "prepare,ngram,ngram-raw,lmplz,prepare-lm,lm",
           "stages to run, comma-separated; lmplz runs only with --lmplz (default: "
           "prepare,ngram,ngram-raw,lmplz,prepare-lm,lm)"),
    Option("--lmplz", help="path to KenLM's lmplz to compare with"),
    Option("--memory", None, "1G", "--memory of ngram train and -S of lmplz (default: 1G)",
           metavar="SIZE"),
    # 4: the word tokenizer's special tokens and one word
    Option("--max-vocab", number(int, Range(4)), 50_000,
           "vocabulary of the train lm stages (default: 50000)"),
    Option("--lm-steps", number(int, AT_LEAST_1), 20,
           "optimizer steps timed after the first for train lm's tokens/s (default: 20)"),
    Option("--text", metavar="FILE",
           help="measure this text (space-separated tokens, one size) instead of the "
                "generated corpora, e.g. the output of keras-seq data tokenize --tokenizer "
                "word --split train --out FILE"),
    Option("--rounds", number(int, AT_LEAST_1), 1,
           "runs of each compared stage (ngram, ngram-raw, lmplz) per size, in alternating "
           "order; the table shows the median and the spread (default: 1)"),
    Option("--keep", None, False,
           "keep the prepared corpora and ARPA files (several GB at 100M)"),
)


def run_scaling(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.corpus_scaling import format_bench, parse_sizes, run_bench

    results = run_bench(parse_sizes(args.sizes), out=args.out, corpus_dir=args.corpus_dir,
                        seed=args.seed, stages=[s.strip() for s in args.stages.split(",")],
                        lmplz=args.lmplz, memory=args.memory, max_vocab=args.max_vocab,
                        lm_steps=args.lm_steps, keep=args.keep, roots=args.roots,
                        rounds=args.rounds, text=args.text,
                        progress=None if args.json else print)
    return results, lambda r: (f"{format_bench(r)}\nresults: {args.out}/scaling.json; "
                               f"plots: {', '.join(r['plots'])}")


register = BenchCommand(
    "scaling", "wall time and peak RSS against corpus tokens (1M, 16M, 100M) for data "
    "prepare, ngram train (vs lmplz) and train lm start-up and tokens/s; PNG plots",
    run_scaling, OPTIONS, ok=lambda r: all(row["rc"] == 0 for row in r["rows"])).register
