"""One trainer for every task shape: run directory, resume, time budget, diagnostics, results.

A task (language model, seq2seq, classifier, tagger, conditioned LM) plugs in only what
differs — its data, its model, its fit arguments, its extra callbacks and its evaluation —
by subclassing :class:`Task`. :func:`train` does the rest the same way for all of them:

1. refuses a run directory that already holds a run (unless ``resume``), or, resuming,
   reloads the saved config (``--epochs`` may grow) and checks the run's task and version;
2. records the Keras backend (a resumed run may continue under another one), sets the
   mixed-precision policy and resolves ``jit_compile`` (always on under JAX);
   seeds every RNG, lets the task prepare its data (tokenizers fitted on train, or loaded
   from the run when resuming) and its ``fit`` arguments — so bad data or flags stop the
   run before anything is written — then saves tokenizers and ``config.json`` atomically;
3. builds the model, or reloads the last committed checkpoint with its optimizer and the
   dropout RNG states (:mod:`keras_seq.training.checkpoints`: a damaged one is named and
   the previous commit used) so a resumed run ends with exactly the weights of an
   uninterrupted one, however it was stopped;
4. runs ``model.fit`` with the shared callbacks — NaN guard, diagnostics said in words,
   TensorBoard (where TensorFlow and the ``tensorboard`` package are importable, else one
   note), ``metrics.csv``, checkpoints, time budget — around the task's own. A task that
   can (``resumes_mid_epoch``) is stopped by the budget after any batch and committed
   there; resumed, its first ``fit`` finishes that epoch from the next batch, with the
   recurrent states and the epoch's metrics so far put back, and a second ``fit`` runs the
   epochs after it;
5. evaluates through the task and writes ``metrics.json``.

See :mod:`keras_seq.runs` for the run directory layout.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keras_seq import atomic, runs
from keras_seq.backend import require_tensorflow_backend, select_backend
from keras_seq.errors import KerasSeqError, RunWriteError
from keras_seq.training.config import TrainConfig
from keras_seq.training.summaries import tensorboard_missing


@dataclass
class Prepared:
    """What a task's :meth:`Task.prepare` hands to the trainer.

    Attributes:
        artifacts: ``{file name: object with .save(path)}`` (tokenizers, label
            vocabularies) saved into a fresh run directory.
        chance_loss: the loss of a uniform guess (``ln`` of the number of outputs), for the
            "not learning" and "diverging" diagnostics.
        notes: ``(kind, message)`` warnings printed before training and kept under
            ``diagnostics`` in ``metrics.json``.
        state: the task's own typed object (a dataclass of its encoded splits, tokenizers,
            labels…), read back by its other methods; the trainer never writes into it.
        strategy: the ``tf.distribute`` strategy the trainer runs (None: one device);
            written by the trainer.
        stopped_mid_epoch: whether the time budget stopped the run inside an epoch;
            written by the trainer before :meth:`Task.results`.

    Example:

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class ParityState:
    ...     train: list
    >>> prepared = Prepared(state=ParityState(train=[0, 1]), chance_loss=0.69)
    >>> prepared.state.train, prepared.strategy, prepared.stopped_mid_epoch
    ([0, 1], None, False)
    """

    artifacts: dict = field(default_factory=dict)
    chance_loss: float | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)
    state: Any = None
    strategy: Any = None
    stopped_mid_epoch: bool = False


@dataclass
class FitPlan:
    """The task's arguments for ``model.fit`` and how to count its throughput.

    Attributes:
        kwargs: passed to ``fit`` (``x``/``y`` or a dataset, ``batch_size``,
            ``validation_data``, ``shuffle``…); ``epochs``, ``initial_epoch``, ``callbacks``
            and ``verbose`` are added by the trainer.
        steps: optimizer steps per epoch.
        items_per_step: tokens or examples per step, for the ``{unit}_per_sec`` result.
        unit: what ``items_per_step`` counts (``"tokens"``, ``"examples"``).
    """

    kwargs: dict
    steps: int
    items_per_step: float = 0.0
    unit: str = "examples"


class Task:
    """The part of a training run that differs between task shapes.

    Subclasses set ``name`` (``keras-seq train NAME``) and ``config_cls`` and implement
    :meth:`prepare`, :meth:`build_model`, :meth:`fit_plan` and :meth:`results`.
    """

    name: str = "?"
    config_cls: type[TrainConfig] = TrainConfig
    #: "epoch": stop at the first epoch end past the budget (keeps stateful streams whole);
    #: "batch": stop mid-epoch as soon as it is past.
    budget_check: str = "epoch"
    #: whether :meth:`fit_plan` takes ``start_batch`` (a run resumed mid-epoch): then the
    #: budget is checked after every batch on one device and a stop commits that position
    resumes_mid_epoch: bool = False
    #: whether ``--strategy mirrored|multi-worker`` is implemented for the task (its
    #: :meth:`fit_plan` serves ``prepared.strategy``'s replicas)
    distributable: bool = False

    def prepare(self, config, run_dir: Path, resume: bool, printer) -> Prepared:
        """Load the data; fit the tokenizers (fresh) or load them from ``run_dir`` (resume).

        May fill config fields that depend on the data (e.g. the longest source)."""
        raise NotImplementedError

    def build_model(self, config, prepared: Prepared):
        """A built and compiled Keras model."""
        raise NotImplementedError

    def fit_plan(self, config, prepared: Prepared, initial_epoch: int, printer) -> FitPlan:
        """What to pass to ``model.fit`` from ``initial_epoch`` on. It runs before anything
        is written or built, so data that cannot be batched stops the run first.

        A task with ``resumes_mid_epoch`` also takes ``start_batch``: the data then starts
        that many batches into epoch ``initial_epoch`` (the trainer shortens that
        ``fit``'s epoch to the batches left)."""
        raise NotImplementedError

    def describe_model(self, model) -> str:
        """The model line printed before training."""
        return f"{model.count_params():,} parameters"

    def callbacks(self, config, prepared: Prepared, run_dir: Path, report: list, printer):
        """``(first, middle)``: callbacks that must run before the NaN guard (state resets,
        learning-rate schedules) and task callbacks that add to the epoch logs before they
        are written (validation metrics, samples)."""
        return [], []

    def sample_fn(self, middle_callbacks):
        """Optional ``() -> list[str]`` of sampled tokens for the repetition diagnostic."""
        return None

    def results(self, config, prepared: Prepared, run_dir: Path, model) -> dict:
        """Task results merged into ``metrics.json`` (evaluations with fingerprints)."""
        return {}

    def result_lines(self, results: dict) -> list[str]:
        """Task lines of the one-screen summary after the shared ones."""
        return []


# ----------------------------------------------------------------------------------------


def _resolve_config(task: Task, config, run_dir: Path, resume: bool, printer):
    """``(config, resume)``: the saved config (``--epochs`` may grow) when resuming, else
    the given one. ``--resume`` on a run that was killed before it saved its config (or
    on a folder that holds none yet) starts the run, and says so."""
    if resume and not (run_dir / runs.CONFIG).exists():
        printer(f"note: nothing to resume in {run_dir} (no {runs.CONFIG}: the run stopped "
                "before saving it, or never started); starting it")
        resume = False
    if resume:
        runs.read_run_config(run_dir, task.name)
        saved = task.config_cls.load(run_dir / runs.CONFIG)
        return task.config_cls.from_dict({**saved.to_dict(),
                                          "epochs": max(config.epochs, saved.epochs)}), True
    if (run_dir / runs.CONFIG).exists():
        raise KerasSeqError(f"{run_dir} already holds a run; pass --resume to continue it or "
                            "choose a new --run-dir")
    return config, False


def _check_writable(run_dir: Path) -> None:
    """Make ``run_dir`` and write a small file there; a full disk or a read-only folder
    raises :class:`~keras_seq.errors.RunWriteError` naming it."""
    probe = run_dir / ".write-check"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunWriteError(run_dir, err) from err
    atomic.write_text_atomic(probe, "keras-seq checks that it can save here\n" * 8)
    probe.unlink(missing_ok=True)


def _resume_point(run_dir: Path, printer, notes: list):
    """The commit a resumed run starts from (None: nothing committed yet, start at epoch
    0), with any damaged file and its replacement said and kept in the diagnostics."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training.checkpoints import (
        committed_rows,
        point_last_at,
        remove_temporaries,
        resume_point,
    )

    remove_temporaries(run_dir)
    point = resume_point(run_dir)
    if point is not None:
        point_last_at(run_dir, point)
    messages = list(point.notes) if point else [
        "note: no epoch was checkpointed before the run stopped; training from epoch 0"]
    _, _, dropped = committed_rows(run_dir / "metrics.csv", point.epochs_done if point else 0)
    if dropped:
        messages.append(f"note: {dropped} row(s) of metrics.csv logged after the last "
                        "checkpoint were dropped (those epochs are trained again)")
    for message in messages:
        printer(message)
        notes.append(("resumed-from-damaged" if point and point.notes else "resume", message))
    return point


def _optimizer_steps(model) -> int:
    return int(model.optimizer.iterations.numpy())


def _settle_backend(config, resume: bool, printer, notes: list) -> dict:
    """Check the run's backend against the one Keras runs and resolve how it computes.

    A fresh run records the running backend in its config (and ``jit_compile=True`` on
    JAX, whose ``fit`` always compiles); a config that asks for another backend than the
    running one is refused. A resumed run may continue under another backend (``.keras``
    checkpoints are backend-neutral): that is said and kept in the diagnostics.
    Returns ``{"backend", "mixed_precision", "jit_compile"}`` as the run computes.
    """
    # lazy: Keras is imported once the backend is chosen
    import keras

    backend = keras.backend.backend()
    if resume:
        started = config.backend or "tensorflow"
        if started != backend:
            note = (f"note: this run was started under the {started} backend and continues "
                    f"under {backend} (.keras checkpoints are backend-neutral); "
                    "metrics.json records the backend of the last session")
            printer(note)
            notes.append(("backend-changed", note))
    else:
        if config.backend is not None and config.backend != backend:
            select_backend(config.backend)  # raises: Keras already runs another backend
        config.backend = backend
        if backend == "jax":
            config.jit_compile = True
    return {"backend": backend, "mixed_precision": config.mixed_precision,
            "jit_compile": True if backend == "jax" else bool(config.jit_compile)}


def _set_policy(mixed_precision: str) -> str:
    """Set Keras's global dtype policy (before models are built or loaded); the old one's
    name, to put back after the run."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    previous = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy(
        "float32" if mixed_precision == "off" else mixed_precision)
    return previous


def tensorboard_callbacks(log_dir, histogram_freq: int = 0, printer=print) -> list:
    """``[TensorBoard(log_dir)]`` (Keras's callback, naming its write errors) where TensorFlow
    and the ``tensorboard`` package are importable, else ``[]`` and one printed note."""
    note = tensorboard_missing()
    if note:
        printer(f"note: {note}")
        return []
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training.callbacks import TensorBoard

    return [TensorBoard(str(log_dir), write_graph=False, histogram_freq=histogram_freq)]


def _recurrent_layers(model) -> list:
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.layers._base import FastRNN

    return [layer for layer in model._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, FastRNN)]


def _recurrent_paths(model) -> dict:
    """``{layer name: the loop its last call ran}`` (``layers.dispatch``): cudnn, fused-loop…"""
    return {layer.name: layer.last_path for layer in _recurrent_layers(model)}


def _xla_or_cudnn(model, computing: dict, notes: list, printer) -> bool:
    """On a TensorFlow GPU, cuDNN's RNN kernels don't compile under XLA (JAX's do): when
    ``jit_compile`` was asked for and a layer can take the fused kernel, the fused kernel
    wins (for a recurrent model it is the larger gain) and XLA is turned off, said and
    recorded. Returns whether it turned XLA off."""
    if computing["backend"] != "tensorflow" or not computing["jit_compile"]:
        return False
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.layers import dispatch

    fused = [layer.name for layer in _recurrent_layers(model)
             if layer.use_cudnn is not False and not dispatch.fused_kernel_blockers(layer)]
    if not fused or not dispatch.gpu_available():
        return False
    model.jit_compile = computing["jit_compile"] = False
    note = (f"note: jit_compile turned off: on a GPU {', '.join(fused)} run cuDNN's fused "
            "kernel, which XLA cannot compile on TensorFlow (under --backend jax it can: "
            "train there to have both)")
    printer(note)
    notes.append(("xla-off-for-cudnn", note))
    return True


def train(task: Task, config, run_dir: str | Path, resume: bool = False, verbose: int = 1,
          printer=print) -> dict:
    """Train ``task`` with ``config`` into ``run_dir`` (or continue it with ``resume=True``).

    Returns the final results (also written to ``metrics.json``), with the ``backend``,
    ``mixed_precision`` and ``jit_compile`` the run computed with.
    """
    # lazy: Keras is imported once the backend is chosen
    import keras

    run_dir = Path(run_dir)
    config, resume = _resolve_config(task, config, run_dir, resume, printer)
    config.validate()
    backend_notes: list[tuple[str, str]] = []
    computing = _settle_backend(config, resume, printer, backend_notes)
    strategy = _settle_strategy(task, config, resume, printer)
    previous_policy = _set_policy(config.mixed_precision)
    try:
        return _train(task, config, run_dir, resume, verbose, printer, computing,
                      backend_notes, strategy)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


def _settle_strategy(task, config, resume: bool, printer):
    """The ``tf.distribute`` strategy of ``config.strategy`` (None for ``one``), with the
    replica count recorded in the config; a resumed run keeps its replica count (it fixes
    the per-replica batch the model was built with)."""
    if config.strategy == "one":
        return None
    if not task.distributable:
        raise KerasSeqError(f"--strategy {config.strategy} is not available for "
                            f"`keras-seq train {task.name}` yet; it trains on one device")
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training import distribute

    require_tensorflow_backend(f"--strategy {config.strategy}")
    if config.strategy == "multi-worker" and config.max_minutes:
        raise KerasSeqError("--max-minutes stops each worker by its own clock, so workers "
                            "would stop at different steps and wait for each other for "
                            "ever; with --strategy multi-worker bound the run by --epochs")
    strategy = distribute.make_strategy(config.strategy, devices=config.devices)
    replicas = strategy.num_replicas_in_sync
    if resume and replicas != config.replicas:
        raise KerasSeqError(
            f"this run trained on {config.replicas} replica(s) and would resume on "
            f"{replicas}: the replica count fixes the per-replica batch, so resume with the "
            "same --strategy/--devices (and the same number of workers)")
    if config.batch_size % replicas:
        raise KerasSeqError(f"--batch-size {config.batch_size} (the global batch) does not "
                            f"split over {replicas} replicas; use a multiple of {replicas}")
    config.replicas = replicas
    printer(f"strategy {config.strategy}: {replicas} replica(s), {config.batch_size // replicas}"
            f" of the {config.batch_size} stream rows each")
    return strategy


def _train(task, config, run_dir: Path, resume: bool, verbose: int, printer, computing: dict,
           backend_notes: list, strategy=None) -> dict:
    """Steps 2–5 of :func:`train` once the config, backend, strategy and dtype policy are
    settled: prepare the data, save a fresh run, build or reload the model, fit, evaluate."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training.distribute import fit_workarounds

    prepared, point = _prepare(task, config, run_dir, resume, printer, backend_notes, strategy)
    initial_epoch = point.epochs_done if point else 0
    start_batch = point.batches_done if point else 0
    if initial_epoch >= config.epochs:
        results = _already_trained(run_dir, initial_epoch, printer)
        if results is not None:
            return results
    plan = _plan(task, config, prepared, initial_epoch, start_batch, printer)
    if not resume:
        _save_fresh_run(run_dir, config, prepared)

    model = _run_model(task, config, prepared, run_dir, point, computing, backend_notes,
                       strategy, printer)
    report = [{"epoch": 0, "kind": kind, "message": note}
              for kind, note in [*prepared.notes, *backend_notes]]
    callbacks, nan_guard, budget = _run_callbacks(task, config, prepared, run_dir, point,
                                                  start_batch, plan, strategy, report, printer)

    steps_before = _optimizer_steps(model)
    started = time.monotonic()
    with fit_workarounds(strategy):
        _fit_sessions(task, config, prepared, model, plan, callbacks, initial_epoch,
                      start_batch, verbose, printer, nan_guard, budget)
    seconds = time.monotonic() - started
    if nan_guard.tripped:
        last = run_dir / runs.LAST
        raise KerasSeqError(nan_guard.message(str(last) if last.is_file() else None))
    budget.hit = budget.hit or any(getattr(c, "stopped_after", None) is not None
                                   for c in callbacks)  # BudgetedDecay: at an epoch end
    return _write_results(task, config, prepared, run_dir, model, plan, budget, computing,
                          report, seconds, steps_before)


def _prepare(task, config, run_dir: Path, resume: bool, printer, backend_notes: list,
             strategy):
    """``(prepared, point)``: seed every RNG, let the task prepare its data (its notes
    printed) and, resuming, find the commit to start from (None: a fresh run, or nothing
    committed yet). A resumed run first checks that it can still save."""
    # lazy: Keras is imported once the backend is chosen
    import keras

    if resume:  # fail now, not after an epoch of training, if nothing can be saved
        _check_writable(run_dir)
    keras.utils.set_random_seed(config.seed)
    prepared = task.prepare(config, run_dir, resume, printer)
    prepared.strategy = strategy
    for _, note in prepared.notes:
        printer(note)
    point = _resume_point(run_dir, printer, backend_notes) if resume else None
    if point is not None and point.batches_done:
        printer(f"resuming mid-epoch: {point.where} (the recurrent states, optimizer, RNG "
                "states and the epoch's metrics so far as committed)")
    return prepared, point


def _already_trained(run_dir: Path, initial_epoch: int, printer) -> dict | None:
    """The saved results of a run that trained all its epochs (said); None, with a note,
    when it stopped before writing them (the last checkpoint is then evaluated)."""
    try:
        results = json.loads((run_dir / runs.METRICS).read_text())
        printer(f"{run_dir} already trained {initial_epoch} epoch(s); nothing to do")
        return results
    except (OSError, ValueError):  # stopped after the last epoch, before the results
        printer(f"note: {run_dir} trained all {initial_epoch} epoch(s) but stopped before "
                f"writing {runs.METRICS}; evaluating the last checkpoint now")
    return None


def _save_fresh_run(run_dir: Path, config, prepared: Prepared) -> None:
    """A fresh run's tokenizers (the task's artifacts) and ``config.json``, once
    ``run_dir`` is known to be writable."""
    _check_writable(run_dir)
    for filename, artifact in prepared.artifacts.items():
        artifact.save(run_dir / filename)
    config.save(run_dir / runs.CONFIG)


def start_run(run_dir, config: TrainConfig, artifacts: dict) -> Path:
    """Start a run directory as ``keras-seq train`` does, for a script that calls
    ``model.fit`` itself: ``artifacts`` (``{"tokenizer.json": tokenizer, …}``, anything
    with ``save(path)``) and ``config.json`` (the config with its ``kind``, the keras-seq
    version). Refuses a folder that already holds a run. Returns the folder.

    >>> import tempfile
    >>> from keras_seq.data.tokenizers import make_tokenizer
    >>> from keras_seq.tasks.lm.config import LMConfig
    >>> run = start_run(Path(tempfile.mkdtemp()) / "run", LMConfig(),
    ...                 {"tokenizer.json": make_tokenizer("char").fit("ab")})
    >>> sorted(p.name for p in run.iterdir())
    ['config.json', 'tokenizer.json']
    """
    run_dir = Path(run_dir)
    if (run_dir / runs.CONFIG).exists():
        raise KerasSeqError(f"{run_dir} already holds a run; choose another run directory")
    _save_fresh_run(run_dir, config, Prepared(artifacts=dict(artifacts)))
    return run_dir


def _run_model(task, config, prepared: Prepared, run_dir: Path, point, computing: dict,
               backend_notes: list, strategy, printer):
    """The task's model, built fresh or reloaded from ``point`` under the strategy's scope,
    described; XLA is turned off (and the config saved again) where cuDNN wins."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training.checkpoints import resume_from_checkpoint
    from keras_seq.training.distribute import strategy_scope

    with strategy_scope(strategy):  # a distributed model's variables live on every replica
        if point is not None:
            model = resume_from_checkpoint(point)
            model.jit_compile = computing["jit_compile"]  # as the run was compiled
        else:
            model = task.build_model(config, prepared)
    printer(f"{task.name}: {task.describe_model(model)}")
    if _xla_or_cudnn(model, computing, backend_notes, printer):
        config.jit_compile = False
        config.save(run_dir / runs.CONFIG)
    printer(f"backend {computing['backend']}, mixed precision {computing['mixed_precision']}, "
            f"jit_compile {computing['jit_compile']}")
    return model


def _run_callbacks(task, config, prepared: Prepared, run_dir: Path, point, start_batch: int,
                   plan: FitPlan, strategy, report: list, printer):
    """``(callbacks, nan_guard, budget)``: the task's callbacks around the shared ones, in
    the order they must run (state restores before the NaN guard, the metrics row after
    the checkpoint's commit, the time budget last)."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training import callbacks as cb

    tb_dir = run_dir / "tensorboard"
    first, middle = task.callbacks(config, prepared, run_dir, report, printer)
    nan_guard = cb.NaNGuard()
    checkpoint = cb.RunCheckpoint(run_dir, nan_guard, point.best_val_loss if point else None,
                                  point.state.get("last_logs") if point else None)
    mid_epoch = task.resumes_mid_epoch and strategy is None
    budget = cb.TimeBudget(config.max_minutes, per_batch=mid_epoch or task.budget_check == "batch",
                           commit=checkpoint.commit_mid_epoch if mid_epoch else None,
                           steps_per_epoch=plan.steps)
    restore = []
    if point is not None and (point.stream_states is not None or start_batch):
        restore.append(cb.RestoreSession(point.stream_states,
                                         point.state.get("metric_states") if start_batch
                                         else None))
    shared_diagnostics = []
    if prepared.chance_loss is not None:
        shared_diagnostics.append(cb.TrainingDiagnostics(
            chance_loss=prepared.chance_loss, sample_fn=task.sample_fn(middle), report=report,
            printer=printer))
    callbacks = [
        *first,
        *restore,
        nan_guard,
        *middle,
        *shared_diagnostics,
        *tensorboard_callbacks(tb_dir, getattr(config, "histogram_freq", 0), printer),
        checkpoint,
        cb.MetricsCSV(run_dir / "metrics.csv", point.epochs_done if point else 0,
                      point.state.get("last_logs") if point else None),  # after the commit
        budget,
    ]
    return callbacks, nan_guard, budget


def _write_results(task, config, prepared: Prepared, run_dir: Path, model, plan: FitPlan,
                   budget, computing: dict, report: list, seconds: float,
                   steps_before: int) -> dict:
    """The run's results — shared ones, throughput, then the task's evaluations — written
    to ``metrics.json`` and returned."""
    state = json.loads((run_dir / runs.STATE).read_text())
    steps_run = _optimizer_steps(model) - steps_before
    results = {"run_dir": str(run_dir), "kind": task.name, "epochs_done": state["epochs_done"],
               "batches_done": state.get("batches_done", 0),
               "train_minutes": seconds / 60, "params": int(model.count_params()),
               "time_budget_hit": budget.hit, **computing,
               "recurrent_paths": _recurrent_paths(model), "diagnostics": report}
    if plan.items_per_step and steps_run:
        results[f"{plan.unit}_per_sec"] = steps_run * plan.items_per_step / max(seconds, 1e-9)
    prepared.stopped_mid_epoch = budget.stopped_at is not None
    results.update(task.results(config, prepared, run_dir, model))
    atomic.write_json_atomic(run_dir / runs.METRICS, results)
    return results


def _plan(task, config, prepared, epoch: int, start_batch: int, printer) -> FitPlan:
    if start_batch:
        return task.fit_plan(config, prepared, epoch, printer, start_batch=start_batch)
    return task.fit_plan(config, prepared, epoch, printer)


def _fit_sessions(task, config, prepared, model, plan, callbacks, initial_epoch: int,
                  start_batch: int, verbose: int, printer, nan_guard, budget) -> None:
    """``model.fit`` from ``(initial_epoch, start_batch)`` to ``config.epochs``: mid-epoch,
    one ``fit`` of the batches left in that epoch, then one of the epochs after it. A
    mid-epoch stop by the budget (:class:`~keras_seq.training.callbacks.StopMidEpoch`,
    raised once committed) ends it without validating."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.training import callbacks as cb

    epoch, offset = initial_epoch, start_batch
    while epoch < config.epochs:
        kwargs = dict(plan.kwargs)
        last = config.epochs
        if offset:
            kwargs["steps_per_epoch"], last = plan.steps - offset, epoch + 1
        cb.set_batch_offset(callbacks, offset)
        try:
            model.fit(**kwargs, epochs=last, initial_epoch=epoch, callbacks=callbacks,
                      verbose=verbose)
        except cb.StopMidEpoch as stop:
            if verbose:
                printer("")
            printer(f"{stop}; committed there: --resume continues from the next batch")
            for callback in callbacks:  # what fit's own end would have done (flush logs)
                callback.on_train_end({})
            if getattr(model, "_eval_epoch_iterator", None) is not None:
                del model._eval_epoch_iterator
            return
        if nan_guard.tripped or budget.hit or last == config.epochs:
            return
        epoch, offset = last, 0
        plan = _plan(task, config, prepared, epoch, 0, printer)


def format_results(results: dict, task: Task | None = None) -> str:
    """The one-screen summary printed after training (shared lines, then the task's)."""
    params = results["params"]
    total = params["total"] if isinstance(params, dict) else params
    detail = (f" (attention {params['attention']:,})"
              if isinstance(params, dict) and "attention" in params else "")
    speed = next((f" ({v:,.0f} {k[:-8]}/s)" for k, v in results.items()
                  if k.endswith("_per_sec") and v), "")
    lines = [f"run          {results['run_dir']}",
             f"params       {total:,}{detail}",
             f"trained      {results['epochs_done']} epoch(s) in {results['train_minutes']:.1f} "
             f"min{speed}"]
    if results.get("time_budget_hit"):
        lines[-1] += " — stopped by the time budget"
        if results.get("batches_done"):
            lines[-1] += (f" after batch {results['batches_done']} of epoch "
                          f"{results['epochs_done'] + 1} (--resume continues there)")
    if "backend" in results:
        lines.append(f"backend      {results['backend']} (mixed precision "
                     f"{results['mixed_precision']}, jit_compile {results['jit_compile']})")
    if task is not None:
        lines += task.result_lines(results)
    return "\n".join(lines)
