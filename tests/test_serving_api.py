"""The REST server over real HTTP on loopback: every endpoint in TF Serving's JSON, both
request formats, dynamic batching, several models, version pick-up while running."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest
import tensorflow as tf
from test_serving_common import ThreadServer, model_base, saved_model

from keras_seq.serving.app import ServeConfig
from keras_seq.serving.layout import list_versions, publish_saved_model


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
    return httpx.post(server.url + path, content=json.dumps(body),
                      headers={"Content-Type": "application/json"}, timeout=30)


def test_model_status(server):
    r = httpx.get(server.url + "/v1/models/lm")
    assert r.status_code == 200
    assert r.json() == {"model_version_status": [{
        "version": "1", "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""}}]}
    r = httpx.get(server.url + "/v1/models/lm/versions/1")
    assert r.status_code == 200 and r.json()["model_version_status"][0]["version"] == "1"


def test_metadata_lists_signature_defs(server):
    for path in ("/v1/models/lm/metadata", "/v1/models/lm/versions/1/metadata"):
        r = httpx.get(server.url + path)
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
    r = httpx.get(server.url + "/healthz")
    assert r.status_code == 200 and r.json()["models"]["lm"] == 1
    spec = httpx.get(server.url + "/openapi.json").json()
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


def test_concurrent_calls_are_batched_and_unchanged(server):
    texts = ["the cat sat on the mat", "a", "dog ran", "the big red dog sat on a log", "cat",
             "a small cat", "mat", "the"]
    alone = {}
    for t in texts:  # one at a time: each its own batch
        alone[t] = post(server, "/v1/models/lm:predict", {"instances": [t]}).json()
    before = httpx.get(server.url + "/healthz").json()["batching"]
    results, barrier = {}, threading.Barrier(len(texts))

    def call(t):
        barrier.wait()
        results[t] = post(server, "/v1/models/lm:predict", {"instances": [t]})

    threads = [threading.Thread(target=call, args=(t,)) for t in texts]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    after = httpx.get(server.url + "/healthz").json()["batching"]
    assert all(r.status_code == 200 for r in results.values())
    for t in texts:  # same answer as alone: padding from longer neighbours is cut off
        got, want = results[t].json()["predictions"][0], alone[t]["predictions"][0]
        assert got["tokens"] == want["tokens"]
        np.testing.assert_allclose(got["log_probs"], want["log_probs"], rtol=1e-5, atol=1e-6)
    batches = after["batches"] - before["batches"]
    assert batches < len(texts), after  # at least two calls shared a batch
    assert after["max_requests_per_batch"] >= 2


def test_new_version_is_picked_up(server, tmp_path_factory):
    target = publish_saved_model(saved_model(tmp_path_factory), server.base, "lm")
    assert target.name == "2" and list_versions(server.base / "lm") == [1, 2]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = httpx.get(server.url + "/v1/models/lm").json()["model_version_status"]
        if status[0] == {"version": "2", "state": "AVAILABLE",
                         "status": {"error_code": "OK", "error_message": ""}}:
            break
        time.sleep(0.2)
    assert status[0]["version"] == "2" and status[0]["state"] == "AVAILABLE", status
    assert status[1]["version"] == "1" and status[1]["state"] == "END"
    r = post(server, "/v1/models/lm/versions/2:predict", {"instances": ["the cat"]})
    assert r.status_code == 200
    assert httpx.get(server.url + "/v1/models/lm/metadata").json()["model_spec"]["version"] \
        == "2"
    r = post(server, "/v1/models/lm/versions/1:predict", {"instances": ["the cat"]})
    assert r.status_code == 404
    assert r.json() == {"error": "Servable not found for request: Specific(lm, 1)"}
