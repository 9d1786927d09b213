"""Fuzz the running server from its own OpenAPI spec (schemathesis, bounded): no 5xx, and
the server is still healthy and correct afterwards."""

from __future__ import annotations

import math

import httpx
import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from test_serving_common import ThreadServer, model_base

from keras_seq.serving.app import ServeConfig
from keras_seq.serving.codec import Limits

MAX_EXAMPLES = 8  # per operation: 9 operations → at most 72 spec-driven cases (+ 40 below)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    config = ServeConfig(str(model_base(tmp_path_factory)), poll_interval=0,
                         batch_timeout_ms=1.0, request_timeout_s=20,
                         limits=Limits(max_instances=8, max_text_length=200,
                                       max_generated_tokens=16))
    with ThreadServer(config) as srv:
        srv.seen = []
        yield srv


def _operations(url):
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_fuzz_openapi_no_server_errors(fuzz_server):
    """Every operation of the spec, positive and negative (schema-violating) cases.

    (schemathesis's own pytest integration, ``from_fixture``, does not run on pytest 9 —
    ``Function._nodeid`` is gone — so the cases are drawn from its strategies here.)"""
    operations = _operations(fuzz_server.url)
    assert sorted(op.label for op in operations) == sorted([
        "GET /healthz", "GET /v1/models/{model_name}",
        "GET /v1/models/{model_name}/versions/{version}",
        "GET /v1/models/{model_name}/metadata",
        "GET /v1/models/{model_name}/versions/{version}/metadata",
        "POST /v1/models/{model_name}:predict",
        "POST /v1/models/{model_name}/versions/{version}:predict",
        "POST /v1/models/{model_name}:classify",
        "POST /v1/models/{model_name}/versions/{version}:classify"])
    for op in operations:
        strategy = st.one_of(op.as_strategy(GenerationMode.POSITIVE),
                             op.as_strategy(GenerationMode.NEGATIVE))

        @given(case=strategy)
        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case):
            response = case.call(base_url=fuzz_server.url, timeout=30)
            fuzz_server.seen.append(response.status_code)
            assert response.status_code < 500, (case.method, case.formatted_path, case.body,
                                                response.status_code, response.text[:300])
            if response.status_code >= 400:
                assert set(response.json()) == {"error"}

        check()


_TEXT = st.text(max_size=60)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_SCORE = st.fixed_dictionaries({"instances": st.lists(_TEXT, min_size=1, max_size=4)})
_NEXT = st.fixed_dictionaries({
    "signature_name": st.just("next_tokens"),
    "inputs": st.fixed_dictionaries({"text": st.lists(_TEXT, min_size=1, max_size=4),
                                     "k": st.integers(-5, 2000)})})
_GENERATE = st.fixed_dictionaries({
    "signature_name": st.just("generate"),
    "inputs": st.fixed_dictionaries({"prompt": st.lists(_TEXT, min_size=1, max_size=2),
                                     "max_tokens": st.integers(-2, 20),
                                     "temperature": st.floats(allow_nan=True),
                                     "top_k": _INT32, "seed": _INT32})})


@given(body=st.one_of(_SCORE, _NEXT, _GENERATE))
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
def test_fuzz_model_inputs(fuzz_server, body):
    """Arbitrary Unicode text and argument values reach the model: 200 or a 4xx."""
    import json

    r = httpx.post(fuzz_server.url + "/v1/models/lm:predict", content=json.dumps(body),
                   timeout=30)
    fuzz_server.seen.append(r.status_code)
    reasons = _rejections(body)
    if reasons:
        assert r.status_code == 400, (body, r.status_code, r.text[:300])
        assert any(reason in r.json()["error"] for reason in reasons), (reasons, r.text)
    else:
        assert r.status_code == 200, (body, r.status_code, r.text[:300])
        if "instances" in body:  # score: one prediction per text
            assert len(r.json()["predictions"]) == len(body["instances"])
        else:  # one output row per text or prompt
            texts = body["inputs"].get("text") or body["inputs"]["prompt"]
            for column in r.json()["outputs"].values():
                assert len(column) == len(texts)


def _rejections(body) -> list[str]:
    """The error messages the server must answer ``body`` with (empty: it must succeed).

    The limits of ``fuzz_server`` (max 8 rows, 200 characters, 16 generated tokens) and
    the value checks of the keras-seq signatures; every generated text is short enough
    and any text, even one without tokens, can be scored.
    """
    inputs = body.get("inputs", {})
    name = body.get("signature_name")
    reasons = []
    if name == "next_tokens" and inputs["k"] > 1000:
        reasons.append("k must be at most 1000")
    if name == "generate":
        if not 1 <= inputs["max_tokens"] <= 16:
            reasons.append("max_tokens must be between 1 and 16")
        t = inputs["temperature"]
        with np.errstate(over="ignore"):  # the server reads it as float32
            t32 = np.float32(t) if math.isfinite(t) else np.float32("nan")
        if math.isfinite(t) and not np.isfinite(t32):
            reasons.append("'temperature' has values out of range for float32")
        elif not (np.isfinite(t32) and 0 <= t32 <= 1e6):
            reasons.append("temperature must be a finite number ≥ 0")
    return reasons


def test_still_healthy_after_fuzz(fuzz_server):
    assert fuzz_server.seen, "the fuzz test did not run"
    assert max(fuzz_server.seen) < 500
    assert httpx.get(fuzz_server.url + "/healthz").status_code == 200
    r = httpx.post(fuzz_server.url + "/v1/models/lm:predict",
                   json={"signature_name": "next_tokens", "inputs": {"text": ["the"], "k": 2}})
    assert r.status_code == 200 and len(r.json()["outputs"]["ids"][0]) == 2
    counts = {code: fuzz_server.seen.count(code) for code in sorted(set(fuzz_server.seen))}
    print(f"fuzz: {len(fuzz_server.seen)} requests, statuses {counts}")
