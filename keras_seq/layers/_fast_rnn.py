"""The fast recurrent loop used by the keras-seq layers (TensorFlow backend).

The caller has already projected every timestep's input in one matmul
(``(B, T, D) @ (D, G·U)``), so each loop step runs only the recurrent half of
the cell: one fused ``h @ recurrent_kernel`` plus elementwise gate math.

Semantics match ``keras.src.backend.tensorflow.rnn.rnn``: at a masked step the
previous states are carried over, and the previous output too (zeros before
the first unmasked step), or zeros with ``zero_output_for_mask=True``;
``go_backwards`` walks time in reverse and returns the outputs in the order
they were computed.
"""

from __future__ import annotations

import tensorflow as tf

# Sequences up to this many (static) steps are unrolled into straight-line graph
# code even without unroll=True. Measured on CPU (LSTM 256, T=35, batch 32),
# unrolled fwd+bwd was ~40% slower than tf.while_loop, so it is off by default.
UNROLL_MAX_STEPS = 0


def fast_rnn(
    step,
    x_proj,
    initial_states,
    mask=None,
    go_backwards=False,
    unroll=False,
    return_sequences=True,
    zero_output_for_mask=False,
):
    """Run ``step`` over time.

    Args:
        step: ``step(x_t, states) -> (output, new_states)`` with ``x_t`` of
            shape ``(B, G·U)`` and ``states`` a list of ``(B, S)`` tensors.
        x_proj: projected inputs, shape ``(B, T, G·U)``.
        initial_states: list of ``(B, S)`` tensors.
        mask: optional boolean ``(B, T)``; ``False`` marks padding.
        go_backwards: process time in reverse.
        unroll: force a Python-unrolled loop (needs a static ``T``).
        return_sequences: whether to collect every step's output.
        zero_output_for_mask: masked steps output zeros instead of the previous
            output (``keras.layers.Bidirectional`` sets this).

    Returns:
        ``(last_output, outputs, states)``: ``(B, U)``, ``(B, T, U)`` (or
        ``(B, 1, U)`` when ``return_sequences=False``) and a list of ``(B, S)``.
    """
    xs = tf.transpose(x_proj, [1, 0, 2])  # (T, B, G·U)
    masks = None
    if mask is not None:
        masks = tf.expand_dims(tf.transpose(tf.cast(mask, tf.bool)), -1)  # (T, B, 1)
    if go_backwards:
        xs = tf.reverse(xs, [0])
        masks = None if masks is None else tf.reverse(masks, [0])
    states = list(initial_states)
    steps = xs.shape[0]
    if unroll and steps is None:
        raise ValueError(
            "fast_rnn: received unroll=True with an unknown number of timesteps; "
            "expected a static time dimension. Give Input() a fixed `shape`, or "
            "pass unroll=False."
        )
    if steps is not None and (unroll or steps <= UNROLL_MAX_STEPS):
        return _unrolled(step, xs, states, masks, steps, return_sequences, zero_output_for_mask)
    return _while(step, xs, states, masks, return_sequences, zero_output_for_mask)


def _masked(m, new, old):
    return tf.where(m, new, old)  # m: (B, 1) broadcasts over units


def _unrolled(step, xs, states, masks, steps, return_sequences, zero_output):
    outputs = []
    prev = None
    for t in range(steps):
        output, new_states = step(xs[t], states)  # (B, U), [(B, S)]
        if masks is not None:
            m = masks[t]  # (B, 1)
            prev = tf.zeros_like(output) if prev is None or zero_output else prev
            output = _masked(m, output, prev)
            new_states = [_masked(m, n, s) for n, s in zip(new_states, states)]
            prev = output
        states = list(new_states)
        outputs.append(output)
    last = outputs[-1]
    seq = tf.stack(outputs, axis=1) if return_sequences else tf.expand_dims(last, 1)
    return last, seq, states


def _while(step, xs, states, masks, return_sequences, zero_output):
    steps = tf.shape(xs)[0]
    x_ta = tf.TensorArray(xs.dtype, size=steps).unstack(xs)
    m_ta = None if masks is None else tf.TensorArray(tf.bool, size=steps).unstack(masks)
    # Every keras-seq cell's output has the shape and dtype of its first state.
    zeros = tf.zeros_like(states[0])
    out_ta = tf.TensorArray(zeros.dtype, size=steps if return_sequences else 1)

    def body(t, out_ta, prev, *states):
        states = list(states)
        output, new_states = step(x_ta.read(t), states)
        if m_ta is not None:
            m = m_ta.read(t)
            output = _masked(m, output, zeros if zero_output else prev)
            new_states = [_masked(m, n, s) for n, s in zip(new_states, states)]
        out_ta = out_ta.write(t if return_sequences else 0, output)
        return (t + 1, out_ta, output, *new_states)

    result = tf.while_loop(
        lambda t, *_: t < steps,
        body,
        (tf.constant(0), out_ta, zeros, *states),
        maximum_iterations=steps,
        swap_memory=True,
    )
    last, states = result[2], list(result[3:])
    seq = tf.transpose(result[1].stack(), [1, 0, 2])  # (B, T, U)
    return last, seq, states
