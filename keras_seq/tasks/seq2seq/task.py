"""``keras-seq train seq2seq``: encoder–decoder models on the shared trainer.

Training runs on the shared trainer (:mod:`keras_seq.training.trainer`), so the run
directory has the shared layout (:mod:`keras_seq.runs`) with two tokenizers,
``source_tokenizer.json`` and ``target_tokenizer.json``; ``metrics.csv`` adds the
validation exact match and BLEU, ``metrics.json`` the test results overall and per length
bucket, and ``tensorboard/attention`` holds heatmap images.

Generated data (``dates``, ``reverse``, ``copy``) is re-created from the config's seed,
so the run directory does not store it; TSV data is referenced by path and sha256. The
config is in :mod:`.config`, the data in :mod:`.data`, evaluation in :mod:`.evaluation`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from keras_seq.data.tokenizers import load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.extras import missing
from keras_seq.models.seq2seq import Seq2Seq
from keras_seq.tables import table_lines
from keras_seq.tasks._common import compile_options, fit_kwargs, texts_or_stdin
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig
from keras_seq.tasks.seq2seq.data import encode_pairs, fit_tokenizers, make_batches, task_data
from keras_seq.tasks.seq2seq.decoding import translate as decode_texts
from keras_seq.tasks.seq2seq.evaluation import evaluate_pairs, evaluate_run, load_run, tokens_of
from keras_seq.tasks.seq2seq.metrics import require_bleu
from keras_seq.training import trainer
from keras_seq.training.summaries import SummaryWriter
from keras_seq.training.trainer import FitPlan, Prepared

RUN_FORMAT = "keras-seq-seq2seq-run"
__all__ = ["Seq2SeqConfig", "TASK", "train_seq2seq", "evaluate_run", "load_run",
           "eval_lines", "translate", "format_results"]


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
# Callbacks


class Seq2SeqMonitor(keras.callbacks.Callback):
    """Each epoch: greedy exact match on val pairs into the logs, heatmaps to TensorBoard."""

    def __init__(self, src_tok, tgt_tok, pairs, log_dir, images: int = 1,
                 target_exact_match: float | None = None, printer=print):
        super().__init__()
        require_bleu()  # before training, not after its first epoch
        self.src_tok, self.tgt_tok, self.pairs = src_tok, tgt_tok, pairs
        self.writer = SummaryWriter(log_dir)
        no_plots = missing("matplotlib", "plot", "drawing attention heatmaps")
        if images and self.writer.enabled and no_plots:
            printer(f"note: no attention heatmaps in TensorBoard ({no_plots})")
            images = 0
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
            from keras_seq.tasks.seq2seq.plots import figure_png, heatmap_figure  # lazy: matplotlib

            encoded, hyps, weights = result["_attention"]
            pick = np.linspace(0, len(encoded) - 1, images).astype(int)
            for k, i in enumerate(pick):
                fig = heatmap_figure(weights[i], tokens_of(self.src_tok, encoded[i][0]),
                                     tokens_of(self.tgt_tok, hyps[i] + [self.model.eos_id]),
                                     title=encoded[i][2])
                self.writer.image_png(f"attention/{k}", figure_png(fig), step)
        if self.target is not None and result["exact_match"] >= self.target:
            self.reached = True
            self.model.stop_training = True
            self.printer(f"\nval exact match {result['exact_match']:.4f} ≥ target "
                         f"{self.target}; stopping")


# ----------------------------------------------------------------------------------------
# The task


@dataclass
class Seq2SeqState:
    """What :meth:`Seq2SeqTask.prepare` hands to the task's other methods.

    Attributes:
        data: the task's pairs (:func:`~keras_seq.tasks.seq2seq.data.task_data`).
        src_tok, tgt_tok: the source and target tokenizers.
        train, val: the encoded pairs that fit the length limits.
        monitor: the per-epoch exact-match callback, once :meth:`Seq2SeqTask.callbacks`
            made it (its ``reached`` goes into the results).
    """

    data: object
    src_tok: object
    tgt_tok: object
    train: list
    val: list
    monitor: object = None


class Seq2SeqTask(trainer.Task):
    """Unaligned N→M: encoder–decoder with teacher forcing, greedy exact match per epoch."""

    name = "seq2seq"
    config_cls = Seq2SeqConfig
    budget_check = "batch"  # stateless batches: stopping mid-epoch loses nothing
    resumes_mid_epoch = True  # a budget stop commits the batch reached
    distributable = True  # --strategy mirrored|multi-worker: each replica a share of a batch

    def prepare(self, config: Seq2SeqConfig, run_dir: Path, resume: bool,
                printer) -> Prepared:
        data = task_data(config)
        if resume:
            src_tok = load_tokenizer(run_dir / "source_tokenizer.json")
            tgt_tok = load_tokenizer(run_dir / "target_tokenizer.json")
        else:
            src_tok, tgt_tok = fit_tokenizers(config, data.splits["train"])
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
            raise KerasSeqError(f"task {config.data} has no usable training pairs")
        return Prepared(
            artifacts={"source_tokenizer.json": src_tok, "target_tokenizer.json": tgt_tok},
            chance_loss=math.log(tgt_tok.vocab_size),
            state=Seq2SeqState(data, src_tok, tgt_tok, train, val))

    def build_model(self, config: Seq2SeqConfig, prepared: Prepared):
        return build_model(config, prepared.state.src_tok.vocab_size,
                           prepared.state.tgt_tok.vocab_size)

    def fit_plan(self, config: Seq2SeqConfig, prepared: Prepared, initial_epoch: int,
                 printer, start_batch: int = 0) -> FitPlan:
        train, val = prepared.state.train, prepared.state.val
        bos, eos = Seq2Seq.special_ids(prepared.state.tgt_tok.vocab_size)
        train_batches = make_batches(train, config.batch_size, bos, eos, seed=config.seed)
        steps = config.steps_per_epoch or len(train_batches)
        val_batches = make_batches(val, config.batch_size, bos, eos, seed=None) if val else []
        printer(f"{config.attention} seq2seq: {len(train):,} training pairs, {steps} "
                "steps/epoch")
        kwargs = fit_kwargs(train_batches, val_batches, config.seed, initial_epoch, steps,
                            strategy=prepared.strategy, start_batch=start_batch)
        return FitPlan(kwargs, steps, items_per_step=config.batch_size, unit="pairs")

    def describe_model(self, model) -> str:
        params = model.param_report()
        return f"{params['total']:,} parameters ({params['attention']:,} in attention)"

    def callbacks(self, config: Seq2SeqConfig, prepared: Prepared, run_dir: Path,
                  report: list, printer):
        monitor = Seq2SeqMonitor(prepared.state.src_tok, prepared.state.tgt_tok,
                                 prepared.state.data.splits["val"][: config.eval_size],
                                 run_dir / "tensorboard" / "attention",
                                 images=config.attention_images,
                                 target_exact_match=config.target_exact_match, printer=printer)
        prepared.state.monitor = monitor
        return [], [monitor]

    def results(self, config: Seq2SeqConfig, prepared: Prepared, run_dir: Path,
                model) -> dict:
        src_tok, tgt_tok = prepared.state.src_tok, prepared.state.tgt_tok
        test = evaluate_run(run_dir, "test")
        return {"format": RUN_FORMAT, "task": config.data, "attention": config.attention,
                "params": model.param_report(),
                "target_reached": prepared.state.monitor.reached,
                "source_tokenizer": src_tok.describe(), "target_tokenizer": tgt_tok.describe(),
                "data": prepared.state.data.describe(),
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


# ----------------------------------------------------------------------------------------
# The commands: eval's lines and translate


def eval_lines(result: dict) -> list[str]:
    """What ``keras-seq eval seq2seq`` prints: the scores, a table per source-length
    bucket, three examples and the plots written."""
    lines = [f"{result['split']} ({result['n']:,} pairs, beam {result['beam']}, "
             f"{result['params']:,} parameters): exact match "
             f"{100 * result['exact_match']:.2f}%, token accuracy "
             f"{100 * result['token_accuracy']:.2f}%, BLEU {result['bleu']:.2f}"]
    lines += table_lines([{"source length": r["bucket"], "n": r["n"],
                           "exact %": round(100 * r["exact_match"], 2),
                           "token acc %": round(100 * r["token_accuracy"], 2)}
                          for r in result["by_length"] if r["n"]])
    lines += [f"  {ex['source']!r} → {ex['output']!r} (reference {ex['reference']!r})"
              for ex in result["examples"][:3]]
    return lines + [f"{name}: {path}" for name, path in result.get("plots", {}).items()]


def translate(args) -> int:
    """``keras-seq translate``: one translation per source text; with ``--export DIR``,
    the string → string SavedModel first (and the texts translated by its reload)."""
    if args.export:
        return _translate_export(args)
    texts = texts_or_stdin(args.text, "nothing to translate; pass the text as an argument "
                                      "or on stdin")
    _, src_tok, tgt_tok, model = load_run(args.run_dir)

    def warn(i, count):
        print(f"note: source {i} has {count} {src_tok.kind} token(s) outside the vocabulary; "
              "they were read as <unk>", file=sys.stderr)

    for out in decode_texts(model, src_tok, tgt_tok, texts, beam=args.beam,
                            length_penalty=args.length_penalty, on_unknown=warn):
        print(out)
    return 0


def _translate_export(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.backend import require_tensorflow_backend

    require_tensorflow_backend("translate --export")
    # lazy: loads TensorFlow, once it is known to be Keras's backend
    import tensorflow as tf

    from keras_seq.tasks.seq2seq.export import export_run

    path = export_run(args.run_dir, args.export)
    print(f"SavedModel written to {path} (signature serving_default: text → translation)",
          file=sys.stderr)
    if args.text:
        reloaded = tf.saved_model.load(str(path))
        for out in reloaded.translate(tf.constant(args.text)).numpy():
            print(out.decode("utf-8"))
    return 0
