# ruff: noqa: E402  (the imports after the config keep --help free of TensorFlow)
"""Train an LSTM text classifier on the built-in `reviews-negation` task, top to bottom.

Generated reviews → a word tokenizer → padded id arrays → keras-seq SequenceClassifier
(embedding → LSTM → the last state → label logits) → model.fit with the library's
callbacks. In `reviews-negation` a negator ("not", "never"…) far before the sentiment word
flips its polarity (80-word reviews, negator 10, 35 or 70 words before it), so
the label needs memory across the review. The run directory
is the one `keras-seq train classify` writes::

    python train/classify.py --run-dir runs/negation
    python train/classify.py --run-dir runs/tiny --train-size 200 --units 16 --epochs 1
    keras-seq eval classify --run-dir runs/negation
    keras-seq predict --run-dir runs/negation "the movie was not at all good"

Every value of the config below can be overridden with a flag of the same name
(``--units 64``); ``none`` unsets an optional one.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

from keras_seq.script_config import parse_config


@dataclass
class Config:
    run_dir: str = "runs/classify"  # config.json, tokenizer.json, labels.json, checkpoints/
    # data (generated from the seed: the run stores how, not the texts)
    data: str = "reviews-negation"  # or tsv:PATH (text<TAB>label lines)
    train_size: int = 4000  # reviews; the task's default sizes
    val_size: int = 500
    test_size: int = 1500  # reviews `keras-seq eval classify` scores
    # model
    embed_dim: int = 64  # a small vocabulary of filler, sentiment and negator words
    units: int = 128  # the LSTM state that must carry the negator to the end
    pooling: str = "last"  # last state | mean | attention over the states
    dropout: float = 0.0  # the generated data has no noise to overfit to
    # optimisation
    batch_size: int = 32  # reviews per step
    epochs: int = 10  # passes over the training reviews
    lr: float = 2e-3  # Adam
    clip_norm: float | None = 5.0  # global-norm clipping: recurrent gradients can spike
    seed: int = 1234  # the reviews, the weights and the batch order


config = parse_config(Config, sys.argv[1:], description=__doc__)
run_dir = Path(config.run_dir)
if (run_dir / "config.json").exists():
    sys.exit(f"error: {run_dir} already holds a run; choose another --run-dir")

# TensorFlow loads only now, so that --help and a bad flag answer at once.
import keras

from keras_seq.data.batching import pad_sequences
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.models import SequenceClassifier
from keras_seq.tasks import LABELS_FILE, Labels
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.classify.task import evaluate_run, task_data
from keras_seq.training import callbacks as cb
from keras_seq.training.trainer import start_run, tensorboard_callbacks

keras.utils.set_random_seed(config.seed)

# -- the run's config first: it also says how to generate the data ---------------------------
# Every field above is a ClassifyConfig field of the same name; the script fixes the cell.
run_config = ClassifyConfig.from_script(config, cell="lstm", backend=keras.backend.backend())

# -- data: (text, label) pairs → word ids → padded arrays ------------------------------------
data = task_data(run_config)  # the reviews re-created from the seed, as eval will
train_pairs, val_pairs = data.splits["train"], data.splits["val"]
tokenizer = make_tokenizer("word").fit("\n".join(text for text, _ in train_pairs) + "\n")
labels = Labels(data.labels)  # ["neg", "pos"]: the class ids are their positions


def arrays(pairs):
    """``(ids (N, T), label ids (N,))``, each text's words without the line token, 0-padded."""
    encoded = [tokenizer.encode(text) for text, _ in pairs]
    ids, _ = pad_sequences([e[e != tokenizer.eos_id] for e in encoded])  # (N, T)
    return ids, labels.ids([label for _, label in pairs])  # (N,)


x_train, y_train = arrays(train_pairs)
x_val, y_val = arrays(val_pairs)
print(f"{config.data}: {len(x_train):,} training texts of {x_train.shape[1]} words, labels "
      f"{labels.list}, vocabulary {tokenizer.vocab_size}")

# -- the run directory: what `keras-seq eval classify` reads back -----------------------------
start_run(run_dir, run_config, {"tokenizer.json": tokenizer, LABELS_FILE: labels})

# -- the model: embedding → LSTM → pooled state → logits -------------------------------------
model = SequenceClassifier(tokenizer.vocab_size, len(labels), embed_dim=config.embed_dim,
                           units=config.units, cell="lstm", pooling=config.pooling,
                           dropout=config.dropout)
model.build((None, x_train.shape[1]))  # (B, T) → (B, classes)
clip = {"global_clipnorm": config.clip_norm} if config.clip_norm else {}
model.compile(optimizer=keras.optimizers.Adam(config.lr, **clip),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
print(f"SequenceClassifier: {model.count_params():,} parameters")

# -- callbacks: logs and crash-safe checkpoints ----------------------------------------------
nan_guard = cb.NaNGuard()  # stop at a NaN loss; no checkpoint is written after it
callbacks = [
    nan_guard,
    cb.GradientNormLogger(run_dir / "tensorboard" / "diagnostics", every=20),
    *tensorboard_callbacks(run_dir / "tensorboard"),  # [] and a note without tensorboard
    cb.RunCheckpoint(run_dir, nan_guard),  # checkpoints/last.keras, best.keras, state.json
    cb.MetricsCSV(run_dir / "metrics.csv"),  # after the commit: lists committed epochs only
]

# -- fit: stateless examples, reshuffled each epoch ------------------------------------------
model.fit(x_train, y_train, batch_size=config.batch_size, shuffle=True, epochs=config.epochs,
          validation_data=(x_val, y_val), callbacks=callbacks, verbose=2)
if nan_guard.tripped:
    sys.exit(f"error: {nan_guard.message(str(run_dir / 'checkpoints' / 'last.keras'))}")

# -- score the test split, as `keras-seq eval classify` does ---------------------------------
result = evaluate_run(run_dir, "test")
line = f"test: accuracy {100 * result['accuracy']:.2f}% over {result['n']:,} reviews"
if result.get("by_group"):  # accuracy per negation distance
    line += " · " + ", ".join(f"distance {group}: {100 * v['accuracy']:.1f}%"
                              for group, v in result["by_group"].items())
print(line)
print(f"next: keras-seq eval classify --run-dir {run_dir}")
