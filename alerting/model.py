"""The alert funnel's vocabulary (docs/alerting.md, "Steps"): every source is normalized into an
:class:`Alert`; everything converts to and from plain JSON (``to_dict`` / ``from_dict``) for
changelog-backed tables. Times are float epoch seconds (UTC) everywhere."""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from plait.errors import FieldError


class Severity(enum.IntEnum):
    """Ordered severities: ``info < warning < critical``."""

    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        """Lower-case name used on the wire (``"warning"``)."""
        return _SEVERITY_LABELS[self._value_]


#: Severity value -> wire label (hot path: the enum's ``name`` is a descriptor)
_SEVERITY_LABELS = {0: "info", 1: "warning", 2: "critical"}
#: wire label -> Severity, for :meth:`Alert.from_dict`
_SEVERITY_BY_LABEL = {"info": Severity.INFO, "warning": Severity.WARNING,
                      "critical": Severity.CRITICAL}


class Status(str, enum.Enum):
    """Alert status; Alertmanager's two values."""

    FIRING = "firing"
    RESOLVED = "resolved"


class Outcome(str, enum.Enum):
    """The fate of one raw alert in the ledger (exactly one each): ``delivered`` in message M,
    ``merged`` into M after waiting for a token, ``inhibited`` (``inhibited_by`` names the sources),
    ``silenced`` by S, ``deduplicated`` (see ``reason``), ``rejected`` (``reason`` names the field).
    """

    DELIVERED = "delivered"
    MERGED = "merged"
    DEDUPLICATED = "deduplicated"
    SILENCED = "silenced"
    INHIBITED = "inhibited"
    REJECTED = "rejected"


class AlertRejected(FieldError):
    """A raw alert that cannot be taken in: a 422 at the HTTP edge, a ``rejected`` ledger entry in
    the funnel. ``field``: dotted path as sent (``"[1].startsAt"``); ``problem``: what is wrong."""

    def __init__(self, field: str, problem: str, accepted: str | None = None,
                 code: str = "invalid") -> None:
        super().__init__(field, problem, accepted, code)
        self.problem = problem


@dataclass(frozen=True)
class Alert:
    """One normalized alert.

    ``rule`` is Alertmanager's ``alertname``; ``asset`` what it fired on (may be ``""``);
    ``labels`` identify, ``annotations`` describe; ``time`` (source observation), ``starts_at``,
    ``ends_at`` are epoch seconds (None: not said); ``source`` ``"native"``/``"alertmanager"``
    decides identity (:mod:`alerting.dedupe`); ``invalid_unicode``: strings intake repaired.
    """

    rule: str
    asset: str
    severity: Severity
    status: Status
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    time: float = 0.0
    starts_at: float | None = None
    ends_at: float | None = None
    generator_url: str = ""
    source: str = "native"
    invalid_unicode: int = 0

    def match_labels(self) -> dict[str, str]:
        """Labels matchers, fingerprints and grouping see: source labels plus ``rule``, ``asset``,
        ``severity``, ``alertname``. A native alert's ``rule``, ``asset`` and ``severity`` win; an
        Alertmanager alert's labels are seen as sent (``severity="P1"`` stays P1, one without
        ``severity`` has none: a matcher sees ``""``, as in Alertmanager), ``rule`` and ``asset``
        added only where it has no such label."""
        out = dict(self.labels)
        if self.rule:  # an Alertmanager alert may have no alertname
            out.setdefault("alertname", self.rule)
        if self.source == "alertmanager":
            out.setdefault("rule", self.rule)
            out.setdefault("asset", self.asset)
            return out
        out["rule"] = self.rule
        out["asset"] = self.asset
        out["severity"] = self.severity.label
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (severity and status as lower-case strings; maps copied), by hand:
        ``dataclasses.asdict`` deep-copies field by field."""
        return {"rule": self.rule, "asset": self.asset, "severity": self.severity.label,
                "status": self.status.value, "labels": dict(self.labels),
                "annotations": dict(self.annotations), "time": self.time,
                "starts_at": self.starts_at, "ends_at": self.ends_at,
                "generator_url": self.generator_url, "source": self.source,
                "invalid_unicode": self.invalid_unicode}

    def to_state(self) -> dict[str, Any]:
        """:meth:`to_dict` without default-valued fields: the form kept in funnel state and router
        commands (every open alert holds it); :meth:`from_dict` reads both."""
        d = {"rule": self.rule, "asset": self.asset, "severity": self.severity.label,
             "status": self.status.value, "time": self.time}
        if self.labels:
            d["labels"] = dict(self.labels)
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        if self.starts_at is not None:
            d["starts_at"] = self.starts_at
        if self.ends_at is not None:
            d["ends_at"] = self.ends_at
        if self.generator_url:
            d["generator_url"] = self.generator_url
        if self.source != "native":
            d["source"] = self.source
        if self.invalid_unicode:
            d["invalid_unicode"] = self.invalid_unicode
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Alert":
        """Inverse of :meth:`to_dict` / :meth:`to_state` (trusted: no validation). Raises what the
        dataclass raises for bad fields, KeyError/ValueError for an unknown severity or status."""
        sev, status = d.get("severity"), d.get("status")
        if (type(sev) is str and type(status) is str and sev in _SEVERITY_BY_LABEL
                and status in _STATUSES and _REQUIRED <= d.keys() <= _FIELDS):
            # the usual case: set the attributes directly, bypassing the frozen __init__
            obj = object.__new__(cls)
            attrs = obj.__dict__
            attrs.update(_DEFAULTS)  # the state form (:meth:`to_state`) leaves them out
            attrs.update(d)
            attrs["severity"] = _SEVERITY_BY_LABEL[sev]
            attrs["status"] = _STATUSES[status]
            attrs["labels"] = dict(d.get("labels") or {})
            attrs["annotations"] = dict(d.get("annotations") or {})
            return obj
        d = dict(d)
        d["severity"] = Severity[d["severity"].upper()]
        d["status"] = Status(d["status"])
        d["labels"] = dict(d.get("labels") or {})
        d["annotations"] = dict(d.get("annotations") or {})
        return cls(**d)


@dataclass(frozen=True)
class LedgerEntry:
    """The final outcome of one raw alert (topic ``alerts.ledger``): ``raw_id`` (``"r42"``),
    ``outcome``, ``time`` (epoch s), ``fingerprint`` ("" when rejected), ``message_id`` (delivered,
    merged), ``silence_id``, ``reason`` (dedupe reason or rejection text), ``inhibited_by`` (source
    fingerprints, Alertmanager's ``inhibitedBy``)."""

    raw_id: str
    outcome: str
    time: float
    fingerprint: str = ""
    message_id: str | None = None
    silence_id: str | None = None
    reason: str = ""
    inhibited_by: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (``inhibited_by`` copied)."""
        return {"raw_id": self.raw_id, "outcome": self.outcome, "time": self.time,
                "fingerprint": self.fingerprint, "message_id": self.message_id,
                "silence_id": self.silence_id, "reason": self.reason,
                "inhibited_by": list(self.inhibited_by) if self.inhibited_by is not None else None}


@dataclass(frozen=True)
class Message:
    """One webhook message due to one receiver.

    ``idempotency_key`` is stable across retries; ``attempt`` counts from 1; ``created_at`` epoch
    s; ``sections``: one per group (part), keys of :func:`alerting.group.build_sections`;
    ``merged_groups``/``merged_alerts``: sections merged in after waiting for a token;
    ``alert_count`` at most the batch size (but a lone part); ``traceparent``: the opening
    decision, parent of the delivery spans; ``links``: other traces (at most
    ``plait.tracing.MAX_LINKS``, docs/alerting.md, "Traces").
    """

    id: str
    receiver: str
    idempotency_key: str
    attempt: int
    created_at: float
    sections: list[dict[str, Any]]
    merged_groups: int = 0
    merged_alerts: int = 0
    alert_count: int = 0
    traceparent: str | None = None
    links: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data; ``sections`` is the message's own list (already copied out of the
        state): do not mutate it."""
        return {"id": self.id, "receiver": self.receiver,
                "idempotency_key": self.idempotency_key, "attempt": self.attempt,
                "created_at": self.created_at, "sections": self.sections,
                "merged_groups": self.merged_groups, "merged_alerts": self.merged_alerts,
                "alert_count": self.alert_count, "traceparent": self.traceparent,
                "links": list(self.links)}

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert view listed in the message, in order."""
        return [a for s in self.sections for a in s["alerts"]]


_FIELDS = frozenset(f.name for f in dataclasses.fields(Alert))
_REQUIRED = frozenset(f.name for f in dataclasses.fields(Alert)
                      if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
_STATUSES = {s.value: s for s in Status}
#: fields with a plain default (labels and annotations are set apart)
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Alert)
             if f.default is not dataclasses.MISSING}
