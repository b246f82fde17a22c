"""The error tree every handler maps to an action (PITFALLS.md, house rules).

- ``RetryableError``: worth trying again (timeouts, connect errors, 5xx, 429);
  the handler retries with backoff, a bounded number of times.
- ``PermanentError``: retrying cannot help (4xx, a broken contract, a spec the
  data violates); the task ends FAILED with the message.
- ``PoisonError``: the event itself cannot be decoded; it goes to ``export.dlq``
  with the error and the original payload, and the partition moves on.
"""
from __future__ import annotations


class PlaitError(Exception):
    """Base of every error Plait raises on purpose."""


class RetryableError(PlaitError):
    """A transient failure; ``retry_after`` (seconds) when the peer said so."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(PlaitError):
    """A failure that ends the task FAILED with this message."""


class PoisonError(PlaitError):
    """An event that cannot be decoded; routed to the DLQ."""
