"""``keras-seq pipeline`` end to end on a tiny corpus (tiny sizes, few benchmark tokens)."""

import json

import pytest
from test_export_common import corpus_text

from keras_seq.pipeline import run_pipeline


@pytest.mark.slow
def test_pipeline_end_to_end(tmp_path):
    data = tmp_path / "tiny.txt"
    data.write_text(corpus_text(400, seed=1))
    said = []
    summary = run_pipeline(str(data), tmp_path / "out", minutes=0.05, bench_tokens=20,
                           printer=said.append, variants=("float32", "dynamic"),
                           lstm_overrides=dict(embed_dim=8, units=12, batch_size=4, bptt=6,
                                               max_steps_per_epoch=5, epochs=1))
    out = tmp_path / "out"
    assert summary["comparable"], summary["comparable_note"]
    assert summary["lstm"]["val"]["fingerprint"]["tokenizer"] == \
        summary["ngram"]["val"]["fingerprint"]["tokenizer"]
    for path in ("run/config.json", "kn3.arpa", "saved_model/saved_model.pb",
                 "tflite/manifest.json", "streaming.json", "streaming.png",
                 "demo/model.tflite", "demo/model.json", "demo/tokenizer.json",
                 "pipeline.json"):
        assert (out / path).exists(), path
    assert json.loads((out / "pipeline.json").read_text())["demo_model"]["name"]
    text = "\n".join(said)
    assert "speedup_vs_tflite_fp32" in text and "try it: keras-seq demo" in text
    from keras_seq.runtime import LiteRTLM

    assert len(LiteRTLM(out / "demo" / "model.tflite").generate("the cat", 3)[0]) == 3
