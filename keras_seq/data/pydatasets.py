"""Training batches as ``keras.utils.PyDataset`` s: numpy in, the same on every backend.

* :class:`StreamWindows` — the same batches cut from the token ids on demand (a
  memory-mapped corpus stays on disk);
* :class:`StreamBatches` — the truncated-BPTT stream (:mod:`keras_seq.data.batching`):
  item ``k`` is batch ``k``, so row ``i`` of item ``k+1`` continues row ``i`` of item
  ``k``; served in order, never shuffled.
* :class:`ShuffledBatches` — precomputed batches (padded examples, NPLM windows) served
  without end: pass ``p`` visits them in the order drawn from ``seed + p``, and the first
  pass may start ``skip`` batches in (where a resumed run goes on).

The two stream datasets refuse to be read out of stream order (as ``model.fit(shuffle=True)``
would): an item request ``k`` must be the first, ``0`` (a new pass) or the previous one
plus 1, else a :class:`~keras_seq.errors.DataError` says so; ``check_order=False`` allows
any order, and their ``batch(k)`` reads any batch unchecked.

Items are pure functions of their index, so Keras may read any item twice (it reads the
first two to infer shapes) without changing what training sees.

:func:`fit_input` hands one to ``model.fit``. Keras's own ``PyDataset`` adapter for
TensorFlow fixes every dimension that its first two batches share, which breaks on padded
batches of other widths (or a smaller last batch); there a ``tf.data`` wrapper with
every dimension left open serves the same items.

>>> import numpy as np
>>> batches = [(np.full((1, 1), i),) for i in range(3)]
>>> data = ShuffledBatches(batches, seed=0, skip=1)
>>> data.order(0).tolist(), data.order(1).tolist()
([2, 0, 1], [0, 1, 2])
>>> [int(data[i][0][0, 0]) for i in range(5)]   # pass 0 from its 2nd batch, then pass 1
[0, 1, 0, 1, 2]
"""

from __future__ import annotations

import keras
import numpy as np

from keras_seq.data.prepared import file_region
from keras_seq.errors import DataError


class InStreamOrder:
    """Refuses item requests out of stream order (a mixin for the stream datasets).

    Request ``k`` is accepted when it is the first one, ``0`` (a new pass; TensorFlow's
    ``fit`` also peeks at items 0 and 1 before its pass from 0) or the previous request
    plus 1. ``check_order = False`` accepts any order.
    """

    check_order = True
    _last_request = None
    #: how the fix for a stateless model is spelt in the message
    unchecked_call = "stream_dataset(..., check_order=False)"

    def check_request(self, k: int) -> None:
        """Raise a :class:`~keras_seq.errors.DataError` unless ``k`` follows in order."""
        last = self._last_request
        if self.check_order and last is not None and k != 0 and k != last + 1:
            raise DataError(
                f"stream batch {k} was requested after batch {last}, but a truncated-BPTT "
                "stream must be read in order (0, 1, 2, ...: row i of batch k+1 continues "
                "row i of batch k, and a stateful model carries its state from batch to "
                "batch); pass model.fit(..., shuffle=False), or, for a model that is not "
                f"stateful, {self.unchecked_call} to allow any order")
        self._last_request = k

    def __getitem__(self, k):
        k = int(k)
        self.check_request(k)
        return self.batch(k)


class StreamBatches(InStreamOrder, keras.utils.PyDataset):
    """Batches ``[k·B, (k+1)·B)`` of stream arrays, in order (stateful TBPTT).

    Args:
        x, y: ``(N·B, T)`` arrays from :func:`~keras_seq.data.batching.stream_arrays`.
        batch_size: ``B``, the number of stream rows.
        check_order: refuse items asked for out of stream order (``False``: any order,
            for a model that is not stateful).
    """

    fixed_shapes = True
    unchecked_call = "StreamBatches(..., check_order=False)"

    def __init__(self, x, y, batch_size: int, check_order: bool = True):
        super().__init__()
        self.check_order = bool(check_order)
        self.x, self.y, self.batch_size = np.asarray(x), np.asarray(y), int(batch_size)
        if len(self.x) != len(self.y) or len(self.x) % self.batch_size:
            raise DataError(f"stream arrays of {len(self.x)} and {len(self.y)} rows do not "
                            f"split into batches of {self.batch_size} rows; make them with "
                            "stream_arrays(ids, batch_size, bptt)")

    def __len__(self) -> int:
        return len(self.x) // self.batch_size

    def batch(self, k: int):
        """Batch ``k`` as ``(x, y)``, in any order (no order check)."""
        if not 0 <= k < len(self):
            raise IndexError(f"stream batch {k} out of range (0..{len(self) - 1})")
        rows = slice(k * self.batch_size, (k + 1) * self.batch_size)
        return self.x[rows], self.y[rows]


class StreamWindows(InStreamOrder, keras.utils.PyDataset):
    """The batches of :func:`~keras_seq.data.batching.stream_arrays`, cut from ``ids`` when
    asked for: batch ``k`` is columns ``[k·T, (k+1)·T)`` of the ``B`` stream rows (targets
    one further), copied out as int32. ``ids`` is not copied, so a memory-mapped prepared
    corpus (:class:`~keras_seq.data.prepared.PreparedCorpus`) stays on disk.

    Args:
        ids: the token stream, ``(n,)`` (any integer array, a ``np.memmap`` included).
        layout: its :class:`~keras_seq.data.batching.StreamLayout` (``B``, ``T``).
        max_batches: serve only the first batches.
        check_order: refuse items asked for out of stream order (``False``: any order,
            for a model that is not stateful).
    """

    fixed_shapes = True

    def __init__(self, ids, layout, max_batches: int | None = None,
                 check_order: bool = True):
        super().__init__()
        self.check_order = bool(check_order)
        ids = ids if isinstance(ids, np.ndarray) else np.asarray(ids)
        self.batch_size, self.bptt = int(layout.batch_size), int(layout.bptt)
        self.row_len = layout.row_len
        # A split's own memory map is opened again for each batch (as nanoGPT's train.py
        # does) so that pages read once do not stay mapped: resident memory stays flat.
        self.region = file_region(ids)
        self.dtype = ids.dtype
        self.rows = ids.reshape(-1)[: layout.row_len * self.batch_size].reshape(
            self.batch_size, layout.row_len)  # (B, L): a view, nothing read
        if self.region is not None:
            self.rows = None
        n = layout.num_batches
        self.n = n if max_batches is None else min(n, int(max_batches))

    def _rows(self) -> np.ndarray:
        if self.rows is not None:
            return self.rows
        name, offset = self.region
        return np.memmap(name, dtype=self.dtype, mode="r", offset=offset,
                         shape=(self.batch_size, self.row_len))  # (B, L)

    def __len__(self) -> int:
        return self.n

    def batch(self, k: int):
        """Batch ``k`` as ``(x, y)``, in any order (no order check)."""
        if not 0 <= k < len(self):
            raise IndexError(f"stream batch {k} out of range (0..{len(self) - 1})")
        t = self.bptt
        window = np.array(self._rows()[:, k * t: (k + 1) * t + 1], dtype=np.int32)  # (B, T+1)
        return np.ascontiguousarray(window[:, :-1]), np.ascontiguousarray(window[:, 1:])


class ShuffledBatches(keras.utils.PyDataset):
    """Precomputed batches served endlessly, reshuffled every pass.

    Args:
        batches: a list of batches (tuples of arrays, nested tuples allowed).
        seed: pass ``p`` (counted from this dataset's start) uses the order drawn from
            ``seed + p``.
        shuffle: ``False`` serves the batches in their order, pass after pass
            (validation).
        skip: batches of the first pass left out.
    """

    fixed_shapes = False

    def __init__(self, batches, seed: int = 0, shuffle: bool = True, skip: int = 0):
        super().__init__()
        if not batches:
            raise DataError("no batches to serve; the split is empty")
        self.batches, self.seed, self.shuffle = list(batches), int(seed), shuffle
        self.skip = int(skip)
        self._orders: dict[int, np.ndarray] = {}

    @property
    def num_batches(self):
        return None  # endless; fit's steps_per_epoch says where an epoch ends

    def order(self, pass_: int) -> np.ndarray:
        """The batch order of pass ``pass_``."""
        if pass_ not in self._orders:
            order = np.arange(len(self.batches))
            if self.shuffle:
                np.random.default_rng(self.seed + pass_).shuffle(order)
            self._orders = {pass_: order}  # passes are visited in turn: keep one
        return self._orders[pass_]

    def __getitem__(self, index):
        pass_, position = divmod(self.skip + int(index), len(self.batches))
        return self.batches[self.order(pass_)[position]]


def open_spec(value):
    """The ``tf.TensorSpec`` structure of a batch with every dimension left open."""
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    if isinstance(value, (tuple, list)):
        return tuple(open_spec(v) for v in value)
    value = np.asarray(value)
    return tf.TensorSpec((None,) * value.ndim, tf.as_dtype(value.dtype))


def fit_input(dataset):
    """What to pass to ``model.fit`` as ``x`` for ``dataset`` on the running backend.

    The dataset itself, except for batches of varying shapes on TensorFlow: a
    ``tf.data`` generator over the same items with every dimension open (see the
    module docstring).
    """
    if dataset.fixed_shapes or keras.backend.backend() != "tensorflow":
        return dataset
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    def items():
        return iter(dataset)

    ds = tf.data.Dataset.from_generator(items, output_signature=open_spec(dataset[0]))
    return ds.prefetch(2)
