"""``keras-seq ngram …`` and ``keras-seq bench ngram`` end to end on a tiny corpus."""

import json
import subprocess
import sys

import pytest

from keras_seq.cli import main


@pytest.fixture()
def corpus(tmp_path):
    words = "the cat sat on a mat and the dog ran to the red cat in a big house".split()
    lines = [" ".join(words[(i * 7) % 11:(i * 7) % 11 + 3 + i % 5]) for i in range(200)]
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(lines) + "\nzebra quokka\n")
    return str(path)


def test_train_eval_generate_next(corpus, tmp_path, capsys):
    arpa = str(tmp_path / "kn.arpa")
    assert main(["ngram", "train", "--data", corpus, "--order", "3", "--out", arpa]) == 0
    assert main(["ngram", "eval", "--model", arpa, "--data", corpus, "--split", "val",
                 "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{"):])
    assert result["tokens"] > 0 and 1 < result["ppl"] < 100
    assert result["tokenizer_matches"] and result["corpus_matches"]
    assert result["fingerprint"]["split"] == "val"
    assert main(["ngram", "generate", "--model", arpa, "--max-tokens", "20", "--seed", "4"]) == 0
    first = capsys.readouterr().out
    main(["ngram", "generate", "--model", arpa, "--max-tokens", "20", "--seed", "4"])
    assert capsys.readouterr().out == first
    assert main(["ngram", "next", "--model", arpa, "--context", "<s> the", "--top-k", "2"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


def test_generate_and_next_from_a_certain_model(tmp_path, capsys):
    # Every line is "the cat sat": under MLE each next token is certain, so whatever the
    # seed, generation must reproduce the line and `next` must give p = 1.
    path = tmp_path / "same.txt"
    path.write_text("the cat sat\n" * 40)
    arpa = str(tmp_path / "mle.arpa")
    assert main(["ngram", "train", "--data", str(path), "--order", "3", "--smoothing", "mle",
                 "--out", arpa]) == 0
    capsys.readouterr()
    for seed in ("0", "7"):
        assert main(["ngram", "generate", "--model", arpa, "--max-tokens", "8",
                     "--seed", seed]) == 0
        assert capsys.readouterr().out == "the cat sat\nthe cat sat\n"
    assert main(["ngram", "generate", "--model", arpa, "--max-tokens", "4", "--prompt",
                 "the"]) == 0
    assert capsys.readouterr().out == "the cat sat\nthe\n"
    assert main(["ngram", "next", "--model", arpa, "--context", "<s> the", "--top-k", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"token": "cat", "p": 1.0}]


def test_mle_eval_says_infinite(corpus, tmp_path, capsys):
    arpa = str(tmp_path / "mle.arpa")
    assert main(["ngram", "train", "--data", corpus, "--order", "4", "--smoothing", "mle",
                 "--out", arpa]) == 0
    assert main(["ngram", "eval", "--model", arpa, "--data", corpus, "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "perplexity  inf" in out and "probability 0" in out


def test_sparsity_table_json_and_plot(corpus, tmp_path, capsys):
    png = tmp_path / "s.png"
    assert main(["ngram", "sparsity", "--data", corpus, "--max-order", "3", "--split", "test",
                 "--json", "--plot", str(png)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["order"] for r in report["orders"]] == [1, 2, 3]
    assert report["orders"][0]["ppl_mle"] == "inf"  # 'zebra quokka' is OOV
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(
    "argv,message",
    [
        (["ngram", "train", "--order", "0"], "1 to 10"),
        (["ngram", "train", "--order", "11"], "1 to 10"),
        (["ngram", "eval", "--model", "missing.arpa"], "no such ARPA file"),
    ],
)
def test_bad_input_is_one_line(corpus, tmp_path, capsys, argv, message):
    argv = argv + ["--data", corpus] + (["--out", str(tmp_path / "x")] if "train" in argv else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_empty_training_split(tmp_path, capsys):
    path = tmp_path / "blank.txt"
    path.write_text("\n\n   \n")
    assert main(["ngram", "train", "--data", str(path), "--out", str(tmp_path / "x")]) == 2
    assert "empty" in capsys.readouterr().err


def test_bench_ngram_small(corpus, capsys):
    assert main(["bench", "ngram", "--data", corpus, "--repeat", "2", "--order", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["estimation"]["tokens"] > 0 and len(out["ppl"]) == 2


def test_ngram_command_does_not_import_tensorflow(corpus, tmp_path):
    code = (
        "import sys; from keras_seq.cli import main; "
        f"main(['ngram', 'sparsity', '--data', {corpus!r}, '--max-order', '2']); "
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
