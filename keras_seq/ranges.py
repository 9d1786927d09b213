"""Ranges of numbers: what a config field (``option(range=…)``), a CLI flag
(``type=number(int, AT_LEAST_1)``) or a REST request field
(:func:`keras_seq.serving.codec.request_fields`) accepts, and the named ranges they share.

Below everything (it imports nothing of keras-seq), so that the command line and the
server check their values with the same type and print them the same way. Each range is
declared once, where its field or flag is declared; ``tests/test_ranges_declared_once.py``
fails when a config also checks it by hand.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

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

    def capped(self, high: float) -> Range:
        """This range with its upper bound lowered to ``high`` where that is tighter (a
        server's limit on a value the model itself accepts).

        >>> str(Range(1).capped(256)), str(Range(0, 1).capped(5))
        ('from 1 to 256', 'from 0 to 1')
        """
        if self.high is not None and self.high <= high:
            return self
        return replace(self, high=high, high_open=False)

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
SEED = Range(0, 2**32 - 1)  # what NumPy and Keras accept
NGRAM_ORDER = Range(1, 10)  # keras_seq.ngram's MAX_ORDER
COLUMN = Range()  # a column of a table: any integer, -1 the last
OPEN_SHARE = Range(0, 1, low_open=True)  # a probability mass that must hold something
PORT = Range(0, 65535)  # a TCP port, 0: any free one


def number(kind, rng: Range | None = None):
    """An argparse ``type``: ``kind`` (int or float) parsed from the text, refused unless
    it is finite, within ±:data:`INT_LIMIT` for an int without an upper bound, and in
    ``rng``. The message says what was given and what is expected.

    >>> number(int, AT_LEAST_1)("-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be ≥ 1 (got -3)
    """
    def parse(text):
        value = kind(text)  # ValueError → argparse's "invalid int value: 'x'"
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number (got {text!r})")
        if kind is int and (rng is None or rng.high is None) and abs(value) > INT_LIMIT:
            raise argparse.ArgumentTypeError(f"must be at most {INT_LIMIT:,} (got {text})")
        if rng is not None and value not in rng:
            raise argparse.ArgumentTypeError(f"must be {rng} (got {text})")
        return value

    parse.__name__ = kind.__name__
    parse.kind, parse.range = kind, rng
    return parse
