"""``keras-seq bench classify`` (seed 004's sentiment case), ``bench tag`` (uni- vs
bidirectional taggers at equal parameters) and ``bench conditioned`` (the same LM with and
without its condition)."""

from __future__ import annotations

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import comma_list, number
from keras_seq.ranges import AT_LEAST_1, POSITIVE, SEED


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


SEEDS = Option("--seeds", comma_list(kind=number(int, SEED)), "1,2,3",  # each a valid --seed
               "comma-separated seeds, one run each")


def classify_options() -> list[Option]:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import CLASSIFIERS

    return [
        Option("--out", None, "runs/bench-classify", "folder for the run directories"),
        Option("--models", comma_list(tuple(CLASSIFIERS)), ",".join(CLASSIFIERS),
               f"comma-separated, from {', '.join(CLASSIFIERS)}"),
        SEEDS,
        Option("--minutes", number(float, POSITIVE), 3.0, "training budget per run"),
        Option("--epochs", number(int, AT_LEAST_1), 20, "epochs per run"),
        Option("--hard", None, False, "the variant word counts cannot solve"),
        Option("--train-size", number(int, AT_LEAST_1), None,
               "training reviews (default: the task's 4000)"),
        Option("--length", number(int, AT_LEAST_1), None, "words per review (80)"),
    ]


TAG_OPTIONS = (
    Option("--out", None, "runs/bench-tag", "folder for the run directories"),
    Option("--units", number(int, AT_LEAST_1), 64, "units per direction of the BiLSTM"),
    SEEDS,
    Option("--minutes", number(float, POSITIVE), 3.0, "training budget per run"),
    Option("--epochs", number(int, AT_LEAST_1), 30, "epochs per run"),
    Option("--data", None, "restore-punct",
           "the tagging data (restore-punct[:CORPUS], conll:PATH, conllu:PATH)"),
)

CONDITIONED_OPTIONS = (
    Option("--out", None, "runs/bench-conditioned", "folder for the run directories"),
    SEEDS,
    Option("--minutes", number(float, POSITIVE), None, "optional cap per run"),
    Option("--epochs", number(int, AT_LEAST_1), 8, "epochs per run (equal for both)"),
    Option("--data", None, "python-docs-topics", "python-docs-topics | shapes | tsv:PATH"),
    Option("--grouping", None, "groups", "python-docs-topics: 30 topics or 10 groups",
           choices=("topics", "groups")),
    Option("--mode", None, "both", "where the condition enters the model",
           choices=("init", "input", "both")),
)


def run_classify(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import bench_classify, format_classify

    extra = {k: getattr(args, k) for k in ("train_size", "length")
             if getattr(args, k) is not None}
    out = bench_classify(args.out, models=tuple(m for m in args.models.split(",") if m),
                         seeds=_ints(args.seeds), minutes=args.minutes, epochs=args.epochs,
                         hard=args.hard, **extra)
    return out, format_classify


def run_tag(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import bench_tag, format_tag

    return bench_tag(args.out, units_bi=args.units, seeds=_ints(args.seeds),
                     minutes=args.minutes, epochs=args.epochs, data=args.data), format_tag


def run_conditioned(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.task_shapes import bench_conditioned, format_conditioned

    out = bench_conditioned(args.out, seeds=_ints(args.seeds), minutes=args.minutes,
                            epochs=args.epochs, data=args.data, grouping=args.grouping,
                            mode=args.mode)
    return out, format_conditioned


COMMANDS = (
    BenchCommand("classify", "seed 004's table: LSTM 128/512, BiLSTM and attention pooling on "
                 "reviews-negation, accuracy per distance", run_classify, classify_options),
    BenchCommand("tag", "uni- vs bidirectional LSTM taggers at equal parameters on "
                 "restore-punct", run_tag, TAG_OPTIONS),
    BenchCommand("conditioned", "the same LM with and without its condition "
                 "(python-docs-topics): PPL over seeds", run_conditioned, CONDITIONED_OPTIONS),
)


def register(subparsers) -> None:
    for command in COMMANDS:
        command.register(subparsers)
