"""``keras-seq train lm``: recurrent language models on the shared trainer.

Training is ``model.fit`` with stateful truncated BPTT: the stream layout of
:mod:`keras_seq.data.batching` served in order by a ``keras.utils.PyDataset`` (numpy, so
the same on every Keras backend), a fixed batch size, ``shuffle=False`` and
:class:`~keras_seq.training.callbacks.ResetStatesCallback`. ``bptt_mode="full"`` trains
stateless on whole lines instead. Besides the shared run directory
(:mod:`keras_seq.runs`) an LM run logs ``tensorboard/diagnostics`` (gradient norms,
learning rate), ``tensorboard/samples`` (text sampled each epoch) and
``tensorboard/activations`` (histograms on a fixed validation window).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import keras
import numpy as np

from keras_seq.data.batching import StreamLayout, stream_arrays, stream_dataset
from keras_seq.errors import KerasSeqError
from keras_seq.keyboard import format_metrics, outcomes_or_note
from keras_seq.models import loading
from keras_seq.models.nplm import NPLM
from keras_seq.models.perplexity import Perplexity
from keras_seq.models.rnn_lm import RecurrentLM
from keras_seq.sampling import TopKSampler, make_sampler
from keras_seq.tasks._common import batches_dataset, compile_options, fit_kwargs
from keras_seq.tasks.lm import evaluation
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.data import (
    corpus_for,
    full_bptt_batches,
    has_text,
    lm_tokenizer,
    split_ids,
    unseen_unk_warning,
    window_batches,
)
from keras_seq.tasks.lm.evaluation import (
    check_run_dir,
    evaluate_stream,
    evaluate_windows,
    generate_tokens,
    keyboard_outcomes,
    load_run,
    perplexity_interval,
    stream_to_stdout,
)
from keras_seq.training import callbacks as cb
from keras_seq.training import distribute, trainer
from keras_seq.training.summaries import SummaryWriter, to_numpy
from keras_seq.training.trainer import FitPlan, Prepared

# ----------------------------------------------------------------------------------------
# Datasets for fit (the data itself: :mod:`keras_seq.tasks.lm.data`)


def _padded_dataset(xs, ys, ws, skip: int = 0):
    """The full-BPTT batches in their (seeded, bucketed) order, pass after pass, the first
    pass ``skip`` batches in."""
    return batches_dataset(list(zip(xs, ys, ws)), seed=0, shuffle=False, skip=skip)


class StreamFrom(keras.utils.PyDataset):
    """The truncated-BPTT stream served without end from batch ``start``: item ``i`` is
    stream batch ``(start + i) mod N``, so epochs of ``steps_per_epoch`` batches go on
    through the stream where the previous one stopped, and a run resumed mid-epoch
    starts at its next batch.

    >>> import numpy as np
    >>> stream = stream_dataset(np.arange(41), batch_size=2, bptt=4)   # N = 4 batches
    >>> ring = StreamFrom(stream, start=3)
    >>> [int(ring[i][0][0, 0]) for i in range(3)]                      # batches 3, 0, 1
    [12, 0, 4]
    """

    fixed_shapes = True

    def __init__(self, stream, start: int = 0):
        super().__init__()
        self.stream, self.start = stream, int(start)

    @property
    def num_batches(self):
        return None  # endless; fit's steps_per_epoch says where an epoch ends

    def __getitem__(self, index):
        # batch(), unchecked: Keras peeks at items 0 and 1 before its pass from 0, which
        # asks for stream batches start, start+1, start: not the stream's own order.
        return self.stream.batch((self.start + int(index)) % len(self.stream))


def _range_sample(config: LMConfig, prepared: Prepared, batches: int = 16) -> list:
    """Training input batches ``(B, T)`` spread over the stream, whose activations the
    range tracker of a ``qat="int8"`` run looks at."""
    stream = stream_dataset(prepared.state.train_ids, config.batch_size // config.replicas,
                            config.bptt)
    picks = np.linspace(0, len(stream) - 1, min(batches, len(stream))).astype(int)
    return [stream.batch(int(k))[0] for k in picks]


def stream_batches(config: LMConfig, n_tokens: int) -> int:
    """``N``: the batches of one pass over a training stream of ``n_tokens`` (capped by
    ``--max-steps-per-epoch``)."""
    n = StreamLayout(n_tokens, config.batch_size, config.bptt).num_batches
    return min(n, config.max_steps_per_epoch or n)


# ----------------------------------------------------------------------------------------
# Callbacks of an LM run


class _SampleWriter(keras.callbacks.Callback):
    """Sample text each epoch into TensorBoard (and keep it for the diagnostics)."""

    def __init__(self, tokenizer, log_dir, n_tokens: int, seed: int):
        super().__init__()
        self.tokenizer, self.n_tokens, self.seed = tokenizer, n_tokens, seed
        self.writer = SummaryWriter(log_dir)
        self.last: list[str] = []
        self._runner = None

    def sample(self) -> list[str]:
        if isinstance(self.model, RecurrentLM):
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
        self.writer.text("sample", text, step=epoch + 1)


class _SampleValidation(keras.callbacks.Callback):
    """``--eval-tokens``: each epoch, the perplexity of a fixed contiguous sample of the
    val split, with its 95% confidence interval (:func:`perplexity_interval`, windows of
    ``bptt`` tokens), as ``val_loss``, ``val_perplexity``, ``val_ppl_low`` and
    ``val_ppl_high`` in the epoch's logs (so ``best.keras`` follows the sample)."""

    def __init__(self, sample_ids: np.ndarray, bptt: int):
        super().__init__()
        self.sample_ids, self.bptt = sample_ids, int(bptt)
        self.last: dict | None = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or not np.isfinite(logs.get("loss", 0.0)):
            return
        if isinstance(self.model, NPLM):
            log_probs, _ = evaluate_windows(self.model, self.sample_ids)
        else:
            log_probs, _ = evaluate_stream(self.model, self.sample_ids)
        self.last = perplexity_interval(log_probs, self.bptt)
        logs.update(val_loss=self.last["loss"], val_perplexity=self.last["ppl"],
                    val_ppl_low=self.last["ppl_low"], val_ppl_high=self.last["ppl_high"])


class _ActivationHistograms(keras.callbacks.Callback):
    """Histograms of each layer's activations on a fixed validation window."""

    def __init__(self, log_dir, sample_ids: np.ndarray, freq: int):
        super().__init__()
        self.writer = SummaryWriter(log_dir)
        self.sample_ids, self.freq = sample_ids, freq
        self._probe = None

    def on_epoch_end(self, epoch, logs=None):
        if not self.writer.enabled or not self.freq or (epoch + 1) % self.freq or \
                not np.isfinite((logs or {}).get("loss", 0.0)):
            return
        if self._probe is None:
            self._probe = self.model.clone_for_batch(len(self.sample_ids), stateful=False)
        probe = self._probe
        probe.set_weights(self.model.get_weights())
        step = epoch + 1
        x = probe.embedding(self.sample_ids)
        self.writer.histogram("activations/embedding", to_numpy(x), step)
        for rnn in probe.rnns:
            x = rnn(x, training=False)
            self.writer.histogram(f"activations/{rnn.name}", to_numpy(x), step)
        self.writer.histogram("activations/logits", to_numpy(probe.head(x)), step)


# ----------------------------------------------------------------------------------------
# The task


def _compile(model, config: LMConfig):
    clip = {"global_clipnorm": config.clip_norm} if config.clip_norm else {}
    optimizer = (keras.optimizers.SGD(config.lr, **clip) if config.optimizer == "sgd"
                 else keras.optimizers.Adam(config.lr, **clip))
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[Perplexity(from_logits=True)], **compile_options(config))
    return model


def build_model(config: LMConfig, vocab_size: int):
    """A compiled :class:`RecurrentLM`, or :class:`NPLM` when ``config.model == "nplm"``."""
    if config.model == "nplm":
        model = NPLM(vocab_size, order=config.context + 1, embed_dim=config.embed_dim,
                     hidden=config.units, direct=config.nplm_direct, dropout=config.dropout)
        model.build((None, config.context))
        return _compile(model, config)
    stateful = config.bptt_mode == "truncated"
    model = RecurrentLM(
        vocab_size, embed_dim=config.embed_dim, units=config.units,
        num_layers=config.num_layers, cell=config.cell, dropout=config.dropout,
        tie_weights=config.tie_weights, stateful=stateful, init_scale=config.init_scale,
        variational_dropout=config.variational_dropout, embed_dropout=config.embed_dropout,
        weight_dropout=config.weight_dropout, proj_units=config.proj_units,
        coupled_input_forget=config.cifg, qat=config.qat, **_softmax_kwargs(config, vocab_size),
    )
    # Stateful: built for the rows one replica owns (the whole batch on one device).
    shape = (config.batch_size // config.replicas, config.bptt) if stateful else (1, config.bptt)
    model(np.zeros(shape, np.int32))
    if config.init_from:
        _load_initial_weights(model, config.init_from)
    return _compile(model, config)


def _load_initial_weights(model, init_from) -> None:
    """The weights of the best checkpoint of the run in ``init_from`` (a fine-tune: QAT of
    a float run), checked to have the model's shapes."""
    source = loading.load_model(check_run_dir(init_from))
    # a full-integer QAT model has activation ranges besides its weights: set by its tracker
    ours = [w for w in model.weights if not w.path.endswith("activation_ranges")]
    theirs = [w for w in source.weights if not w.path.endswith("activation_ranges")]
    shapes = [tuple(w.shape) for w in ours], [tuple(w.shape) for w in theirs]
    if shapes[0] != shapes[1]:
        raise KerasSeqError(
            f"--init-from {init_from}: its model has weights of shapes {shapes[1]}, this run's "
            f"{shapes[0]}; start from a run of the same cell, sizes and vocabulary (leave the "
            "model flags out: its config is the base)")
    for variable, value in zip(ours, theirs):
        variable.assign(value)


def _softmax_kwargs(config: LMConfig, vocab_size: int) -> dict:
    """``RecurrentLM``'s output-layer arguments; adaptive cutoffs checked against the
    vocabulary the tokenizer built."""
    if config.softmax != "adaptive":
        return {}
    cutoffs = [int(c) for c in config.cutoffs.split(",") if c.strip()]
    if cutoffs[-1] >= vocab_size:
        raise KerasSeqError(f"--cutoffs {config.cutoffs} reach the vocabulary size "
                            f"({vocab_size} tokens): every cutoff must be below it; lower "
                            "them or raise --max-vocab / lower --min-count")
    return {"softmax": "adaptive", "cutoffs": cutoffs, "div_value": config.div_value}


def _distributed_plan(config: LMConfig, train_ids, val_ids, strategy, printer) -> FitPlan:
    """The stream on ``tf.distribute``: every replica owns fixed rows of it
    (:func:`keras_seq.training.distribute.stream_dataset`)."""
    B, T = config.batch_size, config.bptt
    x, y = stream_arrays(train_ids, B, T)
    if config.max_steps_per_epoch:
        x, y = x[: config.max_steps_per_epoch * B], y[: config.max_steps_per_epoch * B]
    steps = len(x) // B
    kwargs = {"x": distribute.stream_dataset(x, y, B, strategy), "steps_per_epoch": steps,
              "shuffle": False, "validation_data": None}
    if len(val_ids) > B * (T + 1):
        vx, vy = stream_arrays(val_ids, B, T)
        kwargs["validation_data"] = distribute.stream_dataset(vx, vy, B, strategy)
        kwargs["validation_steps"] = len(vx) // B
    else:
        printer(f"note: val split too short for batch {B} × bptt {T}; no validation in fit")
    return FitPlan(kwargs, steps, items_per_step=B * T, unit="tokens")


@dataclass
class LMState:
    """What :meth:`LMTask.prepare` hands to the task's other methods.

    Attributes:
        tokenizer: fitted on train (or loaded, resuming).
        corpus: the text corpus or the prepared (memory-mapped) one.
        train_ids, val_ids: the splits' token ids.
    """

    tokenizer: object
    corpus: object
    train_ids: np.ndarray
    val_ids: np.ndarray


class LMTask(trainer.Task):
    """Next-token language modelling with stateful truncated (or full) BPTT."""

    name = "lm"
    config_cls = LMConfig
    budget_check = "epoch"  # with --strategy: replicas' stream states can't be committed
    resumes_mid_epoch = True  # on one device: stream position, states and metrics committed
    distributable = True  # truncated BPTT (the RNN LM): --strategy mirrored|multi-worker

    def prepare(self, config: LMConfig, run_dir: Path, resume: bool, printer) -> Prepared:
        corpus = corpus_for(config)  # a text corpus, or a prepared (memory-mapped) one
        # resuming: the run's own tokenizer; a fine-tune: the one of the run it starts from
        tokenizer = lm_tokenizer(config, corpus,
                                 run_dir if resume else check_run_dir(config.init_from)
                                 if config.init_from else None)
        train_ids = split_ids(corpus, tokenizer, "train")
        val_ids = split_ids(corpus, tokenizer, "val")
        warning = unseen_unk_warning(train_ids, val_ids, tokenizer.unk_id)
        return Prepared(artifacts={"tokenizer.json": tokenizer},
                        chance_loss=math.log(tokenizer.vocab_size),
                        notes=[("unk-unseen", warning)] if warning else [],
                        state=LMState(tokenizer, corpus, train_ids, val_ids))

    def build_model(self, config: LMConfig, prepared: Prepared):
        return build_model(config, prepared.state.tokenizer.vocab_size)

    def fit_plan(self, config: LMConfig, prepared: Prepared, initial_epoch: int,
                 printer, start_batch: int = 0) -> FitPlan:
        train_ids, val_ids = prepared.state.train_ids, prepared.state.val_ids
        B, T = config.batch_size, config.bptt
        if config.eval_tokens:  # validation is the sample's (_SampleValidation), not fit's
            val_ids = np.array([], np.int32)
        if config.model == "nplm":  # stateless windows, reshuffled every pass
            train = window_batches(train_ids, config.context, B, config.seed)
            steps = config.steps_per_epoch or min(len(train),
                                                  config.max_steps_per_epoch or len(train))
            val = (window_batches(val_ids, config.context, 512, None) if len(val_ids) > 1
                   else [])
            kwargs = fit_kwargs(train, val, config.seed, initial_epoch, steps,
                                start_batch=start_batch)
            return FitPlan(kwargs, steps, items_per_step=B, unit="tokens")
        strategy = prepared.strategy
        if strategy is not None:
            if config.model != "rnn" or config.bptt_mode != "truncated":
                raise KerasSeqError("--strategy mirrored|multi-worker trains the RNN LM with "
                                    "truncated BPTT; the NPLM and --bptt-mode full train on "
                                    "one device")
            return _distributed_plan(config, train_ids, val_ids, strategy, printer)
        if config.bptt_mode == "truncated":  # the stream in order: a PyDataset, any backend
            stream = stream_dataset(train_ids, B, T, max_batches=config.max_steps_per_epoch)
            steps = config.steps_per_epoch or len(stream)
            start = (initial_epoch * steps + start_batch) % len(stream)
            kwargs = {"x": StreamFrom(stream, start), "steps_per_epoch": steps,
                      "shuffle": False, "validation_data": None}
            if len(val_ids) > B * (T + 1):
                kwargs["validation_data"] = stream_dataset(val_ids, B, T)
            elif not config.eval_tokens:
                printer(f"note: val split too short for batch {B} × bptt {T}; no validation "
                        "in fit")
            return FitPlan(kwargs, steps, items_per_step=B * T, unit="tokens")
        eos_id = prepared.state.tokenizer.eos_id
        if eos_id is None:
            raise KerasSeqError("full-BPTT mode trains on whole lines and needs a word or "
                                "subword tokenizer (char has no line token)")
        xs, ys, ws = full_bptt_batches(train_ids, eos_id, B)
        if config.max_steps_per_epoch:
            xs, ys, ws = (v[: config.max_steps_per_epoch] for v in (xs, ys, ws))
        steps = config.steps_per_epoch or len(xs)
        skip = (initial_epoch * steps + start_batch) % len(xs)
        kwargs = {"x": _padded_dataset(xs, ys, ws, skip), "steps_per_epoch": steps,
                  "shuffle": False, "validation_data": None}
        if len(val_ids) > 2:
            val_batches = full_bptt_batches(val_ids, eos_id, B)
            kwargs["validation_data"] = _padded_dataset(*val_batches)
            kwargs["validation_steps"] = len(val_batches[0])
        tokens = sum(float(w.sum()) for w in ws) / max(len(ws), 1)
        return FitPlan(kwargs, steps, items_per_step=tokens, unit="tokens")

    def callbacks(self, config: LMConfig, prepared: Prepared, run_dir: Path, report: list,
                  printer):
        tb_dir = run_dir / "tensorboard"
        first = []
        if config.bptt_mode == "truncated" and config.model == "rnn":
            if prepared.strategy is not None:  # replicas: zeroed at epoch starts
                first.append(cb.ResetStatesCallback())
            else:  # zeroed where the stream starts: epochs may be shorter than one pass
                n = stream_batches(config, len(prepared.state.train_ids))
                first.append(cb.ResetStatesCallback(n, config.steps_per_epoch or n))
            if config.state_reset_prob:
                first.append(cb.RowStateResets(config.state_reset_prob, config.seed))
            if config.qat == "int8":  # full-integer QAT: the activation ranges, tracked
                first.append(cb.ActivationRangeTracker(_range_sample(config, prepared)))
        if config.decay_epochs:
            first.append(cb.BudgetedDecay(config.lr, config.lr_decay, config.decay_epochs,
                                          config.epochs, config.max_minutes))
        elif config.optimizer == "sgd" or config.lr_decay != 1.0:
            first.append(cb.PTBLearningRate(config.lr, config.lr_decay, config.decay_start))
        middle = [cb.GradientNormLogger(tb_dir / "diagnostics", every=config.log_every),
                  _SampleWriter(prepared.state.tokenizer, tb_dir / "samples",
                                config.sample_tokens, config.seed)]
        val_ids, T = prepared.state.val_ids, config.bptt
        if config.eval_tokens and len(val_ids) > 2:
            middle.append(_SampleValidation(val_ids[: config.eval_tokens + 1], T))
        elif config.eval_tokens:
            printer(f"note: the val split has {len(val_ids)} token(s); --eval-tokens has "
                    "nothing to validate on")
        if config.histogram_freq and len(val_ids) > T and config.model == "rnn":
            window = (val_ids[: 4 * T].reshape(4, T) if len(val_ids) >= 4 * T
                      else val_ids[None, :T])
            middle.append(_ActivationHistograms(tb_dir / "activations", window,
                                                config.histogram_freq))
        return first, middle

    def sample_fn(self, middle_callbacks):
        sampler = next(c for c in middle_callbacks if isinstance(c, _SampleWriter))
        return (lambda: sampler.last) if sampler.n_tokens else None

    def results(self, config: LMConfig, prepared: Prepared, run_dir: Path, model) -> dict:
        tokenizer, corpus = prepared.state.tokenizer, prepared.state.corpus
        results = {"tokenizer": tokenizer.describe(), "corpus": corpus.describe()}
        if config.eval_tokens and prepared.stopped_mid_epoch:
            # a bounded validation was asked for: the whole splits wait for the end
            results["evaluation"] = "the val and test splits are evaluated when training ends"
            return results
        for split in ("val", "test"):
            if has_text(corpus, split):
                results[split] = evaluation.perplexity_of_run(run_dir, split).to_dict()
        return results

    def result_lines(self, results: dict) -> list[str]:
        lines = []
        for split in ("val", "test"):
            if split in results:
                r = results[split]
                lines.append(f"{split:<12} cross-entropy {r['nats']:.4f} nats "
                             f"({r['bits']:.3f} bits), PPL {r['ppl']:.2f} over "
                             f"{r['tokens']:,} tokens")
        if "evaluation" in results:
            lines.append(f"evaluation   {results['evaluation']} (--resume)")
        lines.append(f"fingerprint  {results['tokenizer']['fingerprint']}")
        return lines


TASK = LMTask()


def train_lm(config: LMConfig, run_dir: str | Path, resume: bool = False,
             verbose: int = 1, printer=print) -> dict:
    """Train a recurrent LM into ``run_dir`` (or continue it with ``resume=True``).

    Returns the final metrics dict (also written to ``metrics.json``).
    """
    return trainer.train(TASK, config, run_dir, resume=resume, verbose=verbose,
                         printer=printer)


def finetune_lm(run_dir, out_dir, qat: str | None, epochs: int, lr: float,
                printer=print) -> dict:
    """A fine-tune of the run in ``run_dir`` into ``out_dir``: its config, best weights
    and tokenizer, ``epochs`` more at ``lr``, with ``qat`` (``"int8"``, ``"int4"``; None:
    float, the control a QAT run is compared with). ``keras-seq train lm --init-from
    RUN_DIR --qat MODE`` from Python. A run already in ``out_dir`` is resumed (a finished
    one only read back). Returns its results (``train``'s)."""
    out_dir = Path(out_dir)
    base = LMConfig.load(check_run_dir(run_dir) / "config.json")
    config = replace(base, qat=qat, init_from=str(run_dir), epochs=epochs, lr=lr,
                     max_minutes=None, decay_epochs=0, version=LMConfig().version)
    config.validate()
    return train_lm(config, out_dir, resume=(out_dir / "config.json").is_file(), verbose=2,
                    printer=printer)


def format_results(results: dict) -> str:
    return trainer.format_results(results, TASK)


# ----------------------------------------------------------------------------------------
# The commands: eval and generate


def evaluate_run(run_dir: str | Path, split: str = "val", keyboard: bool | None = None,
                 suggestions: int = 3) -> dict:
    """What ``keras-seq eval lm`` reports: the perplexity of the split with its state
    carried over (:func:`keras_seq.tasks.lm.evaluation.perplexity_of_run`, as a dict) and the
    keyboard metrics with ``suggestions`` suggestions (``keyboard`` None: where the run's
    words allow, else a note on stderr; False: not measured; ``"keyboard"`` is then None).
    """
    result = evaluation.perplexity_of_run(run_dir, split)
    outcomes = outcomes_or_note(keyboard, lambda: keyboard_outcomes(run_dir, split,
                                                                    suggestions))
    return {**result.to_dict(), "keyboard": outcomes.metrics() if outcomes else None}


def eval_lines(result: dict) -> list[str]:
    """What ``keras-seq eval lm`` prints: cross-entropy and perplexity, the keyboard
    metrics, the fingerprint."""
    fingerprint = result["fingerprint"]
    lines = [f"{fingerprint['split']}: cross-entropy {result['nats']:.4f} nats "
             f"({result['bits']:.3f} bits), PPL {result['ppl']:.2f} over "
             f"{result['tokens']:,} tokens ({result['oov']:,} <unk>)"]
    if result.get("keyboard"):
        lines.append(format_metrics(result["keyboard"]))
    return lines + [f"fingerprint {fingerprint['tokenizer']}, corpus {fingerprint['corpus']} "
                    f"({fingerprint['corpus_sha256'][:12]}…)"]


def generate(args) -> int:
    """``keras-seq generate`` on an lm run: ``--prompt`` continued token by token on
    stdout."""
    sampler = make_sampler(args.sampler, args.temperature, args.top_k, args.top_p)
    _, tokenizer, model = load_run(args.run_dir)
    sys.stdout.write(args.prompt)
    generate_tokens(model, tokenizer, args.prompt, args.max_tokens, sampler, args.seed,
                    on_token=stream_to_stdout(tokenizer))
    sys.stdout.write("\n")
    return 0
