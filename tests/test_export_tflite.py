"""Every TFLite variant converts, runs and stays close to Keras; metadata and manifest."""

import json

import numpy as np
import pytest
from test_export_common import exported, trained_run

from keras_seq.errors import KerasSeqError
from keras_seq.export.tflite import VARIANTS, best_demo_model, export_tflite
from keras_seq.runtime.litert import LiteRTLM

# loose bounds: the tiny model is barely trained; the pipeline reports the real numbers
MAX_LOGIT_DIFF = {"float32": 1e-5, "float16": 1e-2, "dynamic": 5e-2, "int8": 0.5,
                  "int16x8": 0.2}


@pytest.fixture(scope="module")
def export_all(tmp_path_factory):
    return exported(tmp_path_factory, variants=VARIANTS)


def test_every_variant_converts_and_runs(export_all):
    out, manifest = export_all
    by_name = {m["name"]: m for m in manifest["models"]}
    for variant in VARIANTS:
        entry = by_name[f"step_{variant}"]
        assert "error" not in entry, entry
        assert (out / entry["file"]).stat().st_size == entry["size_bytes"]
        p = entry["parity"]
        assert p["max_abs_logit_diff"] <= MAX_LOGIT_DIFF[variant], (variant, p)
        assert abs(p["ppl_delta_pct"]) < 1.5, (variant, p)
        lm = LiteRTLM(out / entry["file"])
        assert lm.step(2).shape == (lm.vocab_size,)
    for name in ("step_fused_float32", "sequence_float32", "sequence_fused_float32"):
        assert by_name[name]["parity"]["max_abs_logit_diff"] < 1e-5
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in by_name["step_fused_float32"]["ops"]
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" not in by_name["step_float32"]["ops"]
    meta = json.loads((out / "step_int8.json").read_text())
    assert meta["tokenizer_fingerprint"] == manifest["tokenizer_fingerprint"]
    assert meta["state_names"] == ["h0", "c0"] and meta["state_shapes"]["c0"] == [1, 12]
    assert (out / "tokenizer.json").is_file()


def test_sequence_model_scores_like_the_step_model(export_all):
    out, _ = export_all
    ids = LiteRTLM(out / "step_float32.tflite").tokenizer.encode("the cat sat on a mat\n" * 3)
    a = LiteRTLM(out / "step_float32.tflite").score_ids(ids)
    b = LiteRTLM(out / "sequence_float32.tflite").score_ids(ids)  # windows of 8, state carried
    c = LiteRTLM(out / "sequence_fused_float32.tflite").score_ids(ids)  # internal state
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(a, c, atol=1e-5)


def test_demo_model_choice(export_all):
    _, manifest = export_all
    lat = {"step_float32": 50.0, "step_int8": 20.0, "step_dynamic": 30.0}
    assert best_demo_model(manifest, latencies=lat)["name"] == "step_int8"


def test_bad_variant(tmp_path_factory, tmp_path):
    run = trained_run(tmp_path_factory)
    with pytest.raises(KerasSeqError, match="unknown variant"):
        export_tflite(run, tmp_path, variants=["int4"], printer=lambda *a: None)
