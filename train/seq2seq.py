# ruff: noqa: E402  (the imports after the config keep --help free of TensorFlow)
"""Train an encoder–decoder with Bahdanau attention, top to bottom in one file.

Generated pairs → two char tokenizers → teacher-forcing arrays → keras-seq Seq2Seq (a
bidirectional GRU encoder, BahdanauAttention, a GRU decoder) → model.fit with the
library's callbacks. The run directory is the one `keras-seq train seq2seq` writes::

    python train/seq2seq.py --run-dir runs/dates       # "the 15th of June, 2049" → "2049-06-15"
    python train/seq2seq.py --run-dir runs/reverse --data reverse --max-len 30
    python train/seq2seq.py --run-dir runs/tiny --train-size 200 --units 16 --epochs 1
    keras-seq eval seq2seq --run-dir runs/dates
    keras-seq translate --run-dir runs/dates "12.8.15"

Every value of the config below can be overridden with a flag of the same name
(``--units 64``); ``none`` unsets an optional one.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

from keras_seq.script_config import parse_config


@dataclass
class Config:
    run_dir: str = "runs/seq2seq"  # config.json, both tokenizers, checkpoints/, metrics.csv
    # data (generated from the seed: the run stores how, not the pairs)
    data: str = "dates"  # dates (many formats → ISO) | reverse | copy (strings of letters)
    train_size: int = 20000  # pairs; dates reaches ~99% exact match with this many
    val_size: int = 500  # pairs scored by val_loss each epoch
    test_size: int = 1000  # pairs `keras-seq eval seq2seq` decodes
    max_len: int = 20  # reverse/copy: the longest source string
    # model
    embed_dim: int = 32  # characters need small embeddings
    units: int = 128  # encoder units per direction and decoder units
    attention_units: int | None = None  # alignment size A (None: units // 4, a few % of weights)
    # optimisation
    batch_size: int = 64  # pairs per step
    epochs: int = 10  # passes over the training pairs
    lr: float = 3e-3  # Adam; attention models train fast at this rate
    clip_norm: float | None = 5.0  # global-norm clipping: recurrent gradients can spike
    seed: int = 1234  # the pairs, the weights and the batch order


config = parse_config(Config, sys.argv[1:], description=__doc__)
run_dir = Path(config.run_dir)
if (run_dir / "config.json").exists():
    sys.exit(f"error: {run_dir} already holds a run; choose another --run-dir")

# TensorFlow loads only now, so that --help and a bad flag answer at once.
import keras

from keras_seq.data.batching import pad_sequences
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.models import Seq2Seq
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig
from keras_seq.tasks.seq2seq.data import task_data
from keras_seq.tasks.seq2seq.evaluation import evaluate_run
from keras_seq.training import callbacks as cb
from keras_seq.training.trainer import start_run, tensorboard_callbacks

keras.utils.set_random_seed(config.seed)

# -- the run's config first: it also says how to generate the data ---------------------------
# Every field above is a Seq2SeqConfig field of the same name; the script fixes the rest.
run_config = Seq2SeqConfig.from_script(config, tokenizer="char", cell="gru",
                                       bidirectional=True, attention="bahdanau",
                                       backend=keras.backend.backend())

# -- data: pairs → ids → teacher-forcing arrays -----------------------------------------------
data = task_data(run_config)  # the pairs re-created from the seed, as eval will
train_pairs, val_pairs = data.splits["train"], data.splits["val"]
print(f"{config.data}: {len(train_pairs):,} training pairs, e.g. {train_pairs[0]}")
src_tok = make_tokenizer("char").fit("\n".join(s for s, _ in train_pairs) + "\n")
tgt_tok = make_tokenizer("char").fit("\n".join(t for _, t in train_pairs) + "\n")
bos, eos = Seq2Seq.special_ids(tgt_tok.vocab_size)  # two ids after the target vocabulary


def teacher_forcing(pairs):
    """``((source, decoder_in), decoder_out, weights)``: the decoder reads the target
    shifted right (after ``bos``) and predicts it followed by ``eos``; 0 pads."""
    source, _ = pad_sequences([src_tok.encode(s) for s, _ in pairs])  # (N, S)
    targets = [tgt_tok.encode(t).tolist() for _, t in pairs]
    decoder_in, _ = pad_sequences([[bos, *t] for t in targets])  # (N, T + 1)
    decoder_out, real = pad_sequences([[*t, eos] for t in targets])  # (N, T + 1)
    return (source, decoder_in), decoder_out, real.astype("float32")  # weights: 0 on pads


x_train, y_train, w_train = teacher_forcing(train_pairs)
x_val, y_val, w_val = teacher_forcing(val_pairs)
run_config.max_source_len = x_train[0].shape[1]  # the longest training source
longest = y_train.shape[1] - 1  # the longest training target
run_config.max_target_len = longest + max(2, longest // 4)  # decoding may run a little longer
run_config.validate()

# -- the run directory: the config and tokenizers `keras-seq eval seq2seq` reads back ---------
start_run(run_dir, run_config, {"source_tokenizer.json": src_tok,
                                "target_tokenizer.json": tgt_tok})  # + config.json

# -- the model: BiGRU encoder → BahdanauAttention → GRU decoder → logits ----------------------
model = Seq2Seq(src_tok.vocab_size, tgt_tok.vocab_size, embed_dim=config.embed_dim,
                units=config.units, cell="gru", bidirectional=True, attention="bahdanau",
                attention_units=config.attention_units,
                max_source_len=run_config.max_source_len,
                max_target_len=run_config.max_target_len)
model.build()  # ((B, S), (B, T)) → (B, T, target vocabulary + 2)
clip = {"global_clipnorm": config.clip_norm} if config.clip_norm else {}
model.compile(optimizer=keras.optimizers.Adam(config.lr, **clip),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_acc")])
params = model.param_report()
print(f"Seq2Seq: {params['total']:,} parameters ({params['attention']:,} in attention)")

# -- callbacks: logs and crash-safe checkpoints ----------------------------------------------
nan_guard = cb.NaNGuard()  # stop at a NaN loss; no checkpoint is written after it
callbacks = [
    nan_guard,
    cb.GradientNormLogger(run_dir / "tensorboard" / "diagnostics", every=20),
    *tensorboard_callbacks(run_dir / "tensorboard"),  # [] and a note without tensorboard
    cb.RunCheckpoint(run_dir, nan_guard),  # checkpoints/last.keras, best.keras, state.json
    cb.MetricsCSV(run_dir / "metrics.csv"),  # after the commit: lists committed epochs only
]

# -- fit: stateless pairs, so any batch size and a fresh order each epoch ---------------------
model.fit(x_train, y_train, sample_weight=w_train, batch_size=config.batch_size, shuffle=True,
          epochs=config.epochs, validation_data=(x_val, y_val, w_val), callbacks=callbacks,
          verbose=2)
if nan_guard.tripped:
    sys.exit(f"error: {nan_guard.message(str(run_dir / 'checkpoints' / 'last.keras'))}")

# -- decode the test split greedily, as `keras-seq eval seq2seq` does -------------------------
result = evaluate_run(run_dir, "test")
print(f"test: exact match {100 * result['exact_match']:.2f}%, token accuracy "
      f"{100 * result['token_accuracy']:.2f}% over {result['n']:,} pairs")
for example in result["examples"][:3]:
    print(f"  {example['source']!r} → {example['output']!r} (want {example['reference']!r})")
print(f"next: keras-seq eval seq2seq --run-dir {run_dir}")
