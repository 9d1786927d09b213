"""Train, evaluate and sample recurrent language models, one run directory per run.

A run directory holds::

    config.json        the resolved LMConfig
    tokenizer.json     the fitted tokenizer (its fingerprint goes into every result)
    metrics.csv        per-epoch train/val loss, perplexity, learning rate
    metrics.json       final val/test results with fingerprints, timing, diagnostics
    state.json         epochs done, best val loss (for --resume)
    checkpoints/       last.keras (weights + optimizer), best.keras
    tensorboard/       train/ and validation/ (Keras), diagnostics/ (grad norms, lr, samples)

Training is ``model.fit`` with stateful truncated BPTT: the stream layout of
:mod:`keras_seq.data.batching`, a fixed batch size, ``shuffle=False`` and
:class:`~keras_seq.training.callbacks.ResetStatesCallback`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_seq import __version__
from keras_seq.data.batching import StreamLayout, padded_batches, stream_arrays
from keras_seq.data.corpus import load_corpus
from keras_seq.data.tokenizers import EOS, load_tokenizer, make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.metrics import PerplexityResult
from keras_seq.models.rnn_lm import RecurrentLM, reset_recurrent_states
from keras_seq.sampling import Sampler, TopKSampler
from keras_seq.training import callbacks as cb
from keras_seq.training.config import LMConfig
from keras_seq.training.perplexity_metric import Perplexity

RUN_FORMAT = "keras-seq-lm-run"


# ----------------------------------------------------------------------------------------
# Run directories


def check_run_dir(run_dir: str | Path) -> Path:
    """The run directory, after checking it was written by this keras-seq."""
    run_dir = Path(run_dir)
    config_path = run_dir / "config.json"
    if not config_path.is_file():
        raise KerasSeqError(
            f"{run_dir} is not a keras-seq run directory (no config.json); pass the --run-dir "
            "of a `keras-seq train lm` run"
        )
    version = json.loads(config_path.read_text()).get("version")
    if version != __version__:
        raise KerasSeqError(
            f"{run_dir} was written by keras-seq {version}, this is {__version__}; "
            "re-train it or use the matching keras-seq version"
        )
    if not (run_dir / "checkpoints" / "last.keras").is_file():
        raise KerasSeqError(f"{run_dir} has no checkpoint yet (checkpoints/last.keras)")
    return run_dir


def load_run(run_dir: str | Path):
    """``(config, tokenizer, model)`` of a finished or interrupted run (best checkpoint)."""
    run_dir = check_run_dir(run_dir)
    config = LMConfig.load(run_dir / "config.json")
    tokenizer = load_tokenizer(run_dir)
    best = run_dir / "checkpoints" / "best.keras"
    path = best if best.is_file() else run_dir / "checkpoints" / "last.keras"
    model = keras.saving.load_model(path, compile=False)
    return config, tokenizer, model


def corpus_for(config: LMConfig):
    return load_corpus(config.data, data_dir=config.data_dir, split=config.split_ratio)


def fingerprint(tokenizer, corpus, split: str) -> dict:
    return {"tokenizer": tokenizer.fingerprint, "split": split, "corpus_sha256": corpus.sha256,
            "corpus": corpus.name, "split_ratio": corpus.split_spec}


# ----------------------------------------------------------------------------------------
# Data


def _full_bptt_data(ids: np.ndarray, eos_id: int, batch_size: int, bptt_cap: int = 400):
    """Whole lines (at most ``bptt_cap`` + 1 tokens each) as padded batches for stateless
    full BPTT: lists of ``x``, ``y`` and ``sample_weight`` arrays, one entry per batch."""
    cuts = np.flatnonzero(ids == eos_id) + 1
    lines = [line for line in np.split(ids, cuts) if len(line) >= 2]
    lines = [line[: bptt_cap + 1] for line in lines]
    xs, ys, ws = [], [], []
    for batch, mask in padded_batches(lines, batch_size, pad_id=0, bucket=True, seed=0):
        xs.append(batch[:, :-1])
        ys.append(batch[:, 1:])
        ws.append(mask[:, 1:].astype("float32"))
    return xs, ys, ws


def _padded_dataset(xs, ys, ws):
    def gen():
        yield from zip(xs, ys, ws)

    spec = (tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None), tf.int32),
            tf.TensorSpec((None, None), tf.float32))
    return tf.data.Dataset.from_generator(gen, output_signature=spec)


# ----------------------------------------------------------------------------------------
# Evaluation and generation


def evaluate_stream(model: RecurrentLM, ids, bptt: int = 35) -> tuple[np.ndarray, int]:
    """Log-probabilities of every next token of ``ids``, carrying state through the stream.

    Runs a batch-1 stateful copy of ``model`` over windows of ``bptt`` tokens, the last
    window possibly shorter, so all ``len(ids) − 1`` predictions are scored.

    Returns:
        ``(log_probs, n)``: natural-log probabilities ``(n,)`` of the targets.
    """
    ids = np.asarray(ids, dtype=np.int32)
    if len(ids) < 2:
        raise KerasSeqError(f"need at least 2 tokens to evaluate, got {len(ids)}")
    runner = model.clone_for_batch(1, stateful=True)

    @tf.function(reduce_retracing=True)
    def window_log_probs(x, y):
        logits = runner(x, training=False)  # (1, T, V)
        logp = tf.nn.log_softmax(logits, axis=-1)
        return tf.gather(logp, y, axis=-1, batch_dims=2)  # (1, T)

    reset_recurrent_states(runner)
    out = []
    for start in range(0, len(ids) - 1, bptt):
        x = ids[start: min(start + bptt, len(ids) - 1)]
        y = ids[start + 1: start + 1 + len(x)]
        out.append(window_log_probs(x[None], y[None]).numpy()[0])
    log_probs = np.concatenate(out)
    return log_probs, len(log_probs)


def evaluate_run(run_dir: str | Path, split: str = "val") -> PerplexityResult:
    """Cross-entropy and perplexity of a run's model on ``split`` (state carried)."""
    config, tokenizer, model = load_run(run_dir)
    corpus = corpus_for(config)
    text = corpus.text(split)
    if not text.strip():
        raise KerasSeqError(f"split {split!r} of {corpus.name} is empty "
                            f"(split ratio {config.split_ratio})")
    ids = tokenizer.encode(text)
    log_probs, _ = evaluate_stream(model, ids, config.bptt)
    oov = int((ids[1:] == tokenizer.unk_id).sum())
    return PerplexityResult.from_log_probs(
        log_probs, fingerprint=fingerprint(tokenizer, corpus, split), oov=oov,
        model=f"{config.cell} LM ({Path(run_dir).name})",
    )


def generate_tokens(model: RecurrentLM, tokenizer, prompt: str, max_tokens: int,
                    sampler: Sampler | None = None, seed: int | None = None, on_token=None,
                    runner: RecurrentLM | None = None) -> list[int]:
    """Sample ``max_tokens`` ids after ``prompt``; ``on_token(id)`` is called as each arrives."""
    if max_tokens < 0:
        raise KerasSeqError(f"max_tokens must be ≥ 0, got {max_tokens}")
    sampler = sampler or TopKSampler(10)
    rng = np.random.default_rng(seed)
    prompt_ids = tokenizer.encode(prompt) if prompt else np.array([], np.int32)
    if prompt and (len(prompt_ids) == 0 or (prompt_ids == tokenizer.unk_id).all()):
        raise KerasSeqError(
            f"the prompt {prompt!r} has only unknown tokens for this {tokenizer.kind} "
            "vocabulary; use words the model was trained on"
        )
    if len(prompt_ids) == 0:  # start at a line boundary
        start = tokenizer.eos_id if tokenizer.eos_id is not None else tokenizer.encode("\n")[0]
        prompt_ids = np.array([start], np.int32)
    runner = runner or model.clone_for_batch(1, stateful=True)
    reset_recurrent_states(runner)

    @tf.function(reduce_retracing=True, autograph=False)
    def step(x):
        return runner(x, training=False)[:, -1, :]  # (1, V) logits of the next token

    logits = step(prompt_ids[None]).numpy()[0]
    out = []
    for _ in range(max_tokens):
        token = sampler(logits, rng)
        out.append(token)
        if on_token is not None:
            on_token(token)
        logits = step(np.array([[token]], np.int32)).numpy()[0]
    return out


# ----------------------------------------------------------------------------------------
# Training


class _SampleWriter(keras.callbacks.Callback):
    """Sample text each epoch into TensorBoard (and keep it for the diagnostics)."""

    def __init__(self, tokenizer, log_dir, n_tokens: int, seed: int):
        super().__init__()
        self.tokenizer, self.n_tokens, self.seed = tokenizer, n_tokens, seed
        self.writer = tf.summary.create_file_writer(str(log_dir))
        self.last: list[str] = []
        self._runner = None

    def sample(self) -> list[str]:
        if self._runner is None:
            self._runner = self.model.clone_for_batch(1, stateful=True)
        self._runner.set_weights(self.model.get_weights())
        ids = generate_tokens(self.model, self.tokenizer, "", self.n_tokens,
                              TopKSampler(10), seed=self.seed, runner=self._runner)
        self.last = self.tokenizer.ids_to_tokens(ids)
        return self.last

    def on_epoch_end(self, epoch, logs=None):
        if self.n_tokens <= 0 or not np.isfinite((logs or {}).get("loss", 0.0)):
            return  # nothing to sample from a model whose loss is NaN
        text = self.tokenizer.decode(self.tokenizer.tokens_to_ids(self.sample()))
        with self.writer.as_default(step=epoch + 1):
            tf.summary.text("sample", tf.constant(text))


class _ActivationHistograms(keras.callbacks.Callback):
    """Histograms of each layer's activations on a fixed validation window."""

    def __init__(self, log_dir, sample_ids: np.ndarray, freq: int):
        super().__init__()
        self.writer = tf.summary.create_file_writer(str(log_dir))
        self.sample_ids, self.freq = sample_ids, freq
        self._probe = None

    def on_epoch_end(self, epoch, logs=None):
        if not self.freq or (epoch + 1) % self.freq or \
                not np.isfinite((logs or {}).get("loss", 0.0)):
            return
        if self._probe is None:
            self._probe = self.model.clone_for_batch(len(self.sample_ids), stateful=False)
        probe = self._probe
        probe.set_weights(self.model.get_weights())
        x = probe.embedding(self.sample_ids)
        with self.writer.as_default(step=epoch + 1):
            tf.summary.histogram("activations/embedding", x)
            for rnn in probe.rnns:
                x = rnn(x, training=False)
                tf.summary.histogram(f"activations/{rnn.name}", x)
            tf.summary.histogram("activations/logits", probe.head(x))


class _TimeBudget(keras.callbacks.Callback):
    def __init__(self, minutes: float | None):
        super().__init__()
        self.minutes, self.start = minutes, time.monotonic()
        self.hit = False

    def on_epoch_end(self, epoch, logs=None):
        if self.minutes and (time.monotonic() - self.start) / 60 >= self.minutes:
            self.hit = True
            self.model.stop_training = True


def build_model(config: LMConfig, vocab_size: int) -> RecurrentLM:
    stateful = config.bptt_mode == "truncated"
    model = RecurrentLM(
        vocab_size, embed_dim=config.embed_dim, units=config.units,
        num_layers=config.num_layers, cell=config.cell, dropout=config.dropout,
        tie_weights=config.tie_weights, stateful=stateful, init_scale=config.init_scale,
        variational_dropout=config.variational_dropout, embed_dropout=config.embed_dropout,
        weight_dropout=config.weight_dropout,
    )
    shape = (config.batch_size, config.bptt) if stateful else (1, config.bptt)
    model(np.zeros(shape, np.int32))
    clip = {"global_clipnorm": config.clip_norm} if config.clip_norm else {}
    optimizer = (keras.optimizers.SGD(config.lr, **clip) if config.optimizer == "sgd"
                 else keras.optimizers.Adam(config.lr, **clip))
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[Perplexity(from_logits=True)])
    return model


def unseen_unk_warning(train_ids, val_ids, unk_id: int, threshold: float = 0.005) -> str | None:
    """A note when validation has ``<unk>`` tokens but training has none.

    A neural LM then learns to give ``<unk>`` almost no probability, and every unknown
    word in validation costs many nats (on tinyshakespeare words with ``min_count=1``,
    about 16.6 nats each: 13% of the whole validation loss).
    """
    if len(val_ids) == 0 or np.any(train_ids == unk_id):
        return None
    share = float(np.mean(val_ids == unk_id))
    if share < threshold:
        return None
    return (f"note: {share:.1%} of the validation tokens are <unk> but the training stream "
            "has none, so the model will learn to give <unk> almost no probability and "
            "each one will cost many nats. Use --min-count 2 (words seen once in training "
            "become <unk>) or --max-vocab so that <unk> occurs in training.")


def train_lm(config: LMConfig, run_dir: str | Path, resume: bool = False,
             verbose: int = 1, printer=print) -> dict:
    """Train a recurrent LM into ``run_dir`` (or continue it with ``resume=True``).

    Returns the final metrics dict (also written to ``metrics.json``).
    """
    run_dir = Path(run_dir)
    if resume:
        check_run_dir(run_dir)
        saved = LMConfig.load(run_dir / "config.json")
        config = LMConfig.from_dict({**saved.to_dict(), "epochs": max(config.epochs,
                                                                      saved.epochs)})
    elif (run_dir / "config.json").exists():
        raise KerasSeqError(
            f"{run_dir} already holds a run; pass --resume to continue it or choose a new "
            "--run-dir"
        )
    config.validate()
    run_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    corpus = corpus_for(config)
    if resume:
        tokenizer = load_tokenizer(run_dir)
    else:
        tokenizer = make_tokenizer(
            config.tokenizer, max_vocab=config.max_vocab, min_count=config.min_count,
            vocab_size=config.vocab_size, lower=config.lower,
        ).fit(corpus.text("train"))
        tokenizer.save(run_dir)
        config.save(run_dir / "config.json")
    train_ids = tokenizer.encode(corpus.text("train"))
    val_text = corpus.text("val")
    val_ids = tokenizer.encode(val_text) if val_text.strip() else np.array([], np.int32)

    unk_warning = unseen_unk_warning(train_ids, val_ids, tokenizer.unk_id)
    if unk_warning:
        printer(unk_warning)

    B, T = config.batch_size, config.bptt
    if config.bptt_mode == "truncated":
        x, y = stream_arrays(train_ids, B, T)
        layout = StreamLayout(len(train_ids), B, T)
        steps = layout.num_batches
        if config.max_steps_per_epoch:
            steps = min(steps, config.max_steps_per_epoch)
            x, y = x[: steps * B], y[: steps * B]
        fit_data = {"x": x, "y": y, "batch_size": B, "shuffle": False}
        validation = None
        if len(val_ids) > B * (T + 1):
            vx, vy = stream_arrays(val_ids, B, T)
            validation = (vx, vy)
        else:
            printer(f"note: val split too short for batch {B} × bptt {T}; no validation in fit")
    else:
        if tokenizer.eos_id is None:
            raise KerasSeqError("full-BPTT mode trains on whole lines and needs a word or "
                                "subword tokenizer (char has no line token)")
        xs, ys, ws = _full_bptt_data(train_ids, tokenizer.eos_id, B)
        if config.max_steps_per_epoch:
            xs, ys, ws = (v[: config.max_steps_per_epoch] for v in (xs, ys, ws))
        steps = len(xs)
        fit_data = {"x": _padded_dataset(xs, ys, ws).repeat(), "steps_per_epoch": steps,
                    "shuffle": False}
        validation = None
        if len(val_ids) > 2:
            val_batches = _full_bptt_data(val_ids, tokenizer.eos_id, B)
            validation = _padded_dataset(*val_batches).repeat()
            fit_data["validation_steps"] = len(val_batches[0])

    if resume:
        model, initial_epoch = cb.resume_from_checkpoint(run_dir)
    else:
        model = build_model(config, tokenizer.vocab_size)
        initial_epoch = 0
    if initial_epoch >= config.epochs:
        printer(f"{run_dir} already trained {initial_epoch} epoch(s); nothing to do")
        return json.loads((run_dir / "metrics.json").read_text())

    tb_dir = run_dir / "tensorboard"
    diagnostics: list[dict] = []
    if unk_warning:
        diagnostics.append({"epoch": 0, "kind": "unk-unseen", "message": unk_warning})
    nan_guard = cb.NaNGuard()
    sampler_cb = _SampleWriter(tokenizer, tb_dir / "samples", config.sample_tokens, config.seed)
    budget = _TimeBudget(config.max_minutes)
    callbacks = [
        nan_guard,
        cb.GradientNormLogger(tb_dir / "diagnostics", every=config.log_every),
        keras.callbacks.TensorBoard(str(tb_dir), histogram_freq=config.histogram_freq,
                                    write_graph=False),
        keras.callbacks.CSVLogger(str(run_dir / "metrics.csv"), append=resume),
        sampler_cb,
        cb.TrainingDiagnostics(tokenizer.vocab_size,
                               sample_fn=(lambda: sampler_cb.last) if config.sample_tokens
                               else None,
                               report=diagnostics, printer=printer),
        cb.RunCheckpoint(run_dir, nan_guard),
        budget,
    ]
    if config.optimizer == "sgd" or config.lr_decay != 1.0:
        callbacks.insert(0, cb.PTBLearningRate(config.lr, config.lr_decay, config.decay_start))
    if config.bptt_mode == "truncated":
        callbacks.insert(0, cb.ResetStatesCallback())
    if config.histogram_freq and len(val_ids) > T:
        callbacks.append(_ActivationHistograms(tb_dir / "activations",
                                               val_ids[: 4 * T].reshape(4, T)
                                               if len(val_ids) >= 4 * T else val_ids[None, :T],
                                               config.histogram_freq))

    started = time.monotonic()
    model.fit(**fit_data, epochs=config.epochs, initial_epoch=initial_epoch,
              validation_data=validation, callbacks=callbacks, verbose=verbose)
    minutes = (time.monotonic() - started) / 60

    if nan_guard.tripped:
        last = run_dir / "checkpoints" / "last.keras"
        raise KerasSeqError(nan_guard.message(str(last) if last.is_file() else None))

    epochs_done = json.loads((run_dir / "state.json").read_text())["epochs_done"]
    trained_tokens = (epochs_done - initial_epoch) * steps * B * T
    results = {"run_dir": str(run_dir), "epochs_done": epochs_done,
               "train_minutes": minutes, "params": int(model.count_params()),
               "tokens_per_sec": trained_tokens / max(minutes * 60, 1e-9),
               "time_budget_hit": budget.hit, "diagnostics": diagnostics,
               "tokenizer": tokenizer.describe(), "corpus": corpus.describe()}
    for split in ("val", "test"):
        if corpus.text(split).strip():
            r = evaluate_run(run_dir, split)
            results[split] = r.to_dict()
    (run_dir / "metrics.json").write_text(json.dumps(results, indent=2, default=str))
    return results


def format_results(results: dict) -> str:
    lines = [f"run          {results['run_dir']}",
             f"params       {results['params']:,}",
             f"trained      {results['epochs_done']} epoch(s) in {results['train_minutes']:.1f} "
             f"min ({results['tokens_per_sec']:,.0f} tokens/s)"]
    for split in ("val", "test"):
        if split in results:
            r = results[split]
            lines.append(f"{split:<12} cross-entropy {r['nats']:.4f} nats ({r['bits']:.3f} bits), "
                         f"PPL {r['ppl']:.2f} over {r['tokens']:,} tokens")
    lines.append(f"fingerprint  {results['tokenizer']['fingerprint']}")
    return "\n".join(lines)


def stream_to_stdout(tokenizer):
    """An ``on_token`` callback that prints tokens as they arrive."""
    sep = "" if tokenizer.kind == "char" else " "

    def emit(token_id: int):
        tok = tokenizer.vocab[token_id]
        if tokenizer.kind == "subword" and tok.startswith("##"):
            sys.stdout.write(tok[2:])
        elif tok == EOS:
            sys.stdout.write("\n")
        else:
            sys.stdout.write(tok if sep == "" else sep + tok)
        sys.stdout.flush()

    return emit

