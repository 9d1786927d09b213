"""TensorFlow's fused kernels with and without XLA, against Keras's built-in layer.

The measurement behind ``_fused.XLA_WHEN_TRAINING`` (docs/backends-and-gpu.md, "What each
lever gave"): one train step of the recurrent layer alone (loss = a function of its
outputs, SGD), B x T x D inputs, for each variant of keras-seq's fused kernel:

- ``plain``: the loops as TensorFlow ops;
- ``loops``: each ``tf.while_loop`` (forward and backward) compiled by XLA;
- ``whole``: the whole kernel (loops, the code around them and its gradient) compiled;

and for ``keras.layers.LSTM``/``GRU``. Rounds alternate the variants; each prints its
median time per step, its ratio against the built-in's median and its range.

Last, the floor: the step's matmuls alone (the input projection and its kernel's gradient,
the recurrent matmul forward and back at every step, the recurrent kernel's gradient) at
the rates this CPU reaches on the same shapes (a chain of ``(B, U) @ (U, G·U)`` in a
``tf.while_loop``; one ``(T·B, U)ᵀ @ (T·B, G·U)``), and the largest ratio against the
built-in that a step with no other cost would reach.

    python -m tools.fused_variants --cell lstm          # ~1 min on 2 cores
    python -m tools.fused_variants --cell gru --rounds 8
"""

from __future__ import annotations

import argparse
import functools
import platform
import time

import keras
import numpy as np
import tensorflow as tf

from keras_seq.layers import GRU, LSTM, _fused
from keras_seq.layers import gru as gru_module
from keras_seq.layers import lstm as lstm_module
from keras_seq.machine import describe, load_1min

VARIANTS = ("plain", "loops", "whole")
KERNELS = {"lstm": "lstm_sequence", "gru": "gru_sequence"}


def variant_kernel(variant: str, name: str):
    """A ``fused_kernel(name, training)`` stand-in that gives ``variant`` of ``name``."""
    kernel = getattr(_fused, name)

    def lookup(asked, training=False):
        assert asked == name, (asked, name)
        if variant == "loops":
            return functools.partial(kernel, jit_compile=bool(training))
        if variant == "whole" and training:
            return tf.function(kernel, jit_compile=True, autograph=False)
        return kernel

    return lookup


def train_step(layer, x):
    """A compiled SGD step of ``layer`` alone on ``x`` (B, T, D)."""
    optimizer = keras.optimizers.SGD(0.01)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            y = layer(x, training=True)  # (B, T, U)
            loss = tf.reduce_mean(y * tf.cos(y))
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply_gradients(zip(grads, layer.trainable_variables))
        return loss

    return step


def build_steps(cell: str, x, units: int) -> dict:
    """``{variant: step}`` for keras-seq's variants and ``"keras"``, each warmed up."""
    module = lstm_module if cell == "lstm" else gru_module
    ours, theirs = (LSTM, keras.layers.LSTM) if cell == "lstm" else (GRU, keras.layers.GRU)
    steps = {}
    for variant in (*VARIANTS, "keras"):
        layer = (theirs if variant == "keras" else ours)(units, return_sequences=True)
        layer.build(tuple(x.shape))
        step = train_step(layer, x)
        original = module.fused_kernel
        if variant != "keras":
            module.fused_kernel = variant_kernel(variant, KERNELS[cell])
        try:
            for _ in range(3):  # the first call traces with the variant in place
                step()
        finally:
            module.fused_kernel = original
        steps[variant] = step
    return steps


def measure(steps: dict, rounds: int, per_round: int) -> dict:
    """Seconds per step, one list per variant, the variants alternated each round."""
    times = {variant: [] for variant in steps}
    for _ in range(rounds):
        for variant, step in steps.items():
            start = time.perf_counter()
            for _ in range(per_round):
                step()
            times[variant].append((time.perf_counter() - start) / per_round)
    return times


def report(cell: str, times: dict) -> list[str]:
    """One line per variant: median ms, ratio against the built-in, range."""
    keras_median = float(np.median(times["keras"]))
    lines = []
    for variant, seconds in times.items():
        median = float(np.median(seconds))
        lines.append(f"{cell} {variant:6s} {median * 1e3:7.2f} ms/step  "
                     f"{keras_median / median:.2f}x the built-in  "
                     f"range {min(seconds) * 1e3:.2f}-{max(seconds) * 1e3:.2f} ms")
    return lines


def seconds_per_call(fn, *args, calls: int = 10) -> float:
    """Median wall seconds of ``fn(*args)`` over 5 rounds of ``calls`` calls (one warm-up)."""
    fn(*args)
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        rounds.append((time.perf_counter() - start) / calls)
    return float(np.median(rounds))


def matmul_floor(cell: str, batch: int, steps: int, input_dim: int, units: int) -> dict:
    """The step's matmul FLOPs and their time at the rates measured here (see the module
    docstring); ``floor_s`` is the sum of both kinds' times."""
    width = (4 if cell == "lstm" else 3) * units  # G·U
    rows = batch * steps  # T·B
    kernel = tf.random.normal((units, width))
    chain_length = 100

    @tf.function(autograph=False)
    def chain(h):  # (B, U) -> (B, U), chain_length dependent matmuls
        def body(i, h):
            return i + 1, tf.matmul(h, kernel)[:, :units]  # (B, G·U) -> (B, U)

        return tf.while_loop(lambda i, _: i < chain_length, body, (0, h))[1]

    @tf.function(autograph=False)
    def large(a, b):  # (T·B, U)ᵀ @ (T·B, G·U) -> (U, G·U)
        return tf.matmul(a, b, transpose_a=True)

    small_rate = 2 * batch * units * width * chain_length / seconds_per_call(
        chain, tf.random.normal((batch, units)))
    large_rate = 2 * rows * units * width / seconds_per_call(
        large, tf.random.normal((rows, units)), tf.random.normal((rows, width)))
    recurrent_flops = 2 * steps * (2 * batch * units * width)  # forward and back, per step
    large_flops = 2 * (2 * rows * input_dim * width) + 2 * rows * units * width
    return {"small_gflops": small_rate / 1e9, "large_gflops": large_rate / 1e9,
            "floor_s": recurrent_flops / small_rate + large_flops / large_rate}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", choices=sorted(KERNELS), default="lstm")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=35)
    parser.add_argument("--input-dim", type=int, default=128)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=6, help="alternated rounds")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round")
    args = parser.parse_args(argv)
    shape = (args.batch, args.seq_len, args.input_dim)
    x = tf.constant(np.random.default_rng(0).normal(size=shape).astype("float32"))
    machine = describe()
    print(f"{machine['cpu']} ({machine['cores']} cores), load {machine['load_1min']} at the "
          f"start; TensorFlow {tf.__version__}, Python {platform.python_version()}; "
          f"B, T, D, U = {shape + (args.units,)}")
    times = measure(build_steps(args.cell, x, args.units), args.rounds, args.steps)
    print("\n".join(report(args.cell, times)))
    floor = matmul_floor(args.cell, args.batch, args.seq_len, args.input_dim, args.units)
    keras_median = float(np.median(times["keras"]))
    print(f"{args.cell} floor  {floor['floor_s'] * 1e3:7.2f} ms/step  "
          f"{keras_median / floor['floor_s']:.2f}x the built-in  (the matmuls alone: "
          f"{floor['small_gflops']:.0f} GFLOP/s per step's matmul, "
          f"{floor['large_gflops']:.0f} GFLOP/s for the whole-sequence ones)")
    print(f"load {load_1min()} at the end")


if __name__ == "__main__":
    main()
