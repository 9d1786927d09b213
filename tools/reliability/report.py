"""Run the reliability areas and write the table (``docs/reliability.md``).

>>> from tools.reliability import Row
>>> print(markdown_table([Row("a scenario", 10)]))
| area | scenario | trials / cases | failures | data lost | notes |
|---|---|---:|---:|---|---|
| — | a scenario | 10 | 0 | none |  |
"""

from __future__ import annotations

import importlib
import platform
import tempfile
import time
from pathlib import Path

from keras_seq.errors import KerasSeqError
from tools.reliability import AREAS, SCALES, Row


def run_areas(areas, scale: str = "quick", workdir=None, printer=print) -> dict:
    """``{area: [Row, …]}`` for each of ``areas`` (names of :data:`AREAS`), in order."""
    unknown = [a for a in areas if a not in AREAS]
    if unknown or scale not in SCALES:
        raise KerasSeqError(f"received areas {unknown or areas} at scale {scale!r}; expected "
                            f"some of {', '.join(AREAS)} at {' or '.join(SCALES)}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="keras-seq-reliability-") as tmp:
        for area in areas:
            folder = Path(workdir or tmp) / area
            folder.mkdir(parents=True, exist_ok=True)
            printer(f"[{area}] …")
            started = time.monotonic()
            rows = importlib.import_module(AREAS[area]).run(scale, folder, printer)
            printer(f"[{area}] {len(rows)} scenario(s), "
                    f"{sum(r.failures for r in rows)} failure(s) in "
                    f"{time.monotonic() - started:.0f} s")
            results[area] = rows
    return results


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[Row], area: str = "—") -> str:
    lines = ["| area | scenario | trials / cases | failures | data lost | notes |",
             "|---|---|---:|---:|---|---|"]
    lines += [f"| {area} | {_cell(r.scenario)} | {r.cases:,} | {r.failures:,} | "
              f"{_cell(r.data_lost)} | {_cell(r.notes)} |" for r in rows]
    return "\n".join(lines)


def markdown_report(results: dict, command: str, scale: str, seconds: float) -> str:
    """The whole ``docs/reliability.md``: how it was made, then one table."""
    rows = [(area, r) for area, area_rows in results.items() for r in area_rows]
    failures = sum(r.failures for _, r in rows)
    lost = [r.scenario for _, r in rows if r.data_lost != "none"]
    lines = markdown_table([]).splitlines()  # the header
    lines += [markdown_table([r], area).splitlines()[2] for area, r in rows]
    table = "\n".join(lines)
    verdict = (f"**{len(rows)} scenarios, {failures} failure(s), data lost in "
               f"{len(lost)}** ({', '.join(lost) if lost else 'none'}).")
    return f"""# Reliability

What keras-seq promises when things go wrong, and how often it kept the promise.
Produced by the fault campaign (`tools/reliability/`, a development harness outside the
library) with one command from the project root (scale `{scale}`, {seconds / 60:.1f} min on
{platform.machine()} {platform.system()}, Python {platform.python_version()}):

```sh
{command}
```

(`make reliability` runs the full campaign and rewrites this page.)

{verdict}

{table}

The same harness runs at the `quick` scale in `tests/reliability/`: `make test` runs the
in-process pieces (the checkpoint commit protocol, damaged checkpoints, full disks, the
server's read timeout and connection cap, its token check, publish's load check) and a few
hundred generated cases per other area; `make test-slow` runs the areas' quick campaigns
against real subprocesses (a kill of `train lm` between a checkpoint and its commit, a
damaged checkpoint, a read-only run directory; the server's campaign and soak).
"""


def write_report(results: dict, path, command: str, scale: str, seconds: float) -> Path:
    from keras_seq.atomic import write_text_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, markdown_report(results, command, scale, seconds))
    return path
