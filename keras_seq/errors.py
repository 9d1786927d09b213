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
