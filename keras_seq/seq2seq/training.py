"""Train, evaluate and use sequence-to-sequence models, one run directory per run.

A run directory holds (the same conventions as the language-model trainer)::

    config.json               the resolved Seq2SeqConfig
    source_tokenizer.json     tokenizer of the source side (its fingerprint goes into results)
    target_tokenizer.json     tokenizer of the target side
    metrics.csv               per-epoch loss, token accuracy, val exact match
    metrics.json              final test results (overall and per length bucket)
    state.json                epochs done, best val loss, dropout RNG states (--resume)
    checkpoints/              last.keras (weights + optimizer), best.keras
    tensorboard/              train/, validation/ (Keras) and attention/ (heatmap images)

Generated tasks (``dates``, ``reverse``, ``copy``) are re-created from the config's seed,
so the run directory does not store the data; TSV data is referenced by path and sha256.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_seq import __version__
from keras_seq.data.seq2seq_tasks import TaskData, make_task
from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.models.seq2seq import Seq2Seq
from keras_seq.seq2seq import decoding, metrics
from keras_seq.training import callbacks as cb

RUN_FORMAT = "keras-seq-seq2seq-run"


@dataclass
class Seq2SeqConfig:
    """Everything that decides a seq2seq run. Saved as ``config.json`` in the run dir."""

    # data
    task: str = "dates"  # dates | reverse | copy | anki-spa-eng | tsv:PATH
    train_size: int = 20000  # generated tasks: training pairs
    val_size: int = 500
    test_size: int = 2000
    min_len: int = 1  # reverse/copy: source lengths uniform in [min_len, max_len]
    max_len: int = 20
    source_col: int = 0  # TSV columns
    target_col: int = 1
    max_pairs: int | None = None  # TSV: read at most this many pairs
    data_dir: str | None = None
    tokenizer: str = "char"  # char | word | subword, fitted on the training pairs
    max_vocab: int | None = None
    # model
    cell: str = "gru"
    units: int = 128  # encoder units per direction and decoder units
    embed_dim: int = 32
    bidirectional: bool = True
    attention: str = "bahdanau"  # bahdanau (RNNsearch) | none (RNNenc)
    attention_units: int | None = None  # default units // 4: a few % of the weights
    dropout: float = 0.0
    max_source_len: int | None = None  # default: the longest training source
    max_target_len: int | None = None  # default: longest training target + a margin
    # optimisation
    batch_size: int = 64
    epochs: int = 20
    steps_per_epoch: int | None = None  # None: one pass over the training pairs
    lr: float = 3e-3
    clip_norm: float | None = 5.0
    max_minutes: float | None = None  # stop (mid-epoch if need be) once past this budget
    target_exact_match: float | None = None  # stop once val exact match reaches this
    seed: int = 1234
    # logging
    eval_size: int = 500  # val pairs greedily decoded each epoch for exact match
    attention_images: int = 1  # heatmaps written to TensorBoard each epoch
    version: str = field(default=__version__)

    def validate(self) -> Seq2SeqConfig:
        problems = []
        for name in ("train_size", "units", "embed_dim", "batch_size", "epochs"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} must be ≥ 1 (got {getattr(self, name)})")
        if self.attention not in ("bahdanau", "none"):
            problems.append(f"attention must be 'bahdanau' or 'none' (got {self.attention!r})")
        if self.cell not in ("gru", "lstm"):
            problems.append(f"cell must be 'gru' or 'lstm' (got {self.cell!r})")
        if not 0 <= self.dropout < 1:
            problems.append(f"dropout must be in [0, 1) (got {self.dropout})")
        if self.lr <= 0:
            problems.append(f"lr must be > 0 (got {self.lr})")
        if problems:
            raise KerasSeqError("invalid seq2seq configuration: " + "; ".join(problems))
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Seq2SeqConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise KerasSeqError(f"unknown seq2seq config key(s) {unknown}; expected some of "
                                f"{sorted(names)}")
        return cls(**data)

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, path) -> Seq2SeqConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))


# ----------------------------------------------------------------------------------------
# Data


def task_data(config: Seq2SeqConfig) -> TaskData:
    return make_task(config.task, seed=config.seed, train_size=config.train_size,
                     val_size=config.val_size, test_size=config.test_size,
                     min_len=config.min_len, max_len=config.max_len,
                     source_col=config.source_col, target_col=config.target_col,
                     max_pairs=config.max_pairs, data_dir=config.data_dir)


def _fit_tokenizers(config: Seq2SeqConfig, pairs):
    def fit(texts):
        options = {"max_vocab": config.max_vocab}
        if config.tokenizer == "subword":
            options = {"vocab_size": config.max_vocab or 8000}
        return make_tokenizer(config.tokenizer, **options).fit("\n".join(texts) + "\n")

    return fit([s for s, _ in pairs]), fit([t for _, t in pairs])


def encode_pairs(pairs, src_tok, tgt_tok, max_source_len=None, max_target_len=None):
    """Id arrays of each pair; pairs over the limits or with an empty side are dropped."""
    out = []
    for s, t in pairs:
        s_ids = src_tok.encode(" ".join(s.split("\n")))
        t_ids = tgt_tok.encode(" ".join(t.split("\n")))
        if not len(s_ids) or not len(t_ids):
            continue
        if (max_source_len and len(s_ids) > max_source_len) or \
                (max_target_len and len(t_ids) > max_target_len):
            continue
        out.append((s_ids, t_ids, s, t))
    return out


def make_batches(encoded, batch_size: int, bos: int, eos: int, seed: int | None = 0):
    """Length-bucketed teacher-forcing batches ``((src, dec_in), dec_out, weights)``."""
    order = np.arange(len(encoded))
    if seed is not None:
        np.random.default_rng(seed).shuffle(order)
    order = sorted(order, key=lambda i: len(encoded[i][0]))  # stable: random within a length
    batches = []
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        S = max(len(encoded[i][0]) for i in idx)
        T = max(len(encoded[i][1]) for i in idx) + 1
        src = np.zeros((len(idx), S), np.int32)
        dec_in = np.zeros((len(idx), T), np.int32)
        dec_out = np.zeros((len(idx), T), np.int32)
        w = np.zeros((len(idx), T), np.float32)
        for row, i in enumerate(idx):
            s, t = encoded[i][0], encoded[i][1]
            src[row, :len(s)] = s
            dec_in[row, 0] = bos
            dec_in[row, 1:len(t) + 1] = t
            dec_out[row, :len(t)] = t
            dec_out[row, len(t)] = eos
            w[row, :len(t) + 1] = 1.0
        batches.append(((src, dec_in), dec_out, w))
    return batches


def batch_dataset(batches, seed: int, repeat: bool):
    """A ``tf.data`` pipeline over precomputed batches (order reshuffled every pass)."""
    state = {"pass": 0}

    def gen():
        order = np.arange(len(batches))
        if repeat:
            np.random.default_rng(seed + state["pass"]).shuffle(order)
            state["pass"] += 1
        for i in order:
            yield batches[i]

    spec = ((tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None), tf.int32)),
            tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None), tf.float32))
    ds = tf.data.Dataset.from_generator(gen, output_signature=spec)
    return (ds.repeat() if repeat else ds).prefetch(2)


# ----------------------------------------------------------------------------------------
# Model


def build_model(config: Seq2SeqConfig, source_vocab: int, target_vocab: int) -> Seq2Seq:
    model = Seq2Seq(source_vocab, target_vocab, embed_dim=config.embed_dim, units=config.units,
                    cell=config.cell, bidirectional=config.bidirectional,
                    attention=config.attention, attention_units=config.attention_units,
                    dropout=config.dropout, max_source_len=config.max_source_len,
                    max_target_len=config.max_target_len)
    model.build()
    clip = {"global_clipnorm": config.clip_norm} if config.clip_norm else {}
    model.compile(optimizer=keras.optimizers.Adam(config.lr, **clip),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_acc")])
    return model


# ----------------------------------------------------------------------------------------
# Run directories


def check_run_dir(run_dir) -> Path:
    run_dir = Path(run_dir)
    path = run_dir / "config.json"
    if not path.is_file():
        raise KerasSeqError(f"{run_dir} is not a keras-seq seq2seq run directory (no "
                            "config.json); pass the --run-dir of a `keras-seq train seq2seq` run")
    data = json.loads(path.read_text())
    if data.get("version") != __version__ or "attention" not in data:
        raise KerasSeqError(f"{run_dir} was not written by `keras-seq train seq2seq` "
                            f"{__version__}; re-train it")
    if not (run_dir / "checkpoints" / "last.keras").is_file():
        raise KerasSeqError(f"{run_dir} has no checkpoint yet (checkpoints/last.keras)")
    return run_dir


def load_run(run_dir, which: str = "best"):
    """``(config, source_tokenizer, target_tokenizer, model)`` of a run."""
    run_dir = check_run_dir(run_dir)
    config = Seq2SeqConfig.load(run_dir / "config.json")
    src_tok = load_tokenizer(run_dir / "source_tokenizer.json")
    tgt_tok = load_tokenizer(run_dir / "target_tokenizer.json")
    best = run_dir / "checkpoints" / "best.keras"
    path = best if which == "best" and best.is_file() else run_dir / "checkpoints" / "last.keras"
    model = keras.saving.load_model(path, compile=False)
    return config, src_tok, tgt_tok, model


# ----------------------------------------------------------------------------------------
# Evaluation


def _tokens_of(tokenizer, ids) -> list[str]:
    vocab = tokenizer.vocab
    return [vocab[i] if i < len(vocab) else "<eos>" for i in ids]


def evaluate_pairs(model, src_tok, tgt_tok, pairs, beam: int = 1, length_penalty: float = 1.0,
                   n_buckets: int = 8, max_bucket_len: int | None = None,
                   return_attention: bool = False, progress: bool = False) -> dict:
    """Decode ``pairs`` and score them (overall and per source-length bucket)."""
    encoded = encode_pairs(pairs, src_tok, tgt_tok, model.max_source_len)
    if not encoded:
        raise KerasSeqError("no evaluation pair fits the model's source length limit "
                            f"({model.max_source_len} tokens)")
    from keras_seq.data.batching import pad_sequences

    order = np.argsort([len(e[0]) for e in encoded], kind="stable")  # less padding per batch
    encoded = [encoded[i] for i in order]
    src = pad_sequences([e[0] for e in encoded])[0]
    attention = None
    if beam == 1:
        out = decoding.greedy_decode(model, src, return_attention=return_attention,
                                     progress=progress)
        hyps, attention = out if return_attention else (out, None)
    else:
        hyps = decoding.beam_search(model, src, beam=beam, length_penalty=length_penalty,
                                    progress=progress)
    refs = [e[1].tolist() for e in encoded]
    hyp_texts = decoding.decode_targets(tgt_tok, hyps)
    ref_texts = decoding.decode_targets(tgt_tok, refs)
    lengths = [len(e[0]) for e in encoded]
    edges = metrics.bucket_edges(max_bucket_len or max(lengths), n_buckets)
    result = metrics.summarize(hyps, refs, hyp_texts, ref_texts, lengths, edges,
                               char_level=tgt_tok.kind == "char")
    result["skipped"] = len(pairs) - len(encoded)
    result["examples"] = [{"source": e[2], "reference": r, "output": h}
                          for e, r, h in list(zip(encoded, ref_texts, hyp_texts))[:: max(
                              1, len(encoded) // 5)][:5]]
    if return_attention:
        result["_attention"] = (encoded, hyps, attention)
    return result


def heatmap_for(model, src_tok, tgt_tok, source: str, path, title: str | None = None):
    """Greedy-decode ``source`` and write its attention heatmap PNG (title: input → output)."""
    from keras_seq.seq2seq.plots import attention_heatmap

    ids = decoding.encode_sources(src_tok, [source], model.max_source_len)
    (hyp,), (weights,) = decoding.greedy_decode(model, ids, return_attention=True)
    src_tokens = _tokens_of(src_tok, ids[0][ids[0] != 0])
    out_tokens = _tokens_of(tgt_tok, hyp + [model.eos_id])[: len(weights)]
    if title is None:
        title = f"{source} → {decoding.decode_targets(tgt_tok, [hyp])[0]}"
    return attention_heatmap(weights, src_tokens, out_tokens, path, title=title)


def evaluate_run(run_dir, split: str = "test", beam: int = 1, length_penalty: float = 1.0,
                 plot_dir=None, limit: int | None = None, progress: bool = False) -> dict:
    """Metrics of a run's model on ``split`` (and, with ``plot_dir``, heatmap + curve PNGs)."""
    config, src_tok, tgt_tok, model = load_run(run_dir)
    data = task_data(config)
    pairs = data.splits[split][:limit] if limit else data.splits[split]
    if not pairs:
        raise KerasSeqError(f"split {split!r} of task {config.task} is empty")
    max_bucket = config.max_len if config.task in ("reverse", "copy") else None
    result = evaluate_pairs(model, src_tok, tgt_tok, pairs, beam=beam,
                            length_penalty=length_penalty, max_bucket_len=max_bucket,
                            progress=progress)
    result.update(split=split, beam=beam, run_dir=str(run_dir), attention=config.attention,
                  task=config.task, params=int(model.count_params()),
                  fingerprint={"source_tokenizer": src_tok.fingerprint,
                               "target_tokenizer": tgt_tok.fingerprint,
                               "data_sha256": data.describe()["sha256"]})
    if plot_dir is not None:
        from keras_seq.seq2seq.plots import length_curve

        plot_dir = Path(plot_dir)
        example = max(pairs[:50], key=lambda p: len(p[0]))  # a long, readable example
        plots = {"length_curve": str(length_curve(
            {f"{config.attention} ({Path(run_dir).name})": result["by_length"]},
            plot_dir / "length_curve.png"))}
        if config.attention != "none":
            plots["heatmap"] = str(heatmap_for(model, src_tok, tgt_tok, example[0],
                                               plot_dir / "attention_heatmap.png"))
        result["plots"] = plots
    return result


# ----------------------------------------------------------------------------------------
# Callbacks


class Seq2SeqMonitor(keras.callbacks.Callback):
    """Each epoch: greedy exact match on val pairs into the logs, heatmaps to TensorBoard."""

    def __init__(self, src_tok, tgt_tok, pairs, log_dir, images: int = 1,
                 target_exact_match: float | None = None, printer=print):
        super().__init__()
        self.src_tok, self.tgt_tok, self.pairs = src_tok, tgt_tok, pairs
        self.writer = tf.summary.create_file_writer(str(log_dir))
        self.images, self.target, self.printer = images, target_exact_match, printer
        self.reached = False

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or not self.pairs or not np.isfinite(logs.get("loss", 0.0)):
            return
        result = evaluate_pairs(self.model, self.src_tok, self.tgt_tok, self.pairs,
                                return_attention=self.images > 0)
        logs["val_exact_match"] = result["exact_match"]
        logs["val_bleu"] = result["bleu"]
        with self.writer.as_default(step=epoch + 1):
            tf.summary.scalar("val_exact_match", result["exact_match"])
            tf.summary.scalar("val_bleu", result["bleu"])
            if self.images and self.model.attention_type != "none":
                from keras_seq.seq2seq.plots import figure_png, heatmap_figure

                encoded, hyps, weights = result["_attention"]
                pick = np.linspace(0, len(encoded) - 1, self.images).astype(int)
                for k, i in enumerate(pick):
                    fig = heatmap_figure(weights[i], _tokens_of(self.src_tok, encoded[i][0]),
                                         _tokens_of(self.tgt_tok, hyps[i] + [self.model.eos_id]),
                                         title=encoded[i][2])
                    png = tf.image.decode_png(figure_png(fig), channels=4)[None]
                    tf.summary.image(f"attention/{k}", png)
        if self.target is not None and result["exact_match"] >= self.target:
            self.reached = True
            self.model.stop_training = True
            self.printer(f"\nval exact match {result['exact_match']:.4f} ≥ target "
                         f"{self.target}; stopping")


class TimeBudget(keras.callbacks.Callback):
    """Stop once ``minutes`` have passed, checked after every batch."""

    def __init__(self, minutes: float | None):
        super().__init__()
        self.minutes, self.start, self.hit = minutes, time.monotonic(), False

    def on_train_batch_end(self, batch, logs=None):
        if self.minutes and (time.monotonic() - self.start) / 60 >= self.minutes:
            self.hit = True
            self.model.stop_training = True


# ----------------------------------------------------------------------------------------
# Training


def train_seq2seq(config: Seq2SeqConfig, run_dir, resume: bool = False, verbose: int = 1,
                  printer=print) -> dict:
    """Train a seq2seq model into ``run_dir`` (or continue it with ``resume=True``).

    Returns the final metrics (also written to ``metrics.json``).
    """
    run_dir = Path(run_dir)
    if resume:
        check_run_dir(run_dir)
        saved = Seq2SeqConfig.load(run_dir / "config.json")
        config = Seq2SeqConfig.from_dict({**saved.to_dict(),
                                          "epochs": max(config.epochs, saved.epochs)})
    elif (run_dir / "config.json").exists():
        raise KerasSeqError(f"{run_dir} already holds a run; pass --resume to continue it or "
                            "choose a new --run-dir")
    config.validate()
    keras.utils.set_random_seed(config.seed)
    data = task_data(config)
    if resume:
        src_tok = load_tokenizer(run_dir / "source_tokenizer.json")
        tgt_tok = load_tokenizer(run_dir / "target_tokenizer.json")
    else:
        src_tok, tgt_tok = _fit_tokenizers(config, data.splits["train"])
        enc = encode_pairs(data.splits["train"], src_tok, tgt_tok)
        if config.max_source_len is None:
            config.max_source_len = max(len(e[0]) for e in enc)
        if config.max_target_len is None:
            longest = max(len(e[1]) for e in enc)
            config.max_target_len = longest + max(2, longest // 4)
        run_dir.mkdir(parents=True, exist_ok=True)
        src_tok.save(run_dir / "source_tokenizer.json")
        tgt_tok.save(run_dir / "target_tokenizer.json")
        config.save(run_dir / "config.json")
    train = encode_pairs(data.splits["train"], src_tok, tgt_tok, config.max_source_len,
                         config.max_target_len)
    val = encode_pairs(data.splits["val"], src_tok, tgt_tok, config.max_source_len,
                       config.max_target_len)
    if not train:
        raise KerasSeqError(f"task {config.task} has no usable training pairs")

    if resume:
        model, initial_epoch = cb.resume_from_checkpoint(run_dir)
    else:
        model = build_model(config, src_tok.vocab_size, tgt_tok.vocab_size)
        initial_epoch = 0
    if initial_epoch >= config.epochs:
        printer(f"{run_dir} already trained {initial_epoch} epoch(s); nothing to do")
        return json.loads((run_dir / "metrics.json").read_text())

    bos, eos = model.bos_id, model.eos_id
    train_batches = make_batches(train, config.batch_size, bos, eos, seed=config.seed)
    steps = config.steps_per_epoch or len(train_batches)
    # Resumed runs continue the batch order where the interrupted run would have been.
    passes_done = (initial_epoch * steps) // len(train_batches)
    train_ds = batch_dataset(train_batches, config.seed + passes_done, repeat=True)
    val_batches = make_batches(val, config.batch_size, bos, eos, seed=None) if val else []
    val_ds = batch_dataset(val_batches, config.seed, repeat=False) if val else None

    tb_dir = run_dir / "tensorboard"
    nan_guard = cb.NaNGuard()
    monitor = Seq2SeqMonitor(src_tok, tgt_tok, data.splits["val"][: config.eval_size],
                             tb_dir / "attention", images=config.attention_images,
                             target_exact_match=config.target_exact_match, printer=printer)
    budget = TimeBudget(config.max_minutes)
    callbacks = [nan_guard, monitor,
                 keras.callbacks.TensorBoard(str(tb_dir), write_graph=False),
                 keras.callbacks.CSVLogger(str(run_dir / "metrics.csv"), append=resume),
                 cb.RunCheckpoint(run_dir, nan_guard), budget]
    params = model.param_report()
    printer(f"{config.attention} seq2seq: {params['total']:,} parameters "
            f"({params['attention']:,} in attention); {len(train):,} training pairs, "
            f"{steps} steps/epoch")
    started = time.monotonic()
    model.fit(train_ds, steps_per_epoch=steps, epochs=config.epochs,
              initial_epoch=initial_epoch, validation_data=val_ds,
              validation_steps=len(val_batches) or None, callbacks=callbacks, shuffle=False,
              verbose=verbose)
    minutes = (time.monotonic() - started) / 60
    if nan_guard.tripped:
        last = run_dir / "checkpoints" / "last.keras"
        raise KerasSeqError(nan_guard.message(str(last) if last.is_file() else None))

    state = json.loads((run_dir / "state.json").read_text())
    results = {"run_dir": str(run_dir), "format": RUN_FORMAT, "task": config.task,
               "attention": config.attention, "epochs_done": state["epochs_done"],
               "train_minutes": minutes, "params": params, "time_budget_hit": budget.hit,
               "target_reached": monitor.reached,
               "source_tokenizer": src_tok.describe(), "target_tokenizer": tgt_tok.describe(),
               "data": data.describe()}
    test = evaluate_run(run_dir, "test")
    results["test"] = {k: v for k, v in test.items() if not k.startswith("_")}
    (run_dir / "metrics.json").write_text(json.dumps(json_safe(results), indent=2, default=str))
    return results


def format_results(results: dict) -> str:
    t = results["test"]
    lines = [f"run          {results['run_dir']}",
             f"params       {results['params']['total']:,} "
             f"(attention {results['params']['attention']:,})",
             f"trained      {results['epochs_done']} epoch(s) in "
             f"{results['train_minutes']:.1f} min",
             f"test         exact match {100 * t['exact_match']:.2f}%, token accuracy "
             f"{100 * t['token_accuracy']:.2f}%, BLEU {t['bleu']:.2f} over {t['n']:,} pairs"]
    lines += [f"  {r['bucket']:>7}  n={r['n']:<5} exact {100 * r['exact_match']:6.2f}%  "
              f"token {100 * r['token_accuracy']:6.2f}%"
              for r in t["by_length"] if r["n"]]
    return "\n".join(lines)


def json_safe(value):
    """``value`` with NaN floats (e.g. empty length buckets) replaced by ``None``."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
