"""Fuzz the running server from its own OpenAPI spec (schemathesis, bounded): no 5xx; and
every request field with values in and out of its declared range: 200 only for requests
whose every value is in range, else a 400 naming the field; the server is still healthy
and correct afterwards."""

from __future__ import annotations

import json
import math

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from keras_seq.serving.app import ServeConfig
from keras_seq.serving.codec import Limits, field_of, request_fields, vocab_size
from tests.fixtures.serving import ThreadServer, http, model_base

MAX_EXAMPLES = 8  # per operation: 9 operations → at most 72 spec-driven cases
MAX_FIELD_EXAMPLES = 120  # requests with every field drawn in and out of its range
LIMITS = Limits(max_instances=8, max_text_length=200, max_generated_tokens=16, max_k=50)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    config = ServeConfig(str(model_base(tmp_path_factory)), poll_interval=0,
                         batch_timeout_ms=1.0, request_timeout_s=20, limits=LIMITS)
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


# -- every request field, in and out of its declared range ----------------------------------
FUZZED = ("score", "next_tokens", "generate", "step")  # serving_default is score


def _fields(server, signature):
    """The declared range (``request_fields``) of each input of ``signature``."""
    sig = server.app.state.registry.get("lm").signatures[signature]
    table = request_fields(LIMITS, vocab_size(sig))
    return sig, {key: field_of(spec, table, LIMITS) for key, spec in sig.inputs.items()}


def _in_range_values(field):
    r = field.range
    if field.kind == "text":
        return st.text(max_size=min(40, int(r.high)))
    if field.kind == "integer":
        return st.integers(int(r.low), int(r.high) - (1 if r.high_open else 0))
    return st.floats(r.low, r.high, allow_nan=False)


def _any_values(field):
    """On, inside and past the bounds of the field's range, and of other JSON types."""
    r = field.range
    wrong_types = st.sampled_from(["3", True, None, {"x": 1}, 2.0, 7])
    if field.kind == "text":
        n = int(r.high)
        return st.one_of(st.integers(n - 2, n + 2).map(lambda k: "x" * k), wrong_types)
    if field.kind == "integer":
        lo, hi = int(r.low), int(r.high)
        return st.one_of(st.integers(lo - 3, lo + 3), st.integers(hi - 3, hi + 3),
                         st.integers(-(2**63), 2**63), wrong_types)
    return st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(r.low - 1, r.low + 1), st.floats(r.high * 0.999, r.high * 1.001),
                     st.sampled_from([float("nan"), float("inf"), -float("inf")]),
                     wrong_types)


def _nested(shape, leaf):
    """A nested list of ``shape`` (None: 1 to 3 rows) with leaves from ``leaf``."""
    if not shape:
        return leaf
    inner = _nested(shape[1:], leaf)
    size = dict(min_size=1, max_size=3) if shape[0] is None else \
        dict(min_size=shape[0], max_size=shape[0])
    return st.lists(inner, **size)


def _request(server, signature):
    """A columnar request of ``signature`` with every input drawn from its field."""
    sig, fields = _fields(server, signature)
    inputs = {}
    for key, spec in sig.inputs.items():
        field = fields[key]
        leaf = st.one_of(_in_range_values(field), _any_values(field))
        if len(spec.shape) == 2:  # step's states: mostly zeros, so one bad value stands out
            leaf = st.one_of(st.just(0.0), st.just(0.0), leaf)
        inputs[key] = _nested(spec.shape, leaf)
    return st.fixed_dictionaries({"signature_name": st.just(signature),
                                  "inputs": st.fixed_dictionaries(inputs)})


def _leaves(value):
    if isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _in_range(value, field) -> bool:
    """The oracle, written from the field's declared kind and range alone."""
    if field.kind == "text":
        return isinstance(value, str) and len(value) in field.range
    if isinstance(value, bool):
        return False
    if field.kind == "integer":
        return isinstance(value, int) and value in field.range
    return isinstance(value, (int, float)) and math.isfinite(value) and value in field.range


@pytest.fixture(scope="module")
def bodies(fuzz_server):
    return st.sampled_from(FUZZED).flatmap(lambda name: _request(fuzz_server, name))


def test_fuzz_every_field_in_and_out_of_range(fuzz_server, bodies):
    """Every input of every signature, drawn from on, inside and past its declared range
    and from other JSON types: 200 only when every value is in range, else a 400 naming
    an input that is out of it (before the model runs)."""

    @given(body=bodies)
    @settings(max_examples=MAX_FIELD_EXAMPLES, deadline=None, derandomize=True,
              database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def check(body):
        _, fields = _fields(fuzz_server, body["signature_name"])
        bad = sorted(key for key, value in body["inputs"].items()
                     if not all(_in_range(v, fields[key]) for v in _leaves(value)))
        r = http.post(fuzz_server.url + "/v1/models/lm:predict", timeout=30,
                       content=json.dumps(body, allow_nan=True))
        fuzz_server.seen.append(r.status_code)
        if bad:
            assert r.status_code == 400, (bad, body, r.status_code, r.text[:300])
            error = r.json()["error"]
            assert any(error.startswith(f"input '{key}': got ") for key in bad), (bad, error)
            assert " expected " in error, error
        else:
            assert r.status_code == 200, (body, r.status_code, r.text[:300])
            texts = body["inputs"].get("text") or body["inputs"].get("prompt") or [0]
            for column in r.json()["outputs"].values():
                assert len(column) == len(texts)

    check()


def test_still_healthy_after_fuzz(fuzz_server):
    assert fuzz_server.seen, "the fuzz test did not run"
    assert max(fuzz_server.seen) < 500
    assert http.get(fuzz_server.url + "/healthz").status_code == 200
    r = http.post(fuzz_server.url + "/v1/models/lm:predict",
                   json={"signature_name": "next_tokens", "inputs": {"text": ["the"], "k": 2}})
    assert r.status_code == 200 and len(r.json()["outputs"]["ids"][0]) == 2
    counts = {code: fuzz_server.seen.count(code) for code in sorted(set(fuzz_server.seen))}
    print(f"fuzz: {len(fuzz_server.seen)} requests, statuses {counts}")
