"""Train, evaluate and use sequence-to-sequence models, one run directory per run.

Training runs on the shared trainer (:mod:`keras_seq.training.trainer`), so the run
directory has the shared layout (:mod:`keras_seq.runs`) with two tokenizers,
``source_tokenizer.json`` and ``target_tokenizer.json``; ``metrics.csv`` adds the
validation exact match and BLEU, ``metrics.json`` the test results overall and per length
bucket, and ``tensorboard/attention`` holds heatmap images.

Generated tasks (``dates``, ``reverse``, ``copy``) are re-created from the config's seed,
so the run directory does not store the data; TSV data is referenced by path and sha256.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from keras_seq import runs
from keras_seq.atomic import json_safe
from keras_seq.data.seq2seq_tasks import TaskData, make_task
from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.models import loading
from keras_seq.models.seq2seq import Seq2Seq
from keras_seq.tasks._common import compile_options, fit_kwargs
from keras_seq.tasks.seq2seq import decoding, metrics
from keras_seq.training import trainer
from keras_seq.training.config import TrainConfig
from keras_seq.training.summaries import SummaryWriter
from keras_seq.training.trainer import FitPlan, Prepared

RUN_FORMAT = "keras-seq-seq2seq-run"
__all__ = ["Seq2SeqConfig", "train_seq2seq", "evaluate_run", "load_run", "json_safe"]


@dataclass
class Seq2SeqConfig(TrainConfig):
    """Everything that decides a seq2seq run. Saved as ``config.json`` in the run dir."""

    kind = "seq2seq"

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
    def problems(self) -> list[str]:
        problems = super().problems()
        for name in ("train_size", "units", "embed_dim"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} must be ≥ 1 (got {getattr(self, name)})")
        if self.attention not in ("bahdanau", "none"):
            problems.append(f"attention must be 'bahdanau' or 'none' (got {self.attention!r})")
        if self.cell not in ("gru", "lstm"):
            problems.append(f"cell must be 'gru' or 'lstm' (got {self.cell!r})")
        if not 0 <= self.dropout < 1:
            problems.append(f"dropout must be in [0, 1) (got {self.dropout})")
        return problems


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
                  weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_acc")],
                  **compile_options(config))
    return model


# ----------------------------------------------------------------------------------------
# Run directories


def check_run_dir(run_dir) -> Path:
    return runs.check_run_dir(run_dir, "seq2seq")


def load_run(run_dir, which: str = "best"):
    """``(config, source_tokenizer, target_tokenizer, model)`` of a run."""
    run_dir = check_run_dir(run_dir)
    config = Seq2SeqConfig.load(run_dir / runs.CONFIG)
    src_tok = load_tokenizer(run_dir / "source_tokenizer.json")
    tgt_tok = load_tokenizer(run_dir / "target_tokenizer.json")
    return config, src_tok, tgt_tok, loading.load_model(run_dir, which)


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
    from keras_seq.tasks.seq2seq.plots import attention_heatmap

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
        from keras_seq.tasks.seq2seq.plots import length_curve

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
        self.writer = SummaryWriter(log_dir)
        self.images, self.target, self.printer = images, target_exact_match, printer
        self.reached = False

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or not self.pairs or not np.isfinite(logs.get("loss", 0.0)):
            return
        images = self.images if self.writer.enabled else 0
        result = evaluate_pairs(self.model, self.src_tok, self.tgt_tok, self.pairs,
                                return_attention=images > 0)
        logs["val_exact_match"] = result["exact_match"]
        logs["val_bleu"] = result["bleu"]
        step = epoch + 1
        self.writer.scalar("val_exact_match", result["exact_match"], step)
        self.writer.scalar("val_bleu", result["bleu"], step)
        if images and self.model.attention_type != "none":
            from keras_seq.tasks.seq2seq.plots import figure_png, heatmap_figure

            encoded, hyps, weights = result["_attention"]
            pick = np.linspace(0, len(encoded) - 1, images).astype(int)
            for k, i in enumerate(pick):
                fig = heatmap_figure(weights[i], _tokens_of(self.src_tok, encoded[i][0]),
                                     _tokens_of(self.tgt_tok, hyps[i] + [self.model.eos_id]),
                                     title=encoded[i][2])
                self.writer.image_png(f"attention/{k}", figure_png(fig), step)
        if self.target is not None and result["exact_match"] >= self.target:
            self.reached = True
            self.model.stop_training = True
            self.printer(f"\nval exact match {result['exact_match']:.4f} ≥ target "
                         f"{self.target}; stopping")


# ----------------------------------------------------------------------------------------
# The task


class Seq2SeqTask(trainer.Task):
    """Unaligned N→M: encoder–decoder with teacher forcing, greedy exact match per epoch."""

    name = "seq2seq"
    config_cls = Seq2SeqConfig
    budget_check = "batch"  # stateless batches: stopping mid-epoch loses nothing
    distributable = True  # --strategy mirrored|multi-worker: each replica a share of a batch

    def prepare(self, config: Seq2SeqConfig, run_dir: Path, resume: bool,
                printer) -> Prepared:
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
        train = encode_pairs(data.splits["train"], src_tok, tgt_tok, config.max_source_len,
                             config.max_target_len)
        val = encode_pairs(data.splits["val"], src_tok, tgt_tok, config.max_source_len,
                           config.max_target_len)
        if not train:
            raise KerasSeqError(f"task {config.task} has no usable training pairs")
        return Prepared(
            artifacts={"source_tokenizer.json": src_tok, "target_tokenizer.json": tgt_tok},
            chance_loss=math.log(tgt_tok.vocab_size),
            data={"data": data, "src_tok": src_tok, "tgt_tok": tgt_tok, "train": train,
                  "val": val})

    def build_model(self, config: Seq2SeqConfig, prepared: Prepared):
        return build_model(config, prepared.data["src_tok"].vocab_size,
                           prepared.data["tgt_tok"].vocab_size)

    def fit_plan(self, config: Seq2SeqConfig, prepared: Prepared, initial_epoch: int,
                 printer) -> FitPlan:
        train, val = prepared.data["train"], prepared.data["val"]
        bos, eos = Seq2Seq.special_ids(prepared.data["tgt_tok"].vocab_size)
        train_batches = make_batches(train, config.batch_size, bos, eos, seed=config.seed)
        steps = config.steps_per_epoch or len(train_batches)
        val_batches = make_batches(val, config.batch_size, bos, eos, seed=None) if val else []
        printer(f"{config.attention} seq2seq: {len(train):,} training pairs, {steps} "
                "steps/epoch")
        kwargs = fit_kwargs(train_batches, val_batches, config.seed, initial_epoch, steps,
                            strategy=prepared.data.get("strategy"))
        return FitPlan(kwargs, steps, items_per_step=config.batch_size, unit="pairs")

    def describe_model(self, model) -> str:
        params = model.param_report()
        return f"{params['total']:,} parameters ({params['attention']:,} in attention)"

    def callbacks(self, config: Seq2SeqConfig, prepared: Prepared, run_dir: Path,
                  report: list, printer):
        monitor = Seq2SeqMonitor(prepared.data["src_tok"], prepared.data["tgt_tok"],
                                 prepared.data["data"].splits["val"][: config.eval_size],
                                 run_dir / "tensorboard" / "attention",
                                 images=config.attention_images,
                                 target_exact_match=config.target_exact_match, printer=printer)
        prepared.data["monitor"] = monitor
        return [], [monitor]

    def results(self, config: Seq2SeqConfig, prepared: Prepared, run_dir: Path,
                model) -> dict:
        src_tok, tgt_tok = prepared.data["src_tok"], prepared.data["tgt_tok"]
        test = evaluate_run(run_dir, "test")
        return {"format": RUN_FORMAT, "task": config.task, "attention": config.attention,
                "params": model.param_report(),
                "target_reached": prepared.data["monitor"].reached,
                "source_tokenizer": src_tok.describe(), "target_tokenizer": tgt_tok.describe(),
                "data": prepared.data["data"].describe(),
                "test": {k: v for k, v in test.items() if not k.startswith("_")}}

    def result_lines(self, results: dict) -> list[str]:
        t = results["test"]
        lines = [f"test         exact match {100 * t['exact_match']:.2f}%, token accuracy "
                 f"{100 * t['token_accuracy']:.2f}%, BLEU {t['bleu']:.2f} over {t['n']:,} "
                 "pairs"]
        lines += [f"  {r['bucket']:>7}  n={r['n']:<5} exact {100 * r['exact_match']:6.2f}%  "
                  f"token {100 * r['token_accuracy']:6.2f}%"
                  for r in t["by_length"] if r["n"]]
        return lines


TASK = Seq2SeqTask()


def train_seq2seq(config: Seq2SeqConfig, run_dir, resume: bool = False, verbose: int = 1,
                  printer=print) -> dict:
    """Train a seq2seq model into ``run_dir`` (or continue it with ``resume=True``).

    Returns the final metrics (also written to ``metrics.json``).
    """
    return trainer.train(TASK, config, run_dir, resume=resume, verbose=verbose,
                         printer=printer)


def format_results(results: dict) -> str:
    return trainer.format_results(results, TASK)
