"""``python -m tools.reliability``: run the fault campaign and print (or write) one table.

Run it from the project root (``make reliability`` writes ``docs/reliability.md``)::

    python -m tools.reliability --areas files,cli      # the quick subset, two areas
    python -m tools.reliability --full --out docs/reliability.md

The exit status is 1 when any scenario failed or lost data, else 0.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from keras_seq.tables import print_table
from tools.reliability import AREAS
from tools.reliability.report import run_areas, write_report

#: how the report says it was made (run from the project root)
COMMAND = "python -m tools.reliability"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=COMMAND, description="The fault campaign: kill -9 during training, full disks, "
        "corrupt files, hostile requests; one table of trials, failures and data lost.")
    p.add_argument("--areas", default=",".join(AREAS), metavar="A,B",
                   help=f"which areas (default all: {', '.join(AREAS)})")
    p.add_argument("--full", action=argparse.BooleanOptionalAction, default=False,
                   help="the whole campaign (≥ 10 kills per trainer, thousands of cases, "
                   "a 10-minute soak); default: the quick subset tests/reliability runs")
    p.add_argument("--out", default=None, metavar="PATH",
                   help="write the Markdown report there (e.g. docs/reliability.md)")
    p.add_argument("--workdir", default=None, metavar="DIR",
                   help="keep the runs and files the areas make there (default: a temp dir)")
    p.add_argument("--json", action=argparse.BooleanOptionalAction, default=False,
                   help="print machine-readable JSON")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    areas = [a.strip() for a in args.areas.split(",") if a.strip()]
    unknown = [a for a in areas if a not in AREAS]
    if unknown or not areas:
        parser.error(f"--areas: received {args.areas!r}; expected a comma-separated list "
                     f"of {', '.join(AREAS)}")
    scale = "full" if args.full else "quick"
    printer = lambda msg: print(msg, file=sys.stderr, flush=True)
    started = time.monotonic()
    results = run_areas(areas, scale, args.workdir, printer)
    seconds = time.monotonic() - started
    rows = [{"area": area, **row.to_dict()} for area, area_rows in results.items()
            for row in area_rows]
    if args.out:
        command = COMMAND + (" --full" if args.full else "") + (
            f" --areas {','.join(areas)}" if areas != list(AREAS) else "") + \
            f" --out {shlex.quote(args.out)}"
        printer(f"wrote {write_report(results, args.out, command, scale, seconds)}")
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows, ["area", "scenario", "cases", "failures", "data_lost", "notes"])
    return 1 if any(r["failures"] or r["data_lost"] != "none" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
