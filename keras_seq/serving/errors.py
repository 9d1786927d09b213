"""The error a request can end in: an HTTP status and a one-line message.

The server answers every error as TF Serving does, ``{"error": "<message>"}`` with a 4xx
(or 5xx) status, so clients written for TF Serving handle them unchanged.
"""

from __future__ import annotations


class ServingError(Exception):
    """A request that cannot be answered; ``status`` is the HTTP status to send."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> ServingError:
    return ServingError(400, message)


def not_found(message: str) -> ServingError:
    return ServingError(404, message)
