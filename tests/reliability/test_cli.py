"""Bad command lines are refused before any work, in one line, with the nearest match.

The quick campaign runs once; each known bug has its own regression test. Commands run in
this process with the work behind them replaced by tripwires (tools.reliability.cli)."""

import argparse

import pytest

from keras_seq.data.splits import parse_split
from keras_seq.errors import DataError
from tools.reliability import cli as campaign


def test_quick_campaign_rows_are_ok(tmp_path):
    rows = campaign.run("quick", tmp_path, print)
    assert len(rows) == 7
    for row in rows:
        assert row.ok, row
    assert rows[-1].cases >= 200


@pytest.fixture
def cli(tmp_path):
    """``run(*argv)`` → Outcome, with tripwires on data loading, Keras and the server."""
    paths = campaign.make_fixtures(tmp_path)
    with campaign.guarded():
        yield lambda *argv: campaign.run_cli(argv), paths


def _one_error_line(outcome, *needles):
    assert outcome.refused, outcome
    assert outcome.problem() is None, outcome.stderr
    for needle in needles:
        assert needle in outcome.stderr


def test_split_ratio_must_sum_to_100_or_1(cli, tmp_path):
    run, _ = cli
    with pytest.raises(DataError, match="sum to 110"):
        parse_split("50/60")
    assert parse_split("0.8,0.1,0.1") == pytest.approx((0.8, 0.1, 0.1))
    for argv in (["data", "stats"], ["train", "lm", "--run-dir", tmp_path / "r"],
                 ["ngram", "train", "--data", "python-docs", "--out", tmp_path / "a.arpa"]):
        _one_error_line(run(*argv, "--split-ratio", "50/60"), "--split-ratio", "sum to 110")
        assert run(*argv, "--split-ratio", "90/10").reached  # a good split still runs


def test_bad_numbers_are_refused_before_the_corpus_is_read(cli, tmp_path):
    run, _ = cli
    for value in ("-3", "0", "nan", "inf", "99999999999"):
        outcome = run("train", "lm", "--run-dir", tmp_path / "r", f"--units={value}")
        _one_error_line(outcome, "--units")
        assert "note:" not in outcome.stderr + outcome.stdout
    _one_error_line(run("train", "seq2seq", "--run-dir", tmp_path / "r", "--dropout", "1.5"),
                    "--dropout")
    _one_error_line(run("generate", "--run-dir", tmp_path / "r", "--temperature", "nan"),
                    "--temperature")
    # a config that fails as a whole is refused before Keras is even selected
    _one_error_line(run("train", "lm", "--run-dir", tmp_path / "r", "--cell", "lstmp",
                        "--units", "8", "--proj-units", "16"), "proj_units must be ≤ units")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", [["translate", "hello"], ["eval", "seq2seq"],
                                     ["export", "seq2seq", "--out", "x"]])
def test_run_dir_of_another_kind_says_what_it_holds(cli, command):
    run, paths = cli
    outcome = run(*command, "--run-dir", paths["lm"])
    _one_error_line(outcome, "holds a `keras-seq train lm` run, not a seq2seq run",
                    "eval lm, generate")
    assert "re-train" not in outcome.stderr and "written by" not in outcome.stderr
    for folder, says in (("missing", "does not exist"), ("empty", "is empty"),
                         ("file", "is a file"), ("list-config", "JSON list")):
        _one_error_line(run(*command, "--run-dir", paths[folder]), says)


def test_generate_and_predict_name_the_kinds_they_take(cli):
    run, paths = cli
    _one_error_line(run("generate", "--run-dir", paths["seq2seq"]),
                    "generate takes lm or conditioned runs", "use translate")
    _one_error_line(run("predict", "--run-dir", paths["no-kind"], "text"),
                    "names no known kind", "predict takes classify or tag runs")


def test_training_into_a_file_is_refused_before_the_corpus_is_read(cli):
    run, paths = cli
    for kind in ("lm", "seq2seq", "tag"):
        outcome = run("train", kind, "--run-dir", paths["file"])
        _one_error_line(outcome, "is a file")
        assert "note:" not in outcome.stderr


def test_near_misses_are_suggested(cli, tmp_path):
    run, _ = cli
    _one_error_line(run("data", "stats", "--data", "tinyshakspeare"),
                    "did you mean 'tinyshakespeare'?", "python-docs, tinyshakespeare")
    _one_error_line(run("trian", "lm"), "did you mean 'train'?")
    _one_error_line(run("train", "lm", "--run-dir", tmp_path, "--cell", "lstn"),
                    "did you mean 'lstm'?")
    _one_error_line(run("train", "lm", "--run-dir", tmp_path, "--untis", "3"),
                    "did you mean '--units'?")
    _one_error_line(run("train", "seq2seq", "--run-dir", tmp_path, "--data", "datse"),
                    "did you mean 'dates'?")


def test_serve_refuses_a_missing_model_base_and_warns_on_an_empty_one(cli, tmp_path, capsys):
    run, paths = cli
    _one_error_line(run("serve", "--model-base", tmp_path / "nowhere"), "does not exist")
    _one_error_line(run("serve", "--model-base", paths["file"]), "is a file")
    outcome = run("serve", "--model-base", paths["empty-base"])
    assert outcome.reached == "serve"  # the server would start: its checks passed
    assert "warning: no servable model found under base path" in outcome.stderr


def test_every_numeric_flag_has_a_range_and_the_oracle_refuses_what_it_should():
    from keras_seq.cli import build_parser
    from keras_seq.commands._common import AT_LEAST_1, number

    flags = campaign.flags_of(build_parser())
    numeric = [f for f in flags if f.kind == "number"]
    assert numeric and all(f.range is not None for f in numeric)
    units = campaign.Flag(("train", "lm"), "--units", "number", int, AT_LEAST_1)
    assert [units.valid(v) for v in ("3", "0", "nan", "2147483648", "", "٣")] == \
        [True, False, False, False, False, True]
    with pytest.raises(argparse.ArgumentTypeError, match="finite"):
        number(float)("inf")


def test_the_property_test_catches_flags_that_are_not_checked(tmp_path, monkeypatch):
    """Numbers parsed without their range (and a flag with no declared range) let -3
    through to the work: the property test must see both."""
    real_parser = campaign.harness_parser

    def lax(kind, rng=None):
        parse = lambda text: kind(text)  # noqa: E731
        parse.__name__, parse.kind, parse.range = kind.__name__, kind, rng
        return parse

    def lax_parser():  # every number flag parsed without its check; --units without a range
        parser = real_parser()
        for _, leaf in campaign.leaf_parsers(parser):
            for action in leaf._actions:
                if getattr(action.type, "kind", None) in (int, float):
                    rng = None if action.dest == "units" else action.type.range
                    action.type = lax(action.type.kind, rng)
        return parser

    monkeypatch.setattr(campaign, "harness_parser", lax_parser)
    monkeypatch.setattr(campaign, "EDGE_VALUES", ("-3",))
    paths = campaign.make_fixtures(tmp_path)
    coverage, prop = campaign.property_test(tmp_path, paths, examples=1, edges=True,
                                            printer=lambda *_: None)
    assert coverage.failures > 0 and "--units" in coverage.notes
    assert prop.failures > 0 and "accepted" in prop.notes


def test_a_wrong_run_dir_is_refused_before_tensorflow_is_imported(tmp_path):
    import subprocess
    import sys

    paths = campaign.make_fixtures(tmp_path)
    code = ("import sys; from keras_seq.cli import main; "
            f"rc = main(['translate', '--run-dir', {str(paths['lm'])!r}, 'hello']); "
            "print(rc, 'tensorflow' in sys.modules, 'keras' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["2", "False", "False"], out.stderr[-500:]
