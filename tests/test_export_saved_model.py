"""SavedModel signatures: serving-compatible, reload and compare with Keras."""

import contextlib
import io
import json

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.tools import saved_model_cli

from keras_seq.export.graphs import LMGraphs
from keras_seq.export.saved_model import SIGNATURES, signature_summary
from keras_seq.tasks.lm.evaluation import load_run
from tests.fixtures.lm_runs import trained_run
from tests.fixtures.serving import saved_model


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    # the tiny run's export_saved_model, made once per test run and shared with the serving
    # tests (read-only here)
    out = saved_model(tmp_path_factory)
    _, tokenizer, model = load_run(trained_run(tmp_path_factory))
    return out, tokenizer, model, tf.saved_model.load(str(out))


def _keras_logp(model, tokenizer, text):
    ids = np.concatenate([[tokenizer.eos_id], tokenizer.encode(text)]).astype("int32")
    logits = np.asarray(model.clone_for_batch(1, stateful=False)(ids[None]))[0]
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return logp[np.arange(len(ids) - 1), ids[1:]], logits


def test_signatures_are_serving_compatible(saved):
    out, tokenizer, _, _ = saved
    summary = signature_summary(out)
    assert set(SIGNATURES) | {"serving_default"} == set(summary)
    assert summary["score"]["inputs"] == {"text": ("string", [None])}  # a batch of strings
    assert summary["step"]["inputs"]["token"] == ("int32", [1])
    # what `saved_model_cli show --dir OUT --all` prints: its main only parses the flags,
    # then calls _show_all (which also reloads the model); run here, not as a subprocess
    # that spent 5 CPU-s importing TensorFlow again
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        saved_model_cli._show_all(str(out))
    for name in SIGNATURES:
        assert f"signature_def['{name}']" in shown.getvalue()
    assert "tensorflow/serving/predict" in shown.getvalue()
    meta = json.loads((out / "assets" / "keras_seq.json").read_text())
    assert meta["tokenizer_fingerprint"] == tokenizer.fingerprint
    assert json.loads((out / "assets" / "tokenizer.json").read_text())["fingerprint"] == \
        tokenizer.fingerprint


def test_score_matches_keras_for_a_batch(saved):
    _, tokenizer, model, loaded = saved
    texts = ["the cat sat on a mat", "a big red dog ran", "the"]
    res = loaded.signatures["score"](text=tf.constant(texts))
    for i, text in enumerate(texts):
        ref, _ = _keras_logp(model, tokenizer, text)
        n = int(res["lengths"][i])
        assert n == len(ref)
        np.testing.assert_allclose(res["log_probs"][i, :n].numpy(), ref, atol=1e-5)
        assert float(res["cross_entropy"][i]) == pytest.approx(-ref.mean(), abs=1e-5)
        assert float(res["perplexity"][i]) == pytest.approx(np.exp(-ref.mean()), rel=1e-5)
        assert [t.decode() for t in res["tokens"][i, :n].numpy()] == \
            tokenizer.ids_to_tokens(tokenizer.encode(text))


def test_next_tokens_and_step_match_keras(saved):
    _, tokenizer, model, loaded = saved
    res = loaded.signatures["next_tokens"](text=tf.constant(["the cat", "a big red"]),
                                           k=tf.constant(3))
    assert res["tokens"].shape == (2, 3)
    for i, text in enumerate(["the cat", "a big red"]):
        _, logits = _keras_logp(model, tokenizer, text)
        probs = np.exp(logits[-1] - logits[-1].max())
        probs /= probs.sum()
        np.testing.assert_allclose(res["probs"][i].numpy(), np.sort(probs)[::-1][:3],
                                   atol=1e-5)
    # the step signature, streamed with its own state
    g = LMGraphs(model)
    ids = tokenizer.encode("the cat sat on the mat")
    ref = np.asarray(model.clone_for_batch(1, stateful=False)(ids[None]))[0]
    states = {n: tf.zeros((1, g.units)) for n in g.state_names}
    for t, token in enumerate(ids):
        out = loaded.signatures["step"](token=tf.constant([token], tf.int32), **states)
        states = {n: out[n] for n in g.state_names}
        np.testing.assert_allclose(out["logits"][0].numpy(), ref[t], atol=1e-5)


def test_generate_is_seeded_and_batched(saved):
    _, tokenizer, _, loaded = saved
    args = dict(prompt=tf.constant(["the cat", "a dog"]), max_tokens=tf.constant(6),
                temperature=tf.constant(0.8), top_k=tf.constant(4), seed=tf.constant(7))
    a = loaded.signatures["generate"](**args)
    b = loaded.signatures["generate"](**args)
    assert a["ids"].shape == (2, 6)
    np.testing.assert_array_equal(a["ids"].numpy(), b["ids"].numpy())
    assert a["text"].shape == (2,)
    words = a["text"][0].numpy().decode().split()
    assert all(w in tokenizer.vocab for w in words)


def test_out_dir_must_be_new_empty_or_an_earlier_saved_model(tmp_path):
    from keras_seq.errors import KerasSeqError
    from keras_seq.export.saved_model import prepare_saved_model_dir

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(KerasSeqError, match="is not a SavedModel; choose another --out"):
        prepare_saved_model_dir(other)
    assert (other / "notes.txt").read_text() == "keep me"
    earlier = tmp_path / "earlier"
    (earlier / "variables").mkdir(parents=True)
    (earlier / "saved_model.pb").write_bytes(b"old")
    assert not prepare_saved_model_dir(earlier).exists()  # replaced by the new export
    (tmp_path / "empty").mkdir()
    assert prepare_saved_model_dir(tmp_path / "empty") == tmp_path / "empty"
