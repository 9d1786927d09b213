"""``keras-seq bench seq2seq``: attention vs no attention on long reversals (and dates)."""

from __future__ import annotations

from keras_seq.atomic import json_safe
from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import number
from keras_seq.errors import KerasSeqError
from keras_seq.ranges import AT_LEAST_1, POSITIVE, SEED
from keras_seq.tables import table_lines

OPTIONS = (
    Option("--tasks", None, "reverse",
           "comma-separated: reverse (both models), dates (attention model)"),
    Option("--out", None, "bench-seq2seq", "folder for runs and PNGs"),
    Option("--max-len", number(int, AT_LEAST_1), 64, "reversal: longest source"),
    Option("--minutes", number(float, POSITIVE), 12.0,
           "reversal: training budget per model (CPU minutes, wall clock)"),
    Option("--dates-minutes", number(float, POSITIVE), 14.0, "dates: training budget"),
    Option("--units", number(int, AT_LEAST_1), 64,
           "reversal: encoder (per direction) and decoder units"),
    Option("--embed-dim", number(int, AT_LEAST_1), 32, "embedding size of both sides"),
    Option("--batch-size", number(int, AT_LEAST_1), 64, "pairs per training batch"),
    Option("--train-size", number(int, AT_LEAST_1), 60000, "reversal training pairs"),
    Option("--test-size", number(int, AT_LEAST_1), 2000, "test pairs scored per model"),
    Option("--seed", number(int, SEED), 1234, "random seed of data and weights"),
    Option("--fresh", None, False, "retrain even if runs exist in --out"),
)


def tasks(args) -> list[str]:
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not names or any(t not in ("reverse", "dates") for t in names):
        raise KerasSeqError(f"--tasks got {args.tasks!r}; expected reverse, dates or both "
                            "(comma-separated)")
    return names


def run_seq2seq(args):
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.seq2seq import dates_bench, reversal_bench

    verbose = 0 if args.json else 2
    out = {}
    if "reverse" in tasks(args):
        out["reverse"] = reversal_bench(
            args.out, max_len=args.max_len, minutes=args.minutes, units=args.units,
            embed_dim=args.embed_dim, batch_size=args.batch_size, train_size=args.train_size,
            test_size=args.test_size, seed=args.seed, fresh=args.fresh, verbose=verbose)
    if "dates" in tasks(args):
        out["dates"] = dates_bench(args.out, minutes=args.dates_minutes, seed=args.seed,
                                   fresh=args.fresh, verbose=verbose)
    return out, format_seq2seq


def format_seq2seq(out: dict) -> str:
    lines = []
    if "reverse" in out:
        r = out["reverse"]
        lines += [f"\nreversal, lengths 1–{r['max_len']}: exact match per source-length bucket "
                  "(same test set)", *table_lines(r["by_length"]), ""]
        lines += table_lines([
            {"model": name, "params": p["total"], "attention params": p["attention"],
             "minutes": round(r["minutes"][a], 1), "epochs": r["epochs"][a],
             "exact %": round(100 * r["overall"][a]["exact_match"], 2),
             "token %": round(100 * r["overall"][a]["token_accuracy"], 2)}
            for a, name in (("bahdanau", "Bahdanau attention"), ("none", "no attention"))
            for p in [r["params"][a]]])
        lines += [f"parameter gap {r['param_gap_percent']:.1f}%; longest bucket gap "
                  f"{r['longest_bucket_gap_points']:.1f} points",
                  f"length curve: {r['plots']['length_curve']}\nheatmap: {r['plots']['heatmap']}"]
    if "dates" in out:
        d = out["dates"]
        t = d["test"]
        lines += [f"\ndates ({d['params']['total']:,} params, {d['minutes']:.1f} min, "
                  f"{d['epochs']} epochs): exact match {100 * t['exact_match']:.2f}%, token "
                  f"accuracy {100 * t['token_accuracy']:.2f}%, BLEU {t['bleu']:.2f} "
                  f"over {t['n']:,} held-out dates", *table_lines(d["by_length"]),
                  *(f"{name}: {path}" for name, path in d["plots"].items())]
    return "\n".join(lines)


register = BenchCommand(
    "seq2seq", "RNNsearch vs RNNenc: exact match per source length; PNG plots", run_seq2seq,
    OPTIONS, check=tasks, to_json=json_safe).register
