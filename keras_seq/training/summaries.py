"""TensorBoard summaries from any Keras backend: values go through numpy, TensorFlow writes.

TensorFlow is the TensorBoard writer on every backend, and the ``tensorboard`` package (the
``tensorboard`` extra) implements its ``tf.summary.scalar``/``histogram``/``text``/``image``
(TF 2.21 raises ``TBNotInstalledError`` without it). Where either is missing a
:class:`SummaryWriter` writes nothing (the trainer prints one note about it,
:func:`tensorboard_missing`), so task callbacks need no checks of their own.

>>> writer = SummaryWriter(None)   # no directory: a writer that writes nothing
>>> writer.enabled
False
>>> writer.scalar("loss", 1.0, step=1)
"""

from __future__ import annotations

import contextlib

from keras_seq.backend import tensorflow_available, to_numpy
from keras_seq.errors import RunWriteError
from keras_seq.extras import missing

__all__ = ["SummaryWriter", "tensorboard_missing", "to_numpy", "write_errors_named"]

_REASONS = ("No space left on device", "Read-only file system", "Permission denied",
            "Disk quota exceeded", "File too large")


def tensorboard_missing() -> str | None:
    """Why no TensorBoard logs can be written here (``None``: they can)."""
    if not tensorflow_available():
        return ("TensorFlow is not installed, so no TensorBoard logs are written (metrics.csv "
                "and metrics.json are); pip install tensorflow to get them")
    note = missing("tensorboard", "tensorboard", "TensorBoard logging")
    return note and f"no TensorBoard logs are written (metrics.csv and metrics.json are): {note}"


@contextlib.contextmanager
def write_errors_named(log_dir):
    """Turn TensorFlow's failure to write an event file (its ``OpError``, raised on a full
    disk or a read-only folder) into a :class:`~keras_seq.errors.RunWriteError` naming
    ``log_dir``, as every other write of a run does."""
    try:
        yield
    except Exception as err:
        if not tensorflow_available():
            raise
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        if not isinstance(err, tf.errors.OpError):
            raise
        message = str(err)
        reason = next((r for r in _REASONS if r in message), message.strip().splitlines()[0])
        raise RunWriteError(log_dir, OSError(reason)) from err


class SummaryWriter:
    """A TensorBoard event-file writer for ``log_dir`` (``None``, no TensorFlow or no
    ``tensorboard`` package: off)."""

    def __init__(self, log_dir):
        self._writer, self.log_dir = None, log_dir
        if log_dir is not None and tensorboard_missing() is None:
            # lazy: loads TensorFlow only when this runs
            import tensorflow as tf

            with write_errors_named(log_dir):
                self._writer = tf.summary.create_file_writer(str(log_dir))

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def _write(self, step: int, fn) -> None:
        if self._writer is None:
            return
        with write_errors_named(self.log_dir), self._writer.as_default(step=int(step)):
            fn()

    def scalar(self, name: str, value, step: int) -> None:
        self._write(step, lambda: _tf().summary.scalar(name, float(to_numpy(value))))

    def text(self, name: str, text: str, step: int) -> None:
        self._write(step, lambda: _tf().summary.text(name, _tf().constant(text)))

    def histogram(self, name: str, values, step: int) -> None:
        self._write(step, lambda: _tf().summary.histogram(name, to_numpy(values)))

    def image_png(self, name: str, png: bytes, step: int) -> None:
        """One PNG image (as written by ``matplotlib``'s ``savefig(format="png")``)."""
        def write():
            tf = _tf()
            tf.summary.image(name, tf.image.decode_png(png, channels=4)[None])
        self._write(step, write)

    def flush(self) -> None:
        if self._writer is not None:
            with write_errors_named(self.log_dir):
                self._writer.flush()


def _tf():
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    return tf
