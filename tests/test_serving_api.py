"""The REST server over real HTTP on loopback: every endpoint in TF Serving's JSON, both
request formats, dynamic batching, several models, version pick-up while running."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest
import tensorflow as tf

from keras_seq.serving.app import ServeConfig
from keras_seq.serving.layout import list_versions, publish_saved_model
from tests.fixtures.serving import ThreadServer, http, model_base, saved_model


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = model_base(tmp_path_factory, names=("lm", "lm2"))
    config = ServeConfig(str(base), poll_interval=0.2, batch_timeout_ms=30.0,
                         max_batch_size=8)
    with ThreadServer(config) as srv:
        srv.base = base
        yield srv


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The SavedModel called directly (what TF Serving would run)."""
    return tf.saved_model.load(str(saved_model(tmp_path_factory)))


def post(server, path, body):
    # Exactly what a TF Serving client sends: JSON in a POST to …:predict.
    return http.post(server.url + path, content=json.dumps(body),
                      headers={"Content-Type": "application/json"}, timeout=30)


def test_model_status(server):
    r = http.get(server.url + "/v1/models/lm")
    assert r.status_code == 200
    assert r.json() == {"model_version_status": [{
        "version": "1", "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""}}]}
    r = http.get(server.url + "/v1/models/lm/versions/1")
    assert r.status_code == 200 and r.json()["model_version_status"][0]["version"] == "1"


def test_metadata_lists_signature_defs(server):
    for path in ("/v1/models/lm/metadata", "/v1/models/lm/versions/1/metadata"):
        r = http.get(server.url + path)
        assert r.status_code == 200
        meta = r.json()
        assert meta["model_spec"] == {"name": "lm", "signature_name": "", "version": "1"}
        defs = meta["metadata"]["signature_def"]["signature_def"]
        assert {"score", "next_tokens", "generate", "step", "serving_default"} <= set(defs)
        text = defs["next_tokens"]["inputs"]["text"]
        assert text["dtype"] == "DT_STRING"
        assert text["tensor_shape"]["dim"] == [{"size": "-1", "name": ""}]
        assert defs["next_tokens"]["inputs"]["k"]["tensor_shape"]["dim"] == []
        assert defs["score"]["method_name"] == "tensorflow/serving/predict"


def test_healthz_and_openapi(server):
    r = http.get(server.url + "/healthz")
    assert r.status_code == 200 and r.json()["models"]["lm"] == 1
    spec = http.get(server.url + "/openapi.json").json()
    assert "/v1/models/{model_name}:predict" in spec["paths"]
    assert "/v1/models/{model_name}/versions/{version}:predict" in spec["paths"]


def test_score_row_format_matches_saved_model(server, reference):
    texts = ["the cat sat on a mat", "a dog"]
    r = post(server, "/v1/models/lm:predict", {"instances": texts})  # serving_default
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    want = reference.signatures["score"](text=tf.constant(texts))
    assert [p["lengths"] for p in preds] == want["lengths"].numpy().tolist()
    np.testing.assert_allclose([p["perplexity"] for p in preds], want["perplexity"].numpy(),
                               rtol=1e-5)
    assert preds[0]["tokens"] == ["the", "cat", "sat", "on", "a", "mat"]
    assert preds[1]["tokens"][:2] == ["a", "dog"] and preds[1]["tokens"][2:] == [""] * 4


def test_next_tokens_both_formats(server, reference):
    rows = post(server, "/v1/models/lm:predict", {
        "signature_name": "next_tokens",
        "instances": [{"text": "the cat", "k": 3}, {"text": "a big", "k": 3}]})
    cols = post(server, "/v1/models/lm/versions/1:predict", {
        "signature_name": "next_tokens", "inputs": {"text": ["the cat", "a big"], "k": 3}})
    assert rows.status_code == 200 and cols.status_code == 200, (rows.text, cols.text)
    want = reference.signatures["next_tokens"](text=tf.constant(["the cat", "a big"]),
                                               k=tf.constant(3))
    outputs = cols.json()["outputs"]
    assert outputs["ids"] == want["ids"].numpy().tolist()
    assert outputs["tokens"] == [[t.decode() for t in row] for row in want["tokens"].numpy()]
    preds = rows.json()["predictions"]
    assert [p["ids"] for p in preds] == outputs["ids"]
    np.testing.assert_allclose([p["probs"] for p in preds], outputs["probs"], rtol=1e-6)


def test_generate_and_step(server, reference):
    body = {"signature_name": "generate", "inputs": {
        "prompt": ["the cat"], "max_tokens": 4, "temperature": 0.8, "top_k": 5, "seed": 7}}
    r = post(server, "/v1/models/lm:predict", body)
    assert r.status_code == 200, r.text
    want = reference.signatures["generate"](
        prompt=tf.constant(["the cat"]), max_tokens=tf.constant(4),
        temperature=tf.constant(0.8), top_k=tf.constant(5), seed=tf.constant(7))
    assert r.json()["outputs"]["ids"] == want["ids"].numpy().tolist()
    state_names = [k for k in reference.signatures["step"].structured_input_signature[1]
                   if k != "token"]
    units = reference.signatures["step"].structured_input_signature[1][state_names[0]].shape[1]
    instance = {"token": 2, **{n: [0.0] * units for n in state_names}}
    r = post(server, "/v1/models/lm:predict", {"signature_name": "step",
                                               "instances": [instance]})
    assert r.status_code == 200, r.text
    pred = r.json()["predictions"][0]
    assert set(pred) == {"logits", *state_names} and len(pred[state_names[0]]) == units


def test_second_model_side_by_side(server):
    r = post(server, "/v1/models/lm2:predict", {"instances": ["the cat"]})
    assert r.status_code == 200 and r.json()["predictions"][0]["lengths"] == 2


@contextmanager
def full_batches_only(server):
    """While inside, a batch runs only once it is full (``max_batch_size`` rows): its timer
    is an hour away. Concurrent calls then meet in one batch however slowly their threads
    start, with no time window to hit; a call that never joins a batch fails on the
    30 s request deadline instead of passing."""
    batcher = server.app.state.batcher
    saved = batcher.timeout_s
    batcher.timeout_s = 3600.0
    try:
        yield batcher
    finally:
        batcher.timeout_s = saved


def concurrently(server, bodies):
    """POST every body from its own thread; the responses, in order, and the batching
    stats before and after."""
    assert len(bodies) == server.config.max_batch_size  # one request short: nothing runs
    before = http.get(server.url + "/healthz").json()["batching"]
    results = [None] * len(bodies)

    def call(i):
        results[i] = post(server, "/v1/models/lm:predict", bodies[i])

    with full_batches_only(server):
        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(bodies))]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
    after = http.get(server.url + "/healthz").json()["batching"]
    assert all(r is not None and r.status_code == 200 for r in results), \
        [r.text if r is not None else None for r in results]
    return results, before, after


def assert_one_batch_of_all(before, after, n):
    # Each call alone (or several small batches) would not make exactly one batch of n.
    assert after["batches"] - before["batches"] == 1, (before, after)
    assert after["batched_requests"] - before["batched_requests"] == n, (before, after)
    assert after["max_requests_per_batch"] == n, after


def test_concurrent_calls_are_batched_and_unchanged(server):
    texts = ["the cat sat on the mat", "a", "dog ran", "the big red dog sat on a log", "cat",
             "a small cat", "mat", "the"]
    alone = {}
    for t in texts:  # one at a time: each its own batch
        alone[t] = post(server, "/v1/models/lm:predict", {"instances": [t]}).json()
    results, before, after = concurrently(server, [{"instances": [t]} for t in texts])
    assert_one_batch_of_all(before, after, len(texts))
    for t, r in zip(texts, results):  # same answer as alone: padding from longer
        got, want = r.json()["predictions"][0], alone[t]["predictions"][0]  # neighbours cut
        assert got["tokens"] == want["tokens"]
        np.testing.assert_allclose(got["log_probs"], want["log_probs"], rtol=1e-5, atol=1e-6)


NEXT_TEXTS = ["the cat", "a", "the big red dog sat on a", "dog ran", "a small", "mat",
              "the cat sat on the", "log and"]


def _next_alone(reference, text, k=3):
    out = reference.signatures["next_tokens"](text=tf.constant([text]), k=tf.constant(k))
    return {name: value.numpy()[0] for name, value in out.items()}


def test_next_tokens_batch_equals_separate_calls_on_the_saved_model(reference):
    # Texts of different lengths in one call: each row's answer is what it gets alone.
    batch = reference.signatures["next_tokens"](text=tf.constant(NEXT_TEXTS),
                                                k=tf.constant(3))
    assert batch["ids"].shape == (len(NEXT_TEXTS), 3)
    for i, text in enumerate(NEXT_TEXTS):
        alone = _next_alone(reference, text)
        assert batch["ids"][i].numpy().tolist() == alone["ids"].tolist(), text
        assert batch["tokens"][i].numpy().tolist() == alone["tokens"].tolist(), text
        np.testing.assert_allclose(batch["probs"][i].numpy(), alone["probs"], rtol=1e-5,
                                   atol=1e-7)


def test_concurrent_next_tokens_share_a_batch_and_match_separate_calls(server, reference):
    bodies = [{"signature_name": "next_tokens", "inputs": {"text": [t], "k": 3}}
              for t in NEXT_TEXTS]
    results, before, after = concurrently(server, bodies)
    assert_one_batch_of_all(before, after, len(NEXT_TEXTS))
    for text, r in zip(NEXT_TEXTS, results):
        got, want = r.json()["outputs"], _next_alone(reference, text)
        assert got["ids"] == [want["ids"].tolist()], text
        assert got["tokens"] == [[t.decode() for t in want["tokens"]]], text
        np.testing.assert_allclose(got["probs"][0], want["probs"], rtol=1e-5, atol=1e-7)


def test_new_version_is_picked_up(server, tmp_path_factory):
    target = publish_saved_model(saved_model(tmp_path_factory), server.base, "lm")
    assert target.name == "2" and list_versions(server.base / "lm") == [1, 2]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = http.get(server.url + "/v1/models/lm").json()["model_version_status"]
        if status[0] == {"version": "2", "state": "AVAILABLE",
                         "status": {"error_code": "OK", "error_message": ""}}:
            break
        time.sleep(0.2)
    assert status[0]["version"] == "2" and status[0]["state"] == "AVAILABLE", status
    assert status[1]["version"] == "1" and status[1]["state"] == "END"
    r = post(server, "/v1/models/lm/versions/2:predict", {"instances": ["the cat"]})
    assert r.status_code == 200
    assert http.get(server.url + "/v1/models/lm/metadata").json()["model_spec"]["version"] \
        == "2"
    r = post(server, "/v1/models/lm/versions/1:predict", {"instances": ["the cat"]})
    assert r.status_code == 404
    assert r.json() == {"error": "Servable not found for request: Specific(lm, 1)"}
