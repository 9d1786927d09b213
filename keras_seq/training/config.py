"""The config every task's training config extends: plain typed values, checks, JSON.

A task config is a dataclass subclass of :class:`TrainConfig` that adds its own fields
(data, model) and, where a default differs, redeclares a shared one. ``config.json``
stores the fields plus ``"kind"`` (the ``keras-seq train KIND`` that wrote it), so a run
directory says what kind of run it holds.
No TensorFlow import here, so the CLI can parse and print configs quickly.

>>> from dataclasses import dataclass
>>> @dataclass
... class ToyConfig(TrainConfig):
...     kind = "toy"
...     units: int = 8
>>> ToyConfig(units=4, epochs=2).to_dict()["units"]
4
>>> ToyConfig(epochs=0).validate()
Traceback (most recent call last):
...
keras_seq.errors.KerasSeqError: invalid toy training config: epochs must be ≥ 1 (got 0)
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from keras_seq import __version__
from keras_seq.atomic import write_json_atomic
from keras_seq.backend import BACKENDS, MIXED_PRECISION
from keras_seq.errors import KerasSeqError
from keras_seq.options import declared_problems, option
from keras_seq.ranges import AT_LEAST_1, POSITIVE, SEED

STRATEGIES = ("one", "mirrored", "multi-worker")
MAX_JSON_INT = 2**53  # integers beyond this do not survive a JSON round trip everywhere


@dataclass
class TrainConfig:
    """Fields shared by every task (redeclare one in a subclass to change its default)."""

    kind: ClassVar[str] = "?"  # the `keras-seq train KIND` of the run
    renamed: ClassVar[dict[str, str]] = {}  # old field name → new, read from older configs
    # Fields added after run directories of this version were written: a config.json with
    # none of them reads with their defaults; one missing only some is damaged, and refused.
    added: ClassVar[tuple[str, ...]] = ()

    batch_size: int = option(32, "examples per training batch (with --strategy: the global "
                             "batch)", range=AT_LEAST_1)
    epochs: int = option(10, "passes over the training data", range=AT_LEAST_1)
    lr: float = option(1e-3, "learning rate", range=POSITIVE)
    clip_norm: float | None = option(5.0, "clip gradients to this global norm θ (--no-clip: "
                                     "off)", range=POSITIVE)  # None = off
    max_minutes: float | None = option(None, "stop once training has run this many minutes",
                                       range=POSITIVE,
                                       default_help="no limit")  # see the task: epoch/batch
    seed: int = option(1234, "random seed of weights, dropout and data order", range=SEED)
    # how the run computes (``keras-seq train --backend/--mixed-precision/--jit-compile``)
    backend: str | None = option(None, "Keras backend that trains; .keras checkpoints load "
                                 "under any of them", choices=BACKENDS,
                                 default_help="$KERAS_BACKEND, else tensorflow")
    mixed_precision: str = option("off", "Keras dtype policy: compute in float16/bfloat16 with "
                                  "float32 variables (float16 gets loss scaling)",
                                  choices=MIXED_PRECISION)
    jit_compile: bool = option(False, "compile the train step: XLA on TensorFlow, "
                               "torch.compile on torch (JAX always compiles)")
    # tf.distribute (``--strategy/--devices``): batch_size stays the global batch
    strategy: str = option("one", "tf.distribute: one device, mirrored over --devices of this "
                           "host, or multi-worker (one process per host, TF_CONFIG)",
                           choices=STRATEGIES)
    devices: int | None = option(None, "mirrored: how many devices (logical CPU devices on a "
                                 "host without a GPU)", range=AT_LEAST_1,
                                 default_help="every GPU")
    replicas: int = 1  # recorded: the replicas the run trained on
    version: str = field(default=__version__)

    def problems(self) -> list[str]:
        """What is wrong with the config: each field against its declared choices and range
        (:func:`~keras_seq.options.declared_problems`), then the rules between fields;
        subclasses add theirs (never a field's own range again: it is declared once)."""
        problems = declared_problems(self)
        if not isinstance(self.jit_compile, bool):
            problems.append(f"jit_compile must be true or false (got {self.jit_compile!r})")
        if self.devices is not None and self.strategy != "mirrored":
            problems.append(f"devices is for --strategy mirrored (got devices={self.devices!r} "
                            f"with strategy {self.strategy!r})")
        if self.strategy != "one" and self.backend not in (None, "tensorflow"):
            problems.append(f"strategy {self.strategy} runs on tf.distribute: it needs the "
                            f"tensorflow backend (got {self.backend})")
        return problems

    def validate(self):
        problems = self.problems()
        if problems:
            raise KerasSeqError(f"invalid {self.kind} training config: " + "; ".join(problems))
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        write_json_atomic(path, {"kind": self.kind, **self.to_dict()})

    @classmethod
    def migrate(cls, data: dict) -> dict:
        """A copy of a config's ``data`` with the fields of older run directories renamed
        (:attr:`renamed`); a subclass with other changes extends it."""
        data = dict(data)
        for old, new in cls.renamed.items():
            if old in data and new not in data:
                data[new] = data.pop(old)
        if cls.added and not set(cls.added) & set(data):  # written before they existed
            defaults = {f.name: f.default for f in dataclasses.fields(cls)}
            data.update({name: defaults[name] for name in cls.added})
        return data

    @classmethod
    def from_dict(cls, data: dict):
        if not isinstance(data, dict):
            raise KerasSeqError(f"a {cls.kind} config must be a JSON object of fields, got "
                                f"{type(data).__name__}")
        data = cls.migrate(data)
        kind = data.pop("kind", cls.kind)
        if kind != cls.kind:
            raise KerasSeqError(f"config is for a {kind} run, not a {cls.kind} run")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise KerasSeqError(
                f"{cls.kind} config has unknown field(s) {', '.join(unknown)}; it was written "
                f"by a different keras-seq version (expected some of {', '.join(sorted(known))})"
            )
        return cls(**data)

    @classmethod
    def from_script(cls, script_config, ignore=("run_dir",), **fixed):
        """This config from a script's own dataclass (``train/*.py``): each of its fields
        by name, then ``fixed`` (what the script decides, e.g. ``cell="lstm"``), checked.
        A script field this config lacks is an error unless ``ignore`` names it.

        >>> from dataclasses import dataclass
        >>> from keras_seq.tasks.lm.config import LMConfig
        >>> @dataclass
        ... class Script:
        ...     run_dir: str = "runs/x"
        ...     units: int = 32
        >>> LMConfig.from_script(Script(), cell="gru").units
        32
        """
        values = {k: v for k, v in dataclasses.asdict(script_config).items() if k not in ignore}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise KerasSeqError(f"{type(script_config).__name__} has field(s) "
                                f"{', '.join(unknown)} that {cls.__name__} lacks; "
                                f"rename them to its fields or pass ignore=(…)")
        return cls(**{**values, **fixed}).validate()

    @classmethod
    def load(cls, path: str | Path):
        """The config saved in ``path`` (a ``config.json``), checked as a whole.

        A file that is unreadable, not JSON, of another kind of run or another keras-seq
        version, that lacks a field or has one of the wrong type (a string for a number,
        NaN, an integer past 2**53) or an invalid value raises :class:`KerasSeqError`
        naming the file.

        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "config.json"
        >>> TrainConfig(epochs=3).save(path)
        >>> TrainConfig.load(path).epochs
        3
        >>> _ = path.write_text(path.read_text().replace('"epochs": 3', '"epochs": "3"'))
        >>> TrainConfig.load(path)
        Traceback (most recent call last):
        ...
        keras_seq.errors.KerasSeqError: ...config.json is not a usable ? config: epochs must ...
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise KerasSeqError(f"cannot read {path}: {err.strerror or err}") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise KerasSeqError(f"{path} is not valid JSON ({err}); the run directory is "
                                "damaged, re-train it") from None
        if isinstance(data, dict) and data.get("version") != __version__:
            raise KerasSeqError(f"{path} was written by keras-seq {data.get('version')!r}, this "
                                f"is {__version__}; re-train it or use the matching keras-seq")
        if isinstance(data, dict):
            data = cls.migrate(data)
        try:
            config = cls.from_dict(data)  # a JSON object of this kind's fields
            missing = sorted({"kind", *(f.name for f in dataclasses.fields(cls))} - set(data))
            problems = [f"missing field(s) {', '.join(missing)}"] if missing else []
            problems += cls.type_problems(data)
            if problems:
                raise KerasSeqError("; ".join(problems))
            return config.validate()
        except KerasSeqError as err:
            raise KerasSeqError(f"{path} is not a usable {cls.kind} config: {err}") from None

    @classmethod
    def type_problems(cls, data: dict) -> list[str]:
        """Fields of ``data`` whose JSON type does not fit the field's declared type.

        >>> TrainConfig.type_problems({"epochs": 2.5, "lr": float("nan"), "backend": None})
        ['epochs must be an integer (got 2.5)', 'lr must be a finite number (got nan)']
        """
        hints = typing.get_type_hints(cls)
        problems = []
        for f in dataclasses.fields(cls):
            if f.name in data:
                problem = _type_problem(hints[f.name], data[f.name])
                if problem:
                    problems.append(f"{f.name} must be {problem} (got {data[f.name]!r})")
        return problems


def _type_problem(hint, value) -> str | None:
    """What ``value`` should have been to fit ``hint`` (``None``: it fits)."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = typing.get_args(hint) if union else (hint,)
    wanted = []
    for kind in options:
        if kind is type(None):
            if value is None:
                return None
            continue
        if kind is bool:
            wanted.append("true or false")
            ok = isinstance(value, bool)
        elif kind is int:
            wanted.append("an integer")
            ok = (isinstance(value, int) and not isinstance(value, bool)
                  and abs(value) <= MAX_JSON_INT)
        elif kind is float:
            wanted.append("a finite number")
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                  and (abs(value) <= MAX_JSON_INT if isinstance(value, int)
                       else math.isfinite(value)))
        elif kind is str:
            wanted.append("a string")
            ok = isinstance(value, str)
        else:
            return None  # a type this check does not know: the config's own checks decide
        if ok:
            return None
    if type(None) in options:
        wanted.append("null")
    return " or ".join(wanted)
