"""``keras-seq report --out DIR [--quick]``: measure the textbook's claims into DIR/report.md."""

from __future__ import annotations

import argparse

from keras_seq.commands._common import number
from keras_seq.ranges import POSITIVE, SEED


def register(subparsers) -> None:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.analysis.report import SECTIONS

    p = subparsers.add_parser(
        "report",
        help="measure the seed chapters' claims (gradients, memory, speed, TBPTT, sparsity) "
        "into DIR/report.md with plots",
        description="One section per claim: the claim, the command, the measured table and "
        "plot, and a verdict. Without --quick this is the full run docs/textbook.md quotes (hours "
        "on a CPU); --quick takes about ten CPU minutes.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action=argparse.BooleanOptionalAction, default=False,
                      help="small settings (~10 CPU minutes)")
    size.add_argument("--tiny", action=argparse.BooleanOptionalAction, default=False,
                      help="toy settings that finish in seconds (tests; numbers meaningless)")
    p.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS,
                   metavar="SECTION", help="sections to run")
    p.add_argument("--data", default="python-docs", metavar="NAME|PATH",
                   help="corpus for the text-based sections (default python-docs, embedded)")
    p.add_argument("--seed", type=number(int, SEED), default=0, help="random seed (default 0)")
    p.add_argument("--memory-max-minutes", type=number(float, POSITIVE),
                   default=None, metavar="MIN",
                   help="wall-time cap for the memory sweep; runs not started by then are "
                   "skipped and the lengths they bound are marked as lower bounds")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="show progress bars")
    p.add_argument("--combine", nargs="+", default=None, metavar="DIR",
                   help="measure nothing: merge the sections of these report folders (run "
                   "in parallel, same preset and seed) into --out")
    p.set_defaults(func=run_report)


def run_report(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads TensorFlow)
    import tensorflow as tf

    from keras_seq.analysis.report import run_report

    tf.get_logger().setLevel("ERROR")
    if args.combine:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.analysis.report import combine_reports

        print(f"report: {combine_reports(args.out, *args.combine)}")
        return 0
    preset = "tiny" if args.tiny else "quick" if args.quick else "full"
    overrides = None
    if args.memory_max_minutes is not None:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.analysis.report import PRESETS

        overrides = {"memory": {**PRESETS[preset]["memory"],
                                "max_minutes": args.memory_max_minutes}}
    path = run_report(args.out, preset=preset, sections=args.sections, data=args.data,
                      seed=args.seed, progress=args.progress, overrides=overrides)
    print(f"report: {path}")
    return 0
