"""Shared helpers for the export / runtime / demo tests (a tiny trained run, made once).

Not a conftest: the other test modules import what they need from here.
"""

from __future__ import annotations

import numpy as np

_CACHE: dict = {}

WORDS = "the cat dog sat ran on a mat log and big small red".split()


def corpus_text(lines: int = 500, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return "\n".join(" ".join(rng.choice(WORDS, rng.integers(3, 9))) for _ in range(lines)) + "\n"


def trained_run(tmp_path_factory, cell: str = "lstm", num_layers: int = 1):
    """A run directory trained for a few steps (once per session and cell)."""
    key = (cell, num_layers)
    if key not in _CACHE:
        from keras_seq.tasks.lm.config import LMConfig
        from keras_seq.tasks.lm.task import train_lm

        root = tmp_path_factory.mktemp(f"run_{cell}_{num_layers}")
        data = root / "tiny.txt"
        data.write_text(corpus_text())
        config = LMConfig(data=str(data), embed_dim=8, units=12, batch_size=4, bptt=6,
                          epochs=1, max_steps_per_epoch=5, sample_tokens=0, histogram_freq=0,
                          cell=cell, num_layers=num_layers, seed=3)
        train_lm(config, root / "run", verbose=0, printer=lambda *a: None)
        _CACHE[key] = root / "run"
    return _CACHE[key]


ALL_VARIANTS = ("float32", "float16", "dynamic", "int8", "int16x8")


def exported(tmp_path_factory, variants=ALL_VARIANTS, cell="lstm"):
    """TFLite export of the tiny run (once per session, variants and cell)."""
    key = ("export", tuple(variants), cell)
    if key not in _CACHE:
        from keras_seq.export.tflite import export_tflite

        run = trained_run(tmp_path_factory, cell=cell)
        out = tmp_path_factory.mktemp("tflite")
        manifest = export_tflite(run, out, variants=variants, seq_length=8, calib_tokens=40,
                                 parity_tokens=40, val_tokens=200, printer=lambda *a: None)
        _CACHE[key] = (out, manifest)
    return _CACHE[key]
