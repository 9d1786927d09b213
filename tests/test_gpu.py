"""GPU tests (marker ``gpu``): keras-seq's LSTM and GRU on their backend's fused cuDNN
kernel against their own loop (``use_cudnn=False``), on whichever Keras backend runs.

Skipped unless the running backend sees a GPU (``keras_seq.layers.dispatch.gpu_available``).
Run them with ``KERAS_BACKEND=jax pytest -m gpu tests/test_gpu.py`` (also ``torch``,
``tensorflow``), or through ``make bench-gpu BACKEND=jax``, which runs them before the GPU
benchmarks. Written with ``keras.ops`` and numpy; only :func:`grads` branches per backend.

fp32 parity is checked to 1e-4 with TF32 turned off on every backend (cuDNN and the
matmuls of the loop would otherwise round inputs to 10-bit mantissas).

With ``KERAS_SEQ_REFERENCE_KERNELS=1`` they run on a CPU instead, each backend's device
kernel replaced by the reference of the same contract in ``tests/backends/reference_kernels.py``
(``make bench-gpu`` with ``--device cpu`` does this): a dry run of their expectations.
"""

import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_seq.layers import GRU, LSTM


def _gpu_available() -> bool:
    try:
        from keras_seq.layers.dispatch import gpu_available
    except ImportError:
        return False
    return bool(gpu_available())


REFERENCE = os.environ.get("KERAS_SEQ_REFERENCE_KERNELS") == "1"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not (REFERENCE or _gpu_available()),
                       reason=f"no GPU visible to the {keras.backend.backend()} backend"),
]


@pytest.fixture(autouse=True)
def reference_kernels(monkeypatch):
    """On a CPU with KERAS_SEQ_REFERENCE_KERNELS=1: the reference kernels in place of
    the device's (nothing is replaced on a GPU)."""
    if REFERENCE:
        from tests.backends import reference_kernels as ref  # lazy: a test helper

        ref.install(monkeypatch)

B, T, D, U = 4, 9, 5, 8
ATOL = RTOL = 1e-4
CELLS = {"lstm": LSTM, "gru": GRU}
BACKEND = keras.backend.backend()


def has_kernel(kind, mixed=False):
    """Whether keras-seq offers this backend's fused kernel for ``kind``: JAX has an LSTM
    kernel only (jax.experimental.rnn), float32 only; TensorFlow and PyTorch have both."""
    if BACKEND == "jax":
        return kind == "lstm" and not mixed
    return True


def kernel_path(kind, mixed=False):
    """``last_path`` of a layer with ``use_cudnn`` on, unmasked."""
    return "cudnn" if has_kernel(kind, mixed) else "fused-loop"  # else keras-seq's own kernel


def use_cudnn_for(kind):
    """``True`` where the kernel exists (an error if it does not run), else ``"auto"``."""
    return True if has_kernel(kind) else "auto"


@pytest.fixture(autouse=True)
def strict_fp32():
    """float32 policy and no TF32 on the running backend, put back afterwards."""
    backend = keras.backend.backend()
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    restore = []
    if backend == "jax":
        import jax

        old = jax.config.jax_default_matmul_precision
        jax.config.update("jax_default_matmul_precision", "highest")
        restore.append(lambda: jax.config.update("jax_default_matmul_precision", old))
    elif backend == "torch":
        import torch

        old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False

        def back():
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old

        restore.append(back)
    elif backend == "tensorflow":
        import tensorflow as tf

        old = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        restore.append(lambda: tf.config.experimental.enable_tensor_float_32_execution(old))
    try:
        yield
    finally:
        for fn in restore:
            fn()
        keras.mixed_precision.set_global_policy(policy)


def grads(fn, variables):
    """Gradients of the scalar ``fn()`` with respect to Keras ``variables``, as numpy
    arrays: ``tf.GradientTape``, ``jax.grad`` through ``keras.StatelessScope``, or
    ``torch.autograd.grad``."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = fn()
        return [np.asarray(g) for g in tape.gradient(loss, [v.value for v in variables])]
    if backend == "jax":
        import jax

        def pure(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return fn()

        return [np.asarray(g) for g in jax.grad(pure)([v.value for v in variables])]
    if backend == "torch":
        import torch

        loss = fn()
        return [g.detach().cpu().numpy()
                for g in torch.autograd.grad(loss, [v.value for v in variables])]
    raise NotImplementedError(f"grads: no gradient helper for the {backend!r} backend")


def numpy(x):
    # stop_gradient: PyTorch refuses numpy() of a tensor that requires grad.
    return np.asarray(ops.convert_to_numpy(ops.stop_gradient(ops.convert_to_tensor(x))),
                      dtype="float32")


def close(a, b, what, atol=ATOL, rtol=RTOL):
    np.testing.assert_allclose(numpy(a), numpy(b), atol=atol, rtol=rtol, err_msg=what)


def data(seed=0, batch=B, steps=T):
    rng = np.random.default_rng(seed)
    x = (0.5 * rng.standard_normal((batch, steps, D))).astype("float32")
    return x, rng


def twins(kind, **kwargs):
    """``(fused, loop)``: the same layer with ``use_cudnn=True`` / ``False``, same weights."""
    cls = CELLS[kind]
    fused = cls(U, use_cudnn=kwargs.pop("use_cudnn", use_cudnn_for(kind)), **kwargs)
    loop = cls(U, use_cudnn=False, **kwargs)
    x, _ = data(seed=99)
    fused(x)
    loop(x)
    loop.set_weights(fused.get_weights())
    if kwargs.get("stateful"):  # the build calls above left states behind
        fused.reset_state()
        loop.reset_state()
    return fused, loop


def initial_states(kind, rng, batch=B):
    n = 2 if kind == "lstm" else 1
    return [(0.3 * rng.standard_normal((batch, U))).astype("float32") for _ in range(n)]


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_fused_matches_loop_outputs_states_and_gradients(kind):
    fused, loop = twins(kind, return_sequences=True, return_state=True)
    x, rng = data()
    init = initial_states(kind, rng)
    out_f = fused(x, initial_state=init)
    out_l = loop(x, initial_state=init)
    assert fused.last_path == kernel_path(kind), (fused.last_path, fused.last_path_reason)
    assert loop.last_path in ("fused-loop", "loop"), loop.last_path
    close(out_f[0], out_l[0], "outputs")
    for i, (a, b) in enumerate(zip(out_f[1:], out_l[1:])):
        close(a, b, f"final state {i}")

    # As tensors: numpy * torch tensor would turn the tensor into an array.
    w_seq = ops.convert_to_tensor(rng.standard_normal((B, T, U)).astype("float32"))
    w_state = ops.convert_to_tensor(rng.standard_normal((B, U)).astype("float32"))

    def loss_of(layer):
        def fn():
            seq, *states = layer(x, initial_state=init)
            return ops.sum(seq * w_seq) + sum(ops.sum(s * w_state) for s in states)
        return fn

    g_f = grads(loss_of(fused), fused.trainable_variables)
    g_l = grads(loss_of(loop), loop.trainable_variables)
    assert fused.last_path == kernel_path(kind)
    for v, a, b in zip(fused.trainable_variables, g_f, g_l):
        close(a, b, f"gradient of {v.path}")


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_stateful_across_two_calls(kind):
    fused, loop = twins(kind, return_sequences=True, stateful=True)
    x, _ = data(seed=1)
    x1, x2 = x[:, :5], x[:, 5:]
    outputs = []
    for step, chunk in enumerate((x1, x2)):
        outputs.append(numpy(fused(chunk)))
        close(outputs[-1], loop(chunk), f"call {step + 1}")
        assert fused.last_path == kernel_path(kind)
    # The second call continued from the first call's state: a fresh run of x2 differs.
    fresh = CELLS[kind](U, return_sequences=True, use_cudnn=False)
    fresh(x2)
    fresh.set_weights(fused.get_weights())
    assert not np.allclose(outputs[1], numpy(fresh(x2)), atol=1e-3)
    fused.reset_state()
    close(fused(x1), outputs[0], "first call again after reset_state")


def _masks():
    lengths = np.array([T, 6, 3, 1])
    right = np.arange(T)[None, :] < lengths[:, None]  # (B, T): True then False
    return {"right-padded": right, "left-padded": right[:, ::-1].copy()}


@pytest.mark.parametrize("padding", ["right-padded", "left-padded"])
@pytest.mark.parametrize("kind", sorted(CELLS))
def test_masks_use_the_kernel_or_fall_back(kind, padding):
    fused, loop = twins(kind, return_sequences=True, return_state=True, use_cudnn="auto")
    x, _ = data(seed=2)
    mask = _masks()[padding]
    out_f = fused(x, mask=ops.convert_to_tensor(mask))  # no error, whichever path
    out_l = loop(x, mask=ops.convert_to_tensor(mask))
    valid = mask[..., None].astype("float32")
    close(numpy(out_f[0]) * valid, numpy(out_l[0]) * valid, "outputs at unmasked steps")
    for i, (a, b) in enumerate(zip(out_f[1:], out_l[1:])):
        close(a, b, f"final state {i}")
    if BACKEND == "tensorflow":
        # TensorFlow's kernel takes right-padded masks; a run-time check sends any other
        # mask to the loop, decided per batch.
        assert fused.last_path == "cudnn-or-loop", fused.last_path
    else:  # JAX's and PyTorch's fused kernels take no mask: the layer loops
        assert fused.last_path == "loop", fused.last_path


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_bidirectional(kind):
    cls = CELLS[kind]
    fused = keras.layers.Bidirectional(cls(U, return_sequences=True,
                                           use_cudnn=use_cudnn_for(kind)))
    loop = keras.layers.Bidirectional(cls(U, return_sequences=True, use_cudnn=False))
    x, rng = data(seed=3)
    fused(x)
    loop(x)
    loop.set_weights(fused.get_weights())
    close(fused(x), loop(x), "outputs")
    assert fused.forward_layer.last_path == kernel_path(kind)
    assert fused.backward_layer.last_path == kernel_path(kind)
    w = ops.convert_to_tensor(rng.standard_normal((B, T, 2 * U)).astype("float32"))
    g_f = grads(lambda: ops.sum(fused(x) * w), fused.trainable_variables)
    g_l = grads(lambda: ops.sum(loop(x) * w), loop.trainable_variables)
    for v, a, b in zip(fused.trainable_variables, g_f, g_l):
        close(a, b, f"gradient of {v.path}")


def _train_model(kind, **layer_kwargs):
    layer = CELLS[kind](U, return_sequences=True, name="rnn", **layer_kwargs)
    model = keras.Sequential([keras.Input((T, D), batch_size=B), layer,
                              keras.layers.Dense(1, dtype="float32")])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model, layer


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_training_step_with_weight_drop(kind):
    model, layer = _train_model(kind, weight_dropout=0.5, seed=7)
    x, rng = data(seed=4)
    y = rng.standard_normal((B, T, 1)).astype("float32")
    # Weight drop is active in training calls only, and the kernel still runs.
    assert not np.allclose(numpy(layer(x, training=True)), numpy(layer(x, training=False)))
    assert layer.last_path == kernel_path(kind)
    before = numpy(layer.cell.recurrent_kernel)
    loss = float(np.asarray(model.train_on_batch(x, y)))
    assert np.isfinite(loss)
    assert layer.last_path == kernel_path(kind)
    assert not np.allclose(numpy(layer.cell.recurrent_kernel), before)


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_training_step_mixed_float16(kind):
    keras.mixed_precision.set_global_policy("mixed_float16")  # put back by strict_fp32
    model, layer = _train_model(kind)
    assert layer.compute_dtype == "float16"
    assert layer.cell.kernel.dtype == "float32"  # variables stay float32
    x, rng = data(seed=5)
    y = rng.standard_normal((B, T, 1)).astype("float32")
    before = numpy(layer.cell.kernel)
    loss = float(np.asarray(model.train_on_batch(x, y)))  # compiled: JAX's would crash
    assert np.isfinite(loss)
    assert layer.last_path == kernel_path(kind, mixed=True), layer.last_path_reason
    assert not np.allclose(numpy(layer.cell.kernel), before)
    # float16 kernel against the float16 loop: equal to float16 rounding.
    loop = CELLS[kind](U, return_sequences=True, use_cudnn=False)
    loop(x)
    loop.set_weights(layer.get_weights())
    close(layer(x), loop(x), "float16 outputs", atol=2e-2, rtol=2e-2)


@pytest.mark.skipif(REFERENCE, reason="benchmarks need the real device")
def test_benchmark_rows_name_the_gpu_paths():
    from keras_seq.benchmarks.cells import run_benchmark

    report = run_benchmark(cells=("lstm", "gru"), steps=2, repeats=1, warmup=1, vocab=20,
                           embed=4, units=U, seq_len=5, batch=2, head="none", progress=False,
                           device="gpu")
    for row in report["results"]:
        assert row["device"] == "gpu"
        assert row["keras_seq_path"] == kernel_path(row["cell"]), row
        assert row["builtin_path"] in ("cudnn", "backend-loop"), row


def test_jax_gru_has_no_kernel_and_says_so():
    if BACKEND != "jax":
        pytest.skip("JAX only: jax.experimental.rnn has an LSTM kernel only")
    x, _ = data()
    with pytest.raises(ValueError, match="no fused GRU kernel"):
        GRU(U, use_cudnn=True)(x)
    layer = GRU(U)
    layer(x)
    assert layer.last_path == "fused-loop" and "no fused GRU kernel" in layer.last_path_reason
