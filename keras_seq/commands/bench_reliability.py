"""``keras-seq bench reliability``: the reliability campaign, one table
(``docs/reliability.md``; see :mod:`keras_seq.reliability`)."""

from __future__ import annotations


def register(subparsers) -> None:
    from keras_seq.reliability import AREAS

    p = subparsers.add_parser(
        "reliability", help="kill -9 during training, full disks, corrupt files, hostile "
        "requests: one table of trials, failures and data lost")
    p.add_argument("--areas", default=",".join(AREAS), metavar="A,B",
                   help=f"which areas (default all: {', '.join(AREAS)})")
    p.add_argument("--full", action="store_true",
                   help="the whole campaign (≥ 10 kills per trainer, thousands of cases, "
                   "a 10-minute soak); default: the quick subset CI runs")
    p.add_argument("--out", default=None, metavar="PATH",
                   help="write the Markdown report there (e.g. docs/reliability.md)")
    p.add_argument("--workdir", default=None, metavar="DIR",
                   help="keep the runs and files the areas make there (default: a temp dir)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_bench_reliability)


def cmd_bench_reliability(args) -> int:
    import json
    import shlex
    import sys
    import time

    from keras_seq.commands._common import print_table
    from keras_seq.reliability.report import run_areas, write_report

    areas = [a.strip() for a in args.areas.split(",") if a.strip()]
    scale = "full" if args.full else "quick"
    printer = lambda msg: print(msg, file=sys.stderr, flush=True)
    started = time.monotonic()
    results = run_areas(areas, scale, args.workdir, printer)
    seconds = time.monotonic() - started
    rows = [{"area": area, **row.to_dict()} for area, area_rows in results.items()
            for row in area_rows]
    if args.out:
        from keras_seq.reliability import AREAS

        command = "keras-seq bench reliability" + (" --full" if args.full else "") + (
            f" --areas {','.join(areas)}" if areas != list(AREAS) else "") + \
            f" --out {shlex.quote(args.out)}"
        printer(f"wrote {write_report(results, args.out, command, scale, seconds)}")
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows, ["area", "scenario", "cases", "failures", "data_lost", "notes"])
    return 1 if any(r["failures"] or r["data_lost"] != "none" for r in rows) else 0
