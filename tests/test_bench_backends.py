"""bench cells / bench lm on other backends, devices and precisions, without a GPU (seconds).

The GPU side (fused cuDNN paths in the benchmark rows) is in tests/test_gpu.py.
"""

import importlib.util
import json

import keras
import pytest

from keras_seq.benchmarks import backends
from keras_seq.benchmarks.cells import (
    MARKDOWN_COLUMNS,
    format_report,
    markdown_rows,
    markdown_table,
    run_benchmark,
)
from keras_seq.cli import main

TINY = dict(vocab=20, embed=4, units=4, seq_len=3, batch=2, steps=2, repeats=2, warmup=1,
            chunk=1, progress=False)


@pytest.mark.parametrize("setting, value, expected", [
    ("backend", "theano", "expected one of tensorflow, jax, torch"),
    ("device", "tpu", "expected 'cpu' or 'gpu'"),
    ("mixed_precision", "float8", "expected one of off, mixed_float16, mixed_bfloat16"),
    ("jit_compile", "yes", "expected True or False"),
])
def test_bad_settings_say_what_was_received(setting, value, expected):
    with pytest.raises(ValueError, match=expected) as err:
        run_benchmark(**{setting: value}, **TINY)
    assert repr(value) in str(err.value)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_missing_backend_package_is_a_clear_error(capsys):
    with pytest.raises(ValueError, match="needs the 'torch' package.*pip install torch"):
        run_benchmark(backend="torch", **TINY)
    assert main(["bench", "cells", "--quick", "--backend", "torch"]) == 2
    assert "torch" in capsys.readouterr().err


def test_device_gpu_without_a_gpu_is_a_clear_error(capsys):
    if backends.gpu_visible():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="--device gpu, but the .* backend sees no GPU"):
        run_benchmark(device="gpu", **TINY)
    assert main(["bench", "cells", "--quick", "--device", "gpu"]) == 2
    assert "sees no GPU" in capsys.readouterr().err


def test_worker_environment_hides_the_gpu_for_cpu():
    env = backends.worker_env("jax", "cpu")
    assert env["KERAS_BACKEND"] == "jax"
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["JAX_PLATFORMS"] == "cpu"
    assert "CUDA_VISIBLE_DEVICES" not in backends.worker_env("jax", "gpu") or \
        backends.worker_env("jax", "gpu")["CUDA_VISIBLE_DEVICES"] != ""


def test_builtin_path_probe_restores_keras():
    from keras.src import backend as kb

    original = kb.lstm
    record = []
    with backends.probe_builtin_path(record):
        assert kb.lstm is not original
    assert kb.lstm is original


def test_mixed_precision_rows_and_markdown():
    report = run_benchmark(cells=("lstm",), head="softmax", mixed_precision="mixed_bfloat16",
                           **TINY)
    row = report["results"][0]
    assert (row["backend"], row["device"], row["precision"]) == (
        keras.backend.backend(), "cpu", "mixed_bfloat16")
    assert row["keras_seq_path"] in ("fused-loop", "loop")
    assert row["builtin_path"] == "loop"  # no GPU: Keras's cuDNN function declines
    assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
    assert keras.mixed_precision.global_policy().name == "float32"  # put back
    assert "mixed_bfloat16" in format_report(report)
    table = markdown_table(markdown_rows(report), MARKDOWN_COLUMNS)
    assert table.count("\n") == 2
    assert f"| lstm | {keras.backend.backend()} | cpu | mixed_bfloat16 |" in table


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_quick_bench_cells_on_jax_in_a_worker():
    # Under TensorFlow (the default run) the benchmark runs in a JAX worker process.
    report = run_benchmark(cells=("gru",), head="none", backend="jax", device="cpu", **TINY)
    assert report["config"]["backend"] == "jax" and report["config"]["device"] == "cpu"
    assert report["environment"]["backend"] == "jax"
    paths = {row["cell"]: (row["keras_seq_path"], row["builtin_path"])
             for row in report["results"]}
    # On a CPU keras-seq runs its JAX fused kernel (_fused_jax.py); Keras's JAX GRU is its
    # backend gru() (a lax.scan, on any device: JAX has no cuDNN GRU).
    assert paths == {"gru": ("fused-loop", "backend-loop")}
    assert all(row["keras_seq_jit"] == "xla" for row in report["results"])  # JAX compiles
    assert len(report["results"][0]["paired_ratios"]) == TINY["repeats"]


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_worker_failure_names_the_error():
    with pytest.raises(RuntimeError, match="steps=0"):
        backends.run_worker("keras_seq.benchmarks.cells",
                            {**TINY, "cells": ["lstm"], "steps": 0}, "jax", "cpu", echo=False)


def test_bench_lm_speed_quick(capsys):
    assert main(["bench", "lm", "--speed", "--quick", "--cells", "lstm", "--data",
                 "python-docs", "--split-ratio", "90/5/5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["results"]
    assert row["cell"] == "lstm" and row["backend"] == keras.backend.backend()
    assert row["keras_seq_path"] in ("fused-loop", "loop") and row["builtin_path"] == "loop"
    assert row["keras_seq_tokens_per_s"] > 0 and row["builtin_tokens_per_s"] > 0
    assert out["config"]["num_layers"] == 1 and out["config"]["steps"] == 2


def test_bench_lm_speed_refuses_weight_drop():
    from keras_seq.benchmarks.lm import run_speed

    with pytest.raises(ValueError, match="built-in layers have no weight drop"):
        run_speed(cells=("lstm",), weight_dropout=0.3)
