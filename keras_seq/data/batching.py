"""Batches: the truncated-BPTT stream layout and padded variable-length batches.

Stream layout (the PTB reader's): the token stream is cut into ``batch_size`` contiguous
rows; batch ``k`` is columns ``[k·bptt, (k+1)·bptt)`` of every row, so row ``i`` of batch
``k+1`` continues row ``i`` of batch ``k`` and a stateful RNN can carry its state across
batches. Targets are the inputs shifted by one token.

What is not used (the documented remainder): the last ``len(ids) % batch_size`` tokens of
the stream, and the last ``(row_len − 1) % bptt`` input positions of each row. Nothing
else is dropped, and no input token appears twice.

Example:

>>> import numpy as np
>>> x, y = stream_arrays(np.arange(21), batch_size=2, bptt=3)
>>> x[:2].tolist(), y[:2].tolist()   # batch 0: rows 0 and 1
([[0, 1, 2], [10, 11, 12]], [[1, 2, 3], [11, 12, 13]])
>>> x[2:4].tolist()                  # batch 1 continues each row
[[3, 4, 5], [13, 14, 15]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from keras_seq.errors import DataError


@dataclass(frozen=True)
class StreamLayout:
    """How a stream of ``n_tokens`` is laid out for ``batch_size`` rows and windows of ``bptt``."""

    n_tokens: int
    batch_size: int
    bptt: int

    def __post_init__(self):
        for name in ("batch_size", "bptt"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise DataError(f"{name} must be a positive integer, got {value!r}")
        if self.num_batches < 1:
            need = self.batch_size * (self.bptt + 1)
            raise DataError(
                f"a stream of {self.n_tokens:,} tokens is too short for batch_size="
                f"{self.batch_size} and bptt={self.bptt}: each row gets {self.row_len} tokens "
                f"but needs bptt+1={self.bptt + 1} (at least {need:,} tokens in all). "
                "Lower --batch-size or --bptt, or use more text."
            )

    @property
    def row_len(self) -> int:
        return self.n_tokens // self.batch_size

    @property
    def num_batches(self) -> int:
        return (self.row_len - 1) // self.bptt

    @property
    def tokens_per_batch(self) -> int:
        return self.batch_size * self.bptt

    @property
    def unused_tokens(self) -> int:
        """Input positions never served (stream remainder + each row's short tail)."""
        return self.n_tokens - self.num_batches * self.tokens_per_batch


def stream_arrays(ids, batch_size: int, bptt: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets in stream layout, flattened for ``fit(shuffle=False)``.

    Returns:
        ``(x, y)``, each ``(num_batches · batch_size, bptt)`` int32; rows
        ``[k·batch_size, (k+1)·batch_size)`` form batch ``k``.
    """
    ids = np.asarray(ids, dtype=np.int32).reshape(-1)
    layout = StreamLayout(len(ids), batch_size, bptt)
    rows = ids[: layout.row_len * batch_size].reshape(batch_size, layout.row_len)  # (B, L)
    n, t = layout.num_batches, bptt
    x = rows[:, : n * t].reshape(batch_size, n, t)  # (B, N, T)
    y = rows[:, 1 : n * t + 1].reshape(batch_size, n, t)
    # (B, N, T) → (N, B, T) → (N·B, T): batch k is a contiguous block of B rows.
    return (
        np.ascontiguousarray(x.transpose(1, 0, 2).reshape(n * batch_size, t)),
        np.ascontiguousarray(y.transpose(1, 0, 2).reshape(n * batch_size, t)),
    )


def stream_dataset(ids, batch_size: int, bptt: int, max_batches: int | None = None,
                   check_order: bool = True):
    """A ``keras.utils.PyDataset`` of ``(x, y)`` batches, each ``(batch_size, bptt)`` int32,
    in stream order: the batches of :func:`stream_arrays`, cut from ``ids`` one at a time
    (:class:`~keras_seq.data.pydatasets.StreamWindows`; any backend), so a memory-mapped
    stream is never copied whole.

    ``max_batches`` keeps only the first batches of the stream. With ``check_order`` (the
    default) reading its items out of stream order (``model.fit(shuffle=True)``) raises a
    :class:`~keras_seq.errors.DataError`; ``False`` allows any order (a model that is not
    stateful).

    Example:

    >>> data = stream_dataset(np.arange(41), batch_size=2, bptt=4)   # rows 0..19, 20..39
    >>> x, y = data[0]
    >>> len(data), x.tolist(), y.tolist()
    (4, [[0, 1, 2, 3], [20, 21, 22, 23]], [[1, 2, 3, 4], [21, 22, 23, 24]])
    >>> data[1][0].tolist()                                          # each row goes on
    [[4, 5, 6, 7], [24, 25, 26, 27]]
    """
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.data.pydatasets import StreamWindows

    ids = ids if isinstance(ids, np.ndarray) else np.asarray(ids, dtype=np.int32)
    ids = ids if ids.ndim == 1 else ids.reshape(-1)  # a 1-D memmap stays the file's own map
    return StreamWindows(ids, StreamLayout(len(ids), batch_size, bptt), max_batches,
                         check_order=check_order)


def pad_sequences(
    sequences, pad_id: int = 0, max_len: int | None = None, side: str = "right"
) -> tuple[np.ndarray, np.ndarray]:
    """Pad a list of id sequences into one array and its mask.

    Args:
        sequences: iterable of 1-D int sequences (may differ in length; none empty).
        pad_id: id written into padding positions.
        max_len: pad or refuse to this length (``None``: the longest sequence).
        side: ``"right"`` (padding after the tokens) or ``"left"``.

    Returns:
        ``(ids, mask)``: ``(N, max_len)`` int32 and bool (True on real tokens).
    """
    seqs = [np.asarray(s, dtype=np.int32).reshape(-1) for s in sequences]
    if side not in ("right", "left"):
        raise DataError(f"side must be 'right' or 'left', got {side!r}")
    if not seqs:
        raise DataError("pad_sequences got no sequences")
    lengths = np.array([len(s) for s in seqs])
    if (lengths == 0).any():
        empty = int(np.argmin(lengths))
        raise DataError(f"sequence {empty} is empty; every sequence needs at least one token")
    width = int(lengths.max()) if max_len is None else int(max_len)
    if lengths.max() > width:
        raise DataError(
            f"sequence {int(np.argmax(lengths))} has {int(lengths.max())} tokens, more than "
            f"max_len={width}; raise max_len or truncate the inputs"
        )
    out = np.full((len(seqs), width), pad_id, dtype=np.int32)
    mask = np.zeros((len(seqs), width), dtype=bool)
    for i, s in enumerate(seqs):
        sl = slice(0, len(s)) if side == "right" else slice(width - len(s), width)
        out[i, sl] = s
        mask[i, sl] = True
    return out, mask


def padded_batches(
    sequences, batch_size: int, pad_id: int = 0, bucket: bool = True, seed: int | None = 0
):
    """Yield ``(ids, mask)`` batches of variable-length sequences.

    With ``bucket=True`` sequences of similar length share a batch (sorted by length,
    then the batches are shuffled with ``seed``), which wastes little on padding.
    """
    seqs = list(sequences)
    if batch_size < 1:
        raise DataError(f"batch_size must be a positive integer, got {batch_size!r}")
    order = np.argsort([len(s) for s in seqs], kind="stable") if bucket else np.arange(len(seqs))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if seed is not None and bucket:
        np.random.default_rng(seed).shuffle(batches)
    for idx in batches:
        yield pad_sequences([seqs[i] for i in idx], pad_id=pad_id)
