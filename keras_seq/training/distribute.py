"""Stateful truncated BPTT on ``tf.distribute``: explicit stream rows per replica.

A stateful language model carries each stream row's state from one window to the next, so
a replica must see the *same* rows in every window. Nothing here relies on how
``experimental_distribute_dataset`` happens to split a global batch (TF's documentation
says not to): :class:`ReplicaRows` hands replica ``r`` (its id in the sync group, counted
across workers) rows ``[r·b, (r+1)·b)`` of the ``B`` stream rows, ``b = B / R``, through
``strategy.experimental_distribute_values_from_function``.

The model is built with the per-replica batch ``b``; its state variables then hold one
state per replica (mirrored variables updated in replica context). :func:`replica_states`
reads every replica's copy (a plain read outside replica context returns replica 0's only)
and :func:`restore_replica_states` writes them back, so a checkpoint keeps all of them.

:func:`make_train_window` is the step: each replica computes the loss of its rows divided
by the *global* number of target tokens, Keras's optimizer all-reduces the gradients with
a sum, so one step equals a single-device step on the ``B`` rows (to float rounding).
Each replica draws its own dropout masks (:func:`keras_seq.models.train_step.replica_seeds`).

``keras-seq train lm --strategy …`` trains with ``model.fit`` instead: the same rows per
replica come from :func:`stream_dataset`, the seed shift and exact clipping from the
model's train step (:mod:`keras_seq.models.train_step`), and :func:`fit_workarounds`
makes ``fit`` work under ``MultiWorkerMirroredStrategy`` on Keras 3.15.
``keras-seq train seq2seq --strategy …`` serves its padded batches through
:func:`example_dataset`, each replica a fixed share of every batch.

TensorFlow backend only.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket

import numpy as np

from keras_seq.data.pydatasets import open_spec
from keras_seq.errors import KerasSeqError
from keras_seq.layers.state import state_variables
from keras_seq.models.train_step import dense, replica_seeds
from keras_seq.training.config import STRATEGIES

_MULTI_WORKER = None


def make_strategy(name: str, devices=None):
    """The ``tf.distribute`` strategy called ``name``.

    ``one``: the default (no distribution); ``mirrored``: ``MirroredStrategy`` over
    ``devices`` (a list of device names; a count N: the first N GPUs, or on a host
    without a GPU N logical CPU devices, which must be made before TensorFlow starts its
    runtime; None: every GPU); ``multi-worker``: ``MultiWorkerMirroredStrategy``
    configured by ``TF_CONFIG``.
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    if name == "one":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        if isinstance(devices, int):
            devices = device_names(devices)
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi-worker":
        # One per process, made at start-up (before TF's runtime starts, which it
        # configures for collectives): the CLI makes it first and the trainer reuses it.
        global _MULTI_WORKER
        if _MULTI_WORKER is None:
            _MULTI_WORKER = tf.distribute.MultiWorkerMirroredStrategy()
        return _MULTI_WORKER
    raise KerasSeqError(f"received strategy {name!r}; expected one of {', '.join(STRATEGIES)}")


def device_names(count: int) -> list[str]:
    """``count`` GPUs, or ``count`` logical CPU devices on a host without a GPU.

    Physical devices are listed first: listing logical ones starts TensorFlow's runtime,
    after which no logical device can be made.
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        gpus = tf.config.list_logical_devices("GPU")
        if count > len(gpus):
            raise KerasSeqError(f"--devices {count}: this host has {len(gpus)} GPU(s)")
        return [d.name for d in gpus[:count]]
    cpu = tf.config.list_physical_devices("CPU")[0]
    configured = tf.config.get_logical_device_configuration(cpu) or []
    if len(configured) < count:
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * count)
        except RuntimeError as err:  # the runtime already started
            raise KerasSeqError(
                f"--devices {count} on a host without a GPU needs {count} logical CPU "
                "devices, which TensorFlow can only make before its runtime starts "
                f"({err}); run the command in a fresh process") from err
    return [d.name for d in tf.config.list_logical_devices("CPU")[:count]]


class ReplicaRows:
    """The stream's ``(x, y)`` windows, with fixed rows for each replica.

    Args:
        x, y: ``(N·B, T)`` arrays from :func:`keras_seq.data.batching.stream_arrays`
            (window ``k`` is rows ``[k·B, (k+1)·B)``).
        global_batch: ``B``, the number of stream rows; a multiple of the replica count.
        strategy: the ``tf.distribute`` strategy.
    """

    def __init__(self, x, y, global_batch: int, strategy):
        replicas = strategy.num_replicas_in_sync
        if global_batch % replicas:
            raise KerasSeqError(
                f"a global batch of {global_batch} stream rows does not split over "
                f"{replicas} replicas; use a --batch-size that is a multiple of {replicas}")
        self.x, self.y = np.asarray(x), np.asarray(y)
        self.global_batch, self.strategy = global_batch, strategy
        self.per_replica = global_batch // replicas
        self.num_windows = len(self.x) // global_batch

    def rows(self, replica: int) -> slice:
        """The stream rows replica ``replica`` owns, in every window."""
        return slice(replica * self.per_replica, (replica + 1) * self.per_replica)

    def window(self, k: int):
        """Window ``k`` as distributed values: replica ``r`` gets ``rows(r)`` of it."""
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        xk = self.x[k * self.global_batch:(k + 1) * self.global_batch]  # (B, T)
        yk = self.y[k * self.global_batch:(k + 1) * self.global_batch]

        def values(ctx):
            rows = self.rows(ctx.replica_id_in_sync_group)
            return tf.constant(xk[rows]), tf.constant(yk[rows])  # (b, T) each

        return self.strategy.experimental_distribute_values_from_function(values)


def stream_dataset(x, y, global_batch: int, strategy):
    """The TBPTT windows as a distributed dataset for ``model.fit``, rows fixed per replica.

    Built with ``distribute_datasets_from_function``: each worker's input pipeline yields,
    window after window, one ``(b, T)`` batch per local replica in replica order (its
    replicas dequeue "one input after another", as TF documents), each holding that
    replica's :meth:`ReplicaRows.rows`. Nothing depends on how TF would split a global
    batch.
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    rows = ReplicaRows(x, y, global_batch, strategy)
    local = local_replica_ids(strategy)

    def dataset_fn(ctx):
        xs, ys = [], []
        for k in range(rows.num_windows):
            window = slice(k * global_batch, (k + 1) * global_batch)
            for replica in local:  # local replicas dequeue in turn
                part = rows.rows(replica)
                xs.append(rows.x[window][part])
                ys.append(rows.y[window][part])
        data = tf.data.Dataset.from_tensor_slices((np.stack(xs), np.stack(ys)))
        # Epoch after epoch in the same order (fit takes steps_per_epoch windows a time).
        return data.repeat().prefetch(len(local))

    return strategy.distribute_datasets_from_function(dataset_fn)


def example_dataset(batches, strategy):
    """Padded example batches (seq2seq pairs…) as a distributed dataset for ``model.fit``.

    Args:
        batches: global batches by index, served without end (a
            :class:`~keras_seq.data.pydatasets.ShuffledBatches`); each a nested tuple of
            arrays whose rows split evenly over the replicas
            (:func:`keras_seq.tasks._common.split_evenly` pads them so).
        strategy: the ``tf.distribute`` strategy.

    Replica ``r`` gets rows ``[r·b, (r+1)·b)`` of every batch (``b`` = rows / replicas):
    each worker's pipeline yields its local replicas' parts in turn, as
    :func:`stream_dataset` does, with every dimension left open (batches differ in
    width). Replicas of one step share the batch's padded width, so each replica's mean
    loss has the divisor one device's would have, over ``b`` rows instead of ``B``.
    """
    # lazy: loads TensorFlow, Keras only when this runs
    import tensorflow as tf
    from keras import tree

    replicas = strategy.num_replicas_in_sync
    local = local_replica_ids(strategy)

    def parts():
        for k in itertools.count():
            batch = batches[k]
            rows = len(tree.flatten(batch)[0])
            if rows % replicas:
                raise KerasSeqError(f"batch {k} has {rows} rows, which do not split over "
                                    f"{replicas} replicas; pad it with split_evenly()")
            b = rows // replicas
            for replica in local:
                part = slice(replica * b, (replica + 1) * b)
                yield tree.map_structure(lambda a, part=part: a[part], batch)

    def dataset_fn(ctx):
        data = tf.data.Dataset.from_generator(parts, output_signature=open_spec(batches[0]))
        return data.prefetch(len(local))

    return strategy.distribute_datasets_from_function(dataset_fn)


def make_train_window(model, strategy, global_tokens: int):
    """A compiled ``(x, y) -> loss`` step on distributed values (see the module docstring).

    ``global_tokens``: target tokens in one global window (``B·T``); each replica's loss
    is its summed cross-entropy over this, so the all-reduced gradient is the mean's.
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf


    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = replica_seeds(model, lambda: model(x, training=True))  # (b, T, V)
            logits = tf.cast(logits, tf.float32)
            per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)  # (b, T)
            loss = tf.reduce_sum(per_token) / global_tokens
        variables = model.trainable_variables
        grads = [dense(g) for g in tape.gradient(loss, variables)]
        model.optimizer.apply(grads, variables)  # all-reduced (sum) across replicas
        return loss

    @tf.function
    def train_window(values):
        per_replica = strategy.run(replica_step, args=values)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return train_window


def local_replica_ids(strategy) -> list[int]:
    """The sync-group ids of this worker's replicas, in local order."""
    ids = strategy.experimental_distribute_values_from_function(
        lambda ctx: ctx.replica_id_in_sync_group)
    return [int(i) for i in strategy.experimental_local_results(ids)]


def replica_states(model, strategy) -> dict[int, list[np.ndarray]]:
    """This worker's replicas' copies of every state variable:
    ``{replica id in the sync group: [(b, S) per state variable]}``.

    (A plain read outside replica context returns the first replica's copy only.)
    """
    variables = state_variables(model)
    if not variables:
        return {}
    # var.value is the tf.distribute variable behind the Keras one.
    copies = [strategy.experimental_local_results(var.value) for var in variables]
    return {rid: [np.asarray(c[i]) for c in copies]
            for i, rid in enumerate(local_replica_ids(strategy))}


def restore_replica_states(model, strategy, states: dict) -> None:
    """Write ``states`` (as :func:`replica_states` returns) back, each to its replica."""
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    variables = state_variables(model)
    if not variables:
        return
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tuple(tf.constant(s) for s in states[ctx.replica_id_in_sync_group]))

    def assign(*replica_values):
        for var, value in zip(variables, replica_values):
            var.assign(value)

    strategy.run(tf.function(assign), args=values)


def is_multi_worker(strategy) -> bool:
    """Whether ``strategy`` spans several worker processes."""
    if strategy is None:
        return False
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and \
        strategy.extended._num_workers > 1


def strategy_scope(strategy):
    """``strategy.scope()``, or a no-op context for no strategy."""
    return contextlib.nullcontext() if strategy is None else strategy.scope()


@contextlib.contextmanager
def fit_workarounds(strategy):
    """``model.fit`` under ``MultiWorkerMirroredStrategy`` on Keras 3.15 (keras-team/keras
    #20585, open): two places in Keras's TensorFlow trainer reduce across workers wrongly.

    1. ``_maybe_symbolic_build`` builds the model on ``strategy.reduce("MEAN", batch)`` of
       a tuple of per-replica batches, which collective all-reduce cannot take; the build
       needs only shapes, so it is given this worker's first local batch instead.
    2. ``reduce_per_replica`` averages each log with ``strategy.reduce("MEAN", v, axis=0)``,
       which fails on a scalar (every loss and metric); scalars are reduced with
       ``axis=None`` (the mean over replicas), others as Keras does.

    Both are patched only inside this context and only for a multi-worker strategy; other
    strategies run Keras unchanged.
    """
    if not is_multi_worker(strategy):
        yield
        return
    # lazy: loads TensorFlow, Keras only when this runs
    import tensorflow as tf
    from keras.src import tree
    from keras.src.backend.tensorflow import trainer as tf_trainer

    original_build = tf_trainer.TensorFlowTrainer._maybe_symbolic_build
    original_reduce = tf_trainer.reduce_per_replica

    def symbolic_build(self, iterator=None, data_batch=None):
        if iterator is not None:
            for _, _, it in iterator:
                data_batch = tree.map_structure(
                    lambda v: self.distribute_strategy.experimental_local_results(v)[0]
                    if isinstance(v, tf.distribute.DistributedValues) else v, next(it))
                break
        with self.distribute_strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    def reduce_per_replica(values, strategy, reduction):
        if reduction not in ("auto", "mean"):
            return original_reduce(values, strategy, reduction)

        def mean(v):
            rank = len(strategy.experimental_local_results(v)[0].shape)
            return strategy.reduce("MEAN", v, axis=None if rank == 0 else 0)

        return tree.map_structure(mean, values)

    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = symbolic_build
    tf_trainer.reduce_per_replica = reduce_per_replica
    try:
        yield
    finally:
        tf_trainer.TensorFlowTrainer._maybe_symbolic_build = original_build
        tf_trainer.reduce_per_replica = original_reduce


def localhost_cluster(workers: int) -> dict:
    """A ``TF_CONFIG`` cluster of ``workers`` processes on this host's free ports (tests,
    benchmarks, trying multi-worker on one machine)."""
    sockets = [socket.socket() for _ in range(workers)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return {"worker": [f"localhost:{port}" for port in ports]}


def tf_config(cluster: dict, index: int) -> str:
    """The ``TF_CONFIG`` value of worker ``index`` of ``cluster``."""
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
