# ruff: noqa: E402  (the imports after the config keep --help free of TensorFlow)
"""Export a language-model run to TFLite step models and check them against Keras.

The step model takes one token and every layer's state and returns the next-token logits
and the new state (batch 1): what an on-device app runs token by token. This script
exports it with the library's exporter (the same as `keras-seq export tflite --graphs
step`), then runs each variant in the LiteRT interpreter over a prefix of the validation
text, carrying the state itself, and compares the logits with one Keras pass over the
same prefix. It prints the max |Δlogits| per variant and exits 1 past the tolerance::

    python train/lm.py --run-dir runs/shakespeare-char
    python export/tflite.py --run-dir runs/shakespeare-char --out exports/shakespeare-tflite
    python export/tflite.py --run-dir runs/shakespeare-char --out exports/q \\
        --variants float32,dynamic,int8
    keras-seq demo --model exports/shakespeare-tflite/step_dynamic.tflite

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
    variants: str = "float32,dynamic"  # comma list of float32 float16 dynamic int8 int16x8
    prefix_tokens: int = 64  # validation tokens stepped through LiteRT and Keras
    tolerance: float = 1e-4  # float32: the same math, only the op order differs
    quantized_tolerance: float = 0.5  # other variants round the weights (or activations)


config = parse_config(Config, sys.argv[1:], description=__doc__)
variants = [v.strip() for v in config.variants.split(",") if v.strip()]

# TensorFlow loads only now, so that --help and a bad flag answer at once.
import numpy as np
from ai_edge_litert.interpreter import Interpreter

from keras_seq.export.tflite import export_tflite
from keras_seq.tasks.lm.data import corpus_for
from keras_seq.tasks.lm.evaluation import load_run

# -- the run: its config, tokenizer and best checkpoint --------------------------------------
lm_config, tokenizer, model = load_run(config.run_dir)

# -- export: one SavedModel with the step signature, converted per variant ------------------
manifest = export_tflite(config.run_dir, config.out, variants=variants, graphs=["step"],
                         check_parity=False, model=model, tokenizer=tokenizer,
                         config=lm_config)
failed = [m for m in manifest["models"] if "error" in m]
if failed:
    sys.exit("error: conversion failed: " + "; ".join(f"{m['name']}: {m['error']}"
                                                      for m in failed))

# -- the prefix: validation text from a line start, as a stream begins -----------------------
val_text = corpus_for(lm_config).text("val") or corpus_for(lm_config).text("train")
start = tokenizer.eos_id if tokenizer.eos_id is not None else tokenizer.encode("\n")[0]
ids = np.concatenate([[start], tokenizer.encode(val_text)[: config.prefix_tokens]])
ids = ids.astype(np.int32)  # (T,)
# Keras: one stateless pass from the zero state over the whole prefix.
runner = model.clone_for_batch(1, stateful=False)
keras_logits = np.asarray(runner(ids[None], training=False))[0]  # (T, V)

# -- LiteRT: the same tokens one at a time, the state carried by hand -------------------------
worst = {}
for entry in manifest["models"]:
    interpreter = Interpreter(model_path=str(Path(config.out) / entry["file"]))
    step = interpreter.get_signature_runner("step")
    states = {name: np.zeros(detail["shape"], np.float32)  # h0[, c0, h1, …]: (1, U) each
              for name, detail in step.get_input_details().items() if name != "token"}
    logits = []
    for token in ids:
        out = step(token=np.array([token], np.int32), **states)
        logits.append(out["logits"][0])  # (V,)
        states = {name: out[name] for name in states}
    diff = float(np.abs(np.stack(logits) - keras_logits).max())  # over (T, V)
    limit = config.tolerance if entry["variant"] == "float32" else config.quantized_tolerance
    worst[entry["name"]] = (diff, limit)
    verdict = "ok" if diff <= limit else "TOO FAR"
    print(f"{entry['name']:<16} {entry['size_bytes'] / 1024:8.1f} KiB  max|Δlogits| "
          f"{diff:.2e} over {len(ids)} tokens (tolerance {limit:g}) {verdict}")

bad = {name: d for name, (d, limit) in worst.items() if d > limit}
if bad:
    sys.exit(f"error: LiteRT differs from Keras past the tolerance: {bad}; check that the "
             "run's checkpoint loads as trained, or raise --tolerance / --quantized-tolerance "
             "if a quantized variant is expected to be that far")
print(f"parity ok: {len(worst)} step model(s) in {config.out}")
