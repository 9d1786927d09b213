"""Checks that a ``model.fit`` call can train a stateful (truncated-BPTT) model.

A stateful recurrent layer carries row ``i``'s state from one batch to the next, so ``fit``
must feed the stream in order (``shuffle=False``) and in batches of exactly the rows its
state variables hold. Keras checks neither: ``shuffle=True`` (its default) silently
reorders the batches, and a batch of other rows fails deep in a TensorFlow graph.
:func:`check_stateful_fit` says either in one line before anything trains;
:class:`~keras_seq.training.callbacks.ResetStatesCallback` runs it on the arguments of the
``fit`` it is part of (:func:`fit_arguments`).
"""

from __future__ import annotations

import inspect
import math

import keras
from keras import tree

from keras_seq.data.pydatasets import StreamBatches, StreamWindows
from keras_seq.errors import KerasSeqError
from keras_seq.layers.state import stateful_layers

#: the batch size Keras's ``fit`` gives arrays when neither it nor the steps are given
KERAS_DEFAULT_BATCH_SIZE = 32


def fit_arguments(model) -> dict | None:
    """The ``x``, ``batch_size``, ``shuffle`` and ``steps_per_epoch`` of the ``model.fit``
    call running now, or None outside one."""
    # Keras hands callbacks the model but none of fit's arguments; while fit runs they are
    # the locals of its frame, further up the call stack. The nearest frame of a function
    # named "fit" whose `self` is this model is Keras's own fit (a subclass's override,
    # which calls it, lies further up), whatever the backend.
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
                found = frame.f_locals
                return {name: found.get(name)
                        for name in ("x", "batch_size", "shuffle", "steps_per_epoch")}
            frame = frame.f_back
        return None
    finally:
        del frame  # a frame held here would keep the whole stack alive


def check_stateful_fit(model, x, batch_size=None, shuffle=False, steps_per_epoch=None) -> None:
    """Refuse a ``fit`` that would break the truncated BPTT of ``model``'s stateful layers.

    Nothing is checked for a model without stateful recurrent layers. Otherwise a
    :class:`~keras_seq.errors.KerasSeqError` (one line: what was received, what is
    expected, the fix) is raised when:

    - ``shuffle`` is set and Keras would reorder ``x``: arrays, or a ``PyDataset`` of
      known length (Keras does not shuffle a ``tf.data.Dataset`` or an endless
      ``PyDataset``);
    - the batches ``x`` feeds do not have the rows the layers' states were built for: a
      stream dataset's ``batch_size``; for arrays, fit's (Keras's default when None), and
      every batch must be full; a ``tf.data.Dataset`` whose batch dimension is static.
      Other data, and a model on several replicas, are not checked for this.

    Args:
        model: the Keras model.
        x, batch_size, shuffle, steps_per_epoch: the arguments given to ``model.fit``.

    Example:

    >>> import keras, numpy as np
    >>> from keras_seq.data.batching import stream_arrays
    >>> from keras_seq.layers import LSTM
    >>> model = keras.Sequential([keras.Input((5,), batch_size=2), keras.layers.Embedding(9, 4),
    ...                           LSTM(3, stateful=True, name="lstm")])
    >>> x, y = stream_arrays(np.arange(40) % 9, batch_size=2, bptt=5)
    >>> check_stateful_fit(model, x, batch_size=2, shuffle=False)   # fine: nothing said
    >>> check_stateful_fit(model, x, batch_size=4)
    Traceback (most recent call last):
    ...
    keras_seq.errors.KerasSeqError: stateful layer 'lstm' holds state for batches of 2 rows, ...
    """
    layers = stateful_layers(model)
    if not layers:
        return
    rows = _array_rows(x)
    if shuffle and (rows is not None or _finite_pydataset(x)):
        raise KerasSeqError(
            f"model.fit(shuffle={shuffle!r}) reorders the batches of a truncated-BPTT stream, "
            f"but stateful layer {layers[0].name!r} needs row i of batch k+1 to continue row "
            "i of batch k (its state carries from batch to batch); pass "
            "model.fit(..., shuffle=False)")
    strategy = getattr(model, "_distribute_strategy", None)
    if strategy is not None and strategy.num_replicas_in_sync > 1:
        return  # each replica's state holds its share of the batch
    # fed: the rows of each batch; how: what gave that number; fix: how to feed others
    if isinstance(x, (StreamWindows, StreamBatches)):
        fed, how = x.batch_size, f"the stream dataset (batch_size={x.batch_size})"
        fix = "stream_dataset(ids, batch_size={}, bptt)"
    elif rows is not None:
        fed, how = batch_size, f"fit(batch_size={batch_size})"
        if not batch_size:  # Keras's choice
            fed = math.ceil(rows / steps_per_epoch) if steps_per_epoch \
                else KERAS_DEFAULT_BATCH_SIZE
            how = "fit() without batch_size"
        fed = int(fed)
        fix = "x, y = stream_arrays(ids, batch_size={0}, bptt) and fit(batch_size={0})"
    else:
        fed, how, fix = _dataset_batch(x), "the tf.data.Dataset", "a tf.data.Dataset of {}"
    if fed is None:
        return
    for layer in layers:
        built = _state_rows(layer)
        if built is not None and built != fed:
            raise KerasSeqError(
                f"stateful layer {layer.name!r} holds state for batches of {built} rows, but "
                f"{how} feeds batches of {fed}; feed batches of {built} "
                f"({fix.format(built)}), or build the model for the data's batch "
                f"(keras.Input(shape=(T,), batch_size={fed}))")
        if built is not None and rows is not None and rows % fed:
            raise KerasSeqError(
                f"stateful layer {layer.name!r} holds state for batches of {built} rows, but "
                f"the {rows} rows of x leave a last batch of {rows % fed}; make them a "
                f"multiple of {built} ({fix.format(built)})")


def _state_rows(layer) -> int | None:
    """The batch a stateful layer's state variables were built for (None: not built)."""
    states = tree.flatten(layer.states) if layer.states is not None else []
    return int(states[0].shape[0]) if states else None


def _array_rows(x) -> int | None:
    """The rows of ``x`` when Keras takes it as arrays (numpy, tensors, nested), else None."""
    if x is None or isinstance(x, keras.utils.PyDataset) or _is_tf_dataset(x):
        return None
    leaves = tree.flatten(x)
    if not leaves or not all(len(getattr(v, "shape", ())) >= 1 for v in leaves):
        return None
    return int(leaves[0].shape[0])


def _finite_pydataset(x) -> bool:
    return isinstance(x, keras.utils.PyDataset) and x.num_batches is not None


def _is_tf_dataset(x, names=("DatasetV2", "DistributedDataset",
                               "DistributedDatasetsFromFunction")) -> bool:
    # By class name, as Keras does: TensorFlow is not imported for other backends' data.
    return any(c.__name__ in names and c.__module__.startswith("tensorflow.")
               for c in type(x).__mro__)


def _dataset_batch(x) -> int | None:
    """The static batch dimension of a ``tf.data.Dataset``'s elements, else None."""
    if not _is_tf_dataset(x, ("DatasetV2",)):
        return None  # a distributed dataset's elements are per replica
    leaves = tree.flatten(x.element_spec)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    return shape[0] if shape is not None and shape.rank else None
