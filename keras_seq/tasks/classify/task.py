"""``keras-seq train classify``: N→1 sequence classification on the shared trainer.

Texts are split into words by the word tokenizer fitted on the training split (``<eos>``
dropped), padded into length-bucketed batches and read by a
:class:`~keras_seq.models.classifier.SequenceClassifier`. The run directory adds
``labels.json`` (the label vocabulary) and ``plots/confusion_<split>.png``; ``metrics.json``
holds accuracy, macro-F1, the confusion matrix and, where the data has groups (the
negation distance of ``reviews-negation``), the accuracy per group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.extras import missing
from keras_seq.models.classifier import SequenceClassifier
from keras_seq.tables import print_json, table_lines
from keras_seq.tasks._common import (
    LABELS_FILE,
    Labels,
    compile_for_labels,
    example_batches,
    fit_kwargs,
    load_labelled_run,
    texts_or_stdin,
)
from keras_seq.tasks.classify import metrics
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.classify.data import task_data
from keras_seq.training import trainer
from keras_seq.training.trainer import FitPlan, Prepared


def encode_texts(tokenizer, texts, max_len: int | None = None) -> list[np.ndarray]:
    """Word ids of each text (``<eos>`` dropped, at most ``max_len``; an empty text → [unk])."""
    out = []
    for text in texts:
        ids = tokenizer.encode(text)
        ids = ids[ids != tokenizer.eos_id][:max_len]
        out.append(ids if len(ids) else np.array([tokenizer.unk_id], np.int32))
    return out


def build_model(config: ClassifyConfig, vocab_size: int, num_classes: int):
    model = SequenceClassifier(vocab_size, num_classes, embed_dim=config.embed_dim,
                               units=config.units, cell=config.cell,
                               num_layers=config.num_layers, bidirectional=config.bidirectional,
                               pooling=config.pooling, attention_units=config.attention_units,
                               dropout=config.dropout, residual=config.residual)
    model.build((None, 8))
    return compile_for_labels(model, config,
                              keras.metrics.SparseCategoricalAccuracy(name="accuracy"))


def load_run(run_dir, which: str = "best"):
    """``(config, tokenizer, labels, model)`` of a classification run."""
    return load_labelled_run(run_dir, "classify", ClassifyConfig, which)


def predict_proba(model, tokenizer, texts, max_len=None, batch_size: int = 64) -> np.ndarray:
    """Class probabilities ``(N, C)`` of ``texts`` in their order."""
    encoded = encode_texts(tokenizer, texts, max_len)
    batches = example_batches(encoded, list(range(len(encoded))), batch_size, seed=None)
    probs = np.zeros((len(encoded), model.num_classes), np.float32)
    for ids, index, _ in batches:
        probs[index] = keras.ops.convert_to_numpy(keras.ops.softmax(model(ids, training=False)))
    return probs


def evaluate_run(run_dir, split: str = "test", plot_dir=None) -> dict:
    """Accuracy, macro-F1, confusion matrix (and per-group accuracy) of a run on ``split``."""
    config, tokenizer, labels, model = load_run(run_dir)
    data = task_data(config)
    pairs = data.splits.get(split) or []
    if not pairs:
        raise KerasSeqError(f"split {split!r} of task {config.data} is empty")
    probs = predict_proba(model, tokenizer, [t for t, _ in pairs], config.max_len)
    pred = labels.names(probs.argmax(-1))
    true = [label for _, label in pairs]
    report = metrics.classification_report(true, pred, labels.list)
    result = {"split": split, "n": len(pairs), "accuracy": report["accuracy"],
              "macro_f1": report["macro_f1"], "report": report,
              "fingerprint": {"tokenizer": tokenizer.fingerprint, "split": split,
                              "data_sha256": data.sha256}}
    if data.groups.get(split):
        result["by_group"] = metrics.accuracy_by_group(true, pred, data.groups[split])
    no_plot = plot_dir is None and missing("matplotlib", "plot", "the confusion-matrix PNG")
    if no_plot:  # the default PNG is left out without matplotlib; one asked for is not
        result["confusion_png"] = f"not written ({no_plot})"
        return result
    plot_dir = Path(plot_dir) if plot_dir is not None else Path(run_dir) / "plots"
    result["confusion_png"] = str(metrics.plot_confusion(
        report, plot_dir / f"confusion_{split}.png",
        title=f"{config.data} ({split}): accuracy {report['accuracy']:.3f}"))
    return result


@dataclass
class ClassifyState:
    """What :meth:`ClassifyTask.prepare` hands to the task's other methods.

    Attributes:
        data: the task's splits (:func:`task_data`).
        tokenizer: the word tokenizer fitted on train (or loaded, resuming).
        labels: the label vocabulary.
        encoded: ``{split: (word ids per text, label ids)}`` of the non-empty splits.
    """

    data: object
    tokenizer: object
    labels: Labels
    encoded: dict


def eval_lines(result: dict) -> list[str]:
    """What ``keras-seq eval classify`` prints: accuracy and macro-F1, the confusion table,
    the accuracy per group (where the data has groups) and the confusion PNG."""
    lines = [f"{result['split']} ({result['n']:,} examples): accuracy "
             f"{100 * result['accuracy']:.2f}%, macro-F1 {100 * result['macro_f1']:.2f}%",
             *table_lines(metrics.confusion_table(result["report"]))]
    if result.get("by_group"):
        lines += table_lines([{"group": str(g), "n": v["n"], "accuracy %": 100 * v["accuracy"]}
                              for g, v in result["by_group"].items()])
    return [*lines, f"confusion matrix: {result['confusion_png']}"]


def predict(args) -> int:
    """``keras-seq predict`` on a classify run: the ``--top`` labels of each text with
    their scores (``--json``: one row per text)."""
    texts = texts_or_stdin(args.text, "nothing to predict; pass texts as arguments or on "
                                      "stdin")
    config, tokenizer, labels, model = load_run(args.run_dir)
    rows = []
    for text, p in zip(texts, predict_proba(model, tokenizer, texts, config.max_len)):
        best = p.argsort()[::-1][: args.top]
        rows.append({"text": text, "labels": labels.names(best),
                     "scores": [round(float(p[i]), 4) for i in best]})
    if args.json:
        print_json(rows)
        return 0
    for r in rows:
        shown = ", ".join(f"{name} {s:.3f}" for name, s in zip(r["labels"], r["scores"]))
        print(f"{shown}\t{r['text']}")
    return 0


class ClassifyTask(trainer.Task):
    """N→1: one label per text."""

    name = "classify"
    config_cls = ClassifyConfig
    budget_check = "batch"
    resumes_mid_epoch = True  # a budget stop commits the batch reached

    def prepare(self, config: ClassifyConfig, run_dir: Path, resume: bool,
                printer) -> Prepared:
        data = task_data(config)
        texts = [t for t, _ in data.splits["train"]]
        if not texts:
            raise KerasSeqError(f"task {config.data} has no training examples")
        if resume:
            tokenizer, labels = load_tokenizer(run_dir), Labels.load(run_dir / LABELS_FILE)
        else:
            tokenizer = make_tokenizer("word", max_vocab=config.max_vocab,
                                       min_count=config.min_count,
                                       lower=config.lower).fit("\n".join(texts) + "\n")
            labels = Labels(data.labels)
        if len(labels) < 2:
            raise KerasSeqError(f"task {config.data} has {len(labels)} label(s) in training; "
                                "a classifier needs at least 2")
        described = data.describe()
        notes = []
        if described.get("imbalance") and described["imbalance"] > 3:
            counts = described["label_counts"]["train"]
            notes.append(("imbalance", f"note: the training labels are imbalanced "
                          f"({described['imbalance']:.1f}× between the most and least frequent: "
                          f"{counts}); watch macro-F1, not only accuracy"))
        encoded = {split: (encode_texts(tokenizer, [t for t, _ in pairs], config.max_len),
                           labels.ids([label for _, label in pairs]))
                   for split, pairs in data.splits.items() if pairs}
        return Prepared(artifacts={"tokenizer.json": tokenizer, LABELS_FILE: labels},
                        chance_loss=math.log(len(labels)), notes=notes,
                        state=ClassifyState(data, tokenizer, labels, encoded))

    def build_model(self, config: ClassifyConfig, prepared: Prepared):
        return build_model(config, prepared.state.tokenizer.vocab_size,
                           len(prepared.state.labels))

    def fit_plan(self, config: ClassifyConfig, prepared: Prepared, initial_epoch: int,
                 printer, start_batch: int = 0) -> FitPlan:
        encoded = prepared.state.encoded
        train = example_batches(*encoded["train"], config.batch_size, seed=config.seed)
        val = (example_batches(*encoded["val"], config.batch_size, seed=None)
               if "val" in encoded else [])
        kwargs = fit_kwargs(train, val, config.seed, initial_epoch, start_batch=start_batch)
        described = prepared.state.data.describe()
        printer(f"{config.data}: {described['sizes']}, labels {described['labels']}; "
                f"{len(train)} steps/epoch")
        return FitPlan(kwargs, len(train), items_per_step=config.batch_size, unit="examples")

    def results(self, config: ClassifyConfig, prepared: Prepared, run_dir: Path,
                model) -> dict:
        out = {"task": config.data, "data": prepared.state.data.describe(),
               "tokenizer": prepared.state.tokenizer.describe()}
        for split in ("val", "test"):
            if prepared.state.data.splits.get(split):
                out[split] = evaluate_run(run_dir, split)
        return out

    def result_lines(self, results: dict) -> list[str]:
        lines = []
        for split in ("val", "test"):
            if split in results:
                r = results[split]
                line = (f"{split:<12} accuracy {100 * r['accuracy']:.2f}%, macro-F1 "
                        f"{100 * r['macro_f1']:.2f}% over {r['n']:,} examples")
                if r.get("by_group"):
                    line += " · " + ", ".join(f"{g}: {100 * v['accuracy']:.1f}%"
                                              for g, v in r["by_group"].items())
                lines.append(line)
        if "test" in results:
            lines.append(f"confusion    {results['test']['confusion_png']}")
        return lines


TASK = ClassifyTask()


def train_classifier(config: ClassifyConfig, run_dir, resume: bool = False, verbose: int = 1,
                     printer=print) -> dict:
    """Train a sequence classifier into ``run_dir`` (or continue it with ``resume=True``)."""
    return trainer.train(TASK, config, run_dir, resume=resume, verbose=verbose,
                         printer=printer)
