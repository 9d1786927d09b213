"""``keras-seq pipeline``: KN n-grams of orders 2–5 and a recurrent LM on the same tokens,
SavedModel and TFLite export, the on-device benchmark (neural vs n-gram), a demo model and
a summary table."""

from __future__ import annotations

import argparse

from keras_seq.cells import CELLS, cells_for
from keras_seq.commands._common import add_data_args, number
from keras_seq.ranges import AT_LEAST_1, POSITIVE

DEMO_DATA = "tinyshakespeare"  # keras_seq.pipeline.DEMO_DATA (not imported: keep --help fast)
DEFAULT_MINUTES = 14.5  # keras_seq.pipeline.DEFAULT_MINUTES (a test checks they agree)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pipeline", help="end to end (the bundled corpus: about 7 min on 2 AMD EPYC cores; "
        "any text: within --minutes, 14.5 by default): a GRU LM vs the best n-gram, "
        "SavedModel + TFLite export, on-device benchmark, demo model, summary table")
    add_data_args(p, default=DEMO_DATA)
    p.add_argument("--out", required=True, help="output folder (run/, tflite/, demo/, …)")
    p.add_argument("--epochs", type=number(int, AT_LEAST_1), default=10,
                   help="epochs of LM training (default 10, the last 2 at a decaying learning "
                        "rate; counted in epochs so that every machine trains the same model "
                        "where --minutes leaves room for them, as on the bundled corpus)")
    p.add_argument("--minutes", type=number(float, POSITIVE), default=DEFAULT_MINUTES,
                   help="the whole job's time budget (default %(default)s): training gets "
                        "what the other stages will need left of it, said at the start, and "
                        "ends at the last epoch end that fits, before --epochs if need be "
                        "(a 4 MB text: 4 epochs, about 12.5 min on 2 AMD EPYC cores)")
    p.add_argument("--tokens", type=number(int, AT_LEAST_1), default=1000,
                   help="timed tokens per runtime and round in the on-device benchmark")
    p.add_argument("--rounds", type=number(int, AT_LEAST_1), default=3,
                   help="benchmark rounds, the models alternated in each (default 3)")
    g = p.add_argument_group("the neural model (default: a GRU of 256 units tied to its "
                             "embedding)")
    g.add_argument("--cell", choices=cells_for("lm", comparisons=False), default=None,
                   help="lstmp: the on-device LSTM with a recurrent projection (--proj-units; "
                        "512 → 128 with CIFG, the previous default, unless given)")
    g.add_argument("--units", type=number(int, AT_LEAST_1),
                   default=None, help="recurrent units (default: 256)")
    g.add_argument("--proj-units", type=number(int, AT_LEAST_1), default=None,
                   help="lstmp: projection size; the embedding is tied to it")
    g.add_argument("--cifg", action=argparse.BooleanOptionalAction, default=None,
                   help="coupled input-forget gate (Gboard's CIFG), lstm or lstmp")
    g.add_argument("--set", action="append", default=None, metavar="FIELD=VALUE",
                   help="any other field of the LM's config (`train lm`'s flags, as "
                   "snake_case), e.g. --set dropout=0.4 --set weight_dropout=0.3; repeatable; "
                   "values read as JSON (numbers, true/false, null) or else as text")
    g.add_argument("--recipe", default=None, metavar="RECIPE.json",
                   help="a JSON object of LM config fields (applied before --set and the "
                   "flags above): how a recipe in the docs is reproduced")
    q = p.add_argument_group("quantization-aware training (default: none)")
    q.add_argument("--qat", choices=("int8", "int4"), default=None,
                   help="fine-tune the trained LM with QAT (int8: weights and activations, "
                        "int4: weights) and add its step model to the candidates shipped")
    q.add_argument("--qat-epochs", type=number(int, AT_LEAST_1), default=1,
                   help="epochs of the QAT fine-tune (default 1)")
    q.add_argument("--qat-lr", type=number(float, POSITIVE), default=5e-4,
                   help="learning rate of the QAT fine-tune (default 0.0005)")
    p.set_defaults(func=run_pipeline)


def run_pipeline(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.pipeline import run_pipeline

    overrides = {**recipe_fields(args.recipe, args.set or []),
                 **{k: v for k, v in (("cell", args.cell), ("units", args.units),
                                      ("proj_units", args.proj_units), ("cifg", args.cifg))
                    if v is not None}}
    spec = CELLS.get(overrides.get("cell"))  # an unknown cell is refused by LMConfig
    for field, value in (spec.recipe if spec else {}).items():
        overrides.setdefault(field, value)  # unless told (lstmp: Gboard's CIFG 512 → 128)
    if ("units" in overrides or "proj_units" in overrides) and "embed_dim" not in overrides:
        # tied: embedding = output size
        overrides["embed_dim"] = (overrides.get("proj_units") or overrides.get("units")
                                  or 256)
    run_pipeline(args.data, args.out, minutes=args.minutes, epochs=args.epochs,
                 bench_tokens=args.tokens,
                 data_dir=args.data_dir, split_ratio=args.split_ratio, rounds=args.rounds,
                 lstm_overrides=overrides, qat=args.qat, qat_epochs=args.qat_epochs,
                 qat_lr=args.qat_lr)
    return 0


def recipe_fields(recipe: str | None, settings: list[str]) -> dict:
    """The LM config fields of ``--recipe FILE`` then each ``--set FIELD=VALUE``, checked
    against :class:`~keras_seq.tasks.lm.config.LMConfig`'s fields (values are validated
    with the whole config)."""
    # lazy: keeps `keras-seq --help` fast
    import dataclasses
    import json
    from pathlib import Path

    from keras_seq.errors import KerasSeqError
    from keras_seq.tasks.lm.config import LMConfig

    fields = {}
    if recipe is not None:
        try:
            fields = json.loads(Path(recipe).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise KerasSeqError(f"--recipe {recipe}: cannot read a JSON object of LM config "
                                f"fields ({err})") from None
        if not isinstance(fields, dict):
            raise KerasSeqError(f"--recipe {recipe} holds a {type(fields).__name__}; expected "
                                'a JSON object such as {"dropout": 0.4}')
    for setting in settings:
        name, sep, text = setting.partition("=")
        if not sep:
            raise KerasSeqError(f"--set {setting!r}: expected FIELD=VALUE, e.g. dropout=0.4")
        try:
            fields[name.strip()] = json.loads(text)
        except json.JSONDecodeError:
            fields[name.strip()] = text
    known = {f.name for f in dataclasses.fields(LMConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise KerasSeqError(f"unknown LM config field(s) {', '.join(unknown)}; expected some "
                            f"of: {', '.join(sorted(known))}")
    return fields
