"""Check a ``.tflite`` file in pure Python before LiteRT reads it (no TensorFlow here).

LiteRT trusts the model it is given. Its own flatbuffer verifier catches most broken
layouts, but a file that is still a well-formed flatbuffer with a wrong number in it (an
``ADD`` input of ``-1``, a ``SPLIT`` into 0 parts, an operator writing a graph input, a
tiny quantization scale) crashes the process with a segfault or an abort while the
interpreter prepares or runs it (the fault campaign's ``tools/reliability/tflite.py``
found dozens). :func:`check_tflite` walks the whole file first and raises
:class:`CorruptModelError` saying what is wrong and where:

* layout: the ``TFL3`` identifier, the root table, every vtable (its fields inside its
  table), every table, vector and string offset inside the file and aligned, strings
  UTF-8; buffers stored after the flatbuffer (``offset`` / ``size``) inside the file;
* indices: tensor indices of subgraphs, operators and signatures (a signature's tensors
  among its subgraph's inputs and outputs); buffer indices of tensors and metadata;
  opcode indices of operators; builtin codes; subgraph indices of signatures and of
  ``WHILE`` / ``IF``;
* sizes: dimensions ≥ 0, constant data at least as large as its tensor, no tensor over
  :data:`MAX_TENSOR_BYTES` and no subgraph over :data:`MAX_SUBGRAPH_BYTES`;
* dataflow: one writer per tensor (no operator writes a graph input or a constant), no
  constant or variable graph input, variables float32 without data (keras-seq's only
  variables are the fused LSTM's state);
* what the kernels of the operators keras-seq exports assume (:data:`OP_RULES`): input
  and output counts, ``-1`` inputs only where a kernel takes an optional tensor (and the
  fused LSTM's optional inputs in whole groups), the options table of the right type,
  part counts that match the outputs, known fused activations; quantization scales in
  :data:`SCALE_RANGE` with one zero point each (inside the integer type), scales on every
  8/16-bit integer tensor an operator uses, and ``ADD`` / ``SUB`` input scales within
  2^:data:`ADD_SCALE_BITS` of the output's.

These rules describe the models ``keras-seq export tflite`` writes; a model from
elsewhere may use what they refuse (sparse tensors, shuffled weights, relative
``STRIDED_SLICE`` ends). :class:`~keras_seq.runtime.litert.LiteRTLM` then compares the
operators and the signature with the model's metadata, still before the interpreter.

>>> check_tflite(b"abc", "m.tflite")
Traceback (most recent call last):
...
keras_seq.runtime.flatbuffer_check.CorruptModelError: m.tflite is not a usable .tflite model: \
the file is 3 bytes, too short for a flatbuffer header (8 bytes): it is truncated or empty \
(received 3 bytes, expected a TFLite flatbuffer with identifier 'TFL3'). Copy the file \
again, or re-export it with `keras-seq export tflite`
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

from keras_seq.errors import KerasSeqError

IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
#: the largest tensor, and the most bytes of tensors in a subgraph, a model may declare
#: (a keras-seq LM's biggest tensor is its embedding table, a few hundred MB at most)
MAX_TENSOR_BYTES = 1 << 30
MAX_SUBGRAPH_BYTES = 1 << 32

# Builtin operator codes of the TFLite schema (``BuiltinOperator``) that the checks name.
ADD, CONCATENATION, DEQUANTIZE, FULLY_CONNECTED, LOGISTIC, MUL, RESHAPE = 0, 2, 6, 9, 14, 18, 22
SOFTMAX, TANH, SUB, UNIDIRECTIONAL_SEQUENCE_LSTM, STRIDED_SLICE = 25, 28, 41, 44, 45
GATHER, SPLIT, PACK, UNPACK, SPLIT_V, QUANTIZE, IF, WHILE = 36, 49, 83, 88, 102, 114, 118, 119
CUSTOM = 32
MAX_BUILTIN_CODE = 255  # the schema has about 210; leave room for newer LiteRT releases

# What the kernels of the operators keras-seq exports assume: (min inputs, max inputs,
# outputs or None when an option sets it, input positions that may be -1, the options
# type the operator needs or None). Operators not listed get the generic checks only.
_LSTM_OPTIONAL = frozenset({1, 5, 9, 10, 11, 12, 16, 17, 20, 21, 22, 23})
OP_RULES = {
    ADD: (2, 2, 1, (), 11), SUB: (2, 2, 1, (), 28), MUL: (2, 2, 1, (), 21),
    LOGISTIC: (1, 1, 1, (), None), TANH: (1, 1, 1, (), None),
    DEQUANTIZE: (1, 1, 1, (), None), QUANTIZE: (1, 1, 1, (), None),
    SOFTMAX: (1, 1, 1, (), 9), GATHER: (2, 2, 1, (), 23), RESHAPE: (1, 2, 1, (), None),
    FULLY_CONNECTED: (2, 3, 1, (2,), 8), STRIDED_SLICE: (4, 4, 1, (), 32),
    SPLIT: (2, 2, None, (), 35), SPLIT_V: (3, 3, None, (), 79),
    PACK: (1, None, 1, (), 59), UNPACK: (1, 1, None, (), 64),
    CONCATENATION: (1, None, 1, (), 10),
    UNIDIRECTIONAL_SEQUENCE_LSTM: (20, 24, 1, _LSTM_OPTIONAL, 71),
    WHILE: (1, None, None, (), 93), IF: (1, None, None, (), 92),
}
# Operators whose options table must be there: the converter always writes one, and
# without it a count, an axis or a subgraph index reads as 0, which some kernels and
# XNNPACK do not check.
OPTIONS_REQUIRED = {SPLIT, SPLIT_V, PACK, UNPACK, STRIDED_SLICE, FULLY_CONNECTED,
                    UNIDIRECTIONAL_SEQUENCE_LSTM, CONCATENATION, WHILE, IF, SOFTMAX, GATHER}
ACTIVATIONS = range(0, 6)  # ActivationFunctionType: NONE … SIGN_BIT

# TensorType → bytes per element (None: variable or packed, not size-checked).
TYPE_SIZES = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 5: None, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16,
              12: 8, 13: None, 14: None, 15: 4, 16: 2, 17: None, 18: 2, 19: None, 20: None,
              21: 1, 22: 1}
_QUANTIZED_TYPES = {3, 7, 9}  # UINT8, INT16, INT8
_ZERO_POINTS = {3: (0, 255), 7: (-32768, 32767), 9: (-128, 127)}
#: quantization scales a kernel can invert without overflowing float32 (real ones: 1e-9…1e3)
SCALE_RANGE = (1e-30, 1e30)
#: a quantized ADD/SUB needs each input scale below 2^14 × the output scale (int16 kernel)
ADD_SCALE_BITS = 14
_FIX = "Copy the file again, or re-export it with `keras-seq export tflite`"


@functools.cache
def _op_names() -> dict:
    try:  # LiteRT's generated schema: plain Python, no TensorFlow
        # lazy: loads LiteRT only when this runs
        from ai_edge_litert.schema_py_generated import BuiltinOperator
    except ImportError:
        return {}
    return {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}


def op_name(code: int) -> str:
    """The schema's name of builtin operator ``code`` (``"OP_<code>"`` if unknown).

    >>> op_name(9), op_name(44)
    ('FULLY_CONNECTED', 'UNIDIRECTIONAL_SEQUENCE_LSTM')
    """
    return _op_names().get(code, f"OP_{code}")


class CorruptModelError(KerasSeqError):
    """A ``.tflite`` file that is truncated, corrupt or not a TFLite model at all."""


@dataclass
class TFLiteSummary:
    """What :func:`check_tflite` found in a model that passed.

    Attributes:
        size: bytes in the file.
        ops: sorted distinct names of the operators of the main subgraph (custom
            operators by their custom code), as ``keras-seq export tflite`` lists them in
            the metadata.
        subgraphs: number of subgraphs.
        tensors: tensors over all subgraphs.
        signatures: ``{key: {"inputs": [names], "outputs": [names]}}``.
        data_spans: ``(start, size)`` of each buffer's constant data (the weights) in the
            file; everything else is the model's structure.
    """

    size: int
    ops: list = field(default_factory=list)
    subgraphs: int = 0
    tensors: int = 0
    signatures: dict = field(default_factory=dict)
    data_spans: list = field(default_factory=list)


class _Bad(Exception):
    """Raised inside the walk; :func:`check_tflite` turns it into CorruptModelError."""


class _Reader:
    """Bounds-checked little-endian reads from the file's bytes."""

    def __init__(self, data: bytes):
        self.data, self.n = data, len(data)

    def need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or pos + size > self.n:
            raise _Bad(f"{what} at byte {pos:,} ({size:,} bytes) lies outside the "
                       f"{self.n:,}-byte file")

    def scalar(self, fmt: str, pos: int, what: str):
        size = struct.calcsize(fmt)
        self.need(pos, size, what)
        self.aligned(pos, size, what)
        return struct.unpack_from("<" + fmt, self.data, pos)[0]

    def aligned(self, pos: int, size: int, what: str) -> None:
        """Flatbuffers keeps every number at a multiple of its size (LiteRT checks too)."""
        if pos % size:
            raise _Bad(f"{what} at byte {pos:,} is not aligned to {size} bytes")

    def table(self, pos: int, what: str) -> _Table:
        return _Table(self, pos, what)


class _Table:
    """One flatbuffer table: its vtable checked, its fields read by index."""

    def __init__(self, reader: _Reader, pos: int, what: str):
        self.r, self.pos, self.what = reader, pos, what
        vtable = pos - reader.scalar("i", pos, f"{what} table")
        vt_size = reader.scalar("H", vtable, f"{what} vtable")
        if vt_size < 4 or vt_size % 2:
            raise _Bad(f"{what} vtable at byte {vtable:,} declares {vt_size} bytes (an even "
                       "number ≥ 4 expected)")
        reader.need(vtable, vt_size, f"{what} vtable")
        self.size = reader.scalar("H", vtable + 2, f"{what} vtable")
        if self.size < 4:
            raise _Bad(f"{what} table at byte {pos:,} declares {self.size} bytes (≥ 4 "
                       "expected)")
        reader.need(pos, self.size, f"{what} table")
        self.offsets = struct.unpack_from(f"<{(vt_size - 4) // 2}H", reader.data, vtable + 4)
        if any(off and not 4 <= off < self.size for off in self.offsets):
            raise _Bad(f"{what} vtable at byte {vtable:,} places a field outside its "
                       f"{self.size}-byte table")

    def _field(self, index: int, size: int, name: str) -> int | None:
        """Absolute position of field ``index`` (None when absent)."""
        off = self.offsets[index] if index < len(self.offsets) else 0
        if not off:
            return None
        if off + size > self.size:
            raise _Bad(f"field {name} of the {self.what} table at byte {self.pos:,} lies "
                       f"outside the table ({self.size} bytes)")
        return self.pos + off

    def scalar(self, index: int, fmt: str, default, name: str):
        at = self._field(index, struct.calcsize(fmt), name)
        return default if at is None else self.r.scalar(fmt, at, f"{self.what}.{name}")

    def target(self, index: int, name: str) -> int | None:
        """Where the offset field ``index`` points (None when absent)."""
        at = self._field(index, 4, name)
        if at is None:
            return None
        offset = self.r.scalar("I", at, f"{self.what}.{name}")
        if not 0 < offset < 1 << 31:
            raise _Bad(f"{self.what}.{name} at byte {at:,} holds offset {offset:,} (1…2³¹ "
                       "expected)")
        return at + offset

    def vector(self, index: int, elem_size: int, name: str) -> tuple[int, int]:
        """``(start, length)`` of a vector field; ``(0, 0)`` when absent."""
        at = self.target(index, name)
        if at is None:
            return 0, 0
        length = self.r.scalar("I", at, f"{self.what}.{name} vector")
        self.r.need(at + 4, length * elem_size, f"{self.what}.{name} vector of {length:,} "
                    "elements")
        return at + 4, length

    def numbers(self, index: int, fmt: str, name: str) -> list:
        size = struct.calcsize(fmt)
        start, length = self.vector(index, size, name)
        self.r.aligned(start, size, f"{self.what}.{name} vector")
        return list(struct.unpack_from(f"<{length}{fmt}", self.r.data, start)) if length else []

    def string(self, index: int, name: str) -> str | None:
        at = self.target(index, name)
        if at is None:
            return None
        start, length = self.vector(index, 1, name)
        self.r.need(start, length + 1, f"{self.what}.{name} string")
        if self.r.data[start + length] != 0:
            raise _Bad(f"{self.what}.{name} string at byte {at:,} has no terminating zero")
        try:
            return bytes(self.r.data[start:start + length]).decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad(f"{self.what}.{name} string at byte {at:,} is not UTF-8") from None

    def tables(self, index: int, name: str) -> list[_Table]:
        start, length = self.vector(index, 4, name)
        return [self.r.table(start + 4 * i + self.r.scalar("I", start + 4 * i, name),
                             f"{name}[{i}]") for i in range(length)]

    def child(self, index: int, name: str) -> _Table | None:
        at = self.target(index, name)
        return None if at is None else self.r.table(at, f"{self.what}.{name}")


def read_model_file(path: str | Path) -> bytes:
    """The bytes of a ``.tflite`` file, with a clear error for a missing, empty or
    unreadable path (checked by :func:`check_tflite` afterwards).

    >>> read_model_file("/nonexistent/model.tflite")
    Traceback (most recent call last):
    ...
    keras_seq.runtime.flatbuffer_check.CorruptModelError: no model at \
/nonexistent/model.tflite; pass the .tflite written by `keras-seq export tflite` (or \
`keras-seq pipeline`)
    """
    path = Path(path)
    if path.is_dir():
        raise CorruptModelError(f"{path} is a directory; pass the .tflite file inside it "
                                "(written by `keras-seq export tflite`)")
    if not path.is_file():
        raise CorruptModelError(f"no model at {path}; pass the .tflite written by "
                                "`keras-seq export tflite` (or `keras-seq pipeline`)")
    try:
        return path.read_bytes()
    except OSError as err:
        raise CorruptModelError(f"cannot read {path}: {err.strerror or err}; check the "
                                "file's permissions") from None


def check_tflite(data: bytes, name: str = "model") -> TFLiteSummary:
    """Check the bytes of a ``.tflite`` model; raise :class:`CorruptModelError` naming the
    first problem, or return a :class:`TFLiteSummary`.

    >>> check_tflite(b"\\x1c\\0\\0\\0TFL2" + bytes(40), "old.tflite")
    Traceback (most recent call last):
    ...
    keras_seq.runtime.flatbuffer_check.CorruptModelError: old.tflite is not a usable .tflite \
model: its identifier is b'TFL2' (received 48 bytes, expected a TFLite flatbuffer with \
identifier 'TFL3'). Copy the file again, or re-export it with `keras-seq export tflite`
    """
    size = len(data)
    try:
        if size < 8:
            raise _Bad(f"the file is {size} bytes, too short for a flatbuffer header (8 "
                       "bytes): it is truncated or empty")
        if bytes(data[4:8]) != IDENTIFIER:
            raise _Bad(f"its identifier is {bytes(data[4:8])!r}")
        return _check_model(_Reader(data))
    except _Bad as err:
        problem = str(err)
        if "outside the" in problem:
            problem += "; the file looks truncated or overwritten"
        raise CorruptModelError(
            f"{name} is not a usable .tflite model: {problem} (received {size:,} bytes, "
            f"expected a TFLite flatbuffer with identifier 'TFL3'). {_FIX}") from None


def _check_model(r: _Reader) -> TFLiteSummary:
    model = r.table(r.scalar("I", 0, "root offset"), "model")
    version = model.scalar(0, "I", 0, "version")
    if version != SCHEMA_VERSION:
        raise _Bad(f"it declares schema version {version}, LiteRT reads version "
                   f"{SCHEMA_VERSION}")
    opcodes = model.tables(1, "operator_codes")
    codes = [_opcode(t) for t in opcodes]
    spans = [_buffer(r, t) for t in model.tables(4, "buffers")]
    buffers = [size for _, size in spans]
    model.string(3, "description")
    for i in model.numbers(5, "i", "metadata_buffer"):
        if not 0 <= i < len(buffers):
            raise _Bad(f"metadata_buffer names buffer {i}, the model has {len(buffers)}")
    for t in model.tables(6, "metadata"):
        t.string(0, "name")
        if t.scalar(1, "I", 0, "buffer") >= len(buffers):
            raise _Bad(f"{t.what} names buffer {t.scalar(1, 'I', 0, 'buffer')}, the model "
                       f"has {len(buffers)}")
    for t in model.tables(8, "external_buffer_groups"):  # layout only
        t.string(0, "name")
    for t in model.tables(9, "external_buffers"):
        t.string(4, "packing")
    subgraph_tables = model.tables(2, "subgraphs")
    if not subgraph_tables:
        raise _Bad("it has no subgraph")
    counts = [len(sg.tables(0, "tensors")) for sg in subgraph_tables]
    summary = TFLiteSummary(size=r.n, subgraphs=len(subgraph_tables), tensors=sum(counts),
                            data_spans=[(start, size) for start, size in spans if size])
    ends = []
    for g, sg in enumerate(subgraph_tables):
        used, inputs, outputs = _check_subgraph(sg, g, codes, buffers, len(subgraph_tables))
        ends.append({"inputs": inputs, "outputs": outputs})
        if g == 0:
            summary.ops = sorted({opcodes[i].string(1, "custom_code") or "CUSTOM"
                                  if codes[i] == CUSTOM else op_name(codes[i]) for i in used})
    for t in model.tables(7, "signature_defs"):
        key = t.string(2, "signature_key") or ""
        g = t.scalar(4, "I", 0, "subgraph_index")
        if g >= len(subgraph_tables):
            raise _Bad(f"signature {key!r} names subgraph {g}, the model has "
                       f"{len(subgraph_tables)}")
        names = {}
        for side, index in (("inputs", 0), ("outputs", 1)):
            names[side] = []
            for m in t.tables(index, f"signature {key!r} {side}"):
                names[side].append(m.string(0, "name") or "")
                tensor = m.scalar(1, "I", 0, "tensor_index")
                if tensor not in ends[g][side]:
                    raise _Bad(f"signature {key!r} maps {names[side][-1]!r} to tensor "
                               f"{tensor}, not one of the {side} of subgraph {g}")
        summary.signatures[key] = names
    return summary


def _opcode(t: _Table) -> int:
    deprecated = t.scalar(0, "b", 0, "deprecated_builtin_code")
    code = max(deprecated, t.scalar(3, "i", 0, "builtin_code"))
    t.string(1, "custom_code")
    t.scalar(2, "i", 1, "version")
    if not 0 <= code <= MAX_BUILTIN_CODE:
        raise _Bad(f"{t.what} has builtin code {code} (0…{MAX_BUILTIN_CODE} expected)")
    return code


def _buffer(r: _Reader, t: _Table) -> tuple[int, int]:
    """``(start, size)`` of the constant data the buffer holds (size 0: none)."""
    start, length = t.vector(0, 1, "data")
    offset, size = t.scalar(1, "Q", 0, "offset"), t.scalar(2, "Q", 0, "size")
    if offset > 1:
        if length:
            raise _Bad(f"{t.what} has both inline data and an offset")
        if offset + size > r.n:
            raise _Bad(f"{t.what} data at byte {offset:,} ({size:,} bytes) lies outside the "
                       f"{r.n:,}-byte file")
        return offset, size
    return start, length


@dataclass
class _Tensor:
    type: int
    scales: list  # quantization scales (empty: not quantized)
    const: bool  # holds constant data
    variable: bool
    nbytes: int  # as declared by shape and type (0 for strings and packed types)


def _check_subgraph(sg: _Table, g: int, codes: list, buffers: list,
                    n_subgraphs: int) -> tuple[list[int], set, set]:
    """Check subgraph ``g``; returns the opcode index of each of its operators, and its
    input and output tensors."""
    tensors = [_check_tensor(t, i, buffers) for i, t in enumerate(sg.tables(0, "tensors"))]
    sg.string(4, "name")
    sg.scalar(5, "i", 0, "debug_metadata_index")
    where = f"subgraph {g}"
    total = sum(t.nbytes for t in tensors)
    if total > MAX_SUBGRAPH_BYTES:
        raise _Bad(f"{where} declares {total:,} bytes of tensors (at most "
                   f"{MAX_SUBGRAPH_BYTES:,} expected)")
    ends = {}
    for side, index in (("inputs", 1), ("outputs", 2)):
        ends[side] = sg.numbers(index, "i", side)
        for i in ends[side]:
            if not 0 <= i < len(tensors):
                raise _Bad(f"{where} {side} name tensor {i}, it has {len(tensors)} tensors")
            if side == "inputs" and (tensors[i].const or tensors[i].variable):
                raise _Bad(f"{where} input tensor {i} is a constant or a variable")
    codes_used, writer = [], {}
    for k, op in enumerate(sg.tables(3, f"{where} operators")):
        index, outputs = _check_operator(op, f"{where} operator {k}", codes, tensors,
                                         n_subgraphs)
        codes_used.append(index)
        for i in outputs:  # each tensor has one writer: an operator or the caller
            if i in ends["inputs"] or i in writer:
                first = "the caller" if i in ends["inputs"] else f"operator {writer[i]}"
                raise _Bad(f"{where} operator {k} writes tensor {i}, which {first} writes")
            writer[i] = k
    return codes_used, set(ends["inputs"]), set(ends["outputs"])


def _check_tensor(t: _Table, i: int, buffers: list) -> _Tensor:
    what = f"tensor {i}"
    shape = t.numbers(0, "i", "shape")
    ttype = t.scalar(1, "b", 0, "type")
    buffer = t.scalar(2, "I", 0, "buffer")
    t.string(3, "name")
    t.scalar(10, "I", 0, "external_buffer")
    if ttype not in TYPE_SIZES:
        raise _Bad(f"{what} has type {ttype} (0…{max(TYPE_SIZES)} expected)")
    if buffer >= len(buffers):
        raise _Bad(f"{what} names buffer {buffer}, the model has {len(buffers)}")
    if any(d < 0 for d in shape):
        raise _Bad(f"{what} has shape {shape} (dimensions ≥ 0 expected)")
    if any(d < -1 for d in t.numbers(7, "i", "shape_signature")):
        raise _Bad(f"{what} has a shape signature below -1")
    elements = math.prod(shape)
    itemsize = TYPE_SIZES[ttype]
    if itemsize and elements * itemsize > MAX_TENSOR_BYTES:
        raise _Bad(f"{what} declares shape {shape}, {elements * itemsize:,} bytes (at most "
                   f"{MAX_TENSOR_BYTES:,} expected)")
    if itemsize and buffers[buffer] and buffers[buffer] < elements * itemsize:
        raise _Bad(f"{what} of shape {shape} needs {elements * itemsize:,} bytes, its buffer "
                   f"{buffer} holds {buffers[buffer]:,}")
    scales = _check_quantization(t.child(4, "quantization"), what, shape, ttype)
    if t.target(6, "sparsity") is not None:
        raise _Bad(f"{what} is sparse; keras-seq exports only dense tensors")
    for v in t.tables(9, f"{what} variant_tensors"):
        v.numbers(0, "i", "shape")
    variable = bool(t.scalar(5, "B", 0, "is_variable"))
    if variable and (ttype != 0 or buffers[buffer]):
        raise _Bad(f"{what} is a variable of type {ttype} with {buffers[buffer]:,} bytes of data "
                   "(keras-seq's variables are float32 (type 0) state without data)")
    return _Tensor(ttype, scales, buffers[buffer] > 0, variable, elements * (itemsize or 0))


def _check_quantization(q: _Table | None, what: str, shape: list, ttype: int) -> list:
    """The tensor's quantization scales (after checking they are usable)."""
    if q is None:
        return []
    for index, name in ((0, "min"), (1, "max")):
        q.numbers(index, "f", name)
    scales = q.numbers(2, "f", "scale")
    zero_points = q.numbers(3, "q", "zero_point")
    q.scalar(4, "B", 0, "details_type")
    q.child(5, "details")
    dim = q.scalar(6, "i", 0, "quantized_dimension")
    bad = [s for s in scales if not SCALE_RANGE[0] <= s <= SCALE_RANGE[1]]  # NaN too
    if bad:
        raise _Bad(f"{what} has quantization scale {bad[0]!r} ({SCALE_RANGE[0]:g}…"
                   f"{SCALE_RANGE[1]:g} expected)")
    if len(zero_points) != len(scales):
        raise _Bad(f"{what} has {len(scales)} quantization scales and {len(zero_points)} "
                   "zero points")
    if len(scales) > 1 and (not 0 <= dim < len(shape) or shape[dim] != len(scales)):
        raise _Bad(f"{what} of shape {shape} has {len(scales)} per-channel scales along "
                   f"dimension {dim}")
    low, high = _ZERO_POINTS.get(ttype, (-(1 << 63), 1 << 63))
    if any(not low <= z <= high for z in zero_points):
        raise _Bad(f"{what} has zero points {zero_points[:4]} outside {low}…{high}")
    return scales


def _check_operator(op: _Table, where: str, codes: list, tensors: list,
                    n_subgraphs: int) -> tuple[int, list]:
    """Check one operator; returns its opcode index and output tensors."""
    index = op.scalar(0, "I", 0, "opcode_index")
    if index >= len(codes):
        raise _Bad(f"{where} uses opcode {index}, the model has {len(codes)}")
    code = codes[index]
    name = f"{where} ({op_name(code)})"
    inputs, outputs = op.numbers(1, "i", "inputs"), op.numbers(2, "i", "outputs")
    n = len(tensors)
    for i in inputs:
        if not -1 <= i < n:
            raise _Bad(f"{name} reads tensor {i}, the subgraph has {n} tensors")
    for i in outputs + op.numbers(8, "i", "intermediates"):
        if not 0 <= i < n:
            raise _Bad(f"{name} writes tensor {i}, the subgraph has {n} tensors")
    for i in outputs:
        if tensors[i].const:
            raise _Bad(f"{name} writes into constant tensor {i}")
    options_type = op.scalar(3, "B", 0, "builtin_options_type")
    options = op.child(4, "builtin_options")
    op.vector(5, 1, "custom_options")
    op.scalar(6, "b", 0, "custom_options_format")
    op.numbers(7, "b", "mutating_variable_inputs")
    op.scalar(11, "B", 0, "builtin_options_2_type")
    op.child(12, "builtin_options_2")
    op.scalar(13, "i", 0, "debug_metadata_index")
    large_at, large_size = op.scalar(9, "Q", 0, "large_custom_options_offset"), \
        op.scalar(10, "Q", 0, "large_custom_options_size")
    if large_at > 1 and large_at + large_size > op.r.n:
        raise _Bad(f"{name} custom options at byte {large_at:,} lie outside the file")
    if (options is None) != (options_type == 0):
        raise _Bad(f"{name} has options type {options_type} but "
                   f"{'no' if options is None else 'an'} options table")
    _check_scales(name, code, [tensors[i] if i >= 0 else None for i in inputs],
                  [tensors[i] for i in outputs])
    if code in OP_RULES:
        _check_rules(op, name, code, inputs, outputs, options_type, options, n_subgraphs)
    return index, outputs


def _check_scales(name: str, code: int, inputs: list, outputs: list) -> None:
    """Every 8/16-bit integer tensor needs scales, and quantized ``ADD``/``SUB`` abort the
    process when an input's scale exceeds the output's by 2^ADD_SCALE_BITS or more."""
    for t in inputs + outputs:
        if t is not None and t.type in _QUANTIZED_TYPES and not t.scales:
            raise _Bad(f"{name} uses an 8/16-bit integer tensor without quantization scales")
    if code not in (ADD, SUB) or not outputs or outputs[0].type not in _QUANTIZED_TYPES:
        return
    for t in inputs:
        ratio = max(t.scales) / max(outputs[0].scales) if t is not None and t.scales else 0
        if ratio >= 2.0 ** ADD_SCALE_BITS:
            raise _Bad(f"{name} has an input scale {ratio:.3g} times its output scale (below "
                       f"2^{ADD_SCALE_BITS} expected): its quantization scales are corrupt")


def _check_rules(op: _Table, name: str, code: int, inputs: list, outputs: list,
                 options_type: int, options: _Table | None, n_subgraphs: int) -> None:
    low, high, n_out, optional, want = OP_RULES[code]
    if len(inputs) < low or (high is not None and len(inputs) > high):
        expected = f"{low}" if low == high else f"{low}…{high or 'any'}"
        raise _Bad(f"{name} has {len(inputs)} inputs ({expected} expected)")
    for pos, i in enumerate(inputs):
        if i == -1 and pos not in optional:
            raise _Bad(f"{name} input {pos} is missing (-1); the kernel needs it")
    if n_out is not None and len(outputs) != n_out:
        raise _Bad(f"{name} has {len(outputs)} outputs ({n_out} expected)")
    if options is None:
        if code in OPTIONS_REQUIRED:
            raise _Bad(f"{name} has no options table")
        return
    if options_type != want:
        raise _Bad(f"{name} has options of type {options_type} ({want} expected)")
    if code in (ADD, SUB, MUL, FULLY_CONNECTED, UNIDIRECTIONAL_SEQUENCE_LSTM) and \
            options.scalar(0, "b", 0, "fused_activation_function") not in ACTIVATIONS:
        raise _Bad(f"{name} has an unknown fused activation")
    if code == CONCATENATION and \
            options.scalar(1, "b", 0, "fused_activation_function") not in ACTIVATIONS:
        raise _Bad(f"{name} has an unknown fused activation")
    if code == FULLY_CONNECTED and options.scalar(1, "b", 0, "weights_format") != 0:
        raise _Bad(f"{name} uses a shuffled weights format; keras-seq exports the default")
    if code == STRIDED_SLICE and options.scalar(5, "B", 0, "offset"):
        raise _Bad(f"{name} uses relative (offset) ends; keras-seq exports absolute ones")
    parts = {SPLIT: len(outputs), SPLIT_V: len(outputs), UNPACK: len(outputs),
             PACK: len(inputs)}  # what field 0 of their options counts
    if code in parts:
        declared, actual = options.scalar(0, "i", 0, "count"), parts[code]
        if declared != actual or declared < 1:
            raise _Bad(f"{name} declares {declared} parts in its options and has {actual}")
    if code in (WHILE, IF):
        for index in (0, 1):
            g = options.scalar(index, "i", 0, "subgraph_index")
            if not 0 < g < n_subgraphs:
                raise _Bad(f"{name} names subgraph {g}, the model has {n_subgraphs}")
    if code == UNIDIRECTIONAL_SEQUENCE_LSTM:
        _check_lstm_inputs(name, inputs)
    if code == RESHAPE:
        options.numbers(0, "i", "new_shape")


def _check_lstm_inputs(name: str, inputs: list) -> None:
    """The optional LSTM inputs come in groups that are all there or all missing."""
    groups = {"input gate (CIFG)": (1, 5, 12), "peephole": (10, 11),
              "layer normalization": tuple(range(21, min(24, len(inputs))))}
    for label, group in groups.items():
        present = {inputs[i] != -1 for i in group if i < len(inputs)}
        if len(present) > 1:
            raise _Bad(f"{name} has part of its {label} inputs ({list(group)})")
    if inputs[17] != -1 and inputs[16] == -1:
        raise _Bad(f"{name} has a projection bias without projection weights")
