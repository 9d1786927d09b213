"""Arguments shared by every command that reads a corpus or tokenizes text.

``--split`` always selects one split (train/val/test); ``--split-ratio`` says how a corpus
without its own split files is cut.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import sys
from pathlib import Path

from keras_seq.data.corpus import DEFAULT_SPLIT, EMBEDDED, REGISTRY
from keras_seq.ranges import (  # noqa: F401  (re-exported: the commands import them here)
    AT_LEAST_1,
    FRACTION,
    INT_LIMIT,
    NON_NEGATIVE,
    POSITIVE,
    SHARE,
    Range,
)
from keras_seq.tables import print_table  # noqa: F401  (re-exported for the commands)


def add_data_args(parser: argparse.ArgumentParser, default: str | None = EMBEDDED) -> None:
    names = ", ".join([EMBEDDED, *REGISTRY])
    parser.add_argument(
        "--data", default=default, required=default is None, metavar="NAME|PATH",
        help=f"corpus: a registry name ({names}), a .txt file or a directory of .txt files "
        f"(default: {default})",
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
        "--max-vocab", type=int, default=None, metavar="N",
        help="largest vocabulary, special tokens included (char/word; default: no limit)",
    )
    parser.add_argument(
        "--min-count", type=int, default=None, metavar="N",
        help="keep tokens seen at least N times in train (char/word; default 1 = all)",
    )
    parser.add_argument(
        "--vocab-size", type=int, default=None, metavar="N",
        help="target WordPiece vocabulary size (subword; default 8000)",
    )
    parser.add_argument(
        "--no-lower", dest="lower", action="store_false", default=None,
        help="keep case (word/subword; default: lower-case)",
    )


def load_data(args):
    """The corpus named by ``--data`` with ``--split`` and ``--data-dir``, read once the
    tokenizer flags are known to be usable (:func:`new_tokenizer`)."""
    from keras_seq.data.corpus import load_corpus

    if hasattr(args, "tokenizer"):
        new_tokenizer(args)
    return load_corpus(args.data, data_dir=args.data_dir, split=args.split_ratio)


def new_tokenizer(args):
    """An unfitted tokenizer of ``--tokenizer`` kind with the vocabulary options."""
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
    """``--backend``, ``--mixed-precision`` and ``--jit-compile`` of the train commands
    (TrainConfig fields; :func:`keras_seq.cli.main` reads ``--backend`` before Keras is
    imported)."""
    from keras_seq.backend import BACKENDS, MIXED_PRECISION

    g = parser.add_argument_group("backend")
    g.add_argument("--backend", choices=BACKENDS, default=None,
                   help="Keras backend that trains (default: $KERAS_BACKEND, else "
                        "tensorflow); .keras checkpoints load under any of them")
    g.add_argument("--mixed-precision", choices=MIXED_PRECISION, default=None,
                   help="Keras dtype policy: compute in float16/bfloat16 with float32 "
                        "variables; float16 gets loss scaling (default off)")
    g.add_argument("--jit-compile", action="store_true", default=None,
                   help="compile the train step (XLA on TensorFlow, torch.compile on torch; "
                        "JAX always compiles)")
    g.add_argument("--strategy", choices=("one", "mirrored", "multi-worker"), default=None,
                   help="tf.distribute: one device, mirrored over --devices of this host, or "
                        "multi-worker (one process per host, TF_CONFIG); --batch-size is the "
                        "global batch (default one)")
    g.add_argument("--devices", type=int, default=None,
                   help="mirrored: how many devices (GPUs; logical CPU devices on a host "
                        "without one); default every GPU")


def use_backend(args) -> str:
    """Select the Keras backend of ``--backend`` (or ``$KERAS_BACKEND``, else tensorflow)
    before the command imports Keras; sets ``args.backend`` and returns it."""
    from keras_seq.backend import select_backend

    args.backend = select_backend(getattr(args, "backend", None))
    strategy = getattr(args, "strategy", None)
    if strategy == "mirrored" and getattr(args, "devices", None):
        # Logical CPU devices (a host without a GPU) must exist before TF's runtime starts.
        from keras_seq.training.distribute import device_names

        device_names(args.devices)
    elif strategy == "multi-worker":  # configures the runtime for collectives: first
        from keras_seq.training.distribute import make_strategy

        make_strategy("multi-worker")
    return args.backend


def add_json_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def print_json(payload) -> None:
    json.dump(payload, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def config_overrides(args, config_cls, base: dict) -> dict:
    """``base`` updated with every ``config_cls`` field given on the command line (not None)."""
    import dataclasses

    for f in dataclasses.fields(config_cls):
        value = getattr(args, f.name, None)
        if value is not None:
            base[f.name] = value
    return base


def group_parser(subparsers, name: str, help_text: str):
    """The sub-parsers of a command group such as ``train`` or ``eval``.

    Several command modules add models to the same group (``train lm``, ``train seq2seq``),
    so the group is created by whichever module registers first and then reused.
    """
    groups = subparsers.__dict__.setdefault("_keras_seq_groups", {})
    if name not in groups:
        parser = subparsers.add_parser(name, help=help_text)
        groups[name] = parser.add_subparsers(dest=f"{name}_command", metavar="MODEL")
        parser.set_defaults(func=lambda args: parser.print_help() or 2)
    return groups[name]


def add_config_args(parser: argparse.ArgumentParser, config_cls, skip=()) -> None:
    """One ``--flag`` per field of a :class:`~keras_seq.training.config.TrainConfig`
    dataclass (default ``None``: the config's default; ``--no-flag`` for fields that
    default to True). Pair with :func:`config_overrides`."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(config_cls)
    group = parser.add_argument_group(f"{config_cls.kind} config")
    for f in dataclasses.fields(config_cls):
        if f.name in ("version", *skip):
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        base = next((t for t in (bool, int, float, str) if t == kind or t in typing.get_args(kind)),
                    str)
        if base is bool:
            if f.default is True:
                group.add_argument("--no-" + f.name.replace("_", "-"), dest=f.name,
                                   action="store_false", default=None,
                                   help=f"turn {f.name} off (default on)")
            else:
                group.add_argument(flag, action="store_true", default=None,
                                   help="(default off)")
        else:
            group.add_argument(flag, type=base, default=None, metavar=base.__name__.upper(),
                               help=f"(default {f.default})")


# ----------------------------------------------------------------------------------------
# Checking flags while the command line is parsed, before any command loads data


def did_you_mean(word, options) -> str:
    """``" (did you mean 'x'?)"`` for the option closest to ``word``, else ``""``.

    >>> did_you_mean("tinyshakspeare", ["python-docs", "tinyshakespeare", "ptb"])
    " (did you mean 'tinyshakespeare'?)"
    """
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: The range of every numeric flag, by its ``dest`` (read from each flag's help text).
#: :func:`check_flags` gives each ``type=int`` / ``type=float`` flag the range of its name;
#: the reliability campaign (``tools/reliability/cli.py``) tries values outside them.
FLAG_RANGES: dict[str, Range] = {
    **dict.fromkeys((
        "units", "embed_dim", "num_layers", "batch_size", "epochs", "bptt", "context",
        "proj_units", "max_steps_per_epoch", "log_every", "train_size", "val_size",
        "test_size", "min_len", "max_len", "max_pairs", "attention_units", "max_source_len",
        "max_target_len", "steps_per_epoch", "eval_size", "length", "max_sentences",
        "devices", "max_vocab", "min_count", "beam", "limit", "top", "top_k", "max_tokens",
        "seq_length", "calib_tokens", "tokens", "rounds", "steps", "repeats", "chunk",
        "vocab", "embed", "seq_len", "batch", "num_eval", "repeat", "nplm_context", "budget",
        "threads", "max_batch_size", "num_batch_threads", "max_body_bytes", "max_instances",
        "max_text_length", "max_generated_tokens", "max_connections", "distances", "k",
        "vocab_size",  # the tokenizer checks the rest (subword: ≥ 16) before any work
    ), AT_LEAST_1),
    **dict.fromkeys((
        "histogram_freq", "sample_tokens", "decay_start", "warmup", "eval_every",
        "stop_after_failures", "train_steps", "version", "negator_pos", "sentiment_pos",
        "poll_interval", "batch_timeout_ms", "graceful_timeout", "length_penalty",
    ), NON_NEGATIVE),
    **dict.fromkeys((
        "lr", "clip_norm", "max_minutes", "init_scale", "lr_decay", "temperature", "scale",
        "minutes", "dates_minutes", "request_timeout", "read_timeout", "memory_max_minutes",
    ), POSITIVE),
    **dict.fromkeys(("dropout", "embed_dropout", "weight_dropout"), FRACTION),
    **dict.fromkeys(("state_reset_prob", "negated_share"), SHARE),
    **dict.fromkeys(("top_p", "target_exact_match"), Range(0, 1, low_open=True)),
    **dict.fromkeys(("order", "max_order", "kn_order"), Range(1, 10)),  # ngram MAX_ORDER
    **dict.fromkeys(("tag_col", "token_col", "source_col", "target_col"), Range()),  # -1: last
    "seed": Range(0, 2**32 - 1),  # what NumPy and Keras accept
    "port": Range(0, 65535),
    "clients": Range(1, 256),
    "seconds": Range(0, 3600, low_open=True),
}


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


def split_ratio(text: str) -> str:
    """An argparse ``type`` for ``--split-ratio``: a valid split
    (:func:`keras_seq.data.corpus.parse_split`: shares summing to 100 or 1), written with
    ``/`` as every reader of the flag accepts it.

    >>> split_ratio("0.8, 0.1, 0.1")
    '0.8/0.1/0.1'
    """
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
    names = [EMBEDDED, *REGISTRY]
    if not isinstance(spec, str) or spec in names or _exists(spec):
        return
    from keras_seq.errors import DataError

    raise DataError(f"no such corpus {spec!r}{did_you_mean(spec, names)}: it is neither a "
                    f"registry name ({', '.join(names)}) nor an existing file or directory")


def check_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every numeric flag of ``parser`` and its sub-parsers the range of
    :data:`FLAG_RANGES` (shown in its help) and ``--split-ratio`` its check, so that bad
    values are refused while the command line is parsed (exit 2, before any work)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                check_flags(sub)
        elif action.type in (int, float) or hasattr(action.type, "range"):
            if action.type in (int, float):
                action.type = number(action.type, FLAG_RANGES.get(action.dest))
            rng = action.type.range
            if rng is not None and str(rng) != "a number" and action.help != argparse.SUPPRESS:
                shown = str(rng).removeprefix("in ").removeprefix("from ")
                action.help = f"{action.help or ''} (range: {shown})".lstrip()
        elif action.type in (None, str) and action.option_strings and not action.choices:
            if action.dest == "split_ratio":
                action.type = split_ratio
    return parser


def check_tokenizer_options(kind: str, **options) -> None:
    """Build (not fit) the tokenizer a command will fit, so that a bad option combination
    is refused before the corpus is read."""
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
        from keras_seq.errors import KerasSeqError

        raise KerasSeqError(f"unknown {what} {name!r}{hint}; expected one of "
                            f"{', '.join([*names, *(p + '…' for p in prefixes)])}")


def check_shared_fields(args, kind: str) -> None:
    """Check the fields every training config shares (``--lr``, ``--strategy`` with
    ``--devices``, ``--backend``…) as given in ``args``, without importing the task."""
    from keras_seq.training.config import TrainConfig

    shared = type(f"{kind}Flags", (TrainConfig,), {"kind": kind})
    shared(**config_overrides(args, TrainConfig, {})).validate()


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
        from keras_seq.errors import KerasSeqError

        raise KerasSeqError(f"--run-dir {path} is a file; pass a folder for the run (it is "
                            "created when missing)")
