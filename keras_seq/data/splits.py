"""Train/val/test splits: one parser, one sizing rule, one default, for every task.

A split spec gives the train/val[/test] shares: percentages that sum to 100 (``"90/5/5"``)
or fractions that sum to 1 (``"0.9,0.05,0.05"``); two shares (``"90/10"``, nanoGPT's)
mean no test split. :func:`parse_split` reads it, :func:`split_sizes` turns it into
counts by the one rule (each held-out split gets its share of ``n`` rounded half up,
train the rest and at least one item), and two functions apply the counts:

* :func:`split_items` cuts a list: in the given order (``seed=None``: contiguous parts,
  for items whose order matters, such as the paragraphs of a topic), or after a seeded
  shuffle (``seed=S``: rows whose order does not matter), optionally per group
  (``by=``: stratified, each group cut on its own, e.g. per label);
* :func:`split_text` cuts a text stream contiguously by characters, each cut moved
  forward to the next line break (language-model corpora).

The default is :data:`DEFAULT_SPLIT` (90/5/5). A task whose measured results were made
at another ratio keeps that value as its config default (``tag`` and ``conditioned``:
80/10/10) and goes through the same parser and rule.

This module does not import TensorFlow.

Example:

>>> split_sizes(100, parse_split("90/5/5")), split_sizes(5, parse_split("80/10/10"))
((90, 5, 5), (3, 1, 1))
>>> split_items(list(range(10)), "80/10/10")
{'train': [0, 1, 2, 3, 4, 5, 6, 7], 'val': [8], 'test': [9]}
>>> sorted(sum(split_items(list(range(10)), "80/10/10", seed=0).values(), []))
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
>>> split_text("one\\ntwo\\nthree\\nfour\\n", "50/50")
{'train': 'one\\ntwo\\nthree\\n', 'val': 'four\\n', 'test': ''}
"""

from __future__ import annotations

import math
import random
import re

from keras_seq.errors import DataError

SPLITS = ("train", "val", "test")
DEFAULT_SPLIT = "90/5/5"
_SNAP_LIMIT = 10_000  # a cut moves at most this many characters to reach a line break


def parse_split(spec, parts: tuple[int, ...] = (2, 3)) -> tuple[float, float, float]:
    """Parse ``"90/5/5"``, ``"90/10"`` (no test split) or ``"0.8,0.1,0.1"`` into fractions.

    The shares are percentages that sum to 100 or fractions that sum to 1; anything else
    (``"50/60"``) is refused rather than silently rescaled. ``parts`` says how many shares
    a caller accepts (``(3,)``: a test split is required). A tuple or list of numbers is
    read as the shares.

    >>> parse_split("90/10")
    (0.9, 0.1, 0.0)
    >>> parse_split("50/60")
    Traceback (most recent call last):
    ...
    keras_seq.errors.DataError: invalid split '50/60': the shares sum to 110; ...
    """
    if isinstance(spec, (tuple, list)):
        spec = "/".join(str(v) for v in spec)
    pieces = [p for p in re.split(r"[/,:]", str(spec)) if p.strip()]
    try:
        values = [float(p) for p in pieces]
    except ValueError:
        values = []
    if len(values) not in (2, 3) or not all(0 <= v < float("inf") for v in values):
        raise DataError(
            f"invalid split {spec!r}; expected train/val[/test] shares such as "
            f"'{DEFAULT_SPLIT}' (default) or '90/10' (nanoGPT: no test split)"
        )
    if len(values) not in parts:
        raise DataError(
            f"invalid split {spec!r}: {len(values)} shares, expected "
            f"{' or '.join(map(str, parts))} (train/val/test), e.g. '{DEFAULT_SPLIT}'"
        )
    total = sum(values)
    if not (abs(total - 100) <= 1e-6 or abs(total - 1) <= 1e-9):
        raise DataError(
            f"invalid split {spec!r}: the shares sum to {total:g}; expected percentages "
            "that sum to 100 (e.g. '90/5/5') or fractions that sum to 1 (e.g. '0.9,0.05,0.05')"
        )
    values += [0.0] * (3 - len(values))
    if values[0] <= 0:
        raise DataError(f"invalid split {spec!r}: the train share must be positive")
    return tuple(v / total for v in values)  # type: ignore[return-value]


def split_problems(spec, parts: tuple[int, ...] = (2, 3)) -> list[str]:
    """What is wrong with a config's ``split_ratio`` (``[]`` when :func:`parse_split` reads it),
    for the configs' ``problems()``.

    >>> split_problems("80/10/10"), split_problems("80/20", parts=(3,))[0][:44]
    ([], "split_ratio: invalid split '80/20': 2 shares")
    """
    try:
        parse_split(spec, parts)
    except DataError as err:
        return [f"split_ratio: {err}"]
    return []


def split_sizes(n: int, fractions) -> tuple[int, int, int]:
    """``(train, val, test)`` counts of ``n`` items: the one rule of every split.

    val and test get ``n × share`` rounded half up; train gets the rest and keeps at
    least one item (val, then test, give way), so a split never loses its training data.

    >>> split_sizes(4, (0.8, 0.1, 0.1)), split_sizes(37, (0.8, 0.1, 0.1))
    ((4, 0, 0), (29, 4, 4))
    >>> split_sizes(3, (0.02, 0.96, 0.02))
    (1, 2, 0)
    """
    n = int(n)
    val = min(math.floor(n * fractions[1] + 0.5), max(n - 1, 0))
    test = min(math.floor(n * fractions[2] + 0.5), max(n - 1 - val, 0))
    return n - val - test, val, test


def _cut(items: list, sizes) -> dict[str, list]:
    n_train, n_val, _ = sizes
    return {"train": items[:n_train], "val": items[n_train:n_train + n_val],
            "test": items[n_train + n_val:]}


def split_items(items, spec=DEFAULT_SPLIT, *, seed: int | None = None,
                by=None) -> dict[str, list]:
    """Cut ``items`` into ``{"train", "val", "test"}`` lists by :func:`split_sizes`.

    Args:
        items: a sequence; it is not modified.
        spec: the shares (see :func:`parse_split`), or already parsed fractions.
        seed: ``None`` cuts contiguously in the given order (train first, then val, then
            test). An integer shuffles the items with ``random.Random(f"split:{seed}")``
            first: the same items, seed and spec give the same splits.
        by: a function of an item giving its group (e.g. its label): each group is cut
            on its own (groups in sorted order; stratified), then the parts are joined
            and, with a seed, each split is shuffled so that the groups mix.

    >>> rows = [("a", "x"), ("b", "x"), ("c", "y"), ("d", "y")]
    >>> split_items(rows, "50/50", by=lambda row: row[1])["val"]
    [('b', 'x'), ('d', 'y')]
    """
    fractions = spec if _is_fractions(spec) else parse_split(spec)
    rng = random.Random(f"split:{seed}") if seed is not None else None
    groups: dict = {}
    for item in items:
        groups.setdefault(by(item) if by is not None else None, []).append(item)
    out: dict[str, list] = {s: [] for s in SPLITS}
    for key in sorted(groups) if by is not None else groups:
        members = groups[key]
        if rng is not None:
            rng.shuffle(members)
        for split, part in _cut(members, split_sizes(len(members), fractions)).items():
            out[split] += part
    if rng is not None and by is not None:
        for split in SPLITS:
            rng.shuffle(out[split])
    return out


def _is_fractions(spec) -> bool:
    return (isinstance(spec, tuple) and len(spec) == 3
            and all(isinstance(v, float) for v in spec))


def split_text(text: str, spec=DEFAULT_SPLIT) -> dict[str, str]:
    """Cut ``text`` into contiguous train/val/test parts by characters (:func:`split_sizes`).

    Each cut is moved forward to the next line break so no line is split between parts
    (for a text without line breaks, the cut stays where the shares put it). The parts
    concatenate back to ``text`` exactly.
    """
    fractions = spec if _is_fractions(spec) else parse_split(spec)
    n = len(text)
    n_train, n_val, _ = split_sizes(n, fractions)
    cuts = [0]
    for cut in (n_train, n_train + n_val):
        cut = max(cut, cuts[-1])
        newline = text.find("\n", max(cut - 1, 0))  # a cut at a line start stays put
        if cut > 0 and newline != -1 and newline - cut < _SNAP_LIMIT:
            cut = newline + 1
        cuts.append(min(cut, n))
    cuts.append(n)
    return {s: text[a:b] for s, a, b in zip(SPLITS, cuts[:-1], cuts[1:])}
