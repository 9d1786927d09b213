"""Arguments shared by every command that reads a corpus or tokenizes text.

``--split`` always selects one split (train/val/test); ``--split-ratio`` says how a corpus
without its own split files is cut.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from keras_seq.atomic import json_safe
from keras_seq.data.corpus import EMBEDDED, REGISTRY
from keras_seq.data.splits import DEFAULT_SPLIT, SPLITS
from keras_seq.keyboard import (  # noqa: F401  (add_keyboard_args re-exported)
    add_keyboard_args,
    format_metrics,
    outcomes_or_note,
)
from keras_seq.ranges import (  # noqa: F401  (re-exported: the commands import them here)
    AT_LEAST_1,
    FRACTION,
    INT_LIMIT,
    NON_NEGATIVE,
    POSITIVE,
    SHARE,
    Range,
    number,
)
from keras_seq.tables import (  # noqa: F401  (re-exported for the commands)
    add_json_arg,
    print_json,
    print_table,
)


def add_data_args(parser: argparse.ArgumentParser, default: str | None = EMBEDDED) -> None:
    names = ", ".join([EMBEDDED, *REGISTRY])
    parser.add_argument(
        "--data", default=default, required=default is None, metavar="NAME|PATH",
        help=f"corpus: a registry name ({names}), a .txt file, a directory of .txt files "
        f"or a directory written by `keras-seq data prepare` (default: {default})",
    )
    parser.add_argument(
        "--split-ratio", default=DEFAULT_SPLIT, metavar="TRAIN/VAL[/TEST]",
        help="train/val/test shares for corpora without their own split files, percentages "
        f"summing to 100 or fractions summing to 1 (default {DEFAULT_SPLIT}; '90/10' is "
        "nanoGPT's split with no test part)",
    )
    parser.add_argument(
        "--data-dir", default=None, metavar="DIR",
        help="folder searched for registry files before downloading (also $KERAS_SEQ_DATA_DIR)",
    )


def add_tokenizer_args(parser: argparse.ArgumentParser, default: str = "word") -> None:
    parser.add_argument(
        "--tokenizer", default=default, choices=("char", "word", "subword"),
        help=f"tokenizer kind (default {default})",
    )
    parser.add_argument(
        "--max-vocab", type=number(int, AT_LEAST_1), default=None, metavar="N",
        help="largest vocabulary, special tokens included (char/word; default: no limit)",
    )
    parser.add_argument(
        "--min-count", type=number(int, AT_LEAST_1), default=None, metavar="N",
        help="keep tokens seen at least N times in train (char/word; default 1 = all)",
    )
    parser.add_argument(
        "--vocab-size", type=number(int, AT_LEAST_1), default=None, metavar="N",
        help="target WordPiece vocabulary size (subword; default 8000)",
    )
    parser.add_argument(
        "--lower", action=argparse.BooleanOptionalAction, default=None,
        help="lower-case the text first (word/subword; default: on)",
    )


def load_data(args):
    """The corpus named by ``--data`` with ``--split`` and ``--data-dir``, read once the
    tokenizer flags are known to be usable (:func:`new_tokenizer`); a prepared directory
    is opened as a :class:`~keras_seq.data.prepared.PreparedCorpus` (memory-mapped)."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.data.corpus import load_corpus
    from keras_seq.data.prepared import PreparedCorpus, is_prepared

    if hasattr(args, "tokenizer"):
        new_tokenizer(args)
    if is_prepared(args.data):  # its tokenizer and split were fixed when it was prepared
        corpus = PreparedCorpus(args.data)
        corpus.check_request(tokenizer=getattr(args, "tokenizer", None),
                             split_ratio=args.split_ratio,
                             **{k: getattr(args, k, None)
                                for k in ("max_vocab", "min_count", "vocab_size", "lower")})
        return corpus
    return load_corpus(args.data, data_dir=args.data_dir, split=args.split_ratio)


def new_tokenizer(args):
    """An unfitted tokenizer of ``--tokenizer`` kind with the vocabulary options."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.data.tokenizers import make_tokenizer

    options = {
        "max_vocab": args.max_vocab,
        "min_count": args.min_count,
        "vocab_size": args.vocab_size,
        "lower": args.lower,
    }
    return make_tokenizer(args.tokenizer, **options)


def fit_tokenizer(args, corpus):
    """A tokenizer of ``--tokenizer`` kind with the vocabulary options, fitted on train."""
    return new_tokenizer(args).fit(corpus.text("train"))


def add_backend_args(parser: argparse.ArgumentParser) -> None:
    """``--backend``, ``--mixed-precision``, ``--jit-compile``, ``--strategy`` and
    ``--devices`` (TrainConfig fields, for a command whose other flags are not made from a
    config; :func:`keras_seq.cli.main` reads ``--backend`` before Keras is imported)."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.training.config import TrainConfig

    add_config_args(parser, TrainConfig, only=BACKEND_FIELDS)


def use_backend(args) -> str:
    """Select the Keras backend of ``--backend`` (or ``$KERAS_BACKEND``, else tensorflow)
    before the command imports Keras; sets ``args.backend`` and returns it."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.backend import select_backend

    args.backend = select_backend(getattr(args, "backend", None))
    strategy = getattr(args, "strategy", None)
    if strategy == "mirrored" and getattr(args, "devices", None):
        # Logical CPU devices (a host without a GPU) must exist before TF's runtime starts.
        from keras_seq.training.distribute import device_names

        device_names(args.devices)
    elif strategy == "multi-worker":  # configures the runtime for collectives: first
        # lazy: keeps `keras-seq --help` fast (loads Keras)
        from keras_seq.training.distribute import make_strategy

        make_strategy("multi-worker")
    return args.backend


def keyboard_or_note(args, compute):
    """``compute()``'s :class:`~keras_seq.keyboard.KeyboardOutcomes`; None with
    ``--no-keyboard``, or with a note on stderr where they cannot be measured and
    ``--keyboard`` was not asked for (then the error stands)."""
    return outcomes_or_note(args.keyboard, compute)


def print_keyboard(metrics: dict | None) -> None:
    if metrics:
        print(format_metrics(metrics))


def config_overrides(args, config_cls, base: dict) -> dict:
    """``base`` updated with every ``config_cls`` field given on the command line (not
    None); ``--no-clip`` unsets ``clip_norm``."""
    # lazy: keeps `keras-seq --help` fast
    import dataclasses

    for f in dataclasses.fields(config_cls):
        value = getattr(args, f.name, None)
        if value is not None:
            base[f.name] = value
    if getattr(args, "clip", None) is False and "clip_norm" in base:
        base["clip_norm"] = None
    return base


def group_parser(subparsers, name: str, help_text: str, metavar: str = "MODEL"):
    """The sub-parsers of a command group such as ``train`` or ``eval``.

    Several command modules add models to the same group (``train lm``, ``train seq2seq``),
    so the group is created by whichever module registers first and then reused.
    """
    groups = subparsers.__dict__.setdefault("_keras_seq_groups", {})
    if name not in groups:
        parser = subparsers.add_parser(name, help=help_text)
        groups[name] = parser.add_subparsers(dest=f"{name}_command", metavar=metavar)
        parser.set_defaults(func=lambda args: parser.print_help() or 2)
    return groups[name]



def add_train_command(subparsers, kind: str, help_text: str, config_cls, func,
                      presets: dict | None = None, **defaults) -> argparse.ArgumentParser:
    """``keras-seq train KIND``: the flags every trainer shares (``--run-dir``,
    ``--resume``, ``--quiet``, ``--json``), then one flag per field of ``config_cls``
    (:func:`add_config_args`). The one way every ``train`` command is registered."""
    train = group_parser(subparsers, "train", "train a model into a run directory")
    p = train.add_parser(kind, help=help_text)
    p.add_argument("--run-dir", required=True, help="where config, checkpoints and logs go")
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=False,
                   help="continue from the last checkpoint")
    p.add_argument("--quiet", action=argparse.BooleanOptionalAction, default=False,
                   help="one line per epoch")
    add_json_arg(p)
    add_config_args(p, config_cls, presets=presets)
    p.set_defaults(func=func, kind=kind, **defaults)
    return p


def train_printer(args):
    """Where a trainer's progress goes: stdout, or stderr under ``--json`` (whose stdout
    is the results' JSON alone)."""
    if getattr(args, "json", False):
        return lambda *a, **k: print(*a, file=sys.stderr, **k)
    return print


def print_train_results(args, results: dict, format_results) -> None:
    """A trainer's final results: JSON under ``--json`` (NaN as null), else
    ``format_results(results)``."""
    if getattr(args, "json", False):
        print_json(json_safe(results))
    else:
        print(format_results(results))


def add_eval_command(subparsers, kind: str, help_text: str, func,
                     split: str = "test") -> argparse.ArgumentParser:
    """``keras-seq eval KIND``: ``--run-dir``, ``--split`` (default ``split``) and
    ``--json``. The one way every ``eval`` command is registered."""
    evaluate = group_parser(subparsers, "eval", "evaluate a trained model")
    p = evaluate.add_parser(kind, help=help_text)
    p.add_argument("--run-dir", required=True, help="the run to evaluate")
    p.add_argument("--split", default=split, choices=SPLITS, help="split scored")
    add_json_arg(p)
    p.set_defaults(func=func, kind=kind)
    return p


#: the TrainConfig fields listed under "backend" in ``--help``
BACKEND_FIELDS = ("backend", "mixed_precision", "jit_compile", "strategy", "devices")


def add_config_args(parser: argparse.ArgumentParser, config_cls, skip=(), only=None,
                    presets: dict | None = None) -> None:
    """One flag per field of the :class:`~keras_seq.training.config.TrainConfig` dataclass
    ``config_cls`` (``--field-name``; ``--name/--no-name`` for a boolean), made from the
    field's type and its :func:`~keras_seq.training.config.option` metadata: choices and a
    one-line help that shows the config's default once (with ``presets``, the values a
    preset sets too). The parser's default is ``None`` (not given), so a preset or the
    config decides; pair with :func:`config_overrides`. A field that has a default gets
    ``--no-clip`` when it is ``clip_norm``. A number's flag takes the field's declared
    range (``option(range=…)``): the one declaration the config's ``validate()`` reads too."""
    # lazy: keeps `keras-seq --help` fast
    import dataclasses
    import typing

    from keras_seq.options import field_metadata
    from keras_seq.training.config import TrainConfig

    hints = typing.get_type_hints(config_cls)
    shared = {f.name for f in dataclasses.fields(TrainConfig)}
    titles = (f"{config_cls.kind} config", "training", "backend")
    fields = [f for f in dataclasses.fields(config_cls)
              if f.name not in ("version", "replicas", *skip)
              and (only is None or f.name in only)]
    groups = {}
    for f in sorted(fields, key=lambda f: (f.name in shared) + (f.name in BACKEND_FIELDS)):
        title = titles[(f.name in shared) + (f.name in BACKEND_FIELDS)]
        if title not in groups:
            groups[title] = parser.add_argument_group(title)
        group, meta = groups[title], field_metadata(config_cls, f.name)
        flag = "--" + f.name.replace("_", "-")
        hint = hints[f.name]
        base = next((t for t in (bool, int, float, str) if t == hint or t in typing.get_args(hint)),
                    str)
        help_text = meta.get("help", "")
        if help_text:
            help_text = f"{help_text} (default: {_config_default(f, meta, presets)})"
        help_text = help_text.replace("%", "%%")
        if base is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                               help=help_text)
            continue
        metavar = meta.get("metavar") or (None if meta.get("choices") else
                                          {int: "INT", float: "FLOAT"}.get(base, "TEXT"))
        kind = number(base, meta.get("range")) if base in (int, float) else base
        group.add_argument(flag, type=kind, default=None, choices=meta.get("choices"),
                           metavar=metavar, help=help_text)
        if f.name == "clip_norm" and f.default is not None:
            group.add_argument("--clip", action=argparse.BooleanOptionalAction, default=None,
                               help="clip the gradient norm at --clip-norm (--no-clip: "
                               "clipping off, clip_norm unset)")


def show_default(value) -> str:
    """A default as ``--help`` shows it: ``on``/``off`` for booleans, ``%g`` for floats,
    items as they are typed (space-separated) for lists, ``none`` for None.

    >>> show_default(2e-3), show_default(True), show_default(("rnn", "gru"))
    ('0.002', 'on', 'rnn gru')
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return " ".join(map(show_default, value))
    return str(value)


def _config_default(f, meta: dict, presets: dict | None) -> str:
    """What ``--help`` says of a field's default: the config's (or, for a ``None`` default,
    its ``default_help`` words) and what each preset sets it to."""
    shown = meta.get("default_help") if f.default is None and meta.get("default_help") else \
        show_default(f.default)
    setting = {name: show_default(values[f.name]) for name, values in (presets or {}).items()
               if f.name in values}
    values = set(setting.values())
    if values - {show_default(f.default)}:
        shown += "; with --preset: " + (values.pop() if len(values) == 1 and len(setting) ==
                                        len(presets) else ", ".join(
                                            f"{name} {value}" for name, value in setting.items()))
    return shown


# ----------------------------------------------------------------------------------------
# Checking flags while the command line is parsed, before any command loads data


def did_you_mean(word, options) -> str:
    """``" (did you mean 'x'?)"`` for the option closest to ``word``, else ``""``.

    >>> did_you_mean("tinyshakspeare", ["python-docs", "tinyshakespeare", "ptb"])
    " (did you mean 'tinyshakespeare'?)"
    """
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def split_ratio(text: str) -> str:
    """An argparse ``type`` for ``--split-ratio``: a valid split
    (:func:`keras_seq.data.corpus.parse_split`: shares summing to 100 or 1), written with
    ``/`` as every reader of the flag accepts it.

    >>> split_ratio("0.8, 0.1, 0.1")
    '0.8/0.1/0.1'
    """
    # lazy: keeps `keras-seq --help` fast
    import re

    from keras_seq.data.corpus import parse_split
    from keras_seq.errors import DataError

    try:
        parse_split(text)
    except DataError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return "/".join(p.strip() for p in re.split(r"[/,:]", text) if p.strip())


def _exists(path: str) -> bool:
    try:
        return bool(path.strip()) and Path(path).expanduser().exists()
    except (OSError, ValueError):  # a NUL byte, an unencodable name, a name too long
        return False


def check_corpus_arg(args) -> None:
    """Refuse a ``--data`` that is neither a registry name nor an existing file or folder,
    with the nearest registry name, before the command starts (``keras-seq … --data
    tinyshakspeare`` → did you mean 'tinyshakespeare'?)."""
    spec = getattr(args, "data", None)
    if not getattr(args, "data_is_corpus", True):  # train classify|tag|…: a task's --data
        return
    names = [EMBEDDED, *REGISTRY]
    if not isinstance(spec, str) or spec in names or _exists(spec):
        return
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.errors import DataError

    raise DataError(f"no such corpus {spec!r}{did_you_mean(spec, names)}: it is neither a "
                    f"registry name ({', '.join(names)}) nor an existing file or directory")


def check_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``--split-ratio`` its check and finish every help line of ``parser`` and its
    sub-parsers: the parser's default, once (unless the help already says it), then the
    flag's range. Every number flag declares its range where it is declared
    (``type=number(int, AT_LEAST_1)``, or ``option(range=…)`` for a config field's flag);
    a bare ``type=int``/``type=float`` is a mistake in keras-seq, refused here."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                check_flags(sub)
            continue
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        if action.type in (int, float):
            raise TypeError(f"{parser.prog} {action.option_strings[0]}: type="
                            f"{action.type.__name__} without a range; declare it as "
                            f"type=number({action.type.__name__}, AT_LEAST_1) or the range "
                            "it takes")
        if action.type in (None, str) and not action.choices and action.nargs != 0 \
                and action.dest == "split_ratio":
            action.type = split_ratio
        if _shows_default(action):
            action.help = f"{action.help or ''} (default: " \
                          f"{show_default(action.default).replace('%', '%%')})".lstrip()
        rng = getattr(action.type, "range", None)
        if rng is not None and str(rng) != "a number":
            shown = str(rng).removeprefix("in ").removeprefix("from ").replace(" ", "\u00a0")
            action.help = f"{action.help or ''} (range: {shown})".lstrip()  # never cut: ≥ 1
    return parser


def _shows_default(action) -> bool:
    """Whether ``--help`` should add ``action``'s default: it has one that means
    something (not None; for a switch, only a ``--x/--no-x`` one) and the help does not
    already say it."""
    if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
        return False
    if "default" in (action.help or "").lower() or action.default in (None, argparse.SUPPRESS):
        return False
    return action.nargs != 0 or isinstance(action, argparse.BooleanOptionalAction)


def check_tokenizer_options(kind: str, **options) -> None:
    """Build (not fit) the tokenizer a command will fit, so that a bad option combination
    is refused before the corpus is read."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.data.tokenizers import make_tokenizer

    make_tokenizer(kind, **options)


def check_task_name(what: str, name: str, names, prefixes=()) -> None:
    """Refuse ``name`` when it is not one of ``names`` (nor starts with one of ``prefixes``,
    such as ``tsv:``) but is close to one: a misspelling, caught before any work. Names
    close to none are left to the task, which lists what it accepts."""
    if name in names or str(name).startswith(tuple(prefixes)):
        return
    hint = did_you_mean(name, names)
    if hint:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.errors import KerasSeqError

        raise KerasSeqError(f"unknown {what} {name!r}{hint}; expected one of "
                            f"{', '.join([*names, *(p + '…' for p in prefixes)])}")


def comma_list(names=None, kind=None):
    """An argparse ``type`` for a comma-separated list: each item one of ``names`` (with
    the nearest one suggested) or, with ``kind``, a number in that flag's range
    (``number(kind, rng)``). The text is returned as given.

    >>> comma_list(("rnn", "gru", "lstm"))("gru,lstn")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: unknown item 'lstn' (did you mean 'lstm'?); ...
    """
    def parse(text):
        items = [item.strip() for item in str(text).split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        for item in items:
            if kind is not None:
                try:
                    kind(item)
                except ValueError:
                    raise argparse.ArgumentTypeError(f"item {item!r} is not an integer"
                                                     if kind.kind is int else
                                                     f"item {item!r} is not a number") from None
                except argparse.ArgumentTypeError as err:
                    raise argparse.ArgumentTypeError(f"item {item!r}: {err}") from None
            elif item not in names:
                raise argparse.ArgumentTypeError(
                    f"unknown item {item!r}{did_you_mean(item, names)}; expected a "
                    f"comma-separated list of {', '.join(names)}")
        return text

    return parse


def check_run_arg(run_dir, *kinds: str, command: str = "this command", hint: str = "") -> str:
    """Check that ``run_dir`` holds a run of one of ``kinds`` with a checkpoint, before the
    command imports Keras (a wrong folder is refused at once, naming what it holds).
    Returns the run's kind."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq import runs
    from keras_seq.errors import KerasSeqError

    if len(kinds) == 1:
        runs.check_run_dir(run_dir, kinds[0])
        return kinds[0]
    found = runs.read_run_config(run_dir).get("kind")
    if found not in kinds:
        what = f"a `keras-seq train {found}` run" if isinstance(found, str) and found else \
            f"a run whose {runs.CONFIG} names no known kind ({found!r})"
        raise KerasSeqError(f"{run_dir} holds {what}; {command} takes {' or '.join(kinds)} "
                            f"runs{hint}")
    runs.check_run_dir(run_dir, found)
    return found


def check_train_dir(run_dir) -> None:
    """Refuse a ``train --run-dir`` that is a file, before any corpus is read (the folder
    itself is created by the trainer)."""
    path = Path(run_dir)
    if path.exists() and not path.is_dir():
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.errors import KerasSeqError

        raise KerasSeqError(f"--run-dir {path} is a file; pass a folder for the run (it is "
                            "created when missing)")
