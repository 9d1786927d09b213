# ruff: noqa: E402  (the imports after the config keep --help free of TensorFlow)
"""Export a language-model run to TFLite step models and check them against Keras.

The step model takes one token and every layer's state and returns the next-token logits
and the new state (batch 1): what an on-device app runs token by token. This script saves
that graph as a SavedModel with one signature, "step", converts it with
`tf.lite.TFLiteConverter` once per variant (the quantization recipe is below, in view),
writes each file with the metadata the runtime reads, then runs each in the LiteRT
interpreter over a prefix of the validation text, carrying the state itself, and compares
the logits with one Keras pass over the same prefix. It prints the max |Δlogits| per
variant and exits 1 past the tolerance::

    python train/lm.py --run-dir runs/shakespeare-char
    python export/tflite.py --run-dir runs/shakespeare-char --out exports/shakespeare-tflite
    python export/tflite.py --run-dir runs/shakespeare-char --out exports/q \\
        --variants float32,dynamic,int8
    keras-seq demo --model exports/shakespeare-tflite/step_dynamic.tflite

`keras-seq export tflite` does the same with more variants (int16x8, 4-bit and shared-table
ones), sequence graphs, fused LSTM kernels and the fallbacks a converter sometimes needs.
Every value of the config below can be overridden with a flag of the same name.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

from keras_seq.script_config import parse_config


@dataclass
class Config:
    run_dir: str = "runs/lm"  # a `keras-seq train lm` (or train/lm.py) run
    out: str = "exports/lm_tflite"  # step_<variant>.tflite, their metadata, tokenizer.json
    variants: str = "float32,dynamic"  # comma list of float32 float16 dynamic int8
    prefix_tokens: int = 64  # validation tokens stepped through LiteRT and Keras
    tolerance: float = 1e-4  # float32: the same math, only the op order differs
    quantized_tolerance: float = 0.5  # other variants round the weights (or activations)


config = parse_config(Config, sys.argv[1:], description=__doc__)
variants = [v.strip() for v in config.variants.split(",") if v.strip()]
unknown = sorted(set(variants) - {"float32", "float16", "dynamic", "int8"})
if unknown or not variants:
    sys.exit(f"error: --variants {config.variants}: expected some of float32, float16, "
             "dynamic, int8; `keras-seq export tflite` makes int16x8 and the 4-bit ones")

# TensorFlow loads only now, so that --help and a bad flag answer at once.
import tempfile

import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from keras_seq.export.graphs import LMGraphs
from keras_seq.export.tflite import (
    build_saved_model,
    export_ids,
    model_metadata,
    representative_data,
)
from keras_seq.runtime.metadata import write_metadata
from keras_seq.tasks.lm.evaluation import load_run

# -- the run: its config, tokenizer and best checkpoint --------------------------------------
lm_config, tokenizer, model = load_run(config.run_dir)
out = Path(config.out)
out.mkdir(parents=True, exist_ok=True)
tokenizer.save(out)  # tokenizer.json: the runtime reads it beside the models
# Calibration text from the training split; the parity prefix from the validation split,
# each starting after a line end, as a stream does.
calib_ids, ids, _ = export_ids(lm_config, tokenizer, parity_tokens=config.prefix_tokens + 1)

# -- the step graph: (token (1,), h0 (1, U)[, c0 (1, U)] …) → (logits (1, V), h0', c0' …) ----
graphs = LMGraphs(model)
exported = []
with tempfile.TemporaryDirectory() as tmp:
    saved = Path(tmp) / "saved_model"
    step_info = build_saved_model(graphs, saved, ["step"])["step"]  # frozen weights
    for variant in variants:
        # -- the converter and the quantization recipe of each variant ----------------------
        converter = tf.lite.TFLiteConverter.from_saved_model(str(saved), signature_keys=["step"])
        if variant != "float32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]  # quantize the weights
        if variant == "float16":  # weights stored in float16, computed in float32
            converter.target_spec.supported_types = [tf.float16]
        if variant == "int8":  # activations in int8 too: their ranges come from real text
            converter.representative_dataset = representative_data(graphs, calib_ids, "step",
                                                                   step_info)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        # ("dynamic": int8 weights, activations quantized on the fly at each step)
        flat = converter.convert()
        path = out / f"step_{variant}.tflite"
        path.write_bytes(flat)
        write_metadata(path, model_metadata(graphs, "step", variant, step_info, flat,
                                            tokenizer, config.run_dir))  # step_<variant>.json
        exported.append((variant, path))
# Keras: one stateless pass from the zero state over the whole prefix.
runner = model.clone_for_batch(1, stateful=False)
keras_logits = np.asarray(runner(ids[None], training=False))[0]  # (T, V)

# -- LiteRT: the same tokens one at a time, the state carried by hand -------------------------
worst = {}
for variant, path in exported:
    interpreter = Interpreter(model_path=str(path))
    step = interpreter.get_signature_runner("step")
    states = {name: np.zeros(detail["shape"], np.float32)  # h0[, c0, h1, …]: (1, U) each
              for name, detail in step.get_input_details().items() if name != "token"}
    logits = []
    for token in ids:
        out = step(token=np.array([token], np.int32), **states)
        logits.append(out["logits"][0])  # (V,)
        states = {name: out[name] for name in states}
    diff = float(np.abs(np.stack(logits) - keras_logits).max())  # over (T, V)
    limit = config.tolerance if variant == "float32" else config.quantized_tolerance
    worst[path.stem] = (diff, limit)
    verdict = "ok" if diff <= limit else "TOO FAR"
    print(f"{path.stem:<16} {path.stat().st_size / 1024:8.1f} KiB  max|Δlogits| "
          f"{diff:.2e} over {len(ids)} tokens (tolerance {limit:g}) {verdict}")

bad = {name: d for name, (d, limit) in worst.items() if d > limit}
if bad:
    sys.exit(f"error: LiteRT differs from Keras past the tolerance: {bad}; check that the "
             "run's checkpoint loads as trained, or raise --tolerance / --quantized-tolerance "
             "if a quantized variant is expected to be that far")
print(f"parity ok: {len(worst)} step model(s) in {config.out}")
