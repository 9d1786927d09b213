"""One source per flag: a number's range is declared once, beside its help — in
``option(range=…)`` for a config or sampling field, in ``type=number(kind, RANGE)`` for any
other flag — and the CLI, the config's ``validate()``, the REST request table and the fault
campaign all read that declaration."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from keras_seq.cli import build_parser
from keras_seq.commands._common import check_flags, number
from keras_seq.options import declared_range, field_metadata, number_kind
from keras_seq.ranges import AT_LEAST_1
from keras_seq.sampling import SamplingOptions, make_sampler
from keras_seq.serving.codec import Limits, request_fields
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.conditioned.config import ConditionedConfig
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig
from keras_seq.tasks.tag.config import TagConfig
from keras_seq.training.config import TrainConfig

CONFIGS = (TrainConfig, LMConfig, Seq2SeqConfig, ClassifyConfig, TagConfig, ConditionedConfig)


def number_fields(cls):
    """The fields of ``cls`` that a flag or request sets (they have a help) and hold numbers."""
    return [f.name for f in dataclasses.fields(cls)
            if field_metadata(cls, f.name).get("help") and number_kind(cls, f.name)]


def outside(rng, kind):
    """A value just outside ``rng`` (below it where it has a lower bound)."""
    step = 1 if kind is int else 0.5
    if rng.low is not None:
        return kind(rng.low) if rng.low_open else kind(rng.low - step)
    return kind(rng.high) if rng.high_open else kind(rng.high + step)


@pytest.mark.parametrize("cls", (*CONFIGS, SamplingOptions), ids=lambda c: c.__name__)
def test_every_number_field_declares_its_range(cls):
    unranged = [name for name in number_fields(cls) if declared_range(cls, name) is None]
    assert not unranged, f"{cls.__name__}: no option(range=…) for {unranged}"


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_a_config_checks_each_range_once(cls):
    """A value outside a field's declared range gives exactly one "NAME must be …" problem:
    a second, hand-written check of the same rule in ``problems()`` makes it two."""
    for name in number_fields(cls):
        rng, kind = declared_range(cls, name), number_kind(cls, name)
        if rng.low is None and rng.high is None:  # a column: any integer
            continue
        value = outside(rng, kind)
        problems = [p for p in cls(**{name: value}).problems() if p.startswith(f"{name} must")]
        assert problems == [f"{name} must be {rng} (got {value!r})"], (cls.__name__, problems)


def _train_leaves():
    parser = build_parser()
    train = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    kinds = next(a for a in train.choices["train"]._actions
                 if isinstance(a, argparse._SubParsersAction))
    return kinds.choices


def test_train_flags_take_the_range_their_config_declares():
    configs = {cls.kind: cls for cls in CONFIGS[1:]}
    leaves = _train_leaves()
    assert set(configs) <= set(leaves)
    for kind, cls in configs.items():
        for action in leaves[kind]._actions:
            if action.dest in number_fields(cls):
                assert action.type.range is declared_range(cls, action.dest), (kind, action.dest)


def test_every_number_flag_of_every_command_has_a_range():
    seen, unranged = 0, []

    def walk(parser, prog):
        nonlocal seen
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prog} {name}")
            elif action.option_strings and getattr(action.type, "kind", None) in (int, float):
                seen += 1
                if action.type.range is None:
                    unranged.append(f"{prog} {action.option_strings[0]}")

    walk(build_parser(), "keras-seq")
    assert seen > 200 and not unranged, unranged


def test_a_flag_without_a_range_is_refused_when_the_parser_is_built():
    parser = argparse.ArgumentParser(prog="keras-seq toy")
    parser.add_argument("--units", type=int, default=8)
    with pytest.raises(TypeError, match="--units: type=int without a range"):
        check_flags(parser)
    parser = argparse.ArgumentParser(prog="keras-seq toy")
    parser.add_argument("--units", type=number(int, AT_LEAST_1), default=8)
    assert "(range: ≥\u00a01)" in check_flags(parser)._actions[-1].help


def test_generate_flags_and_the_rest_table_read_the_sampling_declaration():
    leaves = {a.dest: a for a in build_parser()._subparsers._group_actions[0]
              .choices["generate"]._actions}
    limits = Limits()
    fields = request_fields(limits)
    caps = {"max_tokens": limits.max_generated_tokens, "top_k": limits.max_k,
            "seed": 2**31 - 1, "temperature": None}
    for name, cap in caps.items():
        declared = declared_range(SamplingOptions, name)
        assert leaves[name].type.range is declared
        assert fields[name].range == (declared if cap is None else declared.capped(cap))
        assert fields[name].means.startswith(field_metadata(SamplingOptions, name)["help"])


def test_temperature_0_and_top_k_0_mean_what_the_rest_signature_says():
    assert type(make_sampler("temperature", temperature=0)).__name__ == "GreedySampler"
    assert type(make_sampler("top-k", top_k=0)).__name__ == "TemperatureSampler"
    assert type(make_sampler("top-k", top_k=3)).__name__ == "TopKSampler"
