"""keras-seq's fused-kernel path on a CPU, on every backend, against its own loop.

Each backend's real Keras ``lstm()``/``gru()`` runs, with only the GPU kernel replaced by
a reference of the same contract (``reference_kernels.py``: TensorFlow's ``CudnnRNNV3``
unpacked into a step loop, JAX's ``jax.experimental.rnn.lstm`` by its ``lstm_ref``,
PyTorch's ``torch._VF`` kernels run on the CPU). The layer with the kernel and the same
layer with ``use_cudnn=False`` must give equal outputs, final states and gradients over a
pairwise covering of go_backwards × return_sequences × return_state × stateful ×
Bidirectional × right-padded mask × weight drop × mixed precision, and the layer must
report the path that ran (``last_path``) with the kernel really called.

``make test`` runs this folder under TensorFlow, JAX and PyTorch.
"""

from __future__ import annotations

import itertools

import keras
import numpy as np
import pytest
from keras import ops

from keras_seq.layers import GRU, LSTM, dispatch

try:
    from . import reference_kernels as ref  # rootdir-relative import (package mode)
except ImportError:
    import reference_kernels as ref  # pytest's default: this folder is on sys.path

BACKEND = keras.backend.backend()
B, T, D, U = 3, 5, 4, 6
FACTORS = ("go_backwards", "return_sequences", "return_state", "stateful",
           "bidirectional", "mask", "weight_drop", "mixed")
MIXED = "mixed_bfloat16" if BACKEND == "torch" else "mixed_float16"


#: Rows (1-5; row 0 has everything off) in which each factor is on. Any two 3-subsets of
#: five rows intersect and differ, so every pair of factors takes all four on/off
#: combinations. return_state, stateful and bidirectional are never on together: Keras
#: 3.15.1's Bidirectional.compute_mask raises TypeError for a stateful return_state pair.
ON_IN_ROWS = {
    "return_state": (1, 2, 3), "stateful": (1, 4, 5), "bidirectional": (2, 4, 5),
    "go_backwards": (1, 2, 4), "return_sequences": (1, 3, 5), "mask": (2, 3, 4),
    "weight_drop": (3, 4, 5), "mixed": (1, 2, 5),
}


def covering_rows():
    """Six settings of the eight on/off factors covering every pair of them."""
    return [{f: row in ON_IN_ROWS[f] for f in FACTORS} for row in range(6)]


#: Plus rows every backend's kernel takes (no mask, float32): with a mask or mixed
#: precision JAX and PyTorch loop, so the covering rows alone would leave their kernels'
#: go_backwards, Bidirectional and stateful paths untried.
KERNEL_ROWS = [
    {"go_backwards", "return_sequences", "return_state", "weight_drop"},
    {"bidirectional", "return_sequences", "stateful"},
    {"go_backwards", "stateful", "return_state"},
]
CASES = covering_rows() + [{f: f in row for f in FACTORS} for row in KERNEL_ROWS]


def _case_id(case):
    return "+".join(f for f in FACTORS if case[f]) or "plain"


def test_the_cases_cover_every_pair_of_factors():
    for a, b in itertools.combinations(FACTORS, 2):
        seen = {(case[a], case[b]) for case in covering_rows()}
        assert seen == {(False, False), (False, True), (True, False), (True, True)}, (a, b)


def expected_path(kind, case):
    """What keras-seq's dispatch must choose on this backend, with a (faked) GPU."""
    own = "loop" if case["mask"] else "fused-loop"  # keras-seq's paths: no kernel call
    if BACKEND == "jax" and (kind == "gru" or case["mixed"] or case["mask"]):
        return own  # no JAX GRU kernel; jax.experimental.rnn is float32-only, no mask
    if case["mask"]:
        return "cudnn-or-loop" if BACKEND == "tensorflow" else "loop"
    return "cudnn"


@pytest.fixture
def kernels(monkeypatch):
    calls = ref.install(monkeypatch)
    policy = keras.mixed_precision.global_policy()
    yield calls
    keras.mixed_precision.set_global_policy(policy)


def _twins(kind, case):
    """``(kernel, loop)`` layers (Bidirectional if asked), same weights."""
    cls = {"lstm": LSTM, "gru": GRU}[kind]
    kwargs = dict(return_sequences=case["return_sequences"],
                  return_state=case["return_state"], stateful=case["stateful"])
    if case["weight_drop"]:
        kwargs.update(weight_dropout=0.5, seed=11)
    if not case["bidirectional"]:
        kwargs["go_backwards"] = case["go_backwards"]
    layers = []
    for use_cudnn in ("auto", False):
        layer = cls(U, use_cudnn=use_cudnn, **kwargs)
        if case["bidirectional"]:
            backward = cls(U, use_cudnn=use_cudnn, go_backwards=True, **kwargs)
            layer = keras.layers.Bidirectional(layer, backward_layer=backward)
        layer(np.zeros((B, T, D), "float32"))
        layers.append(layer)
    layers[1].set_weights(layers[0].get_weights())
    if case["stateful"]:  # the build calls above left states behind
        for layer in layers:
            for rnn in _recurrent(layer):
                rnn.reset_state()
    return layers


def _recurrent(layer):
    if isinstance(layer, keras.layers.Bidirectional):
        return [layer.forward_layer, layer.backward_layer]
    return [layer]


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.stop_gradient(ops.cast(x, "float32"))),
                      dtype="float32")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_kernel_path_equals_the_loop(kind, case, kernels):
    if BACKEND == "jax" and kind == "gru" and any(case.values()):
        pytest.skip("JAX has no GRU kernel: the plain case checks that the loop runs")
    if case["mixed"]:
        keras.mixed_precision.set_global_policy(MIXED)
    tol = 3e-2 if case["mixed"] else 1e-5
    fused, loop = _twins(kind, case)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(B, T, D)).astype("float32")
    lengths = np.array([T, 3, 1])
    mask = (np.arange(T)[None] < lengths[:, None]) if case["mask"] else None  # right-padded
    training = case["weight_drop"]
    # Output steps that hold results on both paths (cuDNN writes zeros past a row's
    # length; the loop carries its last output): in computed order, reversed backwards.
    valid = np.ones((B, T), bool) if mask is None else mask
    if case["go_backwards"] and not case["bidirectional"]:
        valid = valid[:, ::-1]
    valid = valid[..., None].astype("float32")  # (B, T, 1)

    def call(layer):
        return keras.tree.flatten(layer(x, mask=mask, training=training))

    def weighted(outputs, weights):
        seq = outputs[0]
        if case["return_sequences"]:
            seq = seq * ops.convert_to_tensor(valid, dtype=seq.dtype)
        weights = [ops.convert_to_tensor(w) for w in weights]
        total = ops.sum(ops.cast(seq, "float32") * weights[0])
        for out, w in zip(outputs[1:], weights[1:]):
            total = total + ops.sum(ops.cast(out, "float32") * w)
        return total

    path = expected_path(kind, case)
    before = dict(kernels)
    if path in ("loop", "fused-loop"):  # the dispatch must say so, and call no kernel
        call(fused)
        for layer in _recurrent(fused):
            assert layer.last_path == path, (layer.last_path, layer.last_path_reason)
            assert layer.last_path_reason, "a loop names why not the kernel"
        assert kernels == before
        return
    calls = 2 if case["stateful"] else 1  # a stateful layer: the second call continues
    for _ in range(calls):
        got, want = call(fused), call(loop)
        assert len(got) == len(want)
        for i, (a, b) in enumerate(zip(got, want)):
            a, b = _numpy(a), _numpy(b)
            if i == 0 and case["return_sequences"]:
                a, b = a * valid, b * valid
            np.testing.assert_allclose(a, b, atol=tol, rtol=tol, err_msg=f"output {i}")

    for layer in _recurrent(fused):
        assert layer.last_path == path, (layer.last_path, layer.last_path_reason)
        assert layer.last_path_reason is None, layer.last_path_reason
    assert kernels[kind] > before[kind], "the layer said 'cudnn' but no kernel ran"

    if case["stateful"]:
        for layer in (fused, loop):
            for rnn in _recurrent(layer):
                rnn.reset_state()
    weights = [rng.normal(size=tuple(o.shape)).astype("float32") for o in got]
    g_fused = ref.grads(lambda: weighted(call(fused), weights), fused.trainable_variables)
    g_loop = ref.grads(lambda: weighted(call(loop), weights), loop.trainable_variables)
    for v, a, b in zip(fused.trainable_variables, g_fused, g_loop):
        scale = max(1.0, float(np.max(np.abs(b))))
        np.testing.assert_allclose(a, b, atol=tol * scale, rtol=tol,
                                   err_msg=f"gradient of {v.path}")


def test_left_padded_masks_never_reach_the_kernel(kernels):
    """TensorFlow checks each batch's mask at run time; other backends take no mask."""
    fused, loop = _twins("lstm", {**CASES[0], "return_sequences": True})
    x = np.random.default_rng(4).normal(size=(B, T, D)).astype("float32")
    left = (np.arange(T)[None] >= np.array([0, 2, 4])[:, None])  # padding first
    before = kernels["lstm"]
    np.testing.assert_allclose(_numpy(fused(x, mask=left)), _numpy(loop(x, mask=left)),
                               atol=1e-5)
    assert kernels["lstm"] == before


@pytest.mark.skipif(BACKEND != "jax", reason="the JAX kernel's time order (issue a)")
def test_jax_go_backwards_returns_computed_order(kernels):
    """RNN(go_backwards=True) returns outputs in computed (reversed) order, as the loop
    and TensorFlow's kernel: Keras's JAX lstm() flips them back, keras-seq must not."""
    fused, loop = _twins("lstm", {**CASES[0], "go_backwards": True, "return_sequences": True})
    x = np.random.default_rng(5).normal(size=(B, T, D)).astype("float32")
    before = kernels["lstm"]
    out = _numpy(fused(x))
    assert fused.last_path == "cudnn" and kernels["lstm"] == before + 1
    np.testing.assert_allclose(out, _numpy(loop(x)), atol=1e-5)
    np.testing.assert_allclose(out[:, -1], _numpy(loop(x))[:, -1], atol=1e-5)


@pytest.mark.skipif(BACKEND != "jax", reason="jax.experimental.rnn's dtypes (issue b)")
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_jax_mixed_precision_compiled_step_does_not_take_the_kernel(policy, kernels):
    keras.mixed_precision.set_global_policy(policy)
    layer = LSTM(U, return_sequences=True)
    model = keras.Sequential([keras.Input((T, D), batch_size=B), layer,
                              keras.layers.Dense(1, dtype="float32")])
    model.compile(keras.optimizers.SGD(0.1), "mse", jit_compile=True)
    x = np.random.default_rng(6).normal(size=(B, T, D)).astype("float32")
    loss = model.train_on_batch(x, np.zeros((B, T, 1), "float32"))
    assert np.isfinite(loss)
    assert layer.last_path == "fused-loop" and kernels["lstm"] == 0
    assert "float32 only" in layer.last_path_reason
    with pytest.raises(ValueError, match="float32 only"):
        LSTM(U, use_cudnn=True)(x)


@pytest.mark.skipif(BACKEND != "torch", reason="Keras's torch fallback (issue d)")
def test_torch_reports_the_loop_when_the_kernel_does_not_run(monkeypatch):
    """Keras's torch lstm() runs its own loop when the inputs are not on CUDA or its cuDNN
    call raises; keras-seq must report its own loop then (the fused one: no mask here),
    not 'cudnn'."""
    import torch

    monkeypatch.setattr(dispatch, "gpu_available", lambda: True)  # but the inputs: CPU
    x = np.random.default_rng(7).normal(size=(B, T, D)).astype("float32")
    for cls in (LSTM, GRU):
        layer = cls(U)
        layer(x)
        assert layer.last_path == "fused-loop", layer.last_path
        assert "not a CUDA device" in layer.last_path_reason
        with pytest.raises(ValueError, match="not a CUDA device"):
            cls(U, use_cudnn=True)(x)
    monkeypatch.setattr(dispatch, "torch_runtime_blocker", lambda inputs: None)

    def broken(*args, **kwargs):
        raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")

    monkeypatch.setattr(torch._VF, "lstm", broken)
    layer = LSTM(U)
    layer(x)
    assert layer.last_path == "fused-loop"
    assert "CUDNN_STATUS_NOT_SUPPORTED" in layer.last_path_reason
