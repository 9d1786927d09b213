"""The task protocol: what every task shape provides, named in one light record.

A shape is one folder, ``keras_seq/tasks/<shape>/``, with the same files in each:

* ``config.py`` — its typed config (a :class:`~keras_seq.training.config.TrainConfig`);
* ``data.py`` — its data, ``task_data(config)`` among it;
* ``task.py`` — the heavy part (Keras is imported there): ``TASK`` (the trainer plug-in),
  ``load_run``, ``evaluate_run(run_dir, split, **options) -> dict``, ``eval_lines(result)
  -> list[str]`` (what ``keras-seq eval`` prints; ``--json`` prints the result) and the
  function of its use command, named as the command: ``predict``, ``generate`` or
  ``translate`` (``(args) -> exit status``);
* ``shape.py`` — ``SHAPE``, a :class:`TaskShape`: the light part (no TensorFlow, no
  Keras), which the CLI reads to build its parsers.

Its exports are :class:`Command` entries of ``SHAPE.exports``, each naming the function
that runs it as ``"module:function"``; that module is imported only when the export runs
(an exporter may live in :mod:`keras_seq.export`, the layer above the tasks, so the shape
names it instead of importing it). ``keras_seq.commands.tasks.SHAPES`` is the table: one
row, ``name: "dotted.path.of.its.shape"``, registers ``train``, ``eval``, the use command
and the exports of a shape.

Example:

>>> from keras_seq.tasks.classify.shape import SHAPE
>>> SHAPE.name, SHAPE.use.name, [c.name for c in SHAPE.exports]
('classify', 'predict', ['classifier'])
>>> SHAPE.missing()   # every protocol name is there (imports the task module)
[]
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

#: the names every shape's ``task.py`` defines, besides the function of its use command
PROTOCOL = ("TASK", "load_run", "evaluate_run", "eval_lines")


@dataclass(frozen=True)
class Command:
    """A command a shape adds to the CLI: its use command (``keras-seq predict``,
    ``generate``, ``translate``) or one of its exports (``keras-seq export NAME``).

    Args:
        name: the command's word.
        help: its one line in ``--help``.
        add_args: ``(parser) -> None`` adding its flags (light: no TensorFlow). Shapes
            that share a use command (``predict``: classify and tag) share one record, so
            its flags are added once.
        run: an export's ``"module:function"``, the function taking the parsed args and
            returning the exit status; imported only when it runs. (A use command's
            function is ``task.<name>`` of each shape.)
        needs_run: whether ``--run-dir`` must hold a run of the shape (and TensorFlow be
            Keras's backend) before the export runs; False for ``export web``.

    Example:

    >>> Command("tagger", "a tag run as a SavedModel", run="keras_seq.export.x:run").name
    'tagger'
    """

    name: str
    help: str
    add_args: Callable[[argparse.ArgumentParser], None] | None = None
    run: str = ""
    needs_run: bool = True


def word_tokenizer(config) -> tuple[str, dict]:
    """The tokenizer a labelled shape fits: words, with the config's vocabulary options."""
    return "word", {"max_vocab": config.max_vocab, "min_count": config.min_count,
                    "lower": getattr(config, "lower", None)}


def no_options(args) -> dict:
    """``evaluate_run``'s options of a shape whose ``eval`` has no flags of its own."""
    return {}


@dataclass(frozen=True)
class TaskShape:
    """One task shape as the CLI sees it (the light part of the protocol).

    Args:
        name: ``keras-seq train NAME``; the ``kind`` in its runs' ``config.json``.
        config_cls: its typed config; ``train NAME`` has one flag per field.
        train_help, eval_help: the lines of ``train NAME`` and ``eval NAME`` in ``--help``.
        task: the dotted name of its ``task.py`` (imported only when a command runs).
        use: its use command (``predict``/``generate``/``translate``), or None.
        exports: its ``keras-seq export`` formats.
        data_names, data_prefixes: the ``--data`` it knows (``tsv:`` …): a near miss of
            one is refused before any work. Neither: any ``--data`` goes to the task.
        data_is_corpus: whether ``--data`` names a corpus (checked as one before the
            command runs), as for ``lm``.
        eval_split: ``eval NAME``'s default ``--split``.
        tokenizer: ``(config) -> (kind, options)``: the tokenizer built (not fitted)
            before any data is read, so that bad options stop the run at once (None: the
            shape has no tokenizer).
        add_train_args, add_eval_args: flags of its own beyond the config's and the
            shared ones (light).
        eval_options: ``(args) -> dict``: the keyword arguments ``eval`` passes to
            ``evaluate_run`` from those flags.
        base_config: ``(args) -> dict``: the config values the flags override (default:
            the config class's defaults); ``lm`` starts from ``--preset``.
        presets: named configs shown in ``train NAME --help``.

    Example:

    >>> from keras_seq.tasks.tag.config import TagConfig
    >>> shape = TaskShape("tag", TagConfig, "a tagger", "token accuracy",
    ...                   "keras_seq.tasks.tag.task", data_prefixes=("conll:",))
    >>> shape.base_config(None) == TagConfig().to_dict()   # the flags override these
    True
    """

    name: str
    config_cls: type
    train_help: str
    eval_help: str
    task: str
    use: Command | None = None
    exports: tuple[Command, ...] = ()
    data_names: tuple[str, ...] = ()
    data_prefixes: tuple[str, ...] = ()
    data_is_corpus: bool = False
    eval_split: str = "test"
    tokenizer: Callable | None = word_tokenizer
    add_train_args: Callable | None = None
    add_eval_args: Callable | None = None
    eval_options: Callable = no_options
    base_config: Callable | None = None
    presets: dict | None = field(default=None, hash=False)

    def __post_init__(self):
        if self.base_config is None:
            object.__setattr__(self, "base_config", lambda args: self.config_cls().to_dict())

    def task_module(self):
        """The shape's ``task.py`` (imports Keras)."""
        return importlib.import_module(self.task)

    def missing(self) -> list[str]:
        """The protocol names the shape lacks: ``task.py``'s (:data:`PROTOCOL` and its use
        command's function) and its exports' functions. Imports the task module and the
        exporters."""
        module = self.task_module()
        wanted = [*PROTOCOL, *([self.use.name] if self.use else [])]
        out = [f"{self.task}.{name}" for name in wanted if not hasattr(module, name)]
        for command in self.exports:
            try:
                resolve(command.run)
            except (ImportError, AttributeError, ValueError):
                out.append(f"export {command.name}: {command.run or '(no run)'}")
        return out


def resolve(path: str):
    """The object named ``"package.module:name"`` (the module imported now).

    >>> resolve("keras_seq.tasks.protocol:resolve") is resolve
    True
    """
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"expected 'package.module:function', got {path!r}")
    return getattr(importlib.import_module(module), name)


def load_shape(path: str) -> TaskShape:
    """The ``SHAPE`` of the module ``path`` (a table row's value), checked to be one.

    >>> load_shape("keras_seq.tasks.tag.shape").name
    'tag'
    """
    shape = getattr(importlib.import_module(path), "SHAPE", None)
    if not isinstance(shape, TaskShape):
        raise TypeError(f"{path}.SHAPE is {type(shape).__name__}, expected a TaskShape; "
                        "define SHAPE = TaskShape(...) in the shape's shape.py")
    return shape
