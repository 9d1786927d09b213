"""``--flag`` overrides for the typed config at the top of an example script (``train/``,
``export/``): one flag per dataclass field, its default shown, ``none`` for an optional
value, ``--x``/``--no-x`` for a boolean (the grammar of every ``keras-seq`` command). Imports
nothing heavy, so ``--help`` answers at once.

>>> from dataclasses import dataclass
>>> @dataclass
... class Config:
...     units: int = 64  # LSTM units
...     clip_norm: float | None = 5.0
...     tie_weights: bool = False
>>> parse_config(Config, ["--units", "8", "--clip-norm", "none", "--tie-weights"])
Config(units=8, clip_norm=None, tie_weights=True)
>>> parse_config(Config, ["--no-tie-weights"]).tie_weights
False
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing


def _converter(hint, optional: bool):
    def convert(text: str):
        if optional and text.lower() == "none":
            return None
        return hint(text)

    return convert


def parse_config(config_cls, argv, description: str | None = None):
    """``config_cls()`` with each ``--field-name VALUE`` in ``argv`` overriding its default
    (a usage error exits 2 with argparse's message)."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        hint, optional = hints[f.name], False
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
            optional = True
        flag = "--" + f.name.replace("_", "-")
        if hint is bool and not optional:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                                help=f"default: {'on' if f.default else 'off'}")
            continue
        parser.add_argument(flag, type=_converter(hint, optional), default=f.default,
                            metavar=hint.__name__.upper(), help=f"default: {f.default}")
    return config_cls(**vars(parser.parse_args(argv)))
