"""Plain aligned text tables, shared by the commands and the benchmarks.

>>> print_table([{"model": "KN5", "ppl": 170.74}, {"model": "LSTM", "ppl": 118.0}])
... # doctest: -NORMALIZE_WHITESPACE
model    ppl
-----  -----
KN5    170.7
LSTM     118
"""

from __future__ import annotations

import sys


def print_table(rows: list[dict], columns: list[str] | None = None, file=None) -> None:
    """Print ``rows`` as a plain aligned text table (numbers right-aligned)."""
    file = file or sys.stdout
    if not rows:
        return
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
    print(line(columns), file=file)
    print("  ".join("-" * w for w in widths), file=file)
    for row in cells:
        print(line(row), file=file)
