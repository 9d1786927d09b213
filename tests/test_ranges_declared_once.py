"""One source per flag: a number's range is declared once, beside its help — in
``option(range=…)`` for a config or sampling field, in ``type=number(kind, RANGE)`` for any
other flag — and the CLI, the config's ``validate()``, the REST request table and the fault
campaign all read that declaration."""

from __future__ import annotations

import argparse
import ast
import dataclasses
from pathlib import Path

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


# ----------------------------------------------------------------------------------------
# Every command's number flags: argparse refuses a value just outside the declared range
# with the declared message and takes one just inside, and no command checks it again.


def _leaves(parser, path=()):
    """``(path, parser)`` of every command that runs (``("bench", "serve")``, …)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs and path:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*path, name))


def _ranged(parser):
    """The flags of ``parser`` whose type is ``number(kind, RANGE)`` with a bound."""
    return [a for a in parser._actions if a.option_strings and getattr(a.type, "range", None)
            is not None and (a.type.range.low is not None or a.type.range.high is not None)]


def _edges(rng, kind):
    """``(just outside, just inside)`` pairs at each bound of ``rng``."""
    step = 1 if kind is int else 0.5
    pairs = []
    if rng.low is not None:
        pairs.append((kind(rng.low) if rng.low_open else kind(rng.low - step),
                      kind(rng.low + step) if rng.low_open else kind(rng.low)))
    if rng.high is not None:
        pairs.append((kind(rng.high) if rng.high_open else kind(rng.high + step),
                      kind(rng.high - step) if rng.high_open else kind(rng.high)))
    return pairs


def _a_value(action) -> str:
    if action.choices:
        return str(next(iter(action.choices)))
    rng = getattr(action.type, "range", None)
    return str(_edges(rng, action.type.kind)[0][1]) if rng is not None else "x"


def _required_argv(parser, skip) -> list[str]:
    """What ``parser`` needs besides ``skip``: its positionals, its required flags and one
    flag of each required either-or group."""
    argv = []
    for group in parser._mutually_exclusive_groups:
        if group.required and skip not in group._group_actions:
            first = group._group_actions[0]
            argv += [first.option_strings[0], _a_value(first)]
    for action in parser._actions:
        if action is skip or any(action in g._group_actions
                                 for g in parser._mutually_exclusive_groups if g.required):
            continue
        if not action.option_strings and action.nargs not in ("?", "*"):
            argv.append(_a_value(action))
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], _a_value(action)]
    return argv


def _ranged_flags():
    parser = build_parser()
    return parser, [(path, leaf, action) for path, leaf in _leaves(parser)
                    for action in _ranged(leaf)]


def test_every_command_refuses_a_number_just_outside_its_declared_range(capsys):
    parser, flags = _ranged_flags()
    problems = []
    for path, leaf, action in flags:
        flag, rng, kind = action.option_strings[0], action.type.range, action.type.kind
        for out, inside in _edges(rng, kind):
            argv = [*path, *_required_argv(leaf, action), flag]
            with pytest.raises(SystemExit):
                parser.parse_args([*argv, str(out)])
            err = capsys.readouterr().err
            if f"must be {rng} (got {out})" not in err or flag not in err:
                problems.append(f"{' '.join(path)} {flag} {out}: {err.strip()[:200]!r}")
            try:
                got = getattr(parser.parse_args([*argv, str(inside)]), action.dest)
            except SystemExit:
                got = capsys.readouterr().err.strip()
            if got != inside and got != [inside]:
                problems.append(f"{' '.join(path)} {flag} {inside} refused: {str(got)[:200]!r}")
    assert len(flags) > 200 and not problems, "\n".join(problems)


def _number_dests() -> set[str]:
    return {action.dest for _, _, action in _ranged_flags()[1]}


def _hand_checks(tree, dests) -> list[tuple[int, str]]:
    """``(line, flag)`` of each ``args.X`` (or ``min(args.X)``/``max(args.X)``) compared
    with a number, X a ranged flag: a second check of a range its flag declares."""
    def flag_of(node):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("min", "max") \
                and node.args:
            node = node.args[0]
        if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "args" \
                and node.attr in dests:
            return node.attr
        return None

    def is_number(node):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and all(
                isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops):
            operands = [node.left, *node.comparators]
            names = [flag_of(o) for o in operands if flag_of(o)]
            if names and any(is_number(o) for o in operands):
                found.append((node.lineno, names[0]))
    return found


def test_no_command_checks_a_declared_range_by_hand():
    """``if args.tokens < 1: raise …`` after ``type=number(int, AT_LEAST_1)`` is a second
    source of the rule (and of its message): the declared range is the one check."""
    package = Path(__file__).resolve().parents[1] / "keras_seq"
    dests = _number_dests()
    found = [f"{path.relative_to(package.parent)}:{line}: args.{name}"
             for path in sorted(package.rglob("*.py"))
             for line, name in _hand_checks(ast.parse(path.read_text(encoding="utf-8")), dests)]
    assert not found, "ranges checked again by hand (declare the true range instead):\n" + \
        "\n".join(found)


def test_the_hand_check_finder_finds_one():
    code = ("def run(args):\n    if args.tokens < 1 or max(args.clients) > 256:\n"
            "        raise ValueError\n    if not 0 < args.seconds <= 3600:\n        pass\n"
            "    return args.tokens * 2 if args.json else args.other < 1\n")
    assert _hand_checks(ast.parse(code), {"tokens", "clients", "seconds"}) == \
        [(2, "tokens"), (2, "clients"), (4, "seconds")]
