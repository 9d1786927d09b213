"""Every request field has a declared range (``keras_seq.serving.codec.request_fields``),
checked before the model runs: over real HTTP, a value outside it (or of the wrong JSON
type) is a 400 in TF Serving's ``{"error": …}`` naming the input, the value and the range;
values on and inside the bounds are still answered 200."""

from __future__ import annotations

import base64
import json

import pytest

from keras_seq.serving.app import ServeConfig
from keras_seq.serving.codec import Limits, request_fields, vocab_size
from tests.fixtures.serving import ThreadServer, http, model_base

LIMITS = Limits(max_instances=4, max_text_length=50, max_generated_tokens=8, max_k=20)
NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = ServeConfig(str(model_base(tmp_path_factory)), poll_interval=0,
                         batch_timeout_ms=1.0, limits=LIMITS)
    with ThreadServer(config) as srv:
        step = srv.app.state.registry.get("lm").signatures["step"]
        srv.vocab = vocab_size(step)
        srv.states = {n: s.shape[1] for n, s in step.inputs.items() if n != "token"}
        yield srv


def _body(server, signature, field=None, value=None):
    """A valid request of ``signature`` with ``field`` set to ``value`` (the state inputs
    of step: every element)."""
    inputs = {
        "score": {"text": ["the cat"]},
        "next_tokens": {"text": ["the cat"], "k": 3},
        "generate": {"prompt": ["the"], "max_tokens": 2, "temperature": 1.0, "top_k": 3,
                     "seed": 1},
        "step": {"token": [1], **{n: [[0.0] * u] for n, u in server.states.items()}},
    }[signature]
    if field is not None:
        if field in server.states:
            value = [[value] * server.states[field]]
        elif field in ("text", "prompt", "token"):
            value = [value]
        inputs[field] = value
    return {"signature_name": signature, "inputs": inputs}


def predict(server, body):
    # allow_nan: NaN and Infinity are what a careless client's JSON encoder sends
    return http.post(server.url + "/v1/models/lm:predict", timeout=30,
                      content=json.dumps(body, allow_nan=True),
                      headers={"Content-Type": "application/json"})


V = "VOCAB"  # replaced by the model's vocabulary size
TEXT = 'a string (or {"b64": …}) of at most 50 characters'
OUT_OF_RANGE = [
    # (signature, field, value, what the message must say of the range)
    ("next_tokens", "k", 0, "an integer from 1 to 20"),
    ("next_tokens", "k", -3, "an integer from 1 to 20"),
    ("next_tokens", "k", 21, "an integer from 1 to 20"),
    ("next_tokens", "k", 2**40, "an integer from 1 to 20"),
    ("next_tokens", "k", "3", "an integer from 1 to 20"),
    ("next_tokens", "k", 2.5, "an integer from 1 to 20"),
    ("next_tokens", "k", True, "an integer from 1 to 20"),
    ("next_tokens", "k", None, "an integer from 1 to 20"),
    ("next_tokens", "text", "a" * 51, TEXT),
    ("next_tokens", "text", 7, TEXT),
    ("generate", "max_tokens", 0, "an integer from 1 to 8"),
    ("generate", "max_tokens", 9, "an integer from 1 to 8"),
    ("generate", "max_tokens", 10**6, "an integer from 1 to 8"),
    ("generate", "temperature", NAN, "a finite number from 0 to 1000000"),
    ("generate", "temperature", INF, "a finite number from 0 to 1000000"),
    ("generate", "temperature", -INF, "a finite number from 0 to 1000000"),
    ("generate", "temperature", -0.5, "a finite number from 0 to 1000000"),
    ("generate", "temperature", 1e7, "a finite number from 0 to 1000000"),
    ("generate", "temperature", 1e39, "a finite number from 0 to 1000000"),
    ("generate", "temperature", "1.0", "a finite number from 0 to 1000000"),
    ("generate", "top_k", -1, "an integer from 0 to 20"),
    ("generate", "top_k", 21, "an integer from 0 to 20"),
    ("generate", "top_k", -(2**31), "an integer from 0 to 20"),
    ("generate", "seed", -1, "an integer from 0 to 2147483647"),
    ("generate", "seed", 2**31, "an integer from 0 to 2147483647"),
    ("generate", "seed", 1.5, "an integer from 0 to 2147483647"),
    ("generate", "prompt", "a" * 51, TEXT),
    ("generate", "prompt", {"b64": base64.b64encode(b"a" * 51).decode()}, TEXT),
    ("step", "token", -1, f"an integer in [0, {V})"),
    ("step", "token", V, f"an integer in [0, {V})"),
    ("step", "token", 10**6, f"an integer in [0, {V})"),
    ("step", "token", 1.0, f"an integer in [0, {V})"),
    ("step", "h0", NAN, "a finite number from -3.40282e+38 to 3.40282e+38"),
    ("step", "h0", INF, "a finite number from -3.40282e+38 to 3.40282e+38"),
    ("step", "c0", -1e39, "a finite number from -3.40282e+38 to 3.40282e+38"),
    ("step", "c0", "0", "a finite number from -3.40282e+38 to 3.40282e+38"),
    ("score", "text", "a" * 51, TEXT),
    ("score", "text", None, TEXT),
]


def _id(case):
    signature, field, value, _ = case
    return f"{signature}.{field}={str(value)[:12]}"


@pytest.mark.parametrize("case", OUT_OF_RANGE, ids=[_id(c) for c in OUT_OF_RANGE])
def test_out_of_range_is_400_naming_the_field(server, case):
    signature, field, value, expected = case
    value = server.vocab if value == V else value
    expected = expected.replace(V, str(server.vocab))
    r = predict(server, _body(server, signature, field, value))
    assert r.status_code == 400, (case, r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    message = r.json()["error"]
    assert set(r.json()) == {"error"}
    assert message.startswith(f"input '{field}': got "), message  # names the field
    assert f"expected {expected}" in message, message  # and the range
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert json.dumps(value, allow_nan=True) in message, message  # and the value


IN_RANGE = [
    ("next_tokens", "k", 1), ("next_tokens", "k", 20), ("next_tokens", "text", "a" * 50),
    ("next_tokens", "text", ""), ("generate", "max_tokens", 1), ("generate", "max_tokens", 8),
    ("generate", "temperature", 0), ("generate", "temperature", 0.0),
    ("generate", "temperature", 1e6), ("generate", "temperature", 1),
    ("generate", "top_k", 0), ("generate", "top_k", 20), ("generate", "seed", 0),
    ("generate", "seed", 2**31 - 1), ("generate", "prompt", {"b64": "YWJj"}),
    ("step", "token", 0), ("step", "token", V), ("step", "h0", -1e30), ("step", "c0", 3),
    ("score", "text", "a" * 50),
]


@pytest.mark.parametrize("case", IN_RANGE, ids=[_id((*c, None)) for c in IN_RANGE])
def test_in_range_values_are_answered(server, case):
    signature, field, value = case
    value = server.vocab - 1 if value == V else value  # the last id of the vocabulary
    body = _body(server, signature, field, value)
    r = predict(server, body)
    assert r.status_code == 200, (case, r.status_code, r.text[:300])
    outputs = r.json()["outputs"]
    if signature == "next_tokens":  # k tokens per text (the whole vocabulary at most)
        assert len(outputs["ids"][0]) == min(body["inputs"]["k"], server.vocab)
    if signature == "generate":
        assert len(outputs["ids"][0]) == body["inputs"]["max_tokens"]
    if signature == "step":
        assert len(outputs["logits"][0]) == server.vocab


def test_every_input_of_every_signature_has_a_declared_range(server):
    """Each keras-seq signature input is in the table, with the signature's dtype; only
    step's recurrent states (any finite float32) fall back to their dtype's range."""
    table = request_fields(LIMITS, server.vocab)
    servable = server.app.state.registry.get("lm")
    for name, sig in servable.signatures.items():
        for key, spec in sig.inputs.items():
            if name == "step" and key in server.states:
                assert spec.dtype == "float32" and key not in table
                continue
            assert key in table, (name, key)
            assert table[key].dtype == spec.dtype, (name, key, spec.dtype)

