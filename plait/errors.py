"""The one error tree of Plait: every error raised on purpose is a ``PlaitError``::

    PlaitError                       root; ``status`` = HTTP answer at the API edge (500)
    +-- FieldError                   caller input breaks a rule -> 422
    |   +-- plait.callers.NotAllowed     the spec asks for more than the caller's allowance
    |   +-- alerting.model.AlertRejected a raw alert cannot be taken in
    |   +-- alerting.silence.SilenceRefused a silence cannot be created
    +-- AuthError                    who is calling cannot be established -> 401 (503 fail-closed)
    |   +-- Forbidden                a known caller without the allowance -> 403
    |   +-- plait.tokens.DataTokenError    a data token is refused (business-side check)
    +-- NotFound                     no such task / silence / file (or not visible) -> 404
    +-- Conflict                     the resource is in a state that refuses the call -> 409
    +-- Unavailable                  a dependency (Kafka, Redis) did not answer -> 503
    +-- plait.quotas.QuotaExceeded   a caller's daily row quota is used up -> 429
    +-- ConfigError                  start-up: a settings/config/registry file is invalid
    |   +-- plait.callers.CallerConfigError
    +-- RetryableError               worker: transient, retried with backoff
    +-- PermanentError               worker: the task ends FAILED with the message
    +-- PoisonError                  worker: the event cannot be decoded -> dead-letter topic

``api.envelope.install_error_handlers`` maps it to HTTP: ``status`` and :meth:`PlaitError.data` (the
envelope's ``data``). Worker errors never reach the API."""
from __future__ import annotations

from typing import Any


class PlaitError(Exception):
    """Base of every error Plait raises on purpose; ``message`` is safe to show and log."""

    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def data(self) -> Any:
        """The ``data`` member of the error envelope (None by default)."""
        return None


class FieldError(PlaitError, ValueError):
    """Caller input that breaks a rule (422). ``field``: dotted camelCase path as the caller spelt
    it, or ``body``; ``rule``: what is wrong; ``accepted``: what would be, or None; ``code``:
    machine-readable rule name. A ``ValueError`` too, so pydantic validators may raise it."""

    status = 422

    def __init__(self, field: str, rule: str, accepted: str | None = None,
                 code: str = "invalid") -> None:
        text = f"{field}: {rule}" + (f" (accepted: {accepted})" if accepted else "")
        super().__init__(text)
        self.field = field
        self.rule = rule
        self.accepted = accepted
        self.code = code

    def entry(self) -> dict[str, Any]:
        """``{"field", "rule", "accepted", "code"}`` (``accepted`` omitted when None)."""
        out: dict[str, Any] = {"field": self.field, "rule": self.rule, "code": self.code}
        if self.accepted:
            out["accepted"] = self.accepted
        return out

    def data(self) -> Any:
        return {"errors": [self.entry()]}


class RequestInvalid(FieldError):
    """Several field errors at once (422 listing each, in input order)."""

    def __init__(self, errors: list[FieldError]) -> None:
        first = errors[0]
        super().__init__(first.field, first.rule, first.accepted, first.code)
        self.errors = errors
        self.message = "; ".join(str(e) for e in errors)
        self.args = (self.message,)

    def data(self) -> Any:
        return {"errors": [e.entry() for e in self.errors]}


class AuthError(PlaitError):
    """Authentication failed (401); 503 when the nonce store is unreachable (fail closed). Never
    echoes a secret."""

    status = 401

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


class Forbidden(AuthError):
    """A known caller asked for what its registry entry does not allow (403, naming the allowance).
    """

    status = 403

    def __init__(self, message: str) -> None:
        super().__init__(message, status=403)


class NotFound(PlaitError):
    """No such resource, or one the caller may not see (alike, so existence does not leak); 404."""

    status = 404


class Conflict(PlaitError):
    """The resource's state refuses the call (409); ``details`` is the envelope's ``data``."""

    status = 409

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.details = details

    def data(self) -> Any:
        return self.details


class Unavailable(PlaitError):
    """A dependency (Kafka, Redis) did not answer; the caller may retry; 503."""

    status = 503


class ConfigError(PlaitError):
    """An invalid configuration at start-up (the process does not start); names file and key."""


class RetryableError(PlaitError):
    """Worker: a transient failure, retried with backoff; ``retry_after`` seconds or None."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(PlaitError):
    """Worker: retrying cannot help; the task ends FAILED with this message."""


class PoisonError(PlaitError):
    """Worker: an undecodable event; it goes to the dead-letter topic and the partition moves on."""
