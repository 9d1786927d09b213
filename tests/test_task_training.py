"""The task shapes on the shared trainer: a user's own TSV and CoNLL-U files train,
evaluate and predict through the CLI; resume is exact; the NPLM trains as an LM."""

import json

import keras
import numpy as np
import pytest

from keras_seq.cli import main
from keras_seq.errors import KerasSeqError
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.classify.task import train_classifier
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.data import nplm_windows
from keras_seq.tasks.lm.evaluation import evaluate_windows
from keras_seq.tasks.lm.task import train_lm

QUIET = ["--quiet"]


@pytest.fixture(scope="module")
def tsv_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    good, bad, filler = ["great", "fine", "lovely"], ["awful", "poor", "dull"], \
        "the a film plot acting was and it".split()
    rows = ["text\tlabel"]
    for i in range(240):
        label = "pos" if i % 2 else "neg"
        words = list(rng.choice(filler, 6)) + [rng.choice(good if i % 2 else bad)]
        rng.shuffle(words)
        rows.append(f"{' '.join(words)}\t{label}")
    path = tmp_path_factory.mktemp("tsv") / "reviews.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def classify_run(tsv_file, tmp_path_factory):
    run = tmp_path_factory.mktemp("classify") / "run"
    assert main(["train", "classify", "--run-dir", str(run), "--data", f"tsv:{tsv_file}",
                 "--units", "16", "--embed-dim", "8", "--epochs", "6", "--batch-size", "16",
                 "--lr", "0.02", *QUIET]) == 0
    return run


def test_classify_tsv_trains_evaluates_and_predicts(classify_run, capsys):
    metrics = json.loads((classify_run / "metrics.json").read_text())
    assert metrics["kind"] == "classify" and metrics["epochs_done"] == 6
    assert metrics["test"]["accuracy"] >= 0.9  # one sentiment word decides the label
    assert json.loads((classify_run / "labels.json").read_text())["labels"] == ["neg", "pos"]
    assert (classify_run / "plots" / "confusion_test.png").stat().st_size > 1000
    capsys.readouterr()
    assert main(["eval", "classify", "--run-dir", str(classify_run), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fingerprint"]["tokenizer"].startswith("word:")
    assert sum(map(sum, out["report"]["confusion"])) == out["n"]
    assert main(["predict", "--run-dir", str(classify_run), "--json",
                 "the film was lovely", "the plot was awful"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["labels"][0] for r in rows] == ["pos", "neg"]


def test_bad_tsv_row_names_file_and_line(tmp_path, tsv_file, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text(tsv_file.read_text() + "no label column here\n")
    assert main(["train", "classify", "--run-dir", str(tmp_path / "r"), "--data",
                 f"tsv:{bad}", "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert "bad.tsv:242" in err and not (tmp_path / "r").exists()


def test_predict_refuses_other_kinds_of_run(tmp_path, capsys):
    from keras_seq import __version__

    (tmp_path / "config.json").write_text(json.dumps({"kind": "lm", "version": __version__}))
    assert main(["predict", "--run-dir", str(tmp_path), "some text"]) == 2
    assert "holds a `keras-seq train lm` run" in capsys.readouterr().err


def test_classify_resume_ends_with_the_same_weights(tmp_path, tsv_file):
    cfg = dict(data=f"tsv:{tsv_file}", units=8, embed_dim=8, batch_size=16, dropout=0.2,
               seed=3)
    train_classifier(ClassifyConfig(**cfg, epochs=3), tmp_path / "full", verbose=0)
    train_classifier(ClassifyConfig(**cfg, epochs=1), tmp_path / "half", verbose=0)
    train_classifier(ClassifyConfig(**cfg, epochs=3), tmp_path / "half", resume=True,
                     verbose=0)
    full = keras.saving.load_model(tmp_path / "full" / "checkpoints" / "last.keras")
    half = keras.saving.load_model(tmp_path / "half" / "checkpoints" / "last.keras")
    for a, b in zip(full.get_weights(), half.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.fixture(scope="module")
def conllu_file(tmp_path_factory):
    nouns, verbs = ["cat", "dog", "bird", "fish"], ["runs", "sits", "eats", "sleeps"]
    lines, rng = [], np.random.default_rng(1)
    for s in range(80):
        words = [("the", "DET"), (rng.choice(nouns), "NOUN"), (rng.choice(verbs), "VERB")]
        lines.append(f"# sent_id = {s}")
        lines += [f"{i}\t{w}\t{w}\t{t}\t_\t_\t0\t_\t_\t_" for i, (w, t) in enumerate(words, 1)]
        lines.append("")
    path = tmp_path_factory.mktemp("conllu") / "toy.conllu"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tag_conllu_trains_evaluates_and_predicts(tmp_path, conllu_file, capsys):
    run = tmp_path / "run"
    assert main(["train", "tag", "--run-dir", str(run), "--data", f"conllu:{conllu_file}",
                 "--units", "8", "--embed-dim", "8", "--epochs", "8", "--lr", "0.05",
                 "--batch-size", "8", *QUIET]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["test"]["report"]["accuracy"] >= 0.95
    capsys.readouterr()
    assert main(["predict", "--run-dir", str(run), "--json", "the dog eats"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["tags"] == ["DET", "NOUN", "VERB"]
    assert main(["eval", "tag", "--run-dir", str(run)]) == 0
    assert "sentences" in capsys.readouterr().out


def test_nplm_windows_and_evaluation_match_a_direct_pass():
    from keras_seq.models import NPLM

    ids = np.array([3, 4, 5, 6, 7, 3], np.int32)
    windows = nplm_windows(ids, 2)
    assert windows.tolist() == [[0, 3], [3, 4], [4, 5], [5, 6], [6, 7]]
    model = NPLM(10, order=3, embed_dim=4, hidden=5)
    logp, n = evaluate_windows(model, ids, batch_size=2)
    logits = np.asarray(model(windows))
    full = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(logp, full[np.arange(5), ids[1:]], atol=1e-5)
    assert n == 5


def test_nplm_trains_as_a_language_model(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 200)
    run = tmp_path / "run"
    results = train_lm(LMConfig(data=str(corpus), model="nplm", context=2, embed_dim=8,
                                units=16, batch_size=32, epochs=3, lr=0.02,
                                sample_tokens=5), run, verbose=0)
    assert results["val"]["ppl"] < 2.0  # a deterministic text: the window predicts it
    capsys.readouterr()
    assert main(["generate", "--run-dir", str(run), "--prompt", "the cat", "--max-tokens",
                 "4", "--sampler", "greedy"]) == 0
    assert capsys.readouterr().out.startswith("the cat sat on the mat")
    with pytest.raises(KerasSeqError, match="context must be ≥ 1"):
        train_lm(LMConfig(data=str(corpus), model="nplm", context=0), tmp_path / "bad")


def test_conditioned_trains_evaluates_and_generates(tmp_path, capsys):
    rows = [f"{c}\t{' '.join([w] * 6)}" for c, w in (("cats", "meow"), ("dogs", "woof"))
            for _ in range(30)]
    tsv = tmp_path / "c.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    run = tmp_path / "run"
    assert main(["train", "conditioned", "--run-dir", str(run), "--data", f"tsv:{tsv}",
                 "--min-count", "1", "--units", "16", "--embed-dim", "8", "--epochs", "8",
                 "--dropout", "0", "--lr", "0.02", *QUIET]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["kind"] == "conditioned" and metrics["test"]["ppl"] < 1.5
    capsys.readouterr()
    assert main(["generate", "--run-dir", str(run), "--condition", "dogs", "--max-tokens",
                 "3", "--sampler", "greedy"]) == 0
    assert capsys.readouterr().out.strip() == "[dogs] woof woof woof"
    assert main(["generate", "--run-dir", str(run), "--condition", "cows"]) == 2
    assert "unknown condition 'cows'" in capsys.readouterr().err


@pytest.mark.parametrize("kind, data", [("classify", "tsv:reviews.tsv"),
                                        ("tag", "conllu:ud.conllu"),
                                        ("conditioned", "python-docs-topics"),
                                        ("seq2seq", "dates")])
def test_train_refuses_task_and_points_to_data(tmp_path, capsys, kind, data):
    assert main(["train", kind, "--run-dir", str(tmp_path / "r"), "--task", data]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --task" in err and "did you mean '--data'?" in err
    assert not (tmp_path / "r").exists()


def test_configs_of_older_runs_read_task_as_data(tmp_path):
    from keras_seq.tasks.conditioned.config import ConditionedConfig
    from keras_seq.tasks.seq2seq.config import Seq2SeqConfig
    from keras_seq.tasks.tag.config import TagConfig

    assert ClassifyConfig.from_dict({"task": "tsv:a.tsv"}).data == "tsv:a.tsv"
    assert Seq2SeqConfig.from_dict({"task": "reverse"}).data == "reverse"
    assert TagConfig.from_dict({"task": "conll:x"}).data == "conll:x"
    old_tag = {"task": "restore-punct", "data": "tinyshakespeare"}
    assert TagConfig.from_dict(old_tag).data == "restore-punct:tinyshakespeare"
    # a whole config.json of an older conditioned run: `task`, and no split_ratio field
    old = {"kind": "conditioned", **ConditionedConfig(data="shapes").to_dict()}
    old["task"] = old.pop("data")
    del old["split_ratio"]
    (tmp_path / "config.json").write_text(json.dumps(old))
    loaded = ConditionedConfig.load(tmp_path / "config.json")
    assert (loaded.data, loaded.split_ratio) == ("shapes", "80/10/10")
