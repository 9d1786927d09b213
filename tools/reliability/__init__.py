"""The reliability campaign: crashes, full disks, corrupt files, hostile input, a busy server.

Each area is a module with ``run(scale, workdir, printer) -> list[Row]``: it attacks one
part of keras-seq for real (subprocesses killed with SIGKILL, fuzzed files, generated
requests against a live server) and counts what went wrong. ``scale`` is ``"quick"``
(the few trials and few hundred cases CI runs through ``tests/reliability``) or
``"full"`` (the campaign behind ``docs/reliability.md``).

``python -m tools.reliability`` (from the project root; ``make reliability`` for the full
campaign) runs the areas and writes the table (:mod:`tools.reliability.report`). The
campaign is a development harness, not part of the library: it needs the development
dependencies (hypothesis, schemathesis) and ``keras_seq`` never imports it.

>>> row = Row("kill -9 during train lm", cases=10, failures=0)
>>> row.ok, row.data_lost
(True, 'none')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: area name → module (each has ``run(scale, workdir, printer)``), in the report's order
AREAS = {
    "training": "tools.reliability.training",  # kill -9, corrupt checkpoints, full disk
    "files": "tools.reliability.files",  # corpora, tokenizers, ARPA, config, .keras
    "tflite": "tools.reliability.tflite",  # truncated / bit-flipped .tflite files
    "cli": "tools.reliability.cli",  # bad command lines, parser property tests
    "server": "tools.reliability.server",  # generated + hostile requests, floods
    "soak": "tools.reliability.soak",  # 16 clients for minutes: RSS, p99, errors
}
SCALES = ("quick", "full")


@dataclass
class Row:
    """One line of the reliability table.

    Attributes:
        scenario: what was done, in words.
        cases: trials or generated cases run.
        failures: cases that broke a promise (a traceback, a 5xx, a wrong weight…).
        data_lost: what was lost over all cases, in words ("none" when nothing).
        notes: what a failure was, or how the scenario was measured.
    """

    scenario: str
    cases: int
    failures: int = 0
    data_lost: str = "none"
    notes: str = ""

    @property
    def ok(self) -> bool:
        return self.failures == 0 and self.data_lost == "none"

    def to_dict(self) -> dict:
        return asdict(self)
