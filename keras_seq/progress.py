"""Progress bars that cost nothing where they would not show.

:func:`progress_bar` takes tqdm's arguments and returns a tqdm bar only where one would be
displayed (``disable=None``: a terminal on ``file``). Otherwise it returns a
:class:`NoBar`, and tqdm is never imported: that takes ~30 ms, 3% of a one-second
``keras-seq ngram train`` on tinyshakespeare.

Example:

>>> import io
>>> bar = progress_bar(total=10, desc="counting", file=io.StringIO())  # not a terminal
>>> bar.update(3); bar.close(); type(bar).__name__
'NoBar'
"""

from __future__ import annotations

import sys


class NoBar:
    """A bar that shows nothing (``update`` and ``close`` do nothing)."""

    def update(self, n=1):
        pass

    def close(self):
        pass


def progress_bar(*, total, desc: str, disable: bool | None = None, file=None, **options):
    """``tqdm(total=…, desc=…, disable=…, file=…, **options)``, or a :class:`NoBar` where
    that bar would be disabled (``disable`` true, or ``None`` and ``file`` not a terminal).
    ``file`` defaults to standard error."""
    file = sys.stderr if file is None else file
    if disable or (disable is None and not _is_terminal(file)):
        return NoBar()
    # lazy: tqdm is imported only for a bar that shows
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=disable, file=file, **options)


def _is_terminal(file) -> bool:
    try:
        return file.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False
