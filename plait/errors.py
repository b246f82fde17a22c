"""The one error tree of Plait: every error raised on purpose is a ``PlaitError``.

Branches, and who acts on them::

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

The API maps the tree to HTTP answers in one place
(``api.envelope.install_error_handlers``): ``status`` is the HTTP status and
:meth:`PlaitError.data` the envelope's ``data``. ``ConfigError`` is raised while
a process starts (the process does not start); workers never turn it into a
task failure. Worker errors (``Retryable``/``Permanent``/``Poison``) never
reach the API.
"""
from __future__ import annotations

from typing import Any


class PlaitError(Exception):
    """Base of every error Plait raises on purpose.

    Attributes:
        status: HTTP status the API answers when this error reaches it
            (class attribute; subclasses set their own).
        message: the text, safe to show to the caller and to log.
    """

    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def data(self) -> Any:
        """The ``data`` member of the error envelope (None by default)."""
        return None


# -- caller input --------------------------------------------------------------

class FieldError(PlaitError, ValueError):
    """Caller input that breaks a rule; the API answers 422.

    Raised by request validation at the edges (export spec, alerts, silences,
    query parameters) before anything is emitted.

    Attributes:
        field: where, as the caller spelt it: a dotted camelCase path
            (``documentConfig.fileName``, ``[1].labels.alertname``), or
            ``body`` for the whole body.
        rule: what is wrong, human-readable (``is required``).
        accepted: what would be accepted (``csv, xlsx, parquet or jsonl``),
            or None when the rule says it already.
        code: short machine-readable rule name (``required``, ``allowlist``,
            ``unknown``, ``spelling``, ``type``...).

    ``str(error)`` is ``"<field>: <rule>"`` plus ``" (accepted: ...)"``.
    Also a ``ValueError``, so pydantic validators may raise it.
    """

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
    """Several field errors found at once (request validation); 422 listing each.

    Attributes:
        errors: the :class:`FieldError` s, in input order; ``field``/``rule``
            are the first one's.
    """

    def __init__(self, errors: list[FieldError]) -> None:
        first = errors[0]
        super().__init__(first.field, first.rule, first.accepted, first.code)
        self.errors = errors
        self.message = "; ".join(str(e) for e in errors)
        self.args = (self.message,)

    def data(self) -> Any:
        return {"errors": [e.entry() for e in self.errors]}


# -- who is calling ------------------------------------------------------------

class AuthError(PlaitError):
    """Authentication failed: the request is unsigned, badly signed, stale,
    replayed, from an unknown appKey, or lacks a valid bearer token.

    Attributes:
        status: 401; 503 when the nonce store cannot be reached (the API fails
            closed rather than allow replays).
        message: safe to return and to log; never echoes a secret, signature
            or token.
    """

    status = 401

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


class Forbidden(AuthError):
    """A known, authenticated caller asked for something its registry entry
    does not allow (``alerts: ingest``, ``silences: manage``...); 403.
    The message names the allowance that is missing."""

    status = 403

    def __init__(self, message: str) -> None:
        super().__init__(message, status=403)


# -- resources -----------------------------------------------------------------

class NotFound(PlaitError):
    """No such resource, or one the caller may not see (answered alike so
    existence does not leak); 404."""

    status = 404


class Conflict(PlaitError):
    """The resource's state refuses the call (cancel of an ended task); 409.

    Attributes:
        details: the envelope's ``data`` (``{"status": "SUCCESS"}``), or None.
    """

    status = 409

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.details = details

    def data(self) -> Any:
        return self.details


class Unavailable(PlaitError):
    """A dependency (Kafka did not acknowledge, Redis did not answer) failed;
    the caller may retry; 503."""

    status = 503


# -- start-up ------------------------------------------------------------------

class ConfigError(PlaitError):
    """A configuration is invalid (alerting YAML, caller registry, settings);
    raised while a process starts, which then does not start. The message
    names the file and the key (``timing.group_wait: ...``), never a secret."""


# -- workers -------------------------------------------------------------------

class RetryableError(PlaitError):
    """Worker: a transient failure (timeouts, connect errors, 5xx, 429); the
    handler retries with backoff a bounded number of times.

    Attributes:
        retry_after: seconds the peer asked to wait, or None.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(PlaitError):
    """Worker: retrying cannot help (a 4xx from the data API, a broken
    contract, data that violates the spec); the task ends FAILED with this
    message."""


class PoisonError(PlaitError):
    """Worker: an event that cannot be decoded; it goes to the dead-letter
    topic with the error and the original payload, and the partition moves on."""
