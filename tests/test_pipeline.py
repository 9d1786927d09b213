"""``keras-seq pipeline`` end to end on a tiny corpus (tiny sizes, few benchmark tokens)."""

import functools
import json

import pytest
from test_export_common import corpus_text

from keras_seq import pipeline
from keras_seq.pipeline import run_pipeline

TINY_LSTM = dict(embed_dim=12, units=12, batch_size=4, bptt=6, max_steps_per_epoch=5, epochs=1)


def _check_pipeline(out, summary, said, variants):
    assert summary["comparable"], summary["comparable_note"]
    assert summary["lstm"]["val"]["fingerprint"]["tokenizer"] == \
        summary["ngram"]["val"]["fingerprint"]["tokenizer"]
    order = summary["ngram"]["order"]
    by_order = summary["ngram"]["val_ppl_by_order"]
    assert sorted(by_order) == [2, 3, 4, 5] and by_order[order] == min(by_order.values())
    for path in ("run/config.json", f"kn{order}.arpa", f"kn{order}.q8.bin",
                 "saved_model/saved_model.pb", "tflite/manifest.json", "streaming.json",
                 "streaming.png", "demo/model.tflite", "demo/model.json", "demo/tokenizer.json",
                 "pipeline.json"):
        assert (out / path).exists(), path
    saved = json.loads((out / "pipeline.json").read_text())
    assert saved["demo_model"]["name"] == summary["demo_model"]["name"]
    assert list(saved["stages_seconds"]) == ["ngram", "train_lstm", "export", "bench", "demo"]
    manifest = json.loads((out / "tflite" / "manifest.json").read_text())
    assert {m["variant"] for m in manifest["models"]} <= set(variants)
    text = "\n".join(said)
    stages = [line for line in said if line.startswith("\n== ")]
    assert [s.split()[1] for s in stages] == ["1/6", "2/6", "3/6", "4/6", "5/6", "6/6"]
    assert "speedup_vs_tflite_fp32" in text and "try it: keras-seq demo" in text
    # The summary table: both n-gram forms and the TFLite models, each with PPL, size, µs.
    models = [row["model"] for row in summary["table"]]
    assert models[:2] == [f"ngram KN{order} arpa [hash]", f"ngram KN{order} compact-q8 [trie]"]
    assert all(row["p50_us"] > 0 and row["size_kib"] > 0 for row in summary["table"])
    assert [c["met"] for c in summary["checks"]][-1] is True  # no <pad>/<unk> generated
    assert "On-device candidates" in text and "◀ demo" in text
    gen = summary["demo_model"]["generation_check"]
    assert gen["special_tokens"] == gen["special_suggestions"] == 0 and gen["tokens"] > 0
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
    monkeypatch.setattr(pipeline, "EXPORT_GRAPHS", ("step",))
    monkeypatch.setattr(tflite, "export_tflite", functools.partial(
        tflite.export_tflite, seq_length=8, calib_tokens=40,
        parity_tokens=40, val_tokens=200))
    data = tmp_path / "tiny.txt"
    data.write_text(corpus_text(200, seed=1))
    said = []
    summary = run_pipeline(str(data), tmp_path / "out", minutes=0.05, bench_tokens=10,
                           printer=said.append, variants=("float32",),
                           lstm_overrides=TINY_LSTM, rounds=2)
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
