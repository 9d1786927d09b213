"""``keras-seq bench classify`` (seed 004's sentiment case), ``bench tag`` (uni- vs
bidirectional taggers at equal parameters) and ``bench conditioned`` (the same LM with and
without its condition)."""

from __future__ import annotations

import argparse

from keras_seq.commands._common import (
    add_json_arg,
    comma_list,
    number,
    print_json,
)
from keras_seq.ranges import AT_LEAST_1, POSITIVE, SEED


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


SEEDS = comma_list(kind=number(int, SEED))  # "1,2,3", each a valid --seed


def register(subparsers) -> None:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import CLASSIFIERS

    p = subparsers.add_parser("classify", help="seed 004's table: LSTM 128/512, BiLSTM and "
                              "attention pooling on reviews-negation, accuracy per distance")
    p.add_argument("--out", default="runs/bench-classify", help="folder for the run directories")
    p.add_argument("--models", default=",".join(CLASSIFIERS), type=comma_list(tuple(CLASSIFIERS)),
                   help=f"comma-separated, from {', '.join(CLASSIFIERS)}")
    p.add_argument("--seeds", default="1,2,3", type=SEEDS,
                   help="comma-separated seeds, one run each")
    p.add_argument("--minutes", type=number(float, POSITIVE),
                   default=3.0, help="training budget per run")
    p.add_argument("--epochs", type=number(int, AT_LEAST_1), default=20, help="epochs per run")
    p.add_argument("--hard", action=argparse.BooleanOptionalAction, default=False,
                   help="the variant word counts cannot solve")
    p.add_argument("--train-size", type=number(int, AT_LEAST_1), default=None,
                   help="training reviews (default: the task's 4000)")
    p.add_argument("--length", type=number(int, AT_LEAST_1),
                   default=None, help="words per review (80)")
    add_json_arg(p)
    p.set_defaults(func=run_classify)

    p = subparsers.add_parser("tag", help="uni- vs bidirectional LSTM taggers at equal "
                              "parameters on restore-punct")
    p.add_argument("--out", default="runs/bench-tag", help="folder for the run directories")
    p.add_argument("--units", type=number(int, AT_LEAST_1),
                   default=64, help="units per direction of the BiLSTM")
    p.add_argument("--seeds", default="1,2,3", type=SEEDS,
                   help="comma-separated seeds, one run each")
    p.add_argument("--minutes", type=number(float, POSITIVE),
                   default=3.0, help="training budget per run")
    p.add_argument("--epochs", type=number(int, AT_LEAST_1), default=30, help="epochs per run")
    p.add_argument("--data", default="restore-punct",
                   help="the tagging data (restore-punct[:CORPUS], conll:PATH, conllu:PATH)")
    add_json_arg(p)
    p.set_defaults(func=run_tag)

    p = subparsers.add_parser("conditioned", help="the same LM with and without its condition "
                              "(python-docs-topics): PPL over seeds")
    p.add_argument("--out", default="runs/bench-conditioned", help="folder for the run directories")
    p.add_argument("--seeds", default="1,2,3", type=SEEDS,
                   help="comma-separated seeds, one run each")
    p.add_argument("--minutes", type=number(float, POSITIVE),
                   default=None, help="optional cap per run")
    p.add_argument("--epochs", type=number(int, AT_LEAST_1),
                   default=8, help="epochs per run (equal for both)")
    p.add_argument("--data", default="python-docs-topics",
                   help="python-docs-topics | shapes | tsv:PATH")
    p.add_argument("--grouping", default="groups", choices=("topics", "groups"),
                   help="python-docs-topics: 30 topics or 10 groups")
    p.add_argument("--mode", default="both", choices=("init", "input", "both"),
                   help="where the condition enters the model")
    add_json_arg(p)
    p.set_defaults(func=run_conditioned)


def run_classify(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import bench_classify, format_classify

    extra = {k: getattr(args, k) for k in ("train_size", "length")
             if getattr(args, k) is not None}
    out = bench_classify(args.out, models=tuple(m for m in args.models.split(",") if m),
                         seeds=_ints(args.seeds), minutes=args.minutes, epochs=args.epochs,
                         hard=args.hard, **extra)
    print_json(out) if args.json else print(format_classify(out))
    return 0


def run_tag(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import bench_tag, format_tag

    out = bench_tag(args.out, units_bi=args.units, seeds=_ints(args.seeds),
                    minutes=args.minutes, epochs=args.epochs, data=args.data)
    print_json(out) if args.json else print(format_tag(out))
    return 0


def run_conditioned(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import bench_conditioned, format_conditioned

    out = bench_conditioned(args.out, seeds=_ints(args.seeds), minutes=args.minutes,
                            epochs=args.epochs, data=args.data, grouping=args.grouping,
                            mode=args.mode)
    print_json(out) if args.json else print(format_conditioned(out))
    return 0
