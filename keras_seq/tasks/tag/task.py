"""``keras-seq train tag``: aligned N→N tagging on the shared trainer.

Sentences arrive already split into words (CoNLL columns, CoNLL-U, ``restore-punct``), so
the word vocabulary is fitted on the training words as they are (:meth:`fit_tokens`, no
re-splitting that would break the alignment with the tags). A
:class:`~keras_seq.models.tagger.SequenceTagger` (bidirectional by default) predicts one
tag per word; padding carries weight 0. The run directory adds ``labels.json`` (the tag
vocabulary); ``metrics.json`` holds token accuracy, per-tag and micro/macro F1 over the
informative tags and, for BIO tags, span F1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.models.tagger import SequenceTagger
from keras_seq.tables import print_json
from keras_seq.tasks._common import (
    LABELS_FILE,
    Labels,
    compile_for_labels,
    example_batches,
    fit_kwargs,
    load_labelled_run,
    texts_or_stdin,
)
from keras_seq.tasks.tag.config import TagConfig
from keras_seq.tasks.tag.data import restore_punct, restore_text, task_data
from keras_seq.tasks.tag.metrics import format_report, tagging_report
from keras_seq.training import trainer
from keras_seq.training.trainer import FitPlan, Prepared


def build_model(config: TagConfig, vocab_size: int, num_tags: int):
    model = SequenceTagger(vocab_size, num_tags, embed_dim=config.embed_dim, units=config.units,
                           cell=config.cell, num_layers=config.num_layers,
                           bidirectional=config.bidirectional, dropout=config.dropout)
    model.build((None, 8))
    return compile_for_labels(model, config,
                              keras.metrics.SparseCategoricalAccuracy(name="accuracy"))


def load_run(run_dir, which: str = "best"):
    """``(config, tokenizer, tags, model)`` of a tagging run."""
    return load_labelled_run(run_dir, "tag", TagConfig, which)


def predict_tags(model, tokenizer, tags: Labels, sentences, batch_size: int = 64):
    """The predicted tag of every word of every sentence (lists of word lists)."""
    encoded = [tokenizer.encode_tokens(words) if len(words) else np.zeros(0, np.int32)
               for words in sentences]
    nonempty = [i for i, e in enumerate(encoded) if len(e)]
    out: list[list[str]] = [[] for _ in sentences]
    # Targets are the sentence indices (not aligned), so each batch says whose rows it has.
    batches = example_batches([encoded[i] for i in nonempty], nonempty, batch_size, seed=None)
    for ids, index, _ in batches:
        best = keras.ops.convert_to_numpy(keras.ops.argmax(model(ids, training=False), -1))
        for row, i in enumerate(index):
            out[i] = tags.names(best[row, :len(encoded[i])])
    return out


def evaluate_run(run_dir, split: str = "test") -> dict:
    """Token accuracy, F1 over the informative tags (and BIO span F1) on ``split``."""
    config, tokenizer, tags, model = load_run(run_dir)
    data = task_data(config)
    sentences = data.splits.get(split) or []
    if not sentences:
        raise KerasSeqError(f"split {split!r} of task {config.data} is empty")
    pred = predict_tags(model, tokenizer, tags, [words for words, _ in sentences])
    report = tagging_report([t for _, t in sentences], pred, data.scheme, data.default_tag)
    return {"split": split, "n": len(sentences), "accuracy": report["accuracy"],
            "report": report,
            "fingerprint": {"tokenizer": tokenizer.fingerprint, "split": split,
                            "data_sha256": data.sha256}}


@dataclass
class TagState:
    """What :meth:`TagTask.prepare` hands to the task's other methods.

    Attributes:
        data: the task's splits (:func:`task_data`).
        tokenizer: the word tokenizer fitted on the training words (or loaded, resuming).
        tags: the tag vocabulary.
        encoded: ``{split: (word ids per sentence, tag ids per sentence)}``.
    """

    data: object
    tokenizer: object
    tags: Labels
    encoded: dict


def eval_lines(result: dict) -> list[str]:
    """What ``keras-seq eval tag`` prints: the split's size, then the tagging report."""
    return [f"{result['split']} ({result['n']:,} sentences)", format_report(result["report"])]


def restores_text(config: TagConfig) -> bool:
    """Whether the run restores punctuation and case (``restore-punct``): it then reads
    raw text as that task made its sentences, and its tags rewrite the text."""
    return config.data.startswith("restore-punct")


def sentences_of(config: TagConfig, texts) -> list[list[str]]:
    """The word lists a run tags for raw ``texts``: whitespace-split, or, for a
    ``restore-punct`` run, read the way the task made its sentences."""
    if restores_text(config):
        return [[w for s in restore_punct(text, config.max_len) for w in s[0]]
                for text in texts]
    return [text.split() for text in texts]


def predict(args) -> int:
    """``keras-seq predict`` on a tag run: ``word/TAG`` per word (``--json``: one row per
    text); a ``restore-punct`` run also prints the restored text."""
    texts = texts_or_stdin(args.text, "nothing to predict; pass texts as arguments or on "
                                      "stdin")
    config, tokenizer, labels, model = load_run(args.run_dir)
    sentences = sentences_of(config, texts)
    tags = predict_tags(model, tokenizer, labels, sentences)
    rows = [{"tokens": words, "tags": t} for words, t in zip(sentences, tags)]
    if args.json:
        print_json(rows)
        return 0
    for r in rows:
        print(" ".join(f"{w}/{t}" for w, t in zip(r["tokens"], r["tags"])))
    if restores_text(config):
        for r in rows:
            print(restore_text(r["tokens"], r["tags"]))
    return 0


class TagTask(trainer.Task):
    """Aligned N→N: one tag per word."""

    name = "tag"
    config_cls = TagConfig
    budget_check = "batch"
    resumes_mid_epoch = True  # a budget stop commits the batch reached

    def prepare(self, config: TagConfig, run_dir: Path, resume: bool, printer) -> Prepared:
        data = task_data(config)
        train = data.splits.get("train") or []
        if not train:
            raise KerasSeqError(f"task {config.data} has no training sentences")
        if resume:
            tokenizer, tags = load_tokenizer(run_dir), Labels.load(run_dir / LABELS_FILE)
        else:
            tokenizer = make_tokenizer("word", max_vocab=config.max_vocab,
                                       min_count=config.min_count,
                                       lower=config.lower).fit_tokens(w for w, _ in train)
            tags = Labels(data.tags)
        encoded = {}
        for split, sentences in data.splits.items():
            known = [(w, t) for w, t in sentences if w and all(x in tags.index for x in t)]
            if known:
                encoded[split] = ([tokenizer.encode_tokens(w) for w, _ in known],
                                  [tags.ids(t, "tag") for _, t in known])
        return Prepared(artifacts={"tokenizer.json": tokenizer, LABELS_FILE: tags},
                        chance_loss=math.log(len(tags)),
                        notes=[("data", note) for note in data.notes],
                        state=TagState(data, tokenizer, tags, encoded))

    def build_model(self, config: TagConfig, prepared: Prepared):
        return build_model(config, prepared.state.tokenizer.vocab_size,
                           len(prepared.state.tags))

    def fit_plan(self, config: TagConfig, prepared: Prepared, initial_epoch: int,
                 printer, start_batch: int = 0) -> FitPlan:
        encoded = prepared.state.encoded
        train = example_batches(*encoded["train"], config.batch_size, seed=config.seed)
        val = (example_batches(*encoded["val"], config.batch_size, seed=None)
               if "val" in encoded else [])
        kwargs = fit_kwargs(train, val, config.seed, initial_epoch, start_batch=start_batch)
        words = sum(len(x) for x in encoded["train"][0])
        printer(f"{config.data}: {len(encoded['train'][0]):,} training sentences "
                f"({words:,} words), {len(prepared.state.tags)} tags "
                f"({prepared.state.data.scheme})")
        return FitPlan(kwargs, len(train), items_per_step=words / len(train), unit="tokens")

    def results(self, config: TagConfig, prepared: Prepared, run_dir: Path, model) -> dict:
        data = prepared.state.data
        out = {"task": config.data, "data": data.describe(),
               "tokenizer": prepared.state.tokenizer.describe()}
        for split in ("val", "test"):
            if data.splits.get(split):
                out[split] = evaluate_run(run_dir, split)
        return out

    def result_lines(self, results: dict) -> list[str]:
        lines = []
        for split in ("val", "test"):
            if split in results:
                r = results[split]["report"]
                line = (f"{split:<12} token accuracy {100 * r['accuracy']:.2f}%, micro-F1 "
                        f"{100 * r['micro']['f1']:.2f}%, macro-F1 {100 * r['macro']['f1']:.2f}%")
                if "spans" in r:
                    line += f", span F1 {100 * r['spans']['f1']:.2f}%"
                lines.append(line + f" over {r['tokens']:,} tokens")
        return lines


TASK = TagTask()


def train_tagger(config: TagConfig, run_dir, resume: bool = False, verbose: int = 1,
                 printer=print) -> dict:
    """Train a sequence tagger into ``run_dir`` (or continue it with ``resume=True``)."""
    return trainer.train(TASK, config, run_dir, resume=resume, verbose=verbose,
                         printer=printer)
