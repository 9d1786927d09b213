"""Arguments shared by every command that reads a corpus or tokenizes text.

``--split`` always selects one split (train/val/test); ``--split-ratio`` says how a corpus
without its own split files is cut.
"""

from __future__ import annotations

import argparse
import json
import sys

from keras_seq.data.corpus import DEFAULT_SPLIT, EMBEDDED, REGISTRY
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
        help="train/val/test shares for corpora without their own split files "
        f"(default {DEFAULT_SPLIT}; '90/10' is nanoGPT's split with no test part)",
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
    """The corpus named by ``--data`` with ``--split`` and ``--data-dir``."""
    from keras_seq.data.corpus import load_corpus

    return load_corpus(args.data, data_dir=args.data_dir, split=args.split_ratio)


def fit_tokenizer(args, corpus):
    """A tokenizer of ``--tokenizer`` kind with the vocabulary options, fitted on train."""
    from keras_seq.data.tokenizers import make_tokenizer

    options = {
        "max_vocab": args.max_vocab,
        "min_count": args.min_count,
        "vocab_size": args.vocab_size,
        "lower": args.lower,
    }
    return make_tokenizer(args.tokenizer, **options).fit(corpus.text("train"))


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
