"""Declared ranges of numbers: what a CLI flag (``keras_seq.commands._common.FLAG_RANGES``)
or a REST request field (``keras_seq.serving.codec.REQUEST_FIELDS``) accepts.

Below everything (it imports nothing of keras-seq), so that the command line and the
server check their values with the same type and print them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

INT_LIMIT = 2**31 - 1  # sizes and counts past int32 break TensorFlow shapes and int32 ids


@dataclass(frozen=True)
class Range:
    """The numbers a flag accepts (``None``: no bound; ``*_open``: the bound itself is out).

    It says nothing of finiteness: the caller refuses NaN and ±inf first.

    >>> str(Range(0, 1, high_open=True)), 0.5 in Range(0, 1, high_open=True)
    ('in [0, 1)', True)
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        low, high = ("" if b is None else str(int(b)) if float(b).is_integer() and abs(b) < 1e16
                     else f"{b:g}" for b in (self.low, self.high))
        if self.low is not None and self.high is not None:
            if not (self.low_open or self.high_open):
                return f"from {low} to {high}"
            return (f"in {'(' if self.low_open else '['}{low}, {high}"
                    f"{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{'>' if self.low_open else '≥'} {low}"
        if self.high is not None:
            return f"{'<' if self.high_open else '≤'} {high}"
        return "a number"


AT_LEAST_1, NON_NEGATIVE, POSITIVE = Range(1), Range(0), Range(0, low_open=True)
FRACTION, SHARE = Range(0, 1, high_open=True), Range(0, 1)  # dropout-like / probability
