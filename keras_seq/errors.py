"""Errors that keras-seq raises for bad input.

Every message says what was received, what was expected and how to fix it. The CLI
prints these without a traceback (``--debug`` shows it).
"""


class KerasSeqError(ValueError):
    """Bad input or state that the user can fix; the message says how."""


class DataError(KerasSeqError):
    """A corpus, split or token stream that cannot be used as given."""


class NotComparableError(KerasSeqError):
    """Two results measured on different tokens, vocabularies or splits."""


class RunWriteError(KerasSeqError, OSError):
    """A file keras-seq had to write could not be (a full disk, a read-only folder…).

    The message names the file and the reason; whatever was saved before is untouched.

    >>> import errno
    >>> err = RunWriteError("runs/a/state.json", OSError(errno.ENOSPC, "No space left on device"))
    >>> str(err).split(" (")[0]
    'cannot write runs/a/state.json: No space left on device'
    """

    def __init__(self, path, err: OSError):
        self.path, self.reason = str(path), err.strerror or str(err)
        super().__init__(f"cannot write {self.path}: {self.reason} (nothing saved before was "
                         "changed; free space or fix the permissions and run again — a "
                         "training run with --resume)")
