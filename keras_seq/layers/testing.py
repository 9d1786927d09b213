"""Check a keras-seq layer against a Keras built-in: outputs, states and gradients.

Used by the test-suite; handy when changing a cell::

    from keras_seq.layers.testing import compare_with_reference
    diffs = compare_with_reference(LSTM(8, return_state=True),
                                   keras.layers.LSTM(8, return_state=True), x)
    assert max(diffs.values()) < 1e-5
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def _as_list(outputs):
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def run_with_gradients(layer, inputs, weights_seed=0, **call_kwargs):
    """Call ``layer`` and differentiate a fixed random projection of all its outputs.

    Returns ``(outputs, input_grad, weight_grads)`` as numpy arrays; the weight
    gradients follow ``layer.trainable_weights`` order.
    """
    x = tf.convert_to_tensor(inputs)
    rng = np.random.default_rng(weights_seed)
    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = _as_list(layer(x, **call_kwargs))
        # A random weighting makes every output element matter to the loss.
        loss = sum(
            tf.reduce_sum(out * rng.normal(size=tuple(out.shape)).astype("float32"))
            for out in outputs
        )
    grads = tape.gradient(loss, [x] + list(layer.trainable_weights))
    grads = [
        np.zeros(v.shape, "float32") if g is None else np.asarray(g)
        for g, v in zip(grads, [x] + list(layer.trainable_weights))
    ]
    return [np.asarray(o) for o in outputs], grads[0], grads[1:]


def compare_with_reference(ours, reference, inputs, **call_kwargs):
    """Copy ``reference``'s weights into ``ours`` and compare both on ``inputs``.

    Args:
        ours: a keras-seq layer (unbuilt or built).
        reference: the Keras layer with the same settings.
        inputs: ``(batch, timesteps, features)`` array.
        **call_kwargs: passed to both calls (``mask``, ``initial_state``, ``training``).

    Returns:
        dict of maximum absolute differences: ``outputs`` (every returned
        tensor: sequence/last output and final states), ``input_grad`` and
        ``weight_grads``.
    """
    reference(inputs, **call_kwargs)
    ours(inputs, **call_kwargs)
    if len(ours.get_weights()) != len(reference.get_weights()):
        raise ValueError(
            f"compare_with_reference: {type(ours).__name__} has {len(ours.get_weights())} "
            f"weights, {type(reference).__name__} has {len(reference.get_weights())}; "
            "build both with the same settings (units, use_bias, reset_after)."
        )
    ours.set_weights(reference.get_weights())
    for layer in (ours, reference):  # a stateful layer carries its build call's states:
        if getattr(layer, "stateful", False):  # ours ran with other weights, so zero both
            layer.reset_state()
    ref_out, ref_dx, ref_dw = run_with_gradients(reference, inputs, **call_kwargs)
    out, dx, dw = run_with_gradients(ours, inputs, **call_kwargs)
    if len(out) != len(ref_out):
        raise ValueError(
            f"compare_with_reference: {len(out)} outputs vs {len(ref_out)} from the "
            "reference; use the same return_sequences / return_state."
        )
    return {
        "outputs": max(float(np.max(np.abs(a - b))) for a, b in zip(out, ref_out)),
        "input_grad": float(np.max(np.abs(dx - ref_dx))),
        "weight_grads": max(float(np.max(np.abs(a - b))) for a, b in zip(dw, ref_dw)),
    }
