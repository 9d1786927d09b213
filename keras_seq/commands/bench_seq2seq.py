"""``keras-seq bench seq2seq``: attention vs no attention on long reversals (and dates)."""

from __future__ import annotations

import argparse
import sys

from keras_seq.commands._common import add_json_arg, number, print_json, print_table
from keras_seq.ranges import AT_LEAST_1, POSITIVE, SEED


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "seq2seq", help="RNNsearch vs RNNenc: exact match per source length; PNG plots")
    p.add_argument("--tasks", default="reverse",
                   help="comma-separated: reverse (both models), dates (attention model)")
    p.add_argument("--out", default="bench-seq2seq", help="folder for runs and PNGs")
    p.add_argument("--max-len", type=number(int, AT_LEAST_1),
                   default=64, help="reversal: longest source")
    p.add_argument("--minutes", type=number(float, POSITIVE), default=12.0,
                   help="reversal: training budget per model (CPU minutes, wall clock)")
    p.add_argument("--dates-minutes", type=number(float, POSITIVE),
                   default=14.0, help="dates: training budget")
    p.add_argument("--units", type=number(int, AT_LEAST_1), default=64,
                   help="reversal: encoder (per direction) and decoder units")
    p.add_argument("--embed-dim", type=number(int, AT_LEAST_1),
                   default=32, help="embedding size of both sides")
    p.add_argument("--batch-size", type=number(int, AT_LEAST_1),
                   default=64, help="pairs per training batch")
    p.add_argument("--train-size", type=number(int, AT_LEAST_1),
                   default=60000, help="reversal training pairs")
    p.add_argument("--test-size", type=number(int, AT_LEAST_1),
                   default=2000, help="test pairs scored per model")
    p.add_argument("--seed", type=number(int, SEED),
                   default=1234, help="random seed of data and weights")
    p.add_argument("--fresh", action=argparse.BooleanOptionalAction, default=False,
                   help="retrain even if runs exist in --out")
    add_json_arg(p)
    p.set_defaults(func=run_seq2seq)


def run_seq2seq(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.seq2seq import dates_bench, reversal_bench

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in ("reverse", "dates")]
    if unknown or not tasks:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.errors import KerasSeqError

        raise KerasSeqError(f"--tasks got {args.tasks!r}; expected reverse, dates or both "
                            "(comma-separated)")
    printer = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    verbose = 0 if args.json else 2
    out = {}
    if "reverse" in tasks:
        out["reverse"] = reversal_bench(
            args.out, max_len=args.max_len, minutes=args.minutes, units=args.units,
            embed_dim=args.embed_dim, batch_size=args.batch_size, train_size=args.train_size,
            test_size=args.test_size, seed=args.seed, fresh=args.fresh, verbose=verbose,
            printer=printer)
    if "dates" in tasks:
        out["dates"] = dates_bench(args.out, minutes=args.dates_minutes, seed=args.seed,
                                   fresh=args.fresh, verbose=verbose, printer=printer)
    if args.json:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.atomic import json_safe

        print_json(json_safe(out))
        return 0
    if "reverse" in out:
        r = out["reverse"]
        print(f"\nreversal, lengths 1–{r['max_len']}: exact match per source-length bucket "
              "(same test set)")
        print_table(r["by_length"])
        print()
        print_table([{"model": name, "params": p["total"], "attention params": p["attention"],
                      "minutes": round(r["minutes"][a], 1), "epochs": r["epochs"][a],
                      "exact %": round(100 * r["overall"][a]["exact_match"], 2),
                      "token %": round(100 * r["overall"][a]["token_accuracy"], 2)}
                     for a, name in (("bahdanau", "Bahdanau attention"),
                                     ("none", "no attention"))
                     for p in [r["params"][a]]])
        print(f"parameter gap {r['param_gap_percent']:.1f}%; longest bucket gap "
              f"{r['longest_bucket_gap_points']:.1f} points")
        print(f"length curve: {r['plots']['length_curve']}\nheatmap: {r['plots']['heatmap']}")
    if "dates" in out:
        d = out["dates"]
        t = d["test"]
        print(f"\ndates ({d['params']['total']:,} params, {d['minutes']:.1f} min, "
              f"{d['epochs']} epochs): exact match {100 * t['exact_match']:.2f}%, token "
              f"accuracy {100 * t['token_accuracy']:.2f}%, BLEU {t['bleu']:.2f} "
              f"over {t['n']:,} held-out dates")
        print_table(d["by_length"])
        for name, path in d["plots"].items():
            print(f"{name}: {path}")
    return 0
