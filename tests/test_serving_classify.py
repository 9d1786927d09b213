"""TF Serving's Classify REST API (``:classify``) over real HTTP on loopback, against an
exported tiny classifier: results equal the SavedModel's, errors are {"error": ...} with
the same limits and auth as :predict, and an LM model (no classify signature) gets a 400."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import tensorflow as tf

from keras_seq.serving.app import ServeConfig
from keras_seq.serving.codec import Limits
from keras_seq.serving.layout import publish_saved_model
from tests.fixtures.classify_runs import classifier_saved_model
from tests.fixtures.serving import ThreadServer, http, saved_model

TOKEN = "classify-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TEXTS = ["the movie was not good", "zzqx unknown words!", "", "Great, really great."]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("classify_models")
    publish_saved_model(classifier_saved_model(tmp_path_factory), base, "clf", 1)
    publish_saved_model(saved_model(tmp_path_factory), base, "lm", 1)
    config = ServeConfig(str(base), poll_interval=0, batch_timeout_ms=20.0, token=TOKEN,
                         max_body_bytes=20_000,
                         limits=Limits(max_instances=6, max_text_length=60))
    with ThreadServer(config) as srv:
        yield srv


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The classify signature called directly."""
    return tf.saved_model.load(str(classifier_saved_model(tmp_path_factory)))


def post(server, path, body=None, raw=None, headers=AUTH):
    content = raw if raw is not None else json.dumps(body)
    return http.post(server.url + path, content=content, timeout=30,
                      headers={"Content-Type": "application/json", **(headers or {})})


def expect_error(r, status, fragment):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"} and fragment in body["error"], body


def expected_results(reference, texts):
    out = reference.signatures["classify"](inputs=tf.constant(texts))
    return [[[label.decode(), float(score)] for label, score in zip(lrow, srow)]
            for lrow, srow in zip(out["labels"].numpy(), out["scores"].numpy())]


def check_results(got, want):
    assert len(got) == len(want)
    for g_row, w_row in zip(got, want):
        assert [label for label, _ in g_row] == [label for label, _ in w_row]
        np.testing.assert_allclose([s for _, s in g_row], [s for _, s in w_row], atol=1e-6)
        scores = [s for _, s in g_row]
        assert scores == sorted(scores, reverse=True)


def test_classify_happy_path(server, reference):
    want = expected_results(reference, TEXTS)
    body = {"examples": [{"inputs": t} for t in TEXTS]}
    for path in ("/v1/models/clf:classify", "/v1/models/clf/versions/1:classify"):
        r = post(server, path, body)
        assert r.status_code == 200, r.text
        assert set(r.json()) == {"results"}
        check_results(r.json()["results"], want)
    # "text" as the feature name, one-value feature lists, b64, an explicit signature
    r = post(server, "/v1/models/clf:classify", {
        "signature_name": "classify",
        "examples": [{"text": TEXTS[0]}, {"inputs": [TEXTS[1]]},
                     {"inputs": {"b64": "R3JlYXQsIHJlYWxseSBncmVhdC4="}}]})
    assert r.status_code == 200, r.text
    check_results(r.json()["results"], [want[0], want[1], want[3]])
    # the same model through :predict (serving_default is the classify function)
    r = post(server, "/v1/models/clf:predict", {"instances": TEXTS[:2]})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    assert [p["labels"] for p in preds] == [[label for label, _ in row] for row in want[:2]]


def test_classify_concurrent_calls_are_batched(server, reference):
    want = expected_results(reference, TEXTS)
    results, errors = {}, []

    def call(i):
        try:
            r = post(server, "/v1/models/clf:classify", {"examples": [{"inputs": TEXTS[i]}]})
            results[i] = r
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(TEXTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for i, r in results.items():
        assert r.status_code == 200, r.text
        check_results(r.json()["results"], [want[i]])
    stats = http.get(server.url + "/healthz").json()["batching"]
    assert stats["batched_requests"] >= len(TEXTS)


@pytest.mark.parametrize("body,fragment", [
    ({"instances": ["a"]}, "unexpected key(s) ['instances']"),
    ({}, "\"examples\" must be a non-empty list"),
    ({"examples": []}, "\"examples\" must be a non-empty list"),
    ({"examples": "the film"}, "\"examples\" must be a non-empty list"),
    ({"examples": ["the film"]}, "example 0 must be an object"),
    ({"examples": [{"inputs": "a", "text": "b"}]}, "example 0 must be an object"),
    ({"examples": [{"review": "a"}]}, "example 0 must be an object"),
    ({"examples": [{"inputs": 3}]}, "input 'inputs': got 3 (an integer), expected a string"),
    ({"examples": [{"inputs": ["a", "b"]}]}, "input 'inputs': got [\"a\", \"b\"] (a list)"),
    ({"examples": [{"text": None}]}, "input 'inputs': got null, expected a string"),
    ({"examples": [{"inputs": {"b64": "YWFh" * 22}}]}, "got {\"b64\": …} of 66 bytes, expected"),
    ({"examples": [{"inputs": "a"}], "context": {"lang": "en"}}, "\"context\" features"),
    ({"examples": [{"inputs": "a"}], "signature_name": 3}, "must be a string"),
    ({"examples": [{"inputs": "a"}], "signature_name": "nope"},
     'Serving signature name: "nope" not found'),
    ({"examples": [{"inputs": "a"}] * 7}, "limit of 6 per request"),
    ({"examples": [{"inputs": "a" * 61}]},
     "input 'inputs': got a string of 61 characters, expected a string (or {\"b64\": …}) of "
     "at most 60 characters"),
    ([{"inputs": "a"}], "must be a JSON object"),
])
def test_classify_bad_bodies(server, body, fragment):
    expect_error(post(server, "/v1/models/clf:classify", body), 400, fragment)


def test_classify_malformed_limits_and_auth(server):
    expect_error(post(server, "/v1/models/clf:classify", raw=b"{not json"), 400,
                 "JSON Parse error")
    expect_error(post(server, "/v1/models/clf:classify", raw=b"x" * 30_000), 413,
                 "--max-body-bytes")
    expect_error(post(server, "/v1/models/clf:classify", {"examples": [{"inputs": "a"}]},
                      headers={}), 401, "bearer token")
    expect_error(post(server, "/v1/models/clf:classify", {"examples": [{"inputs": "a"}]},
                      headers={"Authorization": "Bearer wrong"}), 401, "bearer token")
    expect_error(post(server, "/v1/models/nope:classify", {"examples": [{"inputs": "a"}]}),
                 404, "Servable not found for request: Latest(nope)")
    expect_error(post(server, "/v1/models/clf/versions/7:classify",
                      {"examples": [{"inputs": "a"}]}), 404, "Specific(clf, 7)")
    expect_error(post(server, "/v1/models/clf/versions/x:classify",
                      {"examples": [{"inputs": "a"}]}), 400, "version")
    # GET still reaches the model-status route, as before :classify existed
    r = http.get(server.url + "/v1/models/clf:classify", headers=AUTH)
    expect_error(r, 404, "Could not find any versions")


def test_classify_on_lm_is_a_400(server):
    r = post(server, "/v1/models/lm:classify", {"examples": [{"inputs": "the cat"}]})
    expect_error(r, 400, "has no classify signature")
    assert "keras-seq export classifier" in r.json()["error"]
    assert "score" in r.json()["error"]  # lists the signatures the model does have
    r = post(server, "/v1/models/lm:classify", {"signature_name": "score",
                                                "examples": [{"inputs": "the cat"}]})
    expect_error(r, 400, "'score' is not a classify signature")
    # :predict on the LM is unaffected
    r = post(server, "/v1/models/lm:predict", {"instances": ["the cat"]})
    assert r.status_code == 200, r.text


def test_openapi_lists_classify(server):
    spec = http.get(server.url + "/openapi.json").json()
    assert "/v1/models/{model_name}:classify" in spec["paths"]
    assert "/v1/models/{model_name}/versions/{version}:classify" in spec["paths"]
