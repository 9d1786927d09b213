"""Declared options: a dataclass field that carries its one-line help, its choices and its
range, the single source of everything that reads it — the ``keras-seq`` flag made from it
(:func:`keras_seq.commands._common.add_config_args`), the config's ``validate()``
(:func:`declared_problems`), the REST request table (``keras_seq.serving.codec``) and the
fault campaign (``tools/reliability``), which both read the same range.

Below everything but :mod:`keras_seq.ranges` (it imports nothing heavy).

>>> from dataclasses import dataclass
>>> from keras_seq.ranges import AT_LEAST_1
>>> @dataclass
... class Toy:
...     units: int = option(8, "hidden units", range=AT_LEAST_1)
...     cell: str = option("gru", "recurrent layer", choices=("gru", "lstm"))
>>> declared_problems(Toy(units=0, cell="rnn"))
['units must be ≥ 1 (got 0)', "cell must be one of 'gru', 'lstm' (got 'rnn')"]
>>> str(declared_range(Toy, "units"))
'≥ 1'
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from dataclasses import field

from keras_seq.ranges import Range, number


def option(default, help: str, *, range: Range | None = None, choices: tuple | None = None,
           metavar: str | None = None, default_help: str | None = None):
    """A dataclass field with its one-line description: ``help`` says what it does;
    ``range`` (numbers) and ``choices`` are the values it accepts; ``metavar`` shapes its
    flag; ``default_help`` says in words what a ``None`` default means (``"no limit"``).
    A ``None`` value stays allowed wherever the field's type admits it ("unset").

    >>> from dataclasses import dataclass, fields
    >>> @dataclass
    ... class Toy:
    ...     units: int = option(8, "hidden units")
    >>> fields(Toy)[0].metadata["help"]
    'hidden units'
    """
    metadata = {"help": help, "range": range, "choices": choices, "metavar": metavar,
                "default_help": default_help}
    return field(default=default, metadata={k: v for k, v in metadata.items() if v is not None})


def field_metadata(cls, name: str) -> dict:
    """The :func:`option` metadata of field ``name``: the class's own, else that of the
    nearest base class that describes it (a subclass that only changes a default keeps
    the shared description and range)."""
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__dataclass_fields__", {}).get(name)
        if declared is not None and declared.metadata.get("help"):
            return dict(declared.metadata)
    return {}


def declared_range(cls, name: str) -> Range | None:
    """The range declared for field ``name`` of ``cls`` (None: it has none)."""
    return field_metadata(cls, name).get("range")


def number_kind(cls, name: str) -> type | None:
    """``int`` or ``float`` when field ``name`` holds a number (optionally None), else None."""
    hint = typing.get_type_hints(cls)[name]
    kinds = typing.get_args(hint) or (hint,)
    return next((k for k in (int, float) if k in kinds and bool not in kinds), None)


def declared_problems(obj) -> list[str]:
    """What is wrong with the fields of dataclass instance ``obj`` by their declarations
    alone: a value outside its ``choices`` or ``range``, a range field that holds no
    number (or a fraction where an integer is declared). ``None`` passes (unset)."""
    problems = []
    for f in dataclasses.fields(obj):
        meta, value = field_metadata(type(obj), f.name), getattr(obj, f.name)
        if value is None:
            continue
        choices, rng = meta.get("choices"), meta.get("range")
        if choices is not None and value not in choices:
            problems.append(f"{f.name} must be one of {', '.join(map(repr, choices))} "
                            f"(got {value!r})")
        if rng is not None:
            problem = _number_problem(value, number_kind(type(obj), f.name), rng)
            if problem:
                problems.append(f"{f.name} must be {problem} (got {value!r})")
    return problems


def _number_problem(value, kind, rng: Range) -> str | None:
    """What ``value`` should have been: a number of ``kind`` in ``rng`` (None: it is)."""
    wanted = "an integer" if kind is int else "a finite number"
    is_number = isinstance(value, int if kind is int else (int, float)) \
        and not isinstance(value, bool) and math.isfinite(value)
    if not is_number:
        return f"{wanted} {rng}"
    return None if value in rng else str(rng)


def add_option_flags(parser: argparse.ArgumentParser, options_cls) -> None:
    """One flag per field of the dataclass ``options_cls`` declared with :func:`option`,
    with the field's default, choices and range: ``keras-seq generate``'s flags from
    :class:`~keras_seq.sampling.SamplingOptions` (a training config's flags come from
    ``keras_seq.commands._common.add_config_args``)."""
    for f in dataclasses.fields(options_cls):
        meta, kind = field_metadata(options_cls, f.name), number_kind(options_cls, f.name)
        help_text = meta["help"]
        if f.default is None and meta.get("default_help"):
            help_text += f" (default: {meta['default_help']})"
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                                help=help_text)
            continue
        parser.add_argument(flag, type=number(kind, meta.get("range")) if kind else str,
                            default=f.default, choices=meta.get("choices"),
                            metavar=meta.get("metavar"), help=help_text.replace("%", "%%"))
