"""TF Serving's predict JSON ↔ numpy arrays, with the server's size limits.

Request (``POST …:predict``)::

    {"signature_name": "next_tokens", "instances": [{"text": "the cat", "k": 3}, …]}  # rows
    {"signature_name": "next_tokens", "inputs": {"text": ["the cat", …], "k": 3}}    # columns

Row format stacks each named input across the instances (they share dim 0). A scalar
input of the signature (``k``, ``max_tokens``, …) has no batch dimension, so TF Serving
rejects it in row format; this server accepts it when every instance gives the same value
(an extension: requests valid for TF Serving mean the same here). Strings are JSON
strings, or ``{"b64": "…"}`` for bytes.

Response: row requests get ``{"predictions": [...]}`` (one entry per row; an object of
named outputs when the signature has several), columnar ones ``{"outputs": {...}}`` (or the
bare value for a single output). String outputs are UTF-8 text, ``{"b64": …}`` for outputs
named ``*_bytes``.

Every value is checked against its field's declared range (:func:`request_fields`, one
table; an input it does not name gets its dtype's range) while it is decoded, before the
model runs: ``k`` from 1 to ``max_k``, ``max_tokens`` from 1 to ``--max-generated-tokens``,
``temperature`` a finite number from 0 to 10⁶, ``top_k`` from 0 (the whole vocabulary) to
``max_k``, ``seed`` from 0 to 2³¹-1, ``token`` ids below the vocabulary size, texts up to
``--max-text-length``, other numbers finite and within their dtype. A value outside (or of
the wrong JSON type) is a 400 naming the input, the value received and the range
expected::

    {"error": "input 'k': got 0, expected an integer from 1 to 1000 (how many of …)"}

Classify (``POST …:classify``, TF Serving's Classify API, for SavedModels written by
``keras-seq export classifier``)::

    {"signature_name": "classify", "examples": [{"inputs": "a text"}, …]}   # request
    {"results": [[["pos", 0.93], ["neg", 0.07]], …]}                          # response

Each example holds one feature, the text (``"inputs"``, the signature's input, or
``"text"``; a string, ``{"b64": …}`` or a one-element list of either). Without
``signature_name`` the ``classify`` signature is used (else ``serving_default``); it must
take one batch of strings and return ``labels`` and ``scores`` ``[N, C]``, already sorted
by score. ``context`` features are not supported (each example carries its own text).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass

import numpy as np

from keras_seq.options import declared_range, field_metadata, number_kind
from keras_seq.ranges import Range
from keras_seq.sampling import SamplingOptions
from keras_seq.serving.errors import ServingError, bad_request
from keras_seq.serving.servable import InputSpec, SignatureInfo


@dataclass(frozen=True)
class Limits:
    max_instances: int = 64  # rows per request
    max_text_length: int = 2000  # characters per string input
    max_generated_tokens: int = 256  # ``max_tokens`` of generate
    max_k: int = 1000  # ``k`` of next_tokens, ``top_k`` of generate


@dataclass
class PredictRequest:
    signature: SignatureInfo
    inputs: dict  # name -> np.ndarray (scalars as 0-d arrays)
    rows: int
    columnar: bool


# ----------------------------------------------------------------------------------------
# The declared range of every request field, checked value by value while decoding

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Field:
    """What one request field accepts: values of ``dtype`` in ``range`` (for strings, their
    length in characters, or bytes for ``{"b64": …}``); ``means`` is said in every error.

    >>> Field("int32", Range(1, 8), "how many").expected()
    'an integer from 1 to 8'
    """

    dtype: str  # the signature input's dtype ("string", "int32", "float32", "bool", …)
    range: Range | None = None  # None: no range (bool)
    means: str = ""

    @property
    def kind(self) -> str:
        return _KINDS.get(self.dtype, "unsupported")

    def expected(self) -> str:
        if self.kind == "text":
            return f"a string (or {{\"b64\": …}}) of at most {self.range.high:g} characters"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "integer":
            return f"an integer {self.range}"
        return f"a finite number {self.range}"


def request_fields(limits: Limits, vocab_size: int | None = None) -> dict[str, Field]:
    """The declared range of every input of the keras-seq signatures, by input name (the
    table the server checks each request against, before the model runs).

    An input that is not here, or whose dtype differs (another SavedModel), gets the range
    of its dtype (:func:`dtype_field`). ``vocab_size`` (the model's, when the signature
    shows it) bounds token ids.

    >>> fields = request_fields(Limits())
    >>> str(fields["k"].range), str(fields["temperature"].range)
    ('from 1 to 1000', 'from 0 to 1000000')
    """
    text = Field("string", Range(0, limits.max_text_length),
                 "a text; the server's --max-text-length")
    ids = Range(0, vocab_size, high_open=True) if vocab_size else Range(0, INT32_MAX)
    return {
        "text": text,  # score, next_tokens (and seq2seq's serving_default)
        "prompt": text,  # generate
        "inputs": text,  # classify, tag (and :classify examples)
        "k": Field("int32", Range(1, limits.max_k),
                   "how many of the most likely next tokens to return, at most the "
                   "server's limit; a k above the vocabulary size returns all of it"),
        "max_tokens": _sampling_field("max_tokens", limits.max_generated_tokens,
                                      "; at most the server's --max-generated-tokens"),
        "temperature": _sampling_field("temperature"),
        "top_k": _sampling_field("top_k", limits.max_k, "; at most the server's limit"),
        "seed": _sampling_field("seed", INT32_MAX, "; an int32"),
        "token": Field("int32", ids, "a token id of the model's vocabulary, below its size"),
        "tokens": Field("int32", ids, "token ids of the model's vocabulary"),
    }


def _sampling_field(name: str, cap: float | None = None, more: str = "") -> Field:
    """The request field of a ``generate`` input from its one declaration,
    :class:`keras_seq.sampling.SamplingOptions` (range and help, the same as ``keras-seq
    generate``'s flag), its top lowered to the server's ``cap``."""
    rng = declared_range(SamplingOptions, name)
    dtype = "int32" if number_kind(SamplingOptions, name) is int else "float32"
    help_text = field_metadata(SamplingOptions, name)["help"]
    return Field(dtype, rng if cap is None else rng.capped(cap), help_text + more)


_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
               "int8": (-128, 127), "uint8": (0, 255), "int16": (-(2**15), 2**15 - 1)}
_FLOAT_MAX = {"float16": 65504.0, "float32": float(np.finfo(np.float32).max),
              "float64": float(np.finfo(np.float64).max), "bfloat16": 3.38e38}
_KINDS = {"string": "text", "bool": "bool", **dict.fromkeys(_INT_RANGES, "integer"),
          **dict.fromkeys(_FLOAT_MAX, "number")}


def dtype_field(spec: InputSpec, limits: Limits) -> Field:
    """The range of an input the table does not name: what its dtype can hold (finite
    numbers only; texts up to ``--max-text-length``)."""
    if spec.dtype in _INT_RANGES:
        return Field(spec.dtype, Range(*_INT_RANGES[spec.dtype]), f"any {spec.dtype}")
    if spec.dtype in _FLOAT_MAX:
        top = _FLOAT_MAX[spec.dtype]
        return Field(spec.dtype, Range(-top, top), f"any finite {spec.dtype}")
    if spec.dtype == "string":
        return Field("string", Range(0, limits.max_text_length),
                     "a text; the server's --max-text-length")
    return Field(spec.dtype, None, spec.dtype)


def field_of(spec: InputSpec, fields: dict, limits: Limits) -> Field:
    """The declared range of input ``spec``: its entry in ``fields`` when the dtypes agree,
    else its dtype's."""
    field = fields.get(spec.name)
    return field if field is not None and field.dtype == spec.dtype else \
        dtype_field(spec, limits)


def vocab_size(sig: SignatureInfo) -> int | None:
    """The vocabulary size a signature shows (``step``: ``logits (1, V)``), else None."""
    logits = sig.outputs.get("logits")
    if logits is None or not logits.shape or logits.shape[-1] is None:
        return None
    return int(logits.shape[-1])


def _shown(value) -> str:
    """The value as the client sent it (JSON), cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


_JSON_TYPES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
               dict: "an object", list: "a list"}


def _refuse(name: str, got: str, field: Field) -> ServingError:
    return bad_request(f"input '{name}': got {got}, expected {field.expected()} "
                       f"({field.means})")


def _leaf(value, spec: InputSpec, field: Field):
    """One JSON value of input ``spec`` → its Python value, refused (400 naming the
    input, the value and the range) unless it is of the field's kind and in its range."""
    kind, name = field.kind, spec.name
    wrong_type = "null" if value is None else \
        f"{_shown(value)} ({_JSON_TYPES.get(type(value), type(value).__name__)})"
    if kind == "text":
        if isinstance(value, str):
            if len(value) not in field.range:
                raise _refuse(name, f"a string of {len(value)} characters", field)
            return value.encode("utf-8", "surrogatepass")
        if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
            try:
                raw = base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, ValueError):
                raise bad_request(f"input '{name}': invalid base64 in {{\"b64\": …}}") \
                    from None
            if len(raw) not in field.range:
                raise _refuse(name, f"{{\"b64\": …}} of {len(raw)} bytes", field)
            return raw
        raise _refuse(name, wrong_type, field)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise _refuse(name, wrong_type, field)
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _refuse(name, wrong_type, field)
        if value not in field.range:
            raise _refuse(name, _shown(value), field)
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _refuse(name, wrong_type, field)
        if (isinstance(value, float) and not math.isfinite(value)) or value not in field.range:
            raise _refuse(name, _shown(value), field)
        return float(value)
    raise bad_request(f"input '{name}' has dtype {spec.dtype}, which this server does not "
                      "accept over JSON")


def _is_leaf(value) -> bool:
    return not isinstance(value, list)


def _to_array(value, spec: InputSpec, field: Field, max_elements: int = 1_000_000):
    """A nested JSON list → numpy array of ``spec.dtype`` (rectangular, every value in
    ``field``'s range)."""
    flat: list = []

    def walk(v, depth):
        if _is_leaf(v):
            flat.append(_leaf(v, spec, field))
            if len(flat) > max_elements:
                raise bad_request(f"input '{spec.name}' has more than {max_elements} values")
            return ()
        if depth > 32:
            raise bad_request(f"input '{spec.name}' is nested too deeply")
        shapes = {walk(item, depth + 1) for item in v}
        if len(shapes) > 1:
            raise bad_request(f"input '{spec.name}' is ragged: every list at the same depth "
                              "must have the same length and nesting")
        inner = shapes.pop() if shapes else ()
        return (len(v), *inner)

    shape = walk(value, 0)
    if spec.dtype == "string":
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
        arr = arr.reshape(shape)
    else:
        dtype = "float32" if spec.dtype == "bfloat16" else spec.dtype
        arr = np.array(flat, dtype=dtype).reshape(shape)  # in range: checked value by value
    return arr


def _check_shape(arr: np.ndarray, spec: InputSpec) -> None:
    if len(arr.shape) != len(spec.shape) or any(
            want is not None and want != got for want, got in zip(spec.shape, arr.shape)):
        want = "[" + ", ".join("-1" if d is None else str(d) for d in spec.shape) + "]"
        raise bad_request(f"input '{spec.name}' has shape {list(arr.shape)}, but the "
                          f"signature expects {want} (-1: any size)")


def parse_predict(body, servable, limits: Limits) -> PredictRequest:
    """Validate a predict request body (already JSON-decoded) against the servable."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object with \"instances\" or "
                          "\"inputs\"")
    unknown = set(body) - {"signature_name", "instances", "inputs"}
    if unknown:
        raise bad_request(f"unexpected key(s) {sorted(unknown)} in the request; expected "
                          "\"signature_name\" and one of \"instances\" / \"inputs\"")
    name = body.get("signature_name")
    if name is not None and not isinstance(name, str):
        raise bad_request("\"signature_name\" must be a string")
    sig = servable.signature(name or None)
    has_rows, has_cols = "instances" in body, "inputs" in body
    if has_rows == has_cols:
        raise bad_request("the request must have exactly one of \"instances\" (row format) "
                          "or \"inputs\" (columnar format)")
    specs = sig.inputs
    table = request_fields(limits, vocab_size(sig))
    fields = {key: field_of(spec, table, limits) for key, spec in specs.items()}
    if has_rows:
        inputs = _parse_rows(body["instances"], specs, fields, limits)
    else:
        inputs = _parse_columns(body["inputs"], specs, fields)
    for key, arr in inputs.items():
        _check_shape(arr, specs[key])
    batched = [inputs[k] for k, s in specs.items() if s.batched]
    rows = len(batched[0]) if batched else 1
    if any(len(b) != rows for b in batched):
        raise bad_request("all batched inputs must have the same size in dimension 0, got "
                          + ", ".join(f"{k}: {len(inputs[k])}" for k, s in specs.items()
                                      if s.batched))
    if rows > limits.max_instances:
        raise bad_request(f"{rows} instances is more than the limit of {limits.max_instances} "
                          "per request (--max-instances); split the request")
    return PredictRequest(sig, inputs, rows, has_cols)


def _named(value) -> bool:
    return isinstance(value, dict) and not (set(value) == {"b64"})


def _parse_rows(instances, specs: dict, fields: dict, limits: Limits) -> dict:
    if not isinstance(instances, list) or not instances:
        raise bad_request("\"instances\" must be a non-empty list (one entry per row)")
    if len(instances) > limits.max_instances:
        raise bad_request(f"{len(instances)} instances is more than the limit of "
                          f"{limits.max_instances} per request (--max-instances); split the "
                          "request")
    if all(_named(row) for row in instances):
        columns = {}
        for i, row in enumerate(instances):
            if set(row) != set(specs):
                raise bad_request(f"instance {i} has inputs {sorted(row)}, but the signature "
                                  f"expects {sorted(specs)}")
        for key, spec in specs.items():
            values = [row[key] for row in instances]
            if spec.is_scalar:
                if any(v != values[0] or type(v) is not type(values[0]) for v in values):
                    raise bad_request(f"input '{key}' is a scalar shared by the whole batch; "
                                      "every instance must give the same value (or use the "
                                      "columnar \"inputs\" format)")
                columns[key] = _to_array(values[0], spec, fields[key])
            else:
                columns[key] = _to_array(values, spec, fields[key])
        return columns
    if any(_named(row) for row in instances):
        raise bad_request("\"instances\" mixes objects and plain values; use one object per "
                          "instance with every named input")
    if len(specs) != 1:
        raise bad_request(f"the signature has {len(specs)} inputs ({', '.join(sorted(specs))});"
                          " give each instance as an object of named inputs")
    (key, spec), = specs.items()
    return {key: _to_array(instances, spec, fields[key])}


def _parse_columns(inputs, specs: dict, fields: dict) -> dict:
    if _named(inputs):
        if set(inputs) != set(specs):
            raise bad_request(f"\"inputs\" has {sorted(inputs)}, but the signature expects "
                              f"{sorted(specs)}")
        return {k: _to_array(inputs[k], specs[k], fields[k]) for k in specs}
    if len(specs) != 1:
        raise bad_request(f"the signature has {len(specs)} inputs ({', '.join(sorted(specs))});"
                          " give \"inputs\" as an object of named inputs")
    (key, spec), = specs.items()
    return {key: _to_array(inputs, spec, fields[key])}


def _jsonable(name: str, arr: np.ndarray):
    if arr.dtype == object or arr.dtype.kind == "S":
        if name.endswith("_bytes"):
            fn = lambda b: {"b64": base64.b64encode(b).decode("ascii")}
        else:
            fn = lambda b: b.decode("utf-8", "replace")
        return np.vectorize(fn, otypes=[object])(arr).tolist() if arr.size else \
            arr.astype(object).tolist()
    return arr.tolist()


def encode_outputs(outputs: dict, columnar: bool) -> dict:
    """Numpy outputs → ``{"outputs": …}`` (columnar) or ``{"predictions": […]}`` (rows)."""
    if columnar:
        values = {k: _jsonable(k, v) for k, v in outputs.items()}
        if len(values) == 1:
            return {"outputs": next(iter(values.values()))}
        return {"outputs": values}
    sizes = {k: (v.shape[0] if v.ndim else None) for k, v in outputs.items()}
    batch = {s for s in sizes.values()}
    if len(batch) != 1 or None in batch:
        raise bad_request("the outputs do not share a batch size (" + ", ".join(
            f"{k}: {s}" for k, s in sizes.items()) + "); use the columnar \"inputs\" format")
    values = {k: _jsonable(k, v) for k, v in outputs.items()}
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    n = batch.pop()
    return {"predictions": [{k: values[k][i] for k in values} for i in range(n)]}


# ----------------------------------------------------------------------------------------
# Classify API

_EXAMPLE_KEYS = ("inputs", "text")


def is_classify_signature(sig: SignatureInfo) -> bool:
    """One batch of strings in; ``labels`` (strings) and ``scores`` (floats) ``[N, C]`` out."""
    if len(sig.inputs) != 1:
        return False
    (spec,) = sig.inputs.values()
    labels, scores = sig.outputs.get("labels"), sig.outputs.get("scores")
    return (spec.dtype == "string" and len(spec.shape) == 1 and spec.batched
            and labels is not None and labels.dtype == "string" and len(labels.shape) == 2
            and scores is not None and scores.dtype.startswith("float")
            and len(scores.shape) == 2)


def classify_signature(servable, name: str | None) -> SignatureInfo:
    """The signature a ``:classify`` request runs (400 when the model has none)."""
    if name:
        sig = servable.signature(name)  # 400 if unknown, listing the available ones
    else:
        key = "classify" if "classify" in servable.signatures else "serving_default"
        sig = servable.signatures.get(key)
    if sig is None or not is_classify_signature(sig):
        which = f"signature {name!r} is not a classify signature" if name else \
            "has no classify signature"
        raise bad_request(
            f"model {servable.name} version {servable.version} {which} (signatures: "
            f"{', '.join(sorted(servable.signatures))}); :classify needs a classifier "
            "exported with `keras-seq export classifier` (one string input; outputs "
            "'labels' and 'scores'). Use :predict for this model")
    return sig


def parse_classify(body, servable, limits: Limits) -> PredictRequest:
    """Validate a Classify request body (already JSON-decoded) against the servable."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object with \"examples\": "
                          "[{\"inputs\": \"some text\"}, …]")
    unknown = set(body) - {"signature_name", "examples", "context"}
    if unknown:
        raise bad_request(f"unexpected key(s) {sorted(unknown)} in the classify request; "
                          "expected \"examples\" and optionally \"signature_name\"")
    name = body.get("signature_name")
    if name is not None and not isinstance(name, str):
        raise bad_request("\"signature_name\" must be a string")
    sig = classify_signature(servable, name or None)
    if body.get("context") not in (None, {}):
        raise bad_request("\"context\" features are not supported: give each example its "
                          "own text, {\"inputs\": \"some text\"}")
    examples = body.get("examples")
    if not isinstance(examples, list) or not examples:
        raise bad_request("\"examples\" must be a non-empty list of objects like "
                          "{\"inputs\": \"some text\"}")
    if len(examples) > limits.max_instances:
        raise bad_request(f"{len(examples)} examples is more than the limit of "
                          f"{limits.max_instances} per request (--max-instances); split the "
                          "request")
    (input_name, spec), = sig.inputs.items()
    field = field_of(spec, request_fields(limits), limits)
    allowed = {input_name, *_EXAMPLE_KEYS}
    values = []
    for i, example in enumerate(examples):
        if not isinstance(example, dict) or len(example) != 1 or not set(example) <= allowed:
            got = sorted(example) if isinstance(example, dict) else type(example).__name__
            raise bad_request(f"example {i} must be an object with one feature, the text: "
                              f"{{\"{input_name}\": \"some text\"}} (got {got})")
        (value,) = example.values()
        if isinstance(value, list) and len(value) == 1:
            value = value[0]  # a one-value feature list, as tf.Example features are
        values.append(_leaf(value, spec, field))
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return PredictRequest(sig, {input_name: column}, len(values), columnar=True)


def encode_classify(outputs: dict) -> dict:
    """``labels``/``scores`` ``[N, C]`` → ``{"results": [[[label, score], …], …]}``."""
    labels, scores = outputs["labels"], outputs["scores"]
    return {"results": [[[_text(label), float(score)] for label, score in zip(lrow, srow)]
                        for lrow, srow in zip(labels, scores)]}


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
