"""Classifier and tagger exports: raw-text SavedModel signatures vs the Keras models, in-graph
tokenization parity, the streaming TFLite classifier step (float32 and dynamic) and its
refusals. The tiny runs are trained once per session (also used by test_serving_classify)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_seq.errors import KerasSeqError
from tests.fixtures.classify_runs import classifier_saved_model, classify_run
from tests.shared_cache import shared_folder

# Unknown words, punctuation, case, apostrophes, a literal <unk>, a line break, non-ASCII
# text, blank and empty texts.
TEXTS = [
    "The movie was NOT good, really!",
    "zzqx unknownword ... ?? (brackets) [x]",
    "great\nfilm <unk> isn't bad;it's fine",
    "café naïve — ok…",
    "a-b c.d e,f 3.14 $5",
    "   ",
    "",
]
TAG_TEXTS = ["the Module is imported here", "Unknownzz WORD , x.y", "", "   a   b  ", "pass"]

# Dynamic-range quantization (int8 weights), measured max |Δscores| vs Keras over 200-300
# test texts of trained 64-unit LSTM/GRU classifiers: after the last token ≤ 8.6e-4, after
# any token (streaming) ≤ 8.6e-3 (GRU; LSTM ≤ 1.5e-3); argmax always agreed. float16:
# ≤ 1.3e-3 streaming; float32: ≤ 3e-7. The tiny test model gives ~3e-5. Allowed: 2e-2.
DYNAMIC_TOL = 2e-2
FLOAT_TOL = 1e-4


def tag_run(tmp_path_factory):
    """A tiny tagger run (trained once per test run): the exports are compared with the
    Keras model it saved, so what it learned in its two steps does not matter."""
    def build(folder):
        from keras_seq.tasks.tag.config import TagConfig
        from keras_seq.tasks.tag.task import train_tagger

        # eagerly: tracing the bidirectional train and eval steps costs more than running
        # them on 64 sentences
        tf.config.run_functions_eagerly(True)
        try:
            train_tagger(TagConfig(max_sentences=64, units=16, embed_dim=8, epochs=1),
                         folder / "run", verbose=0, printer=lambda *a: None)
        finally:
            tf.config.run_functions_eagerly(False)

    return shared_folder(tmp_path_factory, "labelled_tag_run", build) / "run"


@pytest.fixture(scope="module")
def clf(tmp_path_factory):
    from keras_seq.tasks.classify.task import load_run

    run = classify_run(tmp_path_factory)
    config, tokenizer, labels, model = load_run(run)
    return SimpleNamespace(run=run, config=config, tokenizer=tokenizer, labels=labels,
                           model=model)


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    from keras_seq.tasks.tag.task import load_run

    run = tag_run(tmp_path_factory)
    _, tokenizer, tags, model = load_run(run)
    return SimpleNamespace(run=run, tokenizer=tokenizer, tags=tags, model=model)


@pytest.fixture(scope="module")
def step_export(clf, tmp_path_factory):
    from keras_seq.export.classifier_tagger import export_classifier_tflite

    out = tmp_path_factory.mktemp("classifier_tflite")
    manifest = export_classifier_tflite(clf.run, out, variants=("float32", "dynamic"),
                                        parity_texts=12, printer=lambda *a: None)
    return out, manifest


@pytest.fixture(scope="module")
def keras_streams(clf):
    """The Keras reference for streaming each of TEXTS, computed once for every variant:
    ``[(ids, scores on the whole text, [scores on ids[:k] for k = 1 … len - 1])]``."""
    from keras_seq.tasks.classify.task import encode_texts, predict_proba

    want = predict_proba(clf.model, clf.tokenizer, TEXTS, clf.config.max_len)
    return [(ids, final, [np.asarray(keras.ops.softmax(
                clf.model(ids[None, :k], training=False))[0]) for k in range(1, len(ids))])
            for ids, final in zip(encode_texts(clf.tokenizer, TEXTS), want)]


def _scores_by_label(labels_out, scores_out, labels) -> np.ndarray:
    got = np.full((len(labels_out), len(labels)), np.nan, np.float32)
    for i, (names, scores) in enumerate(zip(labels_out, scores_out)):
        for name, score in zip(names, scores):
            got[i, labels.index[name.decode()]] = score
    return got


# ----------------------------------------------------------------------------------------
# Classifier SavedModel


def test_classify_signature_matches_keras(clf, tmp_path_factory):
    from keras_seq.tasks.classify.task import predict_proba

    path = classifier_saved_model(tmp_path_factory)
    loaded = tf.saved_model.load(str(path))
    assert {"classify", "serving_default"} <= set(loaded.signatures)
    fn = loaded.signatures["classify"]
    (name, spec), = fn.structured_input_signature[1].items()
    assert name == "inputs" and spec.dtype == tf.string and spec.shape.as_list() == [None]
    outs = fn.structured_outputs
    n_labels = len(clf.labels)
    assert outs["labels"].dtype == tf.string and outs["labels"].shape.as_list() == [None,
                                                                                   n_labels]
    assert outs["scores"].dtype == tf.float32

    result = fn(inputs=tf.constant(TEXTS))
    labels_out, scores_out = result["labels"].numpy(), result["scores"].numpy()
    assert labels_out.shape == scores_out.shape == (len(TEXTS), n_labels)
    assert np.all(np.diff(scores_out, axis=1) <= 0), "rows must be sorted by score"
    want = predict_proba(clf.model, clf.tokenizer, TEXTS, clf.config.max_len)
    np.testing.assert_allclose(_scores_by_label(labels_out, scores_out, clf.labels), want,
                               atol=1e-5)
    default = loaded.signatures["serving_default"](inputs=tf.constant(TEXTS))
    np.testing.assert_array_equal(default["labels"].numpy(), labels_out)
    np.testing.assert_allclose(default["scores"].numpy(), scores_out)

    meta = json.loads((path / "assets" / "keras_seq.json").read_text())
    assert meta["kind"] == "classifier" and meta["labels"] == clf.labels.list
    assert meta["tokenizer_fingerprint"] == clf.tokenizer.fingerprint
    assert (path / "assets" / "tokenizer.json").is_file()


@pytest.mark.parametrize("max_len", [None, 3])
def test_in_graph_tokenization_matches_python(clf, max_len):
    from keras_seq.export.classifier_tagger import ClassifierModule
    from keras_seq.tasks.classify.task import encode_texts

    tok = clf.tokenizer
    for text in TEXTS:  # the tokenizer's own in-graph path first
        np.testing.assert_array_equal(tok.tf_encode(tf.constant([text]))[0].numpy(),
                                      tok.encode(text))
    module = ClassifierModule(clf.model, tok, clf.labels, max_len)
    ids = module.ids(tf.constant(TEXTS)).numpy()
    for row, want in zip(ids, encode_texts(tok, TEXTS, max_len)):
        np.testing.assert_array_equal(row[:len(want)], want)
        assert not row[len(want):].any()
    assert (ids == tok.unk_id).sum() >= 3  # unknown words, <unk> and the empty texts


def test_classify_with_max_len_matches_keras(clf, tmp_path):
    from keras_seq.export.classifier_tagger import export_classifier
    from keras_seq.tasks.classify.task import predict_proba

    out = export_classifier(clf.run, tmp_path / "sm", printer=lambda *a: None,
                            model=clf.model, tokenizer=clf.tokenizer, labels=clf.labels,
                            max_len=4)
    result = tf.saved_model.load(str(out)).signatures["classify"](inputs=tf.constant(TEXTS))
    got = _scores_by_label(result["labels"].numpy(), result["scores"].numpy(), clf.labels)
    want = predict_proba(clf.model, clf.tokenizer, TEXTS, max_len=4)
    np.testing.assert_allclose(got, want, atol=1e-5)


# ----------------------------------------------------------------------------------------
# Tagger SavedModel


def test_tag_signature_matches_keras(tagger, tmp_path):
    from keras_seq.export.classifier_tagger import export_tagger
    from keras_seq.tasks.tag.task import predict_tags

    out = export_tagger(tagger.run, tmp_path / "tag_sm", printer=lambda *a: None)
    loaded = tf.saved_model.load(str(out))
    assert {"tag", "serving_default"} <= set(loaded.signatures)
    result = loaded.signatures["tag"](inputs=tf.constant(TAG_TEXTS))
    tags, lengths = result["tags"].numpy(), result["lengths"].numpy()
    assert lengths.dtype == np.int32
    assert lengths.tolist() == [len(t.split()) for t in TAG_TEXTS]
    assert tags.shape == (len(TAG_TEXTS), max(lengths))
    want = predict_tags(tagger.model, tagger.tokenizer, tagger.tags,
                        [t.split() for t in TAG_TEXTS])
    for row, n, expected in zip(tags, lengths, want):
        assert [t.decode() for t in row[:n]] == expected
        assert all(t == b"" for t in row[n:])
    empty = loaded.signatures["serving_default"](inputs=tf.constant(["", " "]))
    assert empty["tags"].shape == (2, 0) and empty["lengths"].numpy().tolist() == [0, 0]
    meta = json.loads((out / "assets" / "keras_seq.json").read_text())
    assert meta["kind"] == "tagger" and meta["tags"] == tagger.tags.list


# ----------------------------------------------------------------------------------------
# Streaming classifier step (TFLite)


@pytest.mark.parametrize("variant,tol", [("float32", FLOAT_TOL), ("dynamic", DYNAMIC_TOL)])
def test_step_parity(clf, step_export, keras_streams, variant, tol):
    from keras_seq.runtime.classifier import StreamingClassifier

    out, manifest = step_export
    entry = {m["variant"]: m for m in manifest["models"]}[variant]
    assert entry["parity"]["texts"] == 12
    assert entry["parity"]["max_abs_final"] <= tol
    assert entry["parity"]["max_abs_streaming"] <= tol
    meta = json.loads((out / f"{entry['name']}.json").read_text())
    assert meta["inputs"] == ["token", "h0", "c0"] and meta["outputs"] == ["scores", "h0", "c0"]
    assert meta["labels"] == clf.labels.list and meta["task"] == "classify"

    stream = StreamingClassifier(out / entry["file"])
    for text, (ids, final, prefixes) in zip(TEXTS, keras_streams):
        scores = stream.stream_text(text)  # the scores after every token
        assert scores.shape == (len(ids), len(clf.labels))
        np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_allclose(scores[-1], final, atol=tol)  # = Keras on the whole text
        for k, prefix in enumerate(prefixes, 1):  # = Keras on each prefix
            np.testing.assert_allclose(scores[k - 1], prefix, atol=tol)
    best = stream.classify(TEXTS[0])
    assert sorted(label for label, _ in best) == sorted(clf.labels.list)
    assert [s for _, s in best] == sorted((s for _, s in best), reverse=True)


@pytest.mark.parametrize("cell", ["rnn", "gru"])
def test_step_parity_residual_stacked(clf, tmp_path, cell):
    """Other cells, two layers, residual connections (embed_dim == units): the step graph
    applies them as the Keras model does."""
    from keras_seq.export.classifier_tagger import export_classifier_tflite
    from keras_seq.models.classifier import SequenceClassifier
    from keras_seq.tasks._common import Labels

    model = SequenceClassifier(clf.tokenizer.vocab_size, 3, embed_dim=6, units=6, cell=cell,
                               num_layers=2, residual=True)
    model(np.ones((1, 3), np.int32))
    manifest = export_classifier_tflite(None, tmp_path, variants=("float32",),
                                        texts=TEXTS[:5], printer=lambda *a: None,
                                        model=model, tokenizer=clf.tokenizer,
                                        labels=Labels(["a", "b", "c"]))
    parity = manifest["models"][0]["parity"]
    assert manifest["model"]["residual"] is True
    assert parity["max_abs_final"] <= FLOAT_TOL and parity["max_abs_streaming"] <= FLOAT_TOL


@pytest.mark.parametrize("kwargs,fragment", [
    ({"bidirectional": True}, "bidirectional"),
    ({"pooling": "attention"}, "attention pooling"),
    ({"pooling": "mean"}, "mean pooling"),
    ({"bidirectional": True, "pooling": "attention"}, "bidirectional"),
])
def test_step_refuses_whole_sequence_classifiers(clf, tmp_path, kwargs, fragment):
    from keras_seq.export.classifier_tagger import export_classifier_tflite
    from keras_seq.models.classifier import SequenceClassifier

    model = SequenceClassifier(clf.tokenizer.vocab_size, 2, embed_dim=4, units=4, **kwargs)
    model(np.ones((1, 3), np.int32))
    out = tmp_path / "never"
    with pytest.raises(KerasSeqError, match=fragment) as err:
        export_classifier_tflite(None, out, model=model, tokenizer=clf.tokenizer,
                                 labels=clf.labels, printer=lambda *a: None)
    assert "whole sequence" in str(err.value)
    assert not out.exists()


def test_bench_classifier_step(step_export):
    from keras_seq.runtime.classifier import bench_classifier_step

    out, manifest = step_export
    result = bench_classifier_step(out / manifest["models"][0]["file"], tokens=50, warmup=5)
    assert result["tokens"] == 50 and result["threads"] == 1
    assert 0 < result["p50_us"] <= result["p99_us"]


# ----------------------------------------------------------------------------------------
# CLI


def test_cli_export_classifier_and_tagger(clf, tagger, tmp_path, capsys):
    from keras_seq.cli import main

    out = tmp_path / "clf"
    assert main(["export", "classifier", "--run-dir", str(clf.run), "--out", str(out),
                 "--tflite", "--variants", "float32", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["saved_model"] == str(out) and report["tflite_dir"] == str(out / "tflite")
    assert (out / "saved_model.pb").is_file()
    assert (out / "tflite" / "classifier_step_float32.tflite").is_file()
    assert report["tflite"]["models"][0]["parity"]["max_abs_final"] <= FLOAT_TOL

    assert main(["export", "tagger", "--run-dir", str(tagger.run),
                 "--out", str(tmp_path / "tag")]) == 0
    assert (tmp_path / "tag" / "saved_model.pb").is_file()
    # a tag run is not a classify run: a one-line error, no traceback
    assert main(["export", "classifier", "--run-dir", str(tagger.run),
                 "--out", str(tmp_path / "x")]) != 0
    assert "classify run" in capsys.readouterr().err


def test_streaming_classifier_runs_without_tensorflow(step_export):
    import subprocess
    import sys

    out, manifest = step_export
    path = out / manifest["models"][0]["file"]
    code = ("import sys\n"
            "from keras_seq.runtime.classifier import StreamingClassifier\n"
            f"clf = StreamingClassifier({str(path)!r})\n"
            "print(clf.classify('the film was good')[0][0])\n"
            "bad = [m for m in sys.modules if m.split('.')[0] == 'tensorflow']\n"
            "assert not bad, bad[:5]\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
