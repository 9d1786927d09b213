"""Shared helpers for the export / runtime / demo tests (a tiny trained run, made once
per test run for every xdist worker: :mod:`tests.shared_cache`).

Not a conftest: the other test modules import what they need from here.
"""

from __future__ import annotations

import numpy as np

from tests.shared_cache import once, shared_folder

WORDS = "the cat dog sat ran on a mat log and big small red".split()


def corpus_text(lines: int = 500, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return "\n".join(" ".join(rng.choice(WORDS, rng.integers(3, 9))) for _ in range(lines)) + "\n"


def trained_run(tmp_path_factory, cell: str = "lstm", num_layers: int = 1):
    """A run directory trained for a few steps (once per test run, cell and depth)."""
    def build(root):
        from keras_seq.tasks.lm.config import LMConfig
        from keras_seq.tasks.lm.task import train_lm

        data = root / "tiny.txt"
        data.write_text(corpus_text())
        config = LMConfig(data=str(data), embed_dim=8, units=12, batch_size=4, bptt=6,
                          epochs=1, max_steps_per_epoch=5, sample_tokens=0, histogram_freq=0,
                          cell=cell, num_layers=num_layers, seed=3)
        train_lm(config, root / "run", verbose=0, printer=lambda *a: None)

    return shared_folder(tmp_path_factory, f"run_{cell}_{num_layers}", build) / "run"


# A deterministic toy corpus: a few fixed sentences in random order, so the next word is
# mostly determined by the previous ones and a small LSTM learns it in a few seconds.
TOY_SENTENCES = ("the cat sat on a mat", "a big dog ran on the log",
                 "the small red cat ran and sat", "a dog sat on the big red mat",
                 "the log and the mat")


def toy_corpus_text(lines: int = 400, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(TOY_SENTENCES), lines)
    return "\n".join(TOY_SENTENCES[i] for i in picks) + "\n"


LEARNED_UNITS = 64


def learned_run(tmp_path_factory):
    """An LSTM run that has learned the toy corpus (val PPL ≈ 1.8 against 16 for uniform),
    with every weight matrix ≥ 1,024 elements (vocabulary 16, embedding and units 64) so
    TFLite's dynamic-range quantizer really quantizes it. About 27 steps, a few seconds."""
    def build(root):
        from keras_seq.tasks.lm.config import LMConfig
        from keras_seq.tasks.lm.task import train_lm

        data = root / "toy.txt"
        data.write_text(toy_corpus_text())
        config = LMConfig(data=str(data), embed_dim=LEARNED_UNITS, units=LEARNED_UNITS,
                          batch_size=8, bptt=12, lr=0.01, epochs=1, max_steps_per_epoch=60,
                          sample_tokens=0, histogram_freq=0, cell="lstm", seed=3)
        train_lm(config, root / "run", verbose=0, printer=lambda *a: None)

    return shared_folder(tmp_path_factory, "run_learned", build) / "run"


ALL_VARIANTS = ("float32", "float16", "dynamic", "int8", "int16x8")


def exported(tmp_path_factory, variants=ALL_VARIANTS, cell="lstm", run="tiny"):
    """TFLite export of the tiny run (``run="tiny"``, once per test run, variants and cell)
    or of :func:`learned_run` (``run="learned"``, an LSTM): ``(folder, manifest)``."""
    def build(out):
        import json

        from keras_seq.export.tflite import export_tflite

        run_dir = (learned_run(tmp_path_factory) if run == "learned" else
                   trained_run(tmp_path_factory, cell=cell))
        export_tflite(run_dir, out, variants=variants, seq_length=8, calib_tokens=40,
                      parity_tokens=40, val_tokens=200, printer=lambda *a: None)
        return json.loads((out / "manifest.json").read_text())

    return once(tmp_path_factory, f"tflite_{run}_{cell}_{'-'.join(variants)}", build)
