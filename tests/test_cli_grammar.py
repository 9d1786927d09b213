"""One grammar for every ``keras-seq`` command: each flag says what it does and shows its
real default once; train flags come from the typed configs (``--x/--no-x`` for booleans);
every handler is ``run_<command>``."""

import argparse
import re

import pytest

from keras_seq.cli import build_parser
from keras_seq.commands import tasks
from keras_seq.commands._common import show_default
from keras_seq.tasks.lm.config import PRESETS, LMConfig


def _commands(parser, path=()):
    """``(words, parser)`` of every command and group."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _options(parser):
    for action in parser._actions:
        if action.option_strings and action.help != argparse.SUPPRESS and not isinstance(
                action, (argparse._HelpAction, argparse._VersionAction)):
            yield action


def _config(path, parser, argv=()):
    """The config a ``train`` command resolves from ``argv`` (what run_train trains)."""
    args = parser.parse_args(["--run-dir", "r", *argv])
    return tasks.config_from_args(tasks.shapes()[path[1]], args)


def _real_default(path, parser, action):
    """What the command uses when the flag is not given."""
    if path[:1] == ("train",) and len(path) == 2 and action.default is None:
        config = _config(path, parser)
        if hasattr(config, action.dest):
            return getattr(config, action.dest)
    return action.default


COMMANDS = [(path, p) for path, p in _commands(build_parser()) if path]


@pytest.mark.parametrize("path,parser", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_flag_says_what_it_does_and_its_real_default_once(path, parser):
    problems = []
    for action in _options(parser):
        # the line as --help prints it (a formatter may add to the help string)
        flag, text = "/".join(action.option_strings), parser._get_formatter()._expand_help(action)
        described = re.sub(r"\((default|range): [^)]*\)", "", text).strip()
        if not described:
            problems.append(f"{flag} has no description: {text!r}")
        if len(re.findall(r"(?<!\w)default(?!\w)", text.lower())) > 1:  # not serving_default
            problems.append(f"{flag} says 'default' more than once: {text!r}")
        real = _real_default(path, parser, action)
        if real is None or (action.nargs == 0 and not isinstance(
                action, argparse.BooleanOptionalAction)):
            continue  # said in words ("default: no limit") / an off switch
        shown = re.search(r"(?<!\w)default:? (.*)", text)
        if not shown or not shown.group(1).startswith(show_default(real)):
            problems.append(f"{flag} default is {show_default(real)!r}; help: {text!r}")
    assert not problems, f"keras-seq {' '.join(path)}:\n" + "\n".join(problems)


def _switches(parser):
    """Every flag that takes no value, with the flag names it answers to."""
    for action in _options(parser):
        if action.nargs == 0:
            yield "/".join(action.option_strings), action


def test_every_switch_has_both_forms():
    """One boolean grammar: each switch of every command (and of the fault campaign) is
    ``--x/--no-x``; an older spelling may still parse but is not shown in --help."""
    from tools.reliability.__main__ import build_parser as campaign_parser

    parsers = [*COMMANDS, (("python -m tools.reliability",), campaign_parser())]
    switches = [(f"{' '.join(path)} {flag}", action) for path, parser in parsers
                for flag, action in _switches(parser)]
    one_way = [name for name, action in switches
               if not isinstance(action, argparse.BooleanOptionalAction)]
    assert not one_way, "switches without a --no- form:\n" + "\n".join(one_way)
    assert len(switches) >= 40  # --json, --quick, --parity, --progress, … on most commands


@pytest.mark.parametrize("argv,dest,value", [
    (["export", "tflite", "--run-dir", "r", "--out", "o"], "parity", True),
    (["export", "tflite", "--run-dir", "r", "--out", "o", "--no-parity"], "parity", False),
    (["ngram", "train", "--data", "d", "--out", "o"], "discount_fallback", True),
    (["ngram", "train", "--data", "d", "--out", "o", "--no-discount-fallback"],
     "discount_fallback", False),
    (["bench", "web", "--tflite-dir", "t", "--no-webgpu"], "webgpu", False),
    (["report", "--out", "o", "--no-progress", "--tiny"], "progress", False),
    (["train", "lm", "--run-dir", "r", "--no-clip"], "clip", False),
    (["train", "seq2seq", "--run-dir", "r", "--unidirectional"], "bidirectional", False),
    (["--no-debug", "train", "lm", "--run-dir", "r", "--json"], "json", True),
])
def test_the_negative_forms_keep_their_meaning(argv, dest, value):
    assert getattr(build_parser().parse_args(argv), dest) is value


def test_help_output_shows_each_default_once(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "classify", "--help"])
    out = capsys.readouterr().out
    batch = re.search(r"\n  --batch-size INT(.*?)\n  --", out, re.S).group(1)
    assert " ".join(batch.split()) == ("examples per training batch (with --strategy: the "
                                       "global batch) (default: 32) (range: ≥ 1)")


def test_lm_help_shows_what_each_preset_sets():
    parser = dict(COMMANDS)[("train", "lm")]
    checked = 0
    for action in _options(parser):
        for name in PRESETS:
            listed = re.search(rf"{name} ([^,;)]+)", action.help or "")
            if listed:
                config = _config(("train", "lm"), parser, ["--preset", name])
                assert show_default(getattr(config, action.dest)) == listed.group(1)
                checked += 1
    assert checked >= 20  # units, embed_dim, bptt, dropout, … of three presets


@pytest.mark.parametrize("kind", ["lm", "classify", "tag", "conditioned", "seq2seq"])
def test_train_flags_are_the_config_fields_and_booleans_go_both_ways(kind):
    import dataclasses

    parser = dict(COMMANDS)[("train", kind)]
    config = _config(("train", kind), parser)
    flags = {}
    for action in _options(parser):  # the generated flag, not an older alias
        flags.setdefault(action.dest, action)
    for field in dataclasses.fields(config):
        if field.name in ("version", "replicas"):
            continue
        assert field.name in flags, f"train {kind} has no flag for {field.name}"
        if isinstance(getattr(type(config)(), field.name), bool):
            option = "--" + field.name.replace("_", "-")
            assert flags[field.name].option_strings == [option, "--no-" + option[2:]]
            for argv, value in (([option], True), (["--no-" + option[2:]], False)):
                assert getattr(_config(("train", kind), parser, argv), field.name) is value


def test_older_flag_names_still_work():
    commands = dict(COMMANDS)
    lm_parser, s2s = commands[("train", "lm")], commands[("train", "seq2seq")]
    assert _config(("train", "lm"), lm_parser, ["--no-clip"]).clip_norm is None
    assert _config(("train", "lm"), lm_parser, ["--no-lower"]).lower is False
    assert _config(("train", "lm"), lm_parser, ["--preset", "ptb-small"]).units == 200
    assert _config(("train", "lm"), lm_parser, ["--preset", "ptb-small", "--units", "8"]
                   ).units == 8
    assert _config(("train", "seq2seq"), s2s, ["--unidirectional"]).bidirectional is False
    assert _config(("train", "lm"), lm_parser, ["--jit-compile"]).jit_compile is True
    assert LMConfig().lower is None  # the tokenizer's own default (on) applies


def test_every_command_runs_a_run_handler():
    for path, parser in COMMANDS:
        func = parser.get_default("func")
        if func is None or func.__name__ == "<lambda>":  # a group: prints its help
            continue
        assert re.fullmatch(r"run_[a-z0-9_]+", func.__name__), (path, func.__name__)


def test_every_train_and_eval_command_is_registered_the_same_way():
    """One registration path (``add_train_command``/``add_eval_command``): every ``train``
    command takes the same run flags, every ``eval`` command the same ones."""
    commands = dict(_commands(build_parser()))
    trains = {path[1]: p for path, p in commands.items() if path[:1] == ("train",)
              and len(path) == 2}
    evals = {path[1]: p for path, p in commands.items() if path[:1] == ("eval",)
             and len(path) == 2}
    assert set(trains) == set(evals) == {"lm", "seq2seq", "classify", "tag", "conditioned"}
    for kind, parser in trains.items():
        flags = set(parser._option_string_actions)
        assert {"--run-dir", "--resume", "--quiet", "--json", "--data"} <= flags, kind
        assert parser.get_default("kind") == kind
    for kind, parser in evals.items():
        assert {"--run-dir", "--split", "--json"} <= set(parser._option_string_actions), kind
        assert parser.get_default("kind") == kind
