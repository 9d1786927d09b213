import json
import re
import subprocess
import sys

import pytest

from keras_seq.cli import HELP_ORDER, _subcommands, build_parser, main


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "data" in out and "bench" in out


def test_help_lists_every_command_once_in_a_newcomers_order(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = re.findall(r"^    (\w+) ", capsys.readouterr().out, re.M)
    assert sorted(listed) == sorted(HELP_ORDER), "a command is missing from HELP_ORDER"
    assert listed == list(HELP_ORDER)


@pytest.mark.parametrize("tokenizer", ["char", "word", "subword"])
def test_data_stats_json_embedded(capsys, tokenizer):
    extra = ["--vocab-size", "500"] if tokenizer == "subword" else []
    assert main(["data", "stats", "--data", "python-docs", "--tokenizer", tokenizer,
                 "--json", *extra]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tokenizer"]["kind"] == tokenizer
    assert stats["tokenizer"]["fingerprint"].startswith(tokenizer + ":")
    assert set(stats["splits"]) == {"train", "val", "test"}
    assert stats["splits"]["train"]["oov_tokens"] == 0  # the vocabulary comes from train
    assert stats["corpus"]["name"] == "python-docs"


def test_data_stats_table(capsys, shakespeare_available):
    assert main(["data", "stats", "--data", "tinyshakespeare", "--split-ratio", "90/10"]) == 0
    out = capsys.readouterr().out
    assert "fingerprint word:" in out and "val" in out and "oov_rate" in out


def test_tokenize_writes_identical_tokens(tmp_path, capsys):
    out = tmp_path / "val.txt"
    assert main(["data", "tokenize", "--data", "python-docs", "--split", "val",
                 "--min-count", "2", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines and all(line == line.strip() for line in lines)
    assert "<unk>" in out.read_text()  # min-count 2 leaves rare words out
    assert "wrote" in capsys.readouterr().err


def test_errors_are_one_line(capsys):
    assert main(["data", "stats", "--data", "/no/such/corpus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-seq: error: no such corpus") and "Traceback" not in err
    assert main(["data", "stats", "--tokenizer", "char", "--vocab-size", "10"]) == 2
    assert "do not apply" in capsys.readouterr().err
    assert main(["data", "stats", "--split-ratio", "nonsense"]) == 2


def test_a_command_with_a_module_of_its_name_builds_only_its_parser():
    whole = build_parser()
    for command in ("ngram", "data", "compare", "memory"):
        alone = build_parser(command)
        assert _subcommands(alone) == [command] + (["gradients"] if command == "memory" else [])
    argv = ["ngram", "train", "--data", "x.txt", "--order", "3", "--memory", "1G", "--out", "m"]
    alone, full = vars(build_parser("ngram").parse_args(argv)), vars(whole.parse_args(argv))
    assert {k: v for k, v in alone.items() if not k.startswith("_") and k != "func"} == \
        {k: v for k, v in full.items() if not k.startswith("_") and k != "func"}
    for command in ("train", "bench", "tasks", "ngrm", None):  # the whole parser
        assert set(_subcommands(build_parser(command))) == set(_subcommands(whole))


def test_ngram_train_does_not_import_the_other_commands():
    code = ("import sys; from keras_seq.cli import main; main(['ngram', 'train', '--help'])")
    out = subprocess.run([sys.executable, "-c", code + "\n"], capture_output=True, text=True)
    probe = subprocess.run([sys.executable, "-c", (
        "import sys, contextlib, io\n"
        "from keras_seq.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['ngram', 'train', '--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('keras_seq.commands.')))")],
        capture_output=True, text=True, check=True)
    assert "usage: keras-seq ngram train" in out.stdout
    assert probe.stdout.strip() == "['keras_seq.commands._common', " \
        "'keras_seq.commands._startup', 'keras_seq.commands.ngram']"
