"""``keras-seq train conditioned``: 1→N generation from a label, on the shared trainer.

A :class:`~keras_seq.models.conditioned_lm.ConditionedLM` reads each paragraph with its
condition (a topic of Python's bundled documentation, or the first column of a TSV file)
and learns the next word. ``--unconditioned`` trains the same architecture with every
condition mapped to one label: the baseline that shows what the condition is worth. The
run directory adds ``labels.json`` (the conditions); ``metrics.json`` holds validation and
test perplexity over the same target tokens in both cases, and a sample per condition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.models.conditioned_lm import ConditionedLM
from keras_seq.models.perplexity import Perplexity
from keras_seq.sampling import TopKSampler, make_sampler
from keras_seq.tasks._common import (
    LABELS_FILE,
    Labels,
    compile_for_labels,
    fit_kwargs,
    load_labelled_run,
)
from keras_seq.tasks.conditioned.config import ConditionedConfig
from keras_seq.tasks.conditioned.data import (
    conditioned_batches,
    encode_conditioned,
    task_data,
)
from keras_seq.training import trainer
from keras_seq.training.trainer import FitPlan, Prepared


def encoded_split(config: ConditionedConfig, data, tokenizer, split: str):
    """``(condition_id, ids)`` items; all condition ids 0 for an unconditioned run."""
    items = encode_conditioned(data, tokenizer, split)
    return [(0, ids) for _, ids in items] if config.unconditioned else items


def build_model(config: ConditionedConfig, vocab_size: int, num_conditions: int):
    model = ConditionedLM(vocab_size, num_conditions=1 if config.unconditioned
                          else num_conditions, embed_dim=config.embed_dim, units=config.units,
                          cell=config.cell, num_layers=config.num_layers, mode=config.mode,
                          dropout=config.dropout)
    model.build()
    return compile_for_labels(model, config, Perplexity(from_logits=True, name="perplexity"))


def load_run(run_dir, which: str = "best"):
    """``(config, tokenizer, conditions, model)`` of a conditioned-LM run."""
    return load_labelled_run(run_dir, "conditioned", ConditionedConfig, which)


# Target positions within a sequence, for PPL by position: the condition matters most
# before the text itself has said what it is about.
POSITION_BUCKETS = ((1, 3), (4, 10), (11, 30), (31, None))


def perplexity(model, batches) -> dict:
    """PPL over padded batches (weights select the real targets), overall and by target
    position in the sequence (``POSITION_BUCKETS``, 1 = the first word after the start).

    Returns ``{"ppl", "nats", "tokens", "by_position": [{"positions", "ppl", "tokens"}]}``.
    """
    nats = np.zeros(len(POSITION_BUCKETS) + 1)
    counts = np.zeros(len(POSITION_BUCKETS) + 1)
    for inputs, targets, weights in batches:
        logits = keras.ops.convert_to_numpy(model(inputs, training=False))  # (B, T, V)
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        picked = np.take_along_axis(logp, targets[..., None], -1)[..., 0]  # (B, T)
        position = np.arange(1, targets.shape[1] + 1)  # (T,)
        for k, (lo, hi) in enumerate(POSITION_BUCKETS):
            cols = (position >= lo) & (position <= (hi or position[-1]))
            nats[k] -= float((picked[:, cols] * weights[:, cols]).sum())
            counts[k] += float(weights[:, cols].sum())
        nats[-1] -= float((picked * weights).sum())
        counts[-1] += float(weights.sum())
    mean = nats / np.maximum(counts, 1.0)
    return {"ppl": math.exp(mean[-1]), "nats": float(mean[-1]), "tokens": int(counts[-1]),
            "by_position": [{"positions": f"{lo}-{hi or ''}", "ppl": math.exp(mean[k]),
                             "tokens": int(counts[k])}
                            for k, (lo, hi) in enumerate(POSITION_BUCKETS)]}


def generate_text(model, tokenizer, condition_id: int, max_tokens: int = 30,
                  seed: int | None = 0, sampler=None) -> str:
    """A paragraph sampled for one condition (stops at the end of the line)."""
    ids = model.generate(condition_id, max_tokens, sampler=sampler or TopKSampler(10),
                         seed=seed, start_id=tokenizer.eos_id, stop_id=tokenizer.eos_id)
    return tokenizer.decode(np.array(ids, np.int32)).strip()


def evaluate_run(run_dir, split: str = "test") -> dict:
    """Perplexity of a run's model on ``split`` (the same targets with or without the
    condition), with one sample per condition."""
    config, tokenizer, conditions, model = load_run(run_dir)
    data = task_data(config)
    batches = conditioned_batches(encoded_split(config, data, tokenizer, split), 32,
                                  seed=None, max_len=config.max_len)
    names = ["(any)"] if config.unconditioned else conditions.list
    samples = {name: generate_text(model, tokenizer, i, seed=config.seed)
               for i, name in enumerate(names[:12])}
    return {"split": split, **perplexity(model, batches),
            "conditioned": not config.unconditioned, "samples": samples,
            "fingerprint": {"tokenizer": tokenizer.fingerprint, "split": split,
                            "data_sha256": data.sha256}}


@dataclass
class ConditionedState:
    """What :meth:`ConditionedTask.prepare` hands to the task's other methods.

    Attributes:
        data: the task's paragraphs and conditions (:func:`task_data`).
        tokenizer: the word tokenizer fitted on train (or loaded, resuming).
        conditions: the condition vocabulary.
        encoded: ``{"train"|"val": [(condition id, ids), …]}``.
    """

    data: object
    tokenizer: object
    conditions: Labels
    encoded: dict


def eval_lines(result: dict) -> list[str]:
    """What ``keras-seq eval conditioned`` prints: perplexity, overall and by position in
    the paragraph, and the sample of each condition."""
    return [f"{result['split']}: PPL {result['ppl']:.2f} ({result['nats']:.4f} nats) over "
            f"{result['tokens']:,} tokens, "
            f"{'conditioned' if result['conditioned'] else 'unconditioned'}",
            "by position in the paragraph: " + ", ".join(
                f"{b['positions']}: PPL {b['ppl']:.1f}" for b in result["by_position"]),
            *(f"  [{name}] {text}" for name, text in result["samples"].items())]


def generate(args) -> int:
    """``keras-seq generate`` on a conditioned run: a paragraph for ``--condition`` (or
    for each condition), one line each."""
    sampler = make_sampler(args.sampler, args.temperature, args.top_k, args.top_p)
    config, tokenizer, conditions, model = load_run(args.run_dir)
    if args.prompt:
        raise KerasSeqError("--prompt is not supported for conditioned runs; pass --condition")
    if args.condition is not None and args.condition not in conditions.index:
        raise KerasSeqError(f"unknown condition {args.condition!r}; this run knows "
                            f"{', '.join(conditions.list)}")
    names = [args.condition] if args.condition is not None else conditions.list
    for name in names:
        cid = 0 if config.unconditioned else conditions.index[name]
        text = generate_text(model, tokenizer, cid, args.max_tokens, args.seed, sampler)
        print(f"[{name}] {text}")
    return 0


class ConditionedTask(trainer.Task):
    """1→N: a label conditions every token of a language model."""

    name = "conditioned"
    config_cls = ConditionedConfig
    budget_check = "batch"
    resumes_mid_epoch = True  # a budget stop commits the batch reached

    def prepare(self, config: ConditionedConfig, run_dir: Path, resume: bool,
                printer) -> Prepared:
        data = task_data(config)
        if resume:
            tokenizer, conditions = load_tokenizer(run_dir), Labels.load(run_dir / LABELS_FILE)
        else:
            tokenizer = make_tokenizer("word", max_vocab=config.max_vocab,
                                       min_count=config.min_count).fit(data.text("train"))
            conditions = Labels(data.conditions)
        if tokenizer.eos_id is None:
            raise KerasSeqError("the conditioned LM needs a tokenizer with <eos>")
        encoded = {split: encoded_split(config, data, tokenizer, split)
                   for split in ("train", "val")}
        if not encoded["train"]:
            raise KerasSeqError(f"{config.data} has no training text")
        return Prepared(artifacts={"tokenizer.json": tokenizer, LABELS_FILE: conditions},
                        chance_loss=math.log(tokenizer.vocab_size),
                        state=ConditionedState(data, tokenizer, conditions, encoded))

    def build_model(self, config: ConditionedConfig, prepared: Prepared):
        return build_model(config, prepared.state.tokenizer.vocab_size,
                           len(prepared.state.conditions))

    def fit_plan(self, config: ConditionedConfig, prepared: Prepared, initial_epoch: int,
                 printer, start_batch: int = 0) -> FitPlan:
        encoded = prepared.state.encoded
        train = conditioned_batches(encoded["train"], config.batch_size, seed=config.seed,
                                    max_len=config.max_len)
        val = conditioned_batches(encoded["val"], config.batch_size, seed=None,
                                  max_len=config.max_len) if encoded["val"] else []
        kwargs = fit_kwargs(train, val, config.seed, initial_epoch, start_batch=start_batch)
        tokens = sum(float(w.sum()) for _, _, w in train)
        conditions = 1 if config.unconditioned else len(prepared.state.conditions)
        printer(f"{config.data}: {conditions} condition(s), {len(encoded['train']):,} training "
                f"paragraphs ({tokens:,.0f} target tokens)")
        return FitPlan(kwargs, len(train), items_per_step=tokens / len(train), unit="tokens")

    def results(self, config: ConditionedConfig, prepared: Prepared, run_dir: Path,
                model) -> dict:
        out = {"task": config.data, "conditioned": not config.unconditioned,
               "data": prepared.state.data.describe(),
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
                lines.append(f"{split:<12} PPL {r['ppl']:.2f} ({r['nats']:.4f} nats) over "
                             f"{r['tokens']:,} tokens, "
                             f"{'conditioned' if r['conditioned'] else 'unconditioned'}")
                lines.append("             by position " + ", ".join(
                    f"{b['positions']}: {b['ppl']:.1f}" for b in r["by_position"]))
        for name, text in list(results.get("test", {}).get("samples", {}).items())[:3]:
            lines.append(f"sample       [{name}] {text}")
        return lines


TASK = ConditionedTask()


def train_conditioned(config: ConditionedConfig, run_dir, resume: bool = False,
                      verbose: int = 1, printer=print) -> dict:
    """Train a conditioned LM into ``run_dir`` (or continue it with ``resume=True``)."""
    return trainer.train(TASK, config, run_dir, resume=resume, verbose=verbose,
                         printer=printer)
