"""Plain aligned text tables and JSON output, shared by the commands, the tasks and the
benchmarks.

>>> print_table([{"model": "KN5", "ppl": 170.74}, {"model": "LSTM", "ppl": 118.0}])
... # doctest: -NORMALIZE_WHITESPACE
model    ppl
-----  -----
KN5    170.7
LSTM     118
"""

from __future__ import annotations

import argparse
import json
import sys


def print_table(rows: list[dict], columns: list[str] | None = None, file=None) -> None:
    """Print ``rows`` as a plain aligned text table (numbers right-aligned)."""
    for line in table_lines(rows, columns):
        print(line, file=file or sys.stdout)


def table_lines(rows: list[dict], columns: list[str] | None = None) -> list[str]:
    """The lines :func:`print_table` prints (none for no rows).

    >>> table_lines([{"n": 3}])
    ['n', '-', '3']
    """
    if not rows:
        return []
    columns = columns or list(rows[0])

    def fmt(v):
        if isinstance(v, float):
            return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), (int, float)) for r in rows) for c in columns]
    line = lambda vals: "  ".join(
        v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)
    )
    return [line(columns), "  ".join("-" * w for w in widths), *map(line, cells)]


def print_json(payload) -> None:
    """``payload`` as indented JSON on stdout (non-ASCII kept, anything else as ``str``)."""
    json.dump(payload, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def add_json_arg(parser) -> None:
    """``--json/--no-json``: print machine-readable JSON (every command's one flag for it)."""
    parser.add_argument("--json", action=argparse.BooleanOptionalAction, default=False,
                        help="print machine-readable JSON")
