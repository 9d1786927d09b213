"""Quantization-aware training (QAT): weights rounded in training to the grid the export uses.

keras-seq's cells, :class:`QATEmbedding`, :class:`QATDense` and the tied output layer take
``qat="int8"`` or ``qat="int4"``: in every forward pass their weight matrices are replaced
by :func:`fake_quant` of them, **symmetric per output channel** (``scale = max|w| / q``,
``q = 127`` for int8, ``7`` for int4; integers in ``[−q, q]``), with a straight-through
gradient (the rounding counts as the identity backwards; Bengio et al. 2013). That is the
rule of the exporters keras-seq uses: TFLite's dynamic-range quantizer and
ai-edge-quantizer's ``dynamic_wi8_afp32`` / ``dynamic_wi4_afp32`` recipes (per-channel,
symmetric, max-abs scale; ai-edge-quantizer rounds half to even and clips int4 to
``[−8, 7]``, never reached here). A matrix on that grid is quantized by them **to exactly
the trained integers** (its largest element per channel is ``±q·scale``, so they find the
same scale), which :func:`baked` uses at export: the graph holds the rounded weights, no
rounding ops, and no calibration is needed.

Channels are the output columns of a Keras ``(in, out)`` kernel (TFLite's
``FULLY_CONNECTED`` weights are ``(out, in)``, quantized per row), the rows of an embedding
table (per token; the tied output layer reads the same rows). A cell whose exported step
multiplies ``[x, h] @ [kernel; recurrent_kernel]`` in one matmul (keras-seq's LSTM, LSTMP,
SimpleRNN: ``merges_recurrent_matmul``) is quantized over that stacked matrix, as the
exported ``FULLY_CONNECTED`` holds it.

With ``qat="int4"`` activations stay float (ai-edge-quantizer's dynamic-range kernels
quantize them on the fly at run time). ``qat="int8"`` is **full-integer** QAT: weights as
above and every activation the TFLite converter quantizes (each ``FULLY_CONNECTED``,
``ADD``, ``MUL``, ``SUB`` output, the recurrent states, the embedding rows, the logits) goes
through :func:`fake_quant_act`, TensorFlow's ``FakeQuantWithMinMaxVars`` arithmetic (8 bits,
the range nudged so that 0 is exact), with ranges tracked as an exponential moving average
(:class:`ActivationRanges`, :func:`observing`); ``sigmoid``/``tanh`` outputs take the fixed
ranges of TFLite's int8 kernels (:data:`FIXED_RANGES`). Exported, the traced step carries
those ranges as ``FakeQuantWithMinMaxVars`` ops, from which the converter makes the integer
model: no calibration data, the learned ranges themselves. Biases stay float (the
converter stores them as int32).

>>> import numpy as np
>>> w = np.array([[0.5, -1.0], [0.26, 0.3], [-0.1, 0.9]], "float32")   # (in 3, out 2)
>>> np.round(np.asarray(fake_quant(w, "int4", axis=-1)), 4)     # column scales 0.5/7, 1/7
array([[ 0.5   , -1.    ],
       [ 0.2857,  0.2857],
       [-0.0714,  0.8571]], dtype=float32)
>>> integers(w, "int4", axis=-1)[0].tolist()
[[7, -7], [4, 2], [-1, 6]]
"""

from __future__ import annotations

import contextlib
import contextvars

import keras
import numpy as np
from keras import ops

#: ``qat`` values and the largest integer each uses (symmetric, narrow range)
QAT_MODES = {"int8": 127, "int4": 7}
_TINY = 1e-12  # a channel of zeros gets this scale (its integers are 0)

#: TFLite's int8 LOGISTIC and TANH have fixed output scales (1/256 with zero point −128,
#: 1/128 with 0): these ranges reproduce them exactly, so no requantization follows them
FIXED_RANGES = {"sigmoid": (0.0, 255.0 / 256.0), "tanh": (-1.0, 127.0 / 128.0)}
#: how fast a tracked range follows the observed one (TF-MOT's moving-average quantizer)
EMA_DECAY = 0.9

_BAKED = contextvars.ContextVar("keras_seq_qat_baked", default=False)
_OBSERVED = contextvars.ContextVar("keras_seq_qat_observed", default=None)


def check_qat(qat, owner: str = "layer"):
    """``qat`` checked: None, ``"int8"`` or ``"int4"`` (else a ``ValueError`` saying so)."""
    if qat is None or qat in QAT_MODES:
        return qat
    raise ValueError(f"{owner}: received qat={qat!r}; expected None (float training), "
                     f"{' or '.join(repr(m) for m in QAT_MODES)} (weights rounded in training "
                     "to that grid, per output channel)")


def _reduce_axes(rank: int, axis: int) -> tuple[int, ...]:
    axis = axis % rank
    return tuple(i for i in range(rank) if i != axis)


def fake_quant(w, qat: str, axis: int = -1):
    """``w`` rounded to ``qat``'s symmetric per-channel grid along ``axis`` (the channel
    axis), as a float tensor; gradients pass straight through. Under :func:`baked` (the
    exporters: the weights are rounded already) it returns ``w`` unchanged."""
    if qat is None or _BAKED.get():
        return w
    w = ops.convert_to_tensor(w)
    q = float(QAT_MODES[qat])
    scale = ops.maximum(ops.max(ops.abs(w), axis=_reduce_axes(len(w.shape), axis),
                                keepdims=True), _TINY) / q
    rounded = ops.clip(ops.round(w / scale), -q, q) * scale
    return w + ops.stop_gradient(rounded - w)  # straight-through estimator


def nudged_range(lo, hi):
    """``(min, max, scale)`` of TensorFlow's 8-bit ``FakeQuantWithMinMaxVars``: the range
    moved so that 0 is one of its 256 levels (``Nudge`` in TensorFlow's
    ``fake_quant_ops_functor.h``, its ``std::round`` rounding half away from zero)."""
    scale = (hi - lo) / 255.0
    level = -lo / scale  # where 0.0 falls, in levels from the bottom
    zero = ops.clip(ops.sign(level) * ops.floor(ops.abs(level) + 0.5), 0.0, 255.0)
    return -zero * scale, (255.0 - zero) * scale, scale


def fake_quant_act(x, lo, hi):
    """``x`` rounded to 8 bits over ``[lo, hi]`` as TensorFlow's ``FakeQuantWithMinMaxVars``
    does (range nudged, values clipped, ``floor(v / scale + 0.5)``), gradients straight
    through inside the range. Under :func:`baked` on TensorFlow it *is* that op, which the
    TFLite converter reads; under :func:`observing` it records ``x``'s range and returns
    ``x``."""
    observed = _OBSERVED.get()
    if observed is not None:
        return x
    if _BAKED.get():
        # lazy: only the TensorFlow export traces this branch
        import tensorflow as tf

        return tf.quantization.fake_quant_with_min_max_vars(
            x, ops.convert_to_tensor(lo, "float32"), ops.convert_to_tensor(hi, "float32"),
            num_bits=8)
    n_lo, n_hi, scale = nudged_range(ops.convert_to_tensor(lo, x.dtype),
                                     ops.convert_to_tensor(hi, x.dtype))
    clipped = ops.clip(x, n_lo, n_hi)
    # TensorFlow's arithmetic: a multiply by the inverse scale, then floor(· + 0.5)
    rounded = ops.floor((clipped - n_lo) * (1.0 / scale) + 0.5) * scale + n_lo
    return clipped + ops.stop_gradient(rounded - clipped)


class ActivationRanges:
    """The tracked ranges of a layer's named activation points (``qat="int8"``).

    A layer makes one in ``build`` with its point names; it holds a non-trainable
    ``(points, 2)`` weight ``activation_ranges`` (``[min, max]`` rows, saved with the
    model). ``apply(name, x)`` fake-quantizes ``x`` over its row; under
    :func:`observing` it records ``x``'s batch range instead, for
    :func:`update_ranges`. A layer without ``qat="int8"`` gets ``None`` and passes
    activations through (:func:`quantize_activation`)."""

    def __init__(self, layer, points: tuple[str, ...]):
        self.layer, self.points = layer, tuple(points)
        self.index = {name: i for i, name in enumerate(self.points)}
        self.variable = layer.add_weight(
            shape=(len(self.points), 2), name="activation_ranges", trainable=False,
            initializer=keras.initializers.Constant([[-1.0, 1.0]] * len(self.points)))

    def apply(self, name: str, x):
        observed = _OBSERVED.get()
        if observed is not None:
            low, high = ops.min(x), ops.max(x)
            key = (id(self.variable), self.index[name])
            seen = observed.get(key)
            low = low if seen is None else ops.minimum(low, seen[0])
            high = high if seen is None else ops.maximum(high, seen[1])
            observed[key] = (low, high)
            return x
        row = ops.convert_to_tensor(self.variable)[self.index[name]]
        return fake_quant_act(x, row[0], row[1])


def quantize_activation(ranges: ActivationRanges | None, name: str, x):
    """``ranges.apply(name, x)``, or ``x`` for a layer without activation ranges."""
    return x if ranges is None else ranges.apply(name, x)


def quantize_fixed(ranges: ActivationRanges | None, kind: str, x):
    """``x`` (a ``sigmoid`` or ``tanh`` output) rounded to that op's fixed int8 range
    (:data:`FIXED_RANGES`), for a layer with activation ranges."""
    if ranges is None or _OBSERVED.get() is not None:
        return x
    return fake_quant_act(x, *FIXED_RANGES[kind])


@contextlib.contextmanager
def observing():
    """Within this, activation points record their batch ranges (eagerly, unrounded) into
    the yielded dict, for :func:`update_ranges`."""
    observed: dict = {}
    token = _OBSERVED.set(observed)
    try:
        yield observed
    finally:
        _OBSERVED.reset(token)


def update_ranges(model, observed: dict, decay: float | None = EMA_DECAY) -> int:
    """Move every activation range of ``model`` toward what :func:`observing` recorded:
    ``range ← decay·range + (1 − decay)·observed`` (``decay=None``: set to it, the first
    time). Returns the number of ranges updated."""
    updated = 0
    for layer in model._flatten_layers(include_self=True, recursive=True):
        ranges = getattr(layer, "activation_ranges", None)
        if not isinstance(ranges, ActivationRanges):
            continue
        values = np.array(ops.convert_to_numpy(ranges.variable), np.float32)
        for row in range(len(ranges.points)):
            seen = observed.get((id(ranges.variable), row))
            if seen is None:
                continue
            new = np.array([float(ops.convert_to_numpy(seen[0])),
                            float(ops.convert_to_numpy(seen[1]))], np.float32)
            new = np.array([min(new[0], 0.0), max(new[1], 0.0)], np.float32)  # 0 inside
            values[row] = new if decay is None else decay * values[row] + (1 - decay) * new
            updated += 1
        ranges.variable.assign(values)
    return updated


def integers(w, qat: str, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """``(integers, scales)`` of ``w`` on ``qat``'s grid (numpy): what an exporter writes
    for the rounded matrix, ``integers * scales == fake_quant(w)``."""
    w = np.asarray(w, np.float32)
    q = QAT_MODES[qat]
    scale = np.maximum(np.abs(w).max(axis=_reduce_axes(w.ndim, axis), keepdims=True),
                       _TINY) / np.float32(q)
    return np.clip(np.rint(w / scale), -q, q).astype(np.int32), scale.astype(np.float32)


@contextlib.contextmanager
def baked():
    """Within this, :func:`fake_quant` is the identity: for graphs traced over weights that
    are rounded already (:func:`baked_values`), so the exported model holds the rounded
    matrices as constants and no rounding ops."""
    token = _BAKED.set(True)
    try:
        yield
    finally:
        _BAKED.reset(token)


def baked_values(model) -> dict:
    """``{id(variable): rounded value (numpy)}`` for every weight a QAT layer of ``model``
    rounds (each layer's ``qat_weights()``); other weights are absent."""
    out = {}
    for layer in model._flatten_layers(include_self=True, recursive=True):
        rounded = getattr(layer, "qat_weights", None)
        if rounded is None or not getattr(layer, "qat", None):
            continue
        for variable, value in rounded():
            out[id(variable)] = np.asarray(ops.convert_to_numpy(value), np.float32)
    return out
