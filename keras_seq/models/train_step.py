"""Gradient norms in the training logs, on every Keras backend.

:class:`GradNormLogs` is a ``keras.Model`` mixin. Its ``train_step`` is Keras's own (so
loss scaling, metrics and distribution behave as in Keras on TensorFlow, JAX and
PyTorch); the model's optimizer gets a thin hook on ``apply`` — the one call every
backend's step makes with the gradients — that measures, before clipping,

- ``grad_norm``: the global L2 norm of all gradients, and
- ``grad_norm/<layer>``: one per group of layers the model names (:meth:`grad_norm_groups`),

and the step adds them to its logs (so ``fit``'s callbacks, the CSV and TensorBoard see
them). Clipping itself is the optimizer's ``global_clipnorm``/``clipnorm``.

Under ``tf.distribute`` with several replicas the step also gives each replica its own
dropout masks, and clipping applies to the summed gradient (as on one device). Without
clipping, the logged norms are each replica's local gradient's, averaged over replicas.

Example:

>>> import numpy as np, keras
>>> class Tiny(GradNormLogs, keras.Sequential):
...     pass
>>> model = Tiny([keras.Input((3,)), keras.layers.Dense(1, name="out")])
>>> model.compile("sgd", "mse")
>>> history = model.fit(np.ones((4, 3)), np.ones((4, 1)), verbose=0)
>>> sorted(k for k in history.history if k.startswith("grad_norm"))
['grad_norm', 'grad_norm/out']
"""

from __future__ import annotations

import threading

import keras
from keras import ops

from keras_seq.layers.seeds import seed_generators

# Norms measured in the optimizer hook wait here for the step that made them; per thread,
# since tf.distribute's MirroredStrategy traces each replica's step in its own thread.
_PENDING = threading.local()


def dense(grad):
    """A gradient as a dense tensor (TensorFlow gives embeddings ``IndexedSlices``)."""
    if type(grad).__name__ == "IndexedSlices":
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        return tf.convert_to_tensor(grad)
    return grad


def global_norm(grads):
    """``sqrt(Σ ‖g‖²)`` over the non-None gradients, in float32."""
    squares = [ops.sum(ops.square(ops.cast(dense(g), "float32"))) for g in grads if g is not None]
    return ops.sqrt(ops.sum(ops.stack(squares))) if squares else ops.zeros(())


def _presum_if_clipping(grads, optimizer):
    """Under ``tf.distribute`` with several replicas, Keras clips each replica's *local*
    gradient before its all-reduce sums them, so ``global_clipnorm`` bounds the wrong
    vector and a distributed step differs from a single-device one. When the optimizer
    clips, sum the gradients across replicas here, then hand Keras each replica's share
    ``sum / R``: Keras's clip then sees the true norm divided by ``R`` — by then clipping
    is done here exactly — and its all-reduce adds the shares back to the (clipped) sum.

    Returns ``(gradients to measure, gradients for Keras)``: the summed unclipped ones and
    the shares when this applies, else the local gradients twice.
    """
    clipping = any(getattr(optimizer, name, None) for name in
                   ("clipnorm", "global_clipnorm", "clipvalue"))
    if not clipping or keras.backend.backend() != "tensorflow":
        return grads, grads
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if context is None or replicas == 1:
        return grads, grads
    present = [g for g in grads if g is not None]
    summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
    total = [None if g is None else next(summed) for g in grads]
    if optimizer.global_clipnorm:
        clipped, _ = tf.clip_by_global_norm(total, optimizer.global_clipnorm)
    elif optimizer.clipnorm:
        clipped = [None if g is None else tf.clip_by_norm(g, optimizer.clipnorm)
                   for g in total]
    else:
        clipped = [None if g is None else tf.clip_by_value(g, -optimizer.clipvalue,
                                                           optimizer.clipvalue)
                   for g in total]
    return total, [None if g is None else g / replicas for g in clipped]


#: a prime far from 0: replica r's dropout seeds are the shared ones shifted by r times it
REPLICA_SEED_STRIDE = 1_000_003


def replica_seeds(model, fn):
    """Run ``fn()`` in replica context with this replica's own dropout masks.

    Keras's ``SeedGenerator`` states are mirrored, so every replica would draw the same
    masks. For the call, each seed is shifted by ``replica id × REPLICA_SEED_STRIDE``; the
    shift is taken back afterwards, so the draw counters advance as usual and every
    replica ends in the same (checkpointable) seed state. Replica 0 draws what one device
    would.
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    generators = seed_generators(model)
    if not generators:
        return fn()
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    offsets = [tf.stack([tf.cast(replica, g.state.dtype) * REPLICA_SEED_STRIDE,
                         tf.zeros((), g.state.dtype)]) for g in generators]
    for g, offset in zip(generators, offsets):
        g.state.assign(g.state.value + offset)
    out = fn()
    for g, offset in zip(generators, offsets):
        g.state.assign(g.state.value - offset)
    return out


def _own_masks_per_replica(model, step):
    """``step()``, with each ``tf.distribute`` replica drawing its own dropout masks
    (:func:`replica_seeds`) when there are several."""
    if keras.backend.backend() != "tensorflow":
        return step()
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    if tf.distribute.get_replica_context() is None or \
            tf.distribute.get_strategy().num_replicas_in_sync == 1:
        return step()
    return replica_seeds(model, step)


class GradNormLogs:
    """Mixin for ``keras.Model``: ``grad_norm`` and ``grad_norm/<group>`` in every step's logs."""

    def grad_norm_groups(self) -> dict:
        """``{group name: layer}``; the default is one group per direct sub-layer."""
        return {layer.name: layer for layer in self.layers}

    def _hook_optimizer(self, optimizer):
        # Hooked when the first step is traced, not in compile(): a model that overrides
        # compile() is not compiled by keras.saving.load_model.
        if getattr(optimizer, "_grad_norm_hook_for", None) == id(self):
            return
        apply = type(optimizer).apply.__get__(optimizer)
        model = self

        def apply_and_measure(grads, trainable_variables=None):
            # Dense gradients: Keras clips an embedding's IndexedSlices by the norm of its
            # rows, duplicates and all, which is not the norm of the gradient.
            grads = [None if g is None else dense(g) for g in grads]
            variables = (optimizer._trainable_variables if trainable_variables is None
                         else trainable_variables)
            measured, grads = _presum_if_clipping(grads, optimizer)
            model._measure(measured, list(variables), optimizer)
            return apply(grads, trainable_variables)

        optimizer.apply = apply_and_measure  # an instance attribute: not serialized
        optimizer._grad_norm_hook_for = id(self)

    def _measure(self, grads, variables, optimizer):
        scale = getattr(optimizer, "dynamic_scale", None)  # a LossScaleOptimizer's
        unscale = 1.0 if scale is None else 1.0 / ops.cast(ops.convert_to_tensor(scale), "float32")
        by_id = {id(v): g for v, g in zip(variables, grads)}
        by_path = {getattr(v, "path", None): g for v, g in zip(variables, grads)}
        norms = {"grad_norm": global_norm(grads) * unscale}
        for name, layer in self.grad_norm_groups().items():
            group = [by_id.get(id(v), by_path.get(v.path)) for v in layer.trainable_variables]
            if any(g is not None for g in group):
                norms[f"grad_norm/{name}"] = global_norm(group) * unscale
        _PENDING.norms = norms

    def train_step(self, *args):
        _PENDING.norms = {}
        if self.optimizer is not None:
            self._hook_optimizer(self.optimizer)
        out = _own_masks_per_replica(self, lambda: super(GradNormLogs, self).train_step(*args))
        norms, _PENDING.norms = _PENDING.norms, {}
        if keras.backend.backend() == "jax":  # (logs, state)
            logs, state = out
            return {**logs, **norms}, state
        return {**out, **norms}
