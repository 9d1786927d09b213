"""tools/fused_variants.py, the measurement behind _fused.XLA_WHEN_TRAINING, at toy size."""

import re

import pytest

from keras_seq.layers import gru, lstm
from tools import fused_variants


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_every_variant_runs_and_the_lookup_is_restored(cell, capsys):
    module = lstm if cell == "lstm" else gru
    original = module.fused_kernel
    fused_variants.main(["--cell", cell, "--batch", "2", "--seq-len", "3", "--input-dim", "2",
                         "--units", "3", "--rounds", "1", "--steps", "1"])
    out = capsys.readouterr().out
    rows = re.findall(rf"^{cell} (\w+) +[\d.]+ ms/step +([\d.]+)x the built-in", out, re.M)
    assert [name for name, _ in rows] == ["plain", "loops", "whole", "keras", "floor"], out
    assert rows[3][1] == "1.00"
    assert module.fused_kernel is original


def test_the_variants_are_what_they_say():
    kernel = fused_variants.variant_kernel("loops", "gru_sequence")
    assert kernel("gru_sequence", training=True).keywords == {"jit_compile": True}
    assert kernel("gru_sequence", training=False).keywords == {"jit_compile": False}
    whole = fused_variants.variant_kernel("whole", "lstm_sequence")
    assert whole("lstm_sequence", training=True).function_spec.jit_compile is True
    assert fused_variants.variant_kernel("plain", "lstm_sequence")("lstm_sequence", True) is (
        fused_variants._fused.lstm_sequence)


def test_the_floor_counts_the_steps_matmuls():
    """A faster CPU shrinks the floor; the FLOPs behind it are the step's, by hand."""
    floor = fused_variants.matmul_floor("lstm", batch=2, steps=3, input_dim=2, units=4)
    assert floor["small_gflops"] > 0 and floor["large_gflops"] > 0
    # LSTM, G·U = 16, T·B = 6: 3 steps x 2 x (2·2·4·16) recurrent + 2·(2·6·2·16) + 2·6·4·16
    recurrent, large = 3 * 2 * (2 * 2 * 4 * 16), 2 * (2 * 6 * 2 * 16) + 2 * 6 * 4 * 16
    expected = recurrent / (floor["small_gflops"] * 1e9) + large / (floor["large_gflops"] * 1e9)
    assert floor["floor_s"] == pytest.approx(expected)
