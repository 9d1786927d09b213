"""Callbacks for training with ``model.fit`` (used by :mod:`keras_seq.training.trainer`).

* :class:`ResetStatesCallback` — truncated BPTT: zero every stateful layer where the
  stream starts (each epoch start, or each pass when epochs are shorter than the stream)
  and around evaluation, keeping the training state across it (Keras 3 has no
  ``Model.reset_states``).
* :class:`RowStateResets` — truncated BPTT: zero random stream rows' state before a batch,
  so the model keeps seeing the zero state it starts from at inference.
* :class:`ActivationRangeTracker` — full-integer QAT: the activation ranges tracked as a
  moving average of what the model computes on training batches.
* :class:`PTBLearningRate` — the PTB tutorial's schedule ``lr · decay^max(epoch+1−start, 0)``.
* :class:`GradientNormLogger` — global and per-layer gradient norms and the learning rate
  to TensorBoard every N steps.
* :class:`NaNGuard` — stops on a NaN/Inf loss, keeping the last good checkpoint.
* :class:`TrainingDiagnostics` — the usual failures, said in words: loss stuck near
  ``ln|V|``, validation rising while training falls, validation worse than uniform while
  training learns (inference collapse), sampled text collapsing into repeats.
* :class:`RunCheckpoint` — saves the model (optimizer included) and the epoch each epoch,
  and mid-epoch on request (the time budget).
* :class:`TimeBudget` — stops training once a number of minutes has passed: at an epoch
  end, or after any batch, committing the run mid-epoch (:class:`StopMidEpoch`).
* :class:`RestoreSession` — a resumed run's recurrent states and mid-epoch metrics put
  back where the commit left them.

Callbacks that count batches within an epoch have a ``batch_offset``: a resumed run's
first ``fit`` starts mid-epoch, and :func:`set_batch_offset` tells them where.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import keras
import numpy as np

from keras_seq.atomic import write_text_atomic
from keras_seq.extras import require
from keras_seq.layers import quant
from keras_seq.layers.seeds import seed_generator_states
from keras_seq.layers.state import reset_recurrent_states, state_variables, stateful_layers
from keras_seq.sampling import repetition_score
from keras_seq.training import distribute
from keras_seq.training.checkpoints import commit_epoch, committed_rows, csv_text
from keras_seq.training.fit_checks import check_stateful_fit, fit_arguments
from keras_seq.training.summaries import SummaryWriter, write_errors_named

#: a test hook, like :data:`keras_seq.atomic.KILL_AT_ENV`: with it set to ``K``, the time
#: budget counts as spent after ``K`` training batches of this session (a deterministic
#: stop through the same mid-epoch commit as a real one).
BUDGET_BATCHES_ENV = "KERAS_SEQ_BUDGET_BATCHES"


def set_batch_offset(callbacks, offset: int) -> None:
    """Tell every callback that counts batches that this ``fit`` starts ``offset``
    batches into its first epoch (a run resumed mid-epoch)."""
    for callback in callbacks:
        if hasattr(callback, "batch_offset"):
            callback.batch_offset = int(offset)


def _sync(model) -> None:
    """Under JAX, write fit's live state back into the variables before reading them."""
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None:
        sync()


def _numpy(variable) -> np.ndarray:
    return np.array(keras.ops.convert_to_numpy(variable))


class ResetStatesCallback(keras.callbacks.Callback):
    """Zero the state of every stateful layer where the stream starts, and around
    evaluation.

    Without arguments the state is zeroed at each epoch start (an epoch is one pass
    over the stream). With ``num_batches`` (``N``, the batches of one pass) and
    ``steps_per_epoch`` (``S``), epoch ``e``'s batch ``j`` is batch ``(e·S + j) mod N``
    of the stream and the state is zeroed only where that is 0: an epoch shorter than
    the stream continues the previous one's rows and their state. Evaluation during
    ``fit`` starts from zero, and the training state is put back after it.

    Before training it refuses a ``fit`` that would break truncated BPTT, so nothing
    trains on a scrambled stream: ``shuffle=True``, or batches of other rows than the
    state holds (:func:`~keras_seq.training.fit_checks.check_stateful_fit`).

    Args:
        num_batches: ``N``; None: reset at every epoch start.
        steps_per_epoch: ``S`` (default ``N``).

    Example:

    >>> from keras_seq.data import stream_dataset
    >>> from keras_seq.layers import GRU
    >>> model = keras.Sequential([keras.Input((4,), batch_size=2, dtype="int32"),
    ...                           keras.layers.Embedding(10, 3),
    ...                           GRU(5, return_sequences=True, stateful=True, name="gru"),
    ...                           keras.layers.Dense(10)])
    >>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> stream = stream_dataset(np.arange(41) % 10, batch_size=2, bptt=4)
    >>> history = model.fit(stream, epochs=2, shuffle=False, verbose=0,
    ...                     callbacks=[ResetStatesCallback()])
    >>> model.fit(stream, epochs=1, callbacks=[ResetStatesCallback()])  # shuffle=True
    Traceback (most recent call last):
    ...
    keras_seq.errors.KerasSeqError: model.fit(shuffle=True) reorders the batches of a ...
    """

    batch_offset = 0

    def __init__(self, num_batches: int | None = None, steps_per_epoch: int | None = None):
        super().__init__()
        self.num_batches = num_batches
        self.steps_per_epoch = steps_per_epoch or num_batches
        self.epoch, self._training_states = 0, None

    def on_train_begin(self, logs=None):
        arguments = fit_arguments(self.model)  # None: not called from inside a fit
        if arguments is not None:
            check_stateful_fit(self.model, **arguments)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = int(epoch)
        if self.num_batches is None:
            reset_recurrent_states(self.model)

    def on_train_batch_begin(self, batch, logs=None):
        if self.num_batches is None:
            return
        position = self.epoch * self.steps_per_epoch + self.batch_offset + int(batch)
        if position % self.num_batches == 0:
            reset_recurrent_states(self.model)

    def on_test_begin(self, logs=None):
        if self.num_batches is not None:
            _sync(self.model)
            self._training_states = [_numpy(v) for v in state_variables(self.model)]
        reset_recurrent_states(self.model)

    def on_test_end(self, logs=None):
        reset_recurrent_states(self.model)
        if self._training_states is not None:  # back to the stream where training left it
            for variable, value in zip(state_variables(self.model), self._training_states):
                variable.assign(value)
            self._training_states = None


class RowStateResets(keras.callbacks.Callback):
    """Zero each stream row's recurrent state with probability ``prob`` before a batch.

    With the state carried through a whole epoch, a TBPTT model meets the zero state only
    at the epoch's first batch, while evaluation, generation and streaming all start from
    it. Early in training the weights change fast and the model can lose the ability to
    start: measured on tinyshakespeare (word, 1×256 tied LSTM, Adam 3e-3), after epoch 1
    six of twenty validation rows started from zero ran into a runaway cell state
    (``|c|`` ≈ 60, PPL ≈ 10⁷) while the other fourteen were at PPL ≈ 110. Resetting a few
    rows per batch keeps the zero state in the training distribution.

    The rows reset are drawn from ``(seed, epoch, batch)``, so a resumed run draws the same.

    Args:
        prob: chance that a row is reset before a batch (``1/prob`` batches apart on
            average).
        seed: the run's seed.
    """

    def __init__(self, prob: float, seed: int = 0):
        super().__init__()
        if not 0 <= prob <= 1:
            raise ValueError(f"prob must be in [0, 1], got {prob}")
        self.prob, self.seed, self.epoch = prob, int(seed), 0
        self.rows_reset = 0
        self.batch_offset = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = int(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if not self.prob:
            return
        variables = state_variables(self.model)
        if not variables:
            return
        strategy = _distribution(self.model)
        replicas = 1 if strategy is None else strategy.num_replicas_in_sync
        per_replica = int(variables[0].shape[0])
        rows = per_replica * replicas  # the global batch: the same draw on any replicas
        rng = np.random.default_rng([self.seed, self.epoch, self.batch_offset + int(batch)])
        keep = rng.random(rows) >= self.prob  # (B,)
        if keep.all():
            return
        self.rows_reset += int((~keep).sum())
        if replicas > 1:  # each replica's own rows, in its own copy of the state
            states = distribute.replica_states(self.model, strategy)
            for rid, replica in states.items():
                mask = keep[rid * per_replica:(rid + 1) * per_replica]
                states[rid] = [s * mask.astype(s.dtype).reshape((-1,) + (1,) * (s.ndim - 1))
                               for s in replica]
            distribute.restore_replica_states(self.model, strategy, states)
            return
        # JAX's fit keeps the variables' values in its own state during an epoch; put them
        # back first (fit then takes the state from the variables for the next step).
        sync = getattr(self.model, "jax_state_sync", None)
        if sync is not None:
            sync()
        for state in variables:  # (B, U) each
            shape = (rows,) + (1,) * (len(state.shape) - 1)
            state.assign(state.value * keep.astype(state.dtype).reshape(shape))


def _distribution(model):
    """The model's ``tf.distribute`` strategy when it trains on several replicas, else None."""
    strategy = getattr(model, "_distribute_strategy", None)
    return strategy if strategy is not None and strategy.num_replicas_in_sync > 1 else None


class ActivationRangeTracker(keras.callbacks.Callback):
    """Full-integer QAT (``qat="int8"``): track every activation range as an exponential
    moving average of what the model computes on training batches.

    Before the first batch the ranges are set from ``batches`` (the calibration a QAT
    fine-tune starts from); then every ``every`` batches they move toward the range seen
    on the next of them, ``range ← decay·range + (1 − decay)·seen``
    (:func:`~keras_seq.layers.quant.update_ranges`). Each look runs the model eagerly with
    its activations unrounded (:func:`~keras_seq.layers.quant.observing`), its recurrent
    states saved before and put back after, so training goes on where it was.

    Args:
        batches: a sequence of input batches (a stream dataset's ``batch(k)[0]`` or
            arrays), read in turn, cycling.
        every: batches of training between looks.
        decay: the moving average's weight on the old range.

    Example:

    >>> from keras_seq.models import RecurrentLM
    >>> model = RecurrentLM(12, 4, 6, cell="gru", qat="int8")
    >>> _ = model(np.zeros((2, 3), "int32"))
    >>> tracker = ActivationRangeTracker([np.arange(6).reshape(2, 3)], every=10)
    >>> tracker.set_model(model); tracker.on_train_begin()
    >>> ranges = model.rnns[0].cell.activation_ranges.variable.numpy()
    >>> bool((ranges[:, 0] <= 0).all() and (ranges[:, 1] >= 0).all())
    True
    """

    def __init__(self, batches, every: int = 50, decay: float = quant.EMA_DECAY):
        super().__init__()
        if every < 1 or not 0.0 <= decay < 1.0:
            raise ValueError(f"ActivationRangeTracker: received every={every}, decay={decay}; "
                             "expected every ≥ 1 and 0 ≤ decay < 1")
        self.batches, self.every, self.decay = batches, int(every), float(decay)
        self._next = 0

    def _look(self, decay) -> int:
        x = self.batches[self._next % len(self.batches)]
        self._next += 1
        _sync(self.model)
        saved = [_numpy(v) for v in state_variables(self.model)]
        with quant.observing() as seen:
            self.model(x, training=False)
        for variable, value in zip(state_variables(self.model), saved):
            variable.assign(value)
        return quant.update_ranges(self.model, seen, decay)

    def on_train_begin(self, logs=None):
        if self._look(None) == 0:
            raise ValueError("ActivationRangeTracker: the model has no activation ranges to "
                             "track; it tracks the ranges of a qat='int8' model")
        for _ in range(1, min(len(self.batches), 8)):  # a few batches to start from
            self._look(self.decay)

    def on_train_batch_end(self, batch, logs=None):
        if (int(batch) + 1) % self.every == 0:
            self._look(self.decay)


class PTBLearningRate(keras.callbacks.Callback):
    """``lr = base_lr · decay ** max(epoch + 1 − decay_start, 0)`` (epochs counted from 0).

    Args:
        base_lr: learning rate of the first epochs.
        decay: factor applied per epoch once decay has started (1 = constant).
        decay_start: number of epochs trained at ``base_lr`` (the PTB ``max_epoch``).
    """

    def __init__(self, base_lr: float, decay: float, decay_start: int):
        super().__init__()
        self.base_lr, self.decay, self.decay_start = base_lr, decay, decay_start

    def rate(self, epoch: int) -> float:
        return self.base_lr * self.decay ** max(epoch + 1 - self.decay_start, 0)

    def on_epoch_begin(self, epoch, logs=None):
        self.model.optimizer.learning_rate.assign(self.rate(epoch))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = float(self.model.optimizer.learning_rate.numpy())


class BudgetedDecay(PTBLearningRate):
    """The learning rate falls over the last ``last`` epochs that training has room for:
    ``base_lr · decay ** k`` where ``k`` counts the epochs into that tail (0 before it).

    The room is the ``epochs`` still to run, or fewer when ``minutes`` (a time budget)
    runs out first: from the second epoch on, the epochs that fit in the time left at the
    mean epoch time so far. ``k`` never goes back down. With no budget this is the PTB
    schedule with ``decay_start = epochs − last`` (:class:`PTBLearningRate`). With one,
    training ends at the end of the last epoch that fits (:meth:`fits_another`), the tail
    complete, instead of a part epoch that the budget would cut (and that the best
    checkpoint would not keep): :attr:`stopped_after` is then that epoch.

    >>> sched = BudgetedDecay(1.0, 0.5, last=2, epochs=5)
    >>> [sched.rate(e) for e in range(5)]
    [1.0, 1.0, 1.0, 0.5, 0.25]
    >>> sched = BudgetedDecay(1.0, 0.5, last=2, epochs=100, minutes=10)
    >>> [sched.rate(e, elapsed=60 * e) for e in range(8)]   # 1 min an epoch: 10 fit
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    >>> [sched.rate(e, elapsed=60 * e) for e in range(8, 10)]
    [0.5, 0.25]
    """

    def __init__(self, base_lr: float, decay: float, last: int, epochs: int,
                 minutes: float | None = None):
        super().__init__(base_lr, decay, decay_start=epochs - last)
        self.last, self.epochs, self.minutes = last, epochs, minutes
        self.k, self.first, self.start = 0, None, time.monotonic()
        self.stopped_after: int | None = None

    def fits_another(self, epoch: int, elapsed: float) -> bool:
        """Whether one more epoch, at the mean time of those from the first to ``epoch``
        (ended ``elapsed`` seconds into training), fits in the time budget.

        >>> BudgetedDecay(1.0, 0.5, last=2, epochs=9, minutes=10).fits_another(3, 500)
        False
        """
        mean = elapsed / (epoch - (self.first or 0) + 1)
        return not self.minutes or elapsed + mean <= 60 * self.minutes

    def rate(self, epoch: int, elapsed: float | None = None) -> float:
        """The rate of ``epoch`` (from 0), ``elapsed`` seconds into training."""
        if self.first is None:
            self.first = epoch  # a resumed run counts its epoch times from here
        left = self.epochs - epoch  # this one included
        done = epoch - self.first
        if self.minutes and done > 0:
            elapsed = time.monotonic() - self.start if elapsed is None else elapsed
            left = min(left, int((60 * self.minutes - elapsed) // (elapsed / done)))
        if left <= self.last:
            self.k = max(self.k, self.last - left + 1)
        return self.base_lr * self.decay ** self.k

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch + 1 < self.epochs and not self.fits_another(epoch, time.monotonic() - self.start):
            self.model.stop_training, self.stopped_after = True, epoch


class GradientNormLogger(keras.callbacks.Callback):
    """Write ``grad_norm/global``, ``grad_norm/<layer>``, ``learning_rate`` and the batch loss
    to TensorBoard every N steps.

    The norms come from the step's logs (``grad_norm``, ``grad_norm/<layer>``: models with
    :class:`keras_seq.models.train_step.GradNormLogs`), so this works on every Keras
    backend; the writer is :class:`~keras_seq.training.summaries.SummaryWriter` (nothing is
    written without TensorFlow).
    """

    def __init__(self, log_dir: str | Path, every: int = 50):
        super().__init__()
        self.log_dir, self.every = str(log_dir), max(1, int(every))
        self._writer = None
        self._step = 0

    def on_train_begin(self, logs=None):
        self._writer = SummaryWriter(self.log_dir)
        self._step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if not self._writer.enabled or self._step % self.every or not logs \
                or "grad_norm" not in logs:
            return
        write = self._writer.scalar
        write("grad_norm/global", logs["grad_norm"], self._step)
        for key, value in logs.items():
            if key.startswith("grad_norm/"):
                write(key, value, self._step)
        write("learning_rate", self.model.optimizer.learning_rate, self._step)
        if "loss" in logs:
            write("batch/loss", logs["loss"], self._step)

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.flush()


class NaNGuard(keras.callbacks.Callback):
    """Stop training at the first NaN/Inf loss and say what to do.

    :class:`RunCheckpoint` checks ``tripped`` and does not save a checkpoint after it, so
    the last checkpoint on disk is the last good one.
    """

    batch_offset = 0

    def __init__(self):
        super().__init__()
        self.tripped = None
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.tripped = {"epoch": self._epoch + 1, "step": self.batch_offset + batch + 1,
                            "loss": float(loss)}
            self.model.stop_training = True

    def message(self, checkpoint: str | None) -> str:
        kept = f"the last good checkpoint is {checkpoint}" if checkpoint else \
            "no checkpoint was saved before it"
        t = self.tripped
        return (
            f"loss became {t['loss']} at epoch {t['epoch']}, step {t['step']}; training "
            f"stopped and {kept}. Lower the learning rate (--lr) and/or clip gradients "
            "(--clip-norm, e.g. 5), then run again or --resume."
        )


class TrainingDiagnostics(keras.callbacks.Callback):
    """Say in words when training shows one of the classic failure patterns.

    Args:
        vocab_size: ``|V|``; a loss near ``ln|V|`` means the model predicts uniformly.
        sample_fn: optional ``() -> list[str]`` producing sampled tokens each epoch.
        report: a list collecting ``{"epoch", "kind", "message"}`` records.
        chance_loss: the loss of a uniform guess, instead of ``ln(vocab_size)`` (e.g.
            ``ln`` of the number of classes of a classifier).
    """

    def __init__(self, vocab_size: int | None = None, sample_fn=None,
                 report: list | None = None, printer=print, chance_loss: float | None = None):
        super().__init__()
        if (vocab_size is None) == (chance_loss is None):
            raise ValueError("pass exactly one of vocab_size (|V|) and chance_loss")
        self.uniform_loss = math.log(vocab_size) if chance_loss is None else float(chance_loss)
        self.uniform_name = "ln|V|" if chance_loss is None else "the chance loss"
        self.sample_fn = sample_fn
        self.report = report if report is not None else []
        self.printer = printer
        self.history: list[dict] = []
        self._said: set[str] = set()

    def _say(self, epoch: int, kind: str, message: str) -> None:
        self.report.append({"epoch": epoch + 1, "kind": kind, "message": message})
        if kind not in self._said:
            self._said.add(kind)
            self.printer(f"\n[diagnostics] {message}")

    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        self.history.append(logs)
        loss = logs.get("loss")
        # From the second epoch on: a first epoch may legitimately end near ln|V|.
        if loss is not None and math.isfinite(loss) and loss > 2 * self.uniform_loss + 1:
            self._say(epoch, "diverging",
                      f"diverging: training loss {loss:.4g} is far above {self.uniform_name} = "
                      f"{self.uniform_loss:.3f}, worse than a uniform guess. The learning rate "
                      "is too high or gradients explode: lower --lr and clip (--clip-norm 5).")
        elif epoch >= 1 and loss is not None and math.isfinite(loss) and \
                abs(loss - self.uniform_loss) < 0.05 * self.uniform_loss:
            self._say(epoch, "not_learning",
                      f"not learning: training loss {loss:.3f} is still close to "
                      f"{self.uniform_name} = {self.uniform_loss:.3f} (a uniform guess). Check "
                      "that the targets belong to the inputs (for a language model: the inputs "
                      "shifted by one), that the learning rate is neither tiny nor huge, "
                      "that gradients are non-zero (grad_norm in TensorBoard) and that the "
                      "loss takes logits (from_logits=True).")
        val_loss = logs.get("val_loss")
        if val_loss is not None and loss is not None and math.isfinite(loss) and \
                (not math.isfinite(val_loss) or (val_loss > self.uniform_loss and
                                                 val_loss > loss + 1)):
            self._say(epoch, "inference_collapse",
                      f"inference collapse: validation loss {val_loss:.3f} is above "
                      f"{self.uniform_name} = {self.uniform_loss:.3f} (worse than a uniform "
                      f"guess) while training loss is {loss:.3f}. Validation runs without "
                      "dropout and starts from the zero state; a stateful model that meets "
                      "the zero state only at each epoch start can forget how to start from "
                      "it (some rows run into a runaway cell state). Reset a few rows per "
                      "batch (--state-reset-prob 0.02) or keep the best checkpoint: the next "
                      "epoch usually recovers.")
        if len(self.history) >= 3:
            a, b, c = self.history[-3:]
            if all("val_loss" in h for h in (a, b, c)) and \
                    c["val_loss"] > b["val_loss"] > a["val_loss"] and \
                    c["loss"] < b["loss"] < a["loss"]:
                self._say(epoch, "overfitting",
                          f"overfitting: validation loss rose two epochs in a row "
                          f"({a['val_loss']:.3f} → {c['val_loss']:.3f}) while training loss "
                          "fell. Try more dropout (--dropout), weight tying, a smaller model, "
                          "early stopping (keep the best checkpoint) or more data.")
        if self.sample_fn is not None:
            tokens = self.sample_fn()
            score = repetition_score(tokens, n=4)
            logs_sample = " ".join(tokens[:30])
            if len(tokens) >= 20 and score > 0.5:
                self._say(epoch, "repetition",
                          f"sampled text collapses into repeats ({100 * score:.0f}% of its "
                          f"4-grams repeat: {logs_sample!r}…). Sample with temperature/top-p "
                          "instead of greedy, train longer, or check the data for repeated "
                          "boilerplate.")


class RunCheckpoint(keras.callbacks.Callback):
    """Commit each epoch: the model (weights + optimizer), then ``state.json``.

    :func:`keras_seq.training.checkpoints.commit_epoch` does the writing, in an order that
    survives a kill at any moment. ``state.json`` keeps the dropout RNG states, so a
    resumed run draws the same dropout masks as an uninterrupted one, and
    ``checkpoints/best.keras`` follows ``val_loss`` when validation runs. A stateful
    model's recurrent states are committed too (one device: with ``tf.distribute`` only
    replica 0's could be read, and those runs reset them at each epoch start).
    :meth:`commit_mid_epoch` commits a position inside an epoch, with the epoch's metric
    accumulators so far.

    Args:
        run_dir: the run directory.
        nan_guard: no commit after a step that produced NaN.
        best_val_loss: the best validation loss so far (a resumed run's).
        last_logs: the last committed epoch's logs (a resumed run's), kept by mid-epoch
            commits for ``metrics.csv``.
    """

    def __init__(self, run_dir: str | Path, nan_guard: NaNGuard | None = None,
                 best_val_loss: float | None = None, last_logs: dict | None = None):
        super().__init__()
        self.run_dir = Path(run_dir)
        self.nan_guard = nan_guard
        self.best = math.inf if best_val_loss is None else float(best_val_loss)
        self.last_logs = dict(last_logs or {})

    def _stream_states(self) -> list | None:
        if getattr(self.model, "_distribute_strategy", None) is not None \
                or not stateful_layers(self.model):
            return None
        return [_numpy(v) for v in state_variables(self.model)]

    def commit_mid_epoch(self, epoch: int, batches_done: int) -> None:
        """Commit after ``batches_done`` batches of epoch ``epoch`` (counted from 0)."""
        if self.nan_guard is not None and self.nan_guard.tripped:
            return
        _sync(self.model)
        metrics = [_numpy(v).tolist() for v in metric_variables(self.model)]
        extra = {"rng_states": seed_generator_states(self.model), "last_logs": self.last_logs,
                 "metric_states": metrics}
        commit_epoch(self.model, self.run_dir, epoch, None if math.isinf(self.best)
                     else self.best, False, extra, batches_done=batches_done,
                     stream_states=self._stream_states())

    @property
    def last_path(self) -> Path:
        return self.run_dir / "checkpoints" / "last.keras"

    def on_epoch_end(self, epoch, logs=None):
        if self.nan_guard is not None and self.nan_guard.tripped:
            return
        logs = logs or {}
        val = logs.get("val_loss")
        improved = val is not None and val < self.best
        if improved:
            self.best = float(val)
        self.last_logs = {k: float(v) for k, v in logs.items() if np.ndim(v) == 0}
        extra = {"rng_states": seed_generator_states(self.model), "last_logs": self.last_logs}
        commit_epoch(self.model, self.run_dir, epoch + 1,
                     None if math.isinf(self.best) else self.best, improved, extra,
                     stream_states=self._stream_states())


def metric_variables(model) -> list:
    """The accumulators of every metric ``fit`` reports (the loss tracker's included)."""
    return [v for metric in model.metrics for v in metric.variables]


class RestoreSession(keras.callbacks.Callback):
    """Put a resumed run's commit back in its first epoch: the recurrent state of every
    stream row (at the epoch's start) and, when it stopped mid-epoch, the epoch's metric
    accumulators so far, so the epoch's logs and the stream's state are those of an
    uninterrupted run.

    Keras builds the compiled metrics in the first training step, so the committed
    accumulators are added to the ones that step left (``fit`` zeroed them first): exact
    for the sum-and-count accumulators of Keras's mean metrics and of
    :class:`~keras_seq.models.perplexity.Perplexity` (one float addition, as in the
    uninterrupted run). Place it after :class:`ResetStatesCallback`.

    Args:
        stream_states: the state arrays (None: leave the states alone).
        metric_states: the metric variables' values (None: leave them alone).
    """

    def __init__(self, stream_states: list | None, metric_states: list | None):
        super().__init__()
        self.stream_states, self.metric_states = stream_states, metric_states
        self._states_done = self.stream_states is None
        self._metrics_done = self.metric_states is None

    def on_epoch_begin(self, epoch, logs=None):
        if self._states_done:
            return
        self._states_done = True
        variables = state_variables(self.model)
        if len(variables) != len(self.stream_states):
            raise ValueError(f"the commit holds {len(self.stream_states)} recurrent states "
                             f"but the model has {len(variables)}; the checkpoint belongs to "
                             "a different model")
        for variable, value in zip(variables, self.stream_states):
            variable.assign(np.asarray(value, dtype=variable.dtype))

    def on_train_batch_end(self, batch, logs=None):
        if self._metrics_done:
            return
        self._metrics_done = True
        _sync(self.model)
        variables = metric_variables(self.model)
        if len(variables) != len(self.metric_states):
            raise ValueError(f"the commit holds {len(self.metric_states)} metric accumulators "
                             f"but the model reports {len(variables)}; the checkpoint belongs "
                             "to a run compiled with other metrics")
        for variable, value in zip(variables, self.metric_states):
            variable.assign(_numpy(variable) + np.asarray(value, dtype=variable.dtype))


class TensorBoard(keras.callbacks.TensorBoard):
    """Keras's TensorBoard callback, whose failure to write (a full disk, a read-only
    folder) is a :class:`~keras_seq.errors.RunWriteError` naming its folder instead of a
    TensorFlow traceback. It needs the ``tensorboard`` package (the ``tensorboard``
    extra): without it, making one says so in one line
    (:func:`~keras_seq.training.trainer.tensorboard_callbacks` skips it instead)."""

    def __init__(self, log_dir="logs", **kwargs):
        require("tensorboard", "tensorboard", "the TensorBoard callback")
        super().__init__(log_dir, **kwargs)


def _naming_write_errors(method):
    def call(self, *args, **kwargs):
        with write_errors_named(self.log_dir):
            return method(self, *args, **kwargs)

    return call


for _name in ("on_train_begin", "on_train_end", "on_test_begin", "on_test_end",
              "on_train_batch_begin", "on_train_batch_end", "on_epoch_begin", "on_epoch_end"):
    setattr(TensorBoard, _name, _naming_write_errors(getattr(keras.callbacks.TensorBoard, _name)))


class MetricsCSV(keras.callbacks.Callback):
    """``metrics.csv``: one row per epoch (``epoch`` then the logs' scalars, sorted, as
    Keras's ``CSVLogger`` writes them), the whole file rewritten atomically each epoch so a
    kill or a full disk never leaves half a row.

    It runs after :class:`RunCheckpoint`, so the file only ever lists committed epochs; a
    kill between the commit and this write loses that epoch's row, which the commit
    itself keeps (``state.json``'s ``last_logs``) and a resumed run puts back.

    Args:
        path: the CSV file.
        epochs_done: on resume, the committed epochs (rows of later ones are dropped).
        last_logs: on resume, the last committed epoch's logs (its row if missing).
    """

    def __init__(self, path: str | Path, epochs_done: int = 0, last_logs: dict | None = None):
        super().__init__()
        self.path = Path(path)
        self.columns, self.rows, self.dropped = committed_rows(self.path, epochs_done)
        if epochs_done and last_logs and all(int(r["epoch"]) != epochs_done - 1
                                             for r in self.rows):
            self._add({"epoch": epochs_done - 1, **last_logs})

    def on_train_begin(self, logs=None):
        # Put the file in step with the commit before training (rows dropped or put back).
        from keras_seq.training.checkpoints import csv_text

        on_disk = self.path.read_text(encoding="utf-8", errors="replace") \
            if self.path.is_file() else ""
        if self.rows and csv_text(self.columns, self.rows) != on_disk:
            self._write()

    def _write(self) -> None:
        write_text_atomic(self.path, csv_text(self.columns, self.rows))

    def _add(self, row: dict) -> None:
        if not self.columns:
            self.columns = ["epoch", *sorted(k for k in row if k != "epoch")]
        self.rows.append(row)

    def on_epoch_end(self, epoch, logs=None):
        self._add({"epoch": epoch, **{k: float(v) for k, v in (logs or {}).items()
                                      if np.ndim(v) == 0}})
        self._write()


class StopMidEpoch(Exception):
    """Raised by :class:`TimeBudget` out of ``fit`` once it has committed the run
    mid-epoch: the trainer catches it (no validation or epoch-end work after the stop)."""


class TimeBudget(keras.callbacks.Callback):
    """Stop training once ``minutes`` have passed since the callback was made.

    Args:
        minutes: the budget; ``None`` or 0 = no budget.
        per_batch: check after every batch (stop mid-epoch) instead of at each epoch end.
        commit: ``(epoch, batches_done) -> None``, e.g.
            :meth:`RunCheckpoint.commit_mid_epoch`: with it, a stop inside an epoch
            commits that position and raises :class:`StopMidEpoch` (``--resume``
            continues from the next batch); without it, the epoch ends early and is
            committed as done.
        steps_per_epoch: batches per epoch (a stop after an epoch's last batch is an
            ordinary epoch end).

    With :data:`BUDGET_BATCHES_ENV` set (tests), the budget is spent after that many
    batches instead of minutes.
    """

    batch_offset = 0

    def __init__(self, minutes: float | None, per_batch: bool = False, commit=None,
                 steps_per_epoch: int | None = None):
        super().__init__()
        self.minutes, self.per_batch = minutes, per_batch
        self.commit, self.steps_per_epoch = commit, steps_per_epoch
        self.start, self.hit = time.monotonic(), False
        self.stopped_at: tuple[int, int] | None = None  # (epoch, batches done) mid-epoch
        spec = os.environ.get(BUDGET_BATCHES_ENV)
        self.batch_limit = int(spec) if spec else None
        self.batches, self.epoch = 0, 0

    def _spent(self) -> bool:
        if self.batch_limit is not None:
            return self.batches >= self.batch_limit
        return bool(self.minutes) and (time.monotonic() - self.start) / 60 >= self.minutes

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = int(epoch)

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if not (self.per_batch or self.batch_limit is not None) or not self._spent():
            return
        self.hit = True
        self.model.stop_training = True
        done = self.batch_offset + int(batch) + 1
        if self.commit is not None and done != self.steps_per_epoch:
            self.commit(self.epoch, done)
            self.stopped_at = (self.epoch, done)
            raise StopMidEpoch(f"stopped by the time budget after batch {done} of epoch "
                               f"{self.epoch + 1}")

    def on_epoch_end(self, epoch, logs=None):
        if self._spent():
            self.hit = True
            self.model.stop_training = True
