"""The audit trail: who created, read, listed, cancelled and downloaded which task, when, from
where, and refusals. An :class:`Audit` is an event payload for the ``audit`` topic (keyed by
sysCode); its ``details`` go through :func:`redact`, as structlog records
(:func:`redact_processor`)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field, field_validator

from plait.clock import utcnow_iso
from plait.events import PAYLOADS, Payload

AuditAction = Literal["task.created", "task.read", "task.listed", "task.cancelled",
                      "task.downloaded", "auth.refused", "access.refused",
                      "schedule.created", "schedule.updated", "schedule.deleted",
                      "schedule.triggered", "schedule.backfilled", "schedule.skipped",
                      "schedule.paused"]
AuditOutcome = Literal["ok", "refused"]

#: Key fragments marking a secret (lower-case, ``-``/``_`` removed).
SECRET_KEY_PARTS = ("secret", "token", "signature", "password", "passwd", "authorization",
                    "cookie", "credential", "privatekey", "apikey")
SECRET_KEYS = frozenset({"sig", "pw", "pwd", "auth"})
REDACTED = "[redacted]"
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_secret_key(key: Any) -> bool:
    """True when a mapping key names a secret (``appSecret``, ``X-Plait-Signature``, ``sig``...)."""
    k = str(key).lower().replace("-", "").replace("_", "")
    return k in SECRET_KEYS or any(part in k for part in SECRET_KEY_PARTS)


def _scrub_url(value: str) -> str:
    try:
        parts = urlsplit(value)
    except ValueError:
        return value
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if is_secret_key(k) else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(value: Any) -> Any:
    """A copy of ``value`` safe to log: secret keys dropped (recursively), URL credentials and
    secret query parameters replaced by ``[redacted]``."""
    if isinstance(value, Mapping):
        return {k: redact(v) for k, v in value.items() if not is_secret_key(k)}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str) and _URL_RE.match(value):
        return _scrub_url(value)
    return value


def redact_processor(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor applying :func:`redact`; goes before the renderer."""
    return redact(event_dict)


class Audit(Payload):
    """``audit``: one security-relevant action (``task.created``...), ``outcome`` ``ok`` or
    ``refused`` (``reason``); ``sysCode``/``appKey`` None when authentication failed first."""

    TYPE: ClassVar[str] = "plait.audit.Audit.v1"
    action: AuditAction
    outcome: AuditOutcome = "ok"
    at: str = Field(default_factory=utcnow_iso)
    sysCode: str | None = None
    appKey: str | None = None
    userId: str | None = None
    taskId: str | None = None
    bizType: str | None = None
    fileName: str | None = None
    fileFormat: str | None = None
    rows: int | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=0)
    clientIp: str | None = None
    userAgent: str | None = Field(default=None, max_length=512)
    reason: str | None = Field(default=None, max_length=1000)
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("details", mode="after")
    @classmethod
    def _redacted(cls, value: dict[str, Any]) -> dict[str, Any]:
        return redact(value)

    @field_validator("userAgent", mode="before")
    @classmethod
    def _short_agent(cls, value: Any) -> Any:
        return value[:512] if isinstance(value, str) else value


PAYLOADS.setdefault(Audit.TYPE, Audit)
