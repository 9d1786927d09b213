"""Quantization-aware models exported exactly: the LiteRT step model computes what Keras
trained, with no calibration.

A tiny GRU LM learns a toy corpus in float, then is fine-tuned with ``qat="int4"`` and with
``qat="int8"`` (full integer, activation ranges tracked). Checked against the Keras QAT
model over a token stream:

* int4: the file stores exactly the trained integers and scales (every int4 tensor against
  :func:`keras_seq.layers.quant.integers` of the weights), and the logits agree;
* int8: integer kernels throughout; the same most likely token at every position
  (≥ 99.9%) and every logit within four steps of the logits' int8 grid (the bound; measured
  one). An export that drops the learned ranges and calibrates on data instead misses that
  bound (the test builds one and watches it fail: 50 steps off, 96.5% top-1).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from ai_edge_litert.tools import flatbuffer_utils

from keras_seq.data.batching import stream_dataset
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.export.tflite import export_tflite, float_ops, keras_logits, tflite_logits
from keras_seq.layers import quant
from keras_seq.models import RecurrentLM
from keras_seq.training.callbacks import ActivationRangeTracker, ResetStatesCallback
from tests.fixtures.lm_runs import toy_corpus_text

B, T, UNITS = 8, 12, 32
BOUND_STEPS = 4  # the int8 parity bound, in steps of the logits' grid
INT4 = 17  # the flatbuffer's TensorType.INT4


def _fit(model, ids, steps, callbacks=()):
    model.compile(keras.optimizers.Adam(3e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)  # XLA would compile longer than these steps run
    model.fit(stream_dataset(ids, B, T, max_batches=steps), epochs=1, shuffle=False,
              callbacks=[ResetStatesCallback(), *callbacks], verbose=0)
    return model


@pytest.fixture(scope="module")
def qat_models():
    """``{"float": m, "int4": m, "int8": m}``, the tokenizer and a held-out stream."""
    tokenizer = make_tokenizer("word").fit(toy_corpus_text(seed=0))
    ids = tokenizer.encode(toy_corpus_text(lines=500, seed=1))
    held_out = tokenizer.encode(toy_corpus_text(lines=80, seed=2))
    V = tokenizer.vocab_size

    def build(qat):
        keras.utils.set_random_seed(0)
        model = RecurrentLM(V, UNITS, UNITS, cell="gru", tie_weights=True, stateful=True,
                            qat=qat)
        model(np.zeros((B, T), "int32"))
        return model

    models = {"float": _fit(build(None), ids, 40)}
    for qat in ("int4", "int8"):
        model = build(qat)
        trained = [w for w in model.weights if not w.path.endswith("activation_ranges")]
        for variable, value in zip(trained, models["float"].get_weights()):
            variable.assign(value)
        sample = [stream_dataset(ids, B, T).batch(k)[0] for k in range(0, 40, 5)]
        extra = [ActivationRangeTracker(sample, every=10)] if qat == "int8" else []
        models[qat] = _fit(model, ids, 20, extra)
    return {"models": models, "tokenizer": tokenizer, "ids": held_out}


def _int4_tensors(path) -> dict:
    """``{name: (integers (out, in), scales (out,))}`` of the int4 tensors of a file."""
    model = flatbuffer_utils.read_model(str(path))
    out = {}
    for tensor in model.subgraphs[0].tensors:
        data = model.buffers[tensor.buffer].data
        if tensor.type != INT4 or data is None:
            continue
        packed = np.asarray(data, np.uint8)
        low, high = (packed & 0x0F).astype(np.int8), (packed >> 4).astype(np.int8)
        values = np.stack([low, high], -1).reshape(-1)[:np.prod(tensor.shape)]
        values = np.where(values > 7, values - 16, values).reshape(tensor.shape)
        out[tensor.name.decode() if isinstance(tensor.name, bytes) else tensor.name] = (
            values, np.asarray(tensor.quantization.scale, np.float32))
    return out


def test_int4_export_stores_exactly_the_trained_integers(qat_models, tmp_path):
    model = qat_models["models"]["int4"]
    manifest = export_tflite(model, tmp_path, variants=["int4"], graphs=["step"],
                             tokenizer=qat_models["tokenizer"], ids=qat_models["ids"],
                             printer=lambda *a: None)
    stored = list(_int4_tensors(tmp_path / "step_int4.tflite").values())
    table = quant.integers(model.embedding.embeddings.numpy(), "int4", axis=0)
    kernel, recurrent = (quant.integers(np.asarray(w), "int4", axis=-1)
                         for w in model.rnns[0].cell.quantized_kernels())
    # as TFLite stores them, (out, in) with a scale per output row: the GRU's two matrices
    # (3U, U) and the tied table (V, E)
    wanted = [(kernel[0].T, kernel[1][0]), (recurrent[0].T, recurrent[1][0]),
              (table[0], table[1][:, 0])]
    assert len(stored) == len(wanted) == 3
    for want_ints, want_scales in wanted:  # each trained matrix stored exactly, once
        found = [i for i, (ints, scales) in enumerate(stored)
                 if ints.shape == want_ints.shape and np.array_equal(ints, want_ints)
                 and np.allclose(scales, want_scales, rtol=1e-6, atol=0)]
        assert len(found) == 1, "a trained int4 matrix is not in the file as trained"
        stored.pop(found[0])
    p = manifest["models"][0]["parity"]
    assert p["top1_agreement"] >= 0.999 and p["max_abs_logit_diff"] < 0.05, p


def _logits_step(model) -> float:
    """One step of the logits' int8 grid: the tracked range over 255 levels."""
    lo, hi = np.asarray(model.head.activation_ranges.variable)[0]
    return float(quant.nudged_range(float(lo), float(hi))[2])


def _agreement(model, path, tokenizer, ids) -> tuple[float, float]:
    want = keras_logits(model, ids)
    got = tflite_logits(path, ids, tokenizer)
    return float((got.argmax(-1) == want.argmax(-1)).mean()), float(np.abs(got - want).max())


def test_int8_export_takes_the_learned_ranges(qat_models, tmp_path):
    model, tokenizer, ids = (qat_models[k] for k in ("models", "tokenizer", "ids"))
    model = model["int8"]
    manifest = export_tflite(model, tmp_path, variants=["int8"], graphs=["step"],
                             tokenizer=tokenizer, ids=ids, printer=lambda *a: None)
    entry = manifest["models"][0]
    assert entry["note"] == "" and float_ops(tmp_path / entry["file"]) == []
    p = entry["parity"]  # the first 200 held-out tokens, against the Keras QAT model
    assert p["top1_agreement"] >= 0.999, p
    # the stated bound: BOUND_STEPS steps of the logits' int8 grid (an integer kernel and
    # the float simulation may round a value at a tie to neighbouring levels, and a state
    # one level off moves the logits after it; measured: one step), and the same PPL
    assert p["max_abs_logit_diff"] <= BOUND_STEPS * _logits_step(model) * (1 + 1e-4), p
    assert abs(p["ppl_delta_pct"]) < 0.5, p


def test_an_export_that_recalibrates_misses_the_bound(qat_models, tmp_path):
    """The same rounded weights, converted by calibrating activations on data (what an
    exporter that dropped the learned ranges would do): it does not compute what was
    trained, and the bound above says so."""
    models, tokenizer, ids = (qat_models[k] for k in ("models", "tokenizer", "ids"))
    trained = models["int8"]
    config = {**trained.get_config(), "qat": None}
    plain = RecurrentLM.from_config(config)
    plain(np.zeros((B, T), "int32"))
    rounded = quant.baked_values(trained)
    for ours, theirs in zip(plain.weights, [w for w in trained.weights
                                            if not w.path.endswith("activation_ranges")]):
        ours.assign(rounded.get(id(theirs), np.asarray(theirs)))
    export_tflite(plain, tmp_path, variants=["int8"], graphs=["step"], tokenizer=tokenizer,
                  ids=ids, check_parity=False, printer=lambda *a: None)
    agreement, gap = _agreement(trained, tmp_path / "step_int8.tflite", tokenizer, ids[:200])
    print(f"recalibrated: top-1 {agreement:.3f}, max |Δlogits| {gap:.3f} = "
          f"{gap / _logits_step(trained):.1f} steps")  # pytest -s
    assert gap > BOUND_STEPS * _logits_step(trained), (gap, agreement)  # measured: 50 steps


def test_a_qat_model_exports_only_what_it_trained_for(qat_models, tmp_path):
    models, tokenizer, ids = (qat_models[k] for k in ("models", "tokenizer", "ids"))
    with pytest.raises(KerasSeqError, match="trained with qat='int4'.*not dynamic"):
        export_tflite(models["int4"], tmp_path, variants=["dynamic"], ids=ids,
                      printer=lambda *a: None)
    with pytest.raises(KerasSeqError, match="trained with qat='int8'.*not float32"):
        export_tflite(models["int8"], tmp_path, variants=["float32", "int8"], ids=ids,
                      printer=lambda *a: None)
