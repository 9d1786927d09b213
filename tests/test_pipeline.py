"""``keras-seq pipeline`` end to end on a tiny corpus (tiny sizes, few benchmark tokens)."""

import functools
import json

import pytest
from test_export_common import corpus_text

from keras_seq.pipeline import run_pipeline

TINY_LSTM = dict(embed_dim=8, units=12, batch_size=4, bptt=6, max_steps_per_epoch=5, epochs=1)


def _check_pipeline(out, summary, said, variants):
    assert summary["comparable"], summary["comparable_note"]
    assert summary["lstm"]["val"]["fingerprint"]["tokenizer"] == \
        summary["ngram"]["val"]["fingerprint"]["tokenizer"]
    for path in ("run/config.json", "kn3.arpa", "saved_model/saved_model.pb",
                 "tflite/manifest.json", "streaming.json", "streaming.png",
                 "demo/model.tflite", "demo/model.json", "demo/tokenizer.json",
                 "pipeline.json"):
        assert (out / path).exists(), path
    saved = json.loads((out / "pipeline.json").read_text())
    assert saved["demo_model"]["name"] == summary["demo_model"]["name"]
    assert list(saved["stages_seconds"]) == ["train_lstm", "ngram", "export", "bench", "demo"]
    manifest = json.loads((out / "tflite" / "manifest.json").read_text())
    assert {m["variant"] for m in manifest["models"]} <= set(variants)
    text = "\n".join(said)
    stages = [line for line in said if line.startswith("\n== ")]
    assert [s.split()[1] for s in stages] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    assert "speedup_vs_tflite_fp32" in text and "try it: keras-seq demo" in text
    from keras_seq.runtime import LiteRTLM

    assert len(LiteRTLM(out / "demo" / "model.tflite").generate("the cat", 3)[0]) == 3


def test_pipeline_tiny(tmp_path, monkeypatch):
    # The fast version of the check below: every stage for real at the smallest sizes. The
    # LSTM's 5 steps run eagerly (no tracing: most of a tiny run's time); only the float32
    # step graph (what the demo runs) is converted to TFLite, with small calibration,
    # parity and validation sizes.
    import tensorflow as tf

    import keras_seq.export.tflite as tflite
    import keras_seq.tasks.lm.task as lm_task

    train_lm = lm_task.train_lm

    def train_eagerly(*args, **kwargs):
        tf.config.run_functions_eagerly(True)
        try:
            return train_lm(*args, **kwargs)
        finally:
            tf.config.run_functions_eagerly(False)

    monkeypatch.setattr(lm_task, "train_lm", train_eagerly)
    monkeypatch.setattr(tflite, "export_tflite", functools.partial(
        tflite.export_tflite, graphs=("step",), seq_length=8, calib_tokens=40,
        parity_tokens=40, val_tokens=200))
    data = tmp_path / "tiny.txt"
    data.write_text(corpus_text(200, seed=1))
    said = []
    summary = run_pipeline(str(data), tmp_path / "out", minutes=0.05, bench_tokens=10,
                           printer=said.append, variants=("float32",),
                           lstm_overrides=TINY_LSTM)
    _check_pipeline(tmp_path / "out", summary, said, ("float32",))
    assert summary["demo_model"]["name"] == "step_float32"
    manifest = json.loads((tmp_path / "out" / "tflite" / "manifest.json").read_text())
    assert [(m["graph"], m["variant"]) for m in manifest["models"]] == [("step", "float32")]
    assert "error" not in manifest["models"][0]


@pytest.mark.slow  # every graph and two variants; the fast version above runs every stage
def test_pipeline_end_to_end(tmp_path):
    data = tmp_path / "tiny.txt"
    data.write_text(corpus_text(400, seed=1))
    said = []
    summary = run_pipeline(str(data), tmp_path / "out", minutes=0.05, bench_tokens=20,
                           printer=said.append, variants=("float32", "dynamic"),
                           lstm_overrides=TINY_LSTM)
    _check_pipeline(tmp_path / "out", summary, said, ("float32", "dynamic"))
