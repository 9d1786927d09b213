# ruff: noqa: E402  (the imports after the config keep --help free of TensorFlow)
"""Export a language-model run as a SavedModel and check its signatures against Keras.

The SavedModel takes raw text (the tokenizer runs inside the graph) and loads with
TensorFlow alone, e.g. in TF Serving or `keras-seq serve`. This script exports it with the
library's exporter (the same as `keras-seq export saved-model`), reloads it, and compares
two signatures with the Keras model:

* ``step`` (token + state → logits + state), stepped over a prefix of the validation text;
* ``score`` (text → per-token log-probabilities) on one validation line, whose tokens must
  also be the Python tokenizer's.

It prints the max absolute difference of each and exits 1 past the tolerance::

    python train/lm.py --run-dir runs/shakespeare-char
    python export/saved_model.py --run-dir runs/shakespeare-char --out exports/shakespeare-sm
    keras-seq serve --model-base models --model-name lm --publish exports/shakespeare-sm

Every value of the config below can be overridden with a flag of the same name.
"""

import sys
from dataclasses import dataclass

from keras_seq.script_config import parse_config


@dataclass
class Config:
    run_dir: str = "runs/lm"  # a `keras-seq train lm` (or train/lm.py) run
    out: str = "exports/lm_saved_model"  # the SavedModel folder (replaced if it is one)
    prefix_tokens: int = 64  # validation tokens stepped through `step`
    tolerance: float = 1e-4  # both sides compute in float32; only the op order differs


config = parse_config(Config, sys.argv[1:], description=__doc__)

# TensorFlow loads only now, so that --help and a bad flag answer at once.
import numpy as np
import tensorflow as tf

from keras_seq.export.saved_model import export_saved_model
from keras_seq.tasks.lm.data import corpus_for
from keras_seq.tasks.lm.evaluation import load_run

# -- the run, then the export -----------------------------------------------------------------
lm_config, tokenizer, model = load_run(config.run_dir)
export_saved_model(config.run_dir, config.out, model=model, tokenizer=tokenizer)
loaded = tf.saved_model.load(config.out)  # only TensorFlow from here on: no keras-seq classes
runner = model.clone_for_batch(1, stateful=False)  # Keras reference, from the zero state
start = tokenizer.eos_id if tokenizer.eos_id is not None else tokenizer.encode("\n")[0]
val_text = corpus_for(lm_config).text("val") or corpus_for(lm_config).text("train")

# -- step: a prefix, one token at a time, the state carried by hand --------------------------
ids = np.concatenate([[start], tokenizer.encode(val_text)[: config.prefix_tokens]])
ids = ids.astype(np.int32)  # (T,)
keras_logits = np.asarray(runner(ids[None], training=False))[0]  # (T, V)
step = loaded.signatures["step"]
states = {name: tf.zeros(spec.shape, spec.dtype)  # h0[, c0, h1, …]: (1, U) each
          for name, spec in step.structured_input_signature[1].items() if name != "token"}
logits = []
for token in ids:
    out = step(token=tf.constant([token], tf.int32), **states)
    logits.append(out["logits"].numpy()[0])  # (V,)
    states = {name: out[name] for name in states}
step_diff = float(np.abs(np.stack(logits) - keras_logits).max())
print(f"step   max|Δlogits|    {step_diff:.2e} over {len(ids)} tokens")

# -- score: one line of text in, log p of each of its tokens out -----------------------------
line = next((text for text in val_text.splitlines() if text.strip()), "")
scored = loaded.signatures["score"](text=tf.constant([line]))
n = int(scored["lengths"].numpy()[0])
graph_tokens = [t.decode() for t in scored["tokens"].numpy()[0][:n]]
line_ids = tokenizer.encode(line)[:n]  # the Python tokenizer's ids of the same line
if graph_tokens != tokenizer.ids_to_tokens(line_ids):
    sys.exit(f"error: the SavedModel tokenizes {line!r} as {graph_tokens[:10]}…, the run's "
             f"tokenizer as {tokenizer.ids_to_tokens(line_ids)[:10]}…; they must agree")
ids = np.concatenate([[start], line_ids]).astype(np.int32)  # (1 + n,)
keras_logp = tf.nn.log_softmax(runner(ids[None, :-1], training=False)[0]).numpy()  # (n, V)
keras_token_logp = keras_logp[np.arange(n), ids[1:]]  # (n,)
score_diff = float(np.abs(scored["log_probs"].numpy()[0][:n] - keras_token_logp).max())
print(f"score  max|Δlog p|     {score_diff:.2e} over {n} tokens of {line[:40]!r}")

if max(step_diff, score_diff) > config.tolerance:
    sys.exit(f"error: the SavedModel differs from Keras past the tolerance "
             f"{config.tolerance:g} (step {step_diff:.2e}, score {score_diff:.2e}); check "
             "that the run's checkpoint loads as trained")
print(f"parity ok (tolerance {config.tolerance:g}): SavedModel in {config.out}")
