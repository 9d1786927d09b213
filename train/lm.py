# ruff: noqa: E402  (the imports after the config keep --help free of TensorFlow)
"""Train an LSTM language model with stateful truncated BPTT, top to bottom in one file.

Corpus → tokenizer → stream batches → keras-seq RecurrentLM → model.fit with the
library's callbacks. The run directory is the one `keras-seq train lm` writes, so the CLI
reads it::

    python train/lm.py --run-dir runs/shakespeare-char               # bundled corpus, chars
    python train/lm.py --run-dir runs/tiny --units 64 --epochs 1 --max-steps-per-epoch 20
    python train/lm.py --run-dir runs/mine --data my_corpus.txt --tokenizer word --min-count 2
    keras-seq eval lm --run-dir runs/shakespeare-char
    keras-seq generate --run-dir runs/shakespeare-char --prompt "ROMEO:" --max-tokens 200

Every value of the config below can be overridden with a flag of the same name
(``--embed-dim 128``); ``none`` unsets an optional one.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

from keras_seq.script_config import parse_config


@dataclass
class Config:
    run_dir: str = "runs/lm"  # config.json, tokenizer.json, checkpoints/, metrics.csv go here
    # data
    data: str = "tinyshakespeare"  # bundled (no download), "python-docs", or a .txt path
    data_dir: str | None = None  # extra folder searched for registry corpora
    split_ratio: str = "90/10"  # train/val shares of the text, cut at line boundaries
    tokenizer: str = "char"  # char: ~65 symbols, no <unk>; word needs --min-count 2
    min_count: int | None = None  # word: rarer words become <unk>, so <unk> is trained
    # model
    embed_dim: int = 64  # small: a char vocabulary has few symbols to tell apart
    units: int = 256  # the LSTM state; the capacity that matters most
    num_layers: int = 1  # a second layer helps on words, little on chars at this size
    dropout: float = 0.1  # on embeddings, between layers and before the logits
    # optimisation
    bptt: int = 64  # truncation length τ: gradients flow back at most τ steps
    batch_size: int = 32  # B parallel streams; also the stateful model's fixed batch
    epochs: int = 5  # passes over the training stream
    max_steps_per_epoch: int | None = None  # cut each pass short (smoke tests, quick looks)
    lr: float = 2e-3  # Adam; recurrent LMs train well at 1e-3..3e-3
    clip_norm: float | None = 5.0  # global-norm clipping: an LSTM's gradients can spike
    state_reset_prob: float = 0.0  # chance a stream row restarts from zero state per batch
    seed: int = 1234  # weights, dropout and row resets are drawn from it


config = parse_config(Config, sys.argv[1:], description=__doc__)
run_dir = Path(config.run_dir)
if (run_dir / "config.json").exists():
    sys.exit(f"error: {run_dir} already holds a run; choose another --run-dir")

# TensorFlow loads only now, so that --help and a bad flag answer at once.
import keras

from keras_seq import __version__
from keras_seq.data.batching import stream_arrays
from keras_seq.data.corpus import load_corpus
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.models import RecurrentLM
from keras_seq.models.perplexity import Perplexity
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.evaluation import perplexity_of_run
from keras_seq.training import callbacks as cb
from keras_seq.training.trainer import start_run, tensorboard_callbacks

keras.utils.set_random_seed(config.seed)

# -- data: text → ids → the stream layout ----------------------------------------------------
corpus = load_corpus(config.data, data_dir=config.data_dir, split=config.split_ratio)
tokenizer = make_tokenizer(config.tokenizer, min_count=config.min_count)
tokenizer.fit(corpus.text("train"))  # the vocabulary comes from the training split only
train_ids = tokenizer.encode(corpus.text("train"))  # (N,) int32
val_ids = tokenizer.encode(corpus.text("val"))  # (M,)
B, T = config.batch_size, config.bptt
# Cut the stream into B rows; batch k is columns [kT, (k+1)T) of every row, so row i of
# batch k+1 continues row i of batch k and the state carries over from batch to batch.
x_train, y_train = stream_arrays(train_ids, B, T)  # (steps·B, T) each; y is x shifted by one
if config.max_steps_per_epoch:
    keep = config.max_steps_per_epoch * B
    x_train, y_train = x_train[:keep], y_train[:keep]
x_val, y_val = stream_arrays(val_ids, B, T)  # (val_steps·B, T)
print(f"{corpus.name}: {len(train_ids):,} training tokens, {len(val_ids):,} validation, "
      f"vocabulary {tokenizer.vocab_size} ({tokenizer.kind}); {len(x_train) // B} steps/epoch")

# -- the run directory: the config and tokenizer `keras-seq eval lm` reads back --------------
# Every field above is an LMConfig field of the same name; the script fixes the rest.
lm_config = LMConfig.from_script(config, cell="lstm", optimizer="adam",
                                 backend=keras.backend.backend())
start_run(run_dir, lm_config, {"tokenizer.json": tokenizer})  # + config.json, kind "lm"

# -- the model: embedding → LSTM → logits, stateful at batch B --------------------------------
model = RecurrentLM(tokenizer.vocab_size, embed_dim=config.embed_dim, units=config.units,
                    num_layers=config.num_layers, cell="lstm", dropout=config.dropout,
                    stateful=True)
model(keras.ops.zeros((B, T), "int32"))  # build at the fixed batch: (B, T) → (B, T, V)
clip = {"global_clipnorm": config.clip_norm} if config.clip_norm else {}
model.compile(optimizer=keras.optimizers.Adam(config.lr, **clip),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=[Perplexity(from_logits=True)])
print(f"RecurrentLM: {model.count_params():,} parameters (keras-seq {__version__})")

# -- callbacks: state resets (Keras 3 has no Model.reset_states), logs, checkpoints -----------
nan_guard = cb.NaNGuard()  # stop at a NaN loss; no checkpoint is written after it
callbacks = [
    cb.ResetStatesCallback(),  # zero the state at each epoch start and around validation
    cb.RowStateResets(config.state_reset_prob, config.seed),
    nan_guard,
    cb.GradientNormLogger(run_dir / "tensorboard" / "diagnostics", every=20),
    *tensorboard_callbacks(run_dir / "tensorboard"),  # [] and a note without tensorboard
    cb.RunCheckpoint(run_dir, nan_guard),  # checkpoints/last.keras, best.keras, state.json
    cb.MetricsCSV(run_dir / "metrics.csv"),  # after the commit: lists committed epochs only
]

# -- fit: the stream in order, one fixed batch size ------------------------------------------
model.fit(x_train, y_train, batch_size=B, shuffle=False, epochs=config.epochs,
          validation_data=(x_val, y_val), callbacks=callbacks, verbose=2)
if nan_guard.tripped:
    sys.exit(f"error: {nan_guard.message(str(run_dir / 'checkpoints' / 'last.keras'))}")

# -- evaluate the best checkpoint the way `keras-seq eval lm` does (state carried) -----------
result = perplexity_of_run(run_dir, "val")
print(f"val: {result.nats:.4f} nats/token, PPL {result.ppl:.2f} over {result.tokens:,} tokens")
print(f"next: keras-seq eval lm --run-dir {run_dir}; keras-seq generate --run-dir {run_dir}")
