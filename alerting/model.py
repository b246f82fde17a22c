"""The one vocabulary of the alert funnel (docs/alerting.md, "Steps").

Every source (native JSON, Alertmanager / Prometheus) is normalized into an
:class:`Alert`: rule, asset, severity, status, labels, annotations, time.
Everything here converts to and from plain JSON data (``to_dict`` /
``from_dict``) so funnel state can live in changelog-backed Faust tables.

Times are float seconds since the Unix epoch (UTC) everywhere.
"""
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


#: Severity value -> its wire label (``Severity.label``: a hot path; the
#: enum's ``name`` is a descriptor, lower-cased at each call)
_SEVERITY_LABELS = {0: "info", 1: "warning", 2: "critical"}
#: wire label -> Severity, for :meth:`Alert.from_dict`
_SEVERITY_BY_LABEL = {"info": Severity.INFO, "warning": Severity.WARNING,
                      "critical": Severity.CRITICAL}


class Status(str, enum.Enum):
    """Alert status; Alertmanager's two values."""

    FIRING = "firing"
    RESOLVED = "resolved"


class Outcome(str, enum.Enum):
    """The fate of one raw alert in the ledger (exactly one per raw alert).

    ``delivered``: carried by webhook message M that the receiver accepted;
    ``inhibited``: muted by a firing source alert of an ``inhibit_rules``
    rule (``inhibited_by`` names the source fingerprints);
    ``merged``: its group waited for a token and was merged into message M,
    which the receiver accepted; ``deduplicated``: a repeat inside the cooldown,
    a de-escalation, a resolve repeat, or a suppressed transient (see
    ``reason``); ``silenced``: hidden by silence S; ``rejected``: failed
    normalization (``reason`` names the field).
    """

    DELIVERED = "delivered"
    MERGED = "merged"
    DEDUPLICATED = "deduplicated"
    SILENCED = "silenced"
    INHIBITED = "inhibited"
    REJECTED = "rejected"


class AlertRejected(FieldError):
    """A raw alert that cannot be taken in (``alerting.intake``): at the HTTP
    edge a 422 naming the field; inside the funnel a ``rejected`` ledger entry.

    Attributes:
        field: dotted path of the offending field as the sender spelt it
            (``"labels.alertname"``, ``"[1].startsAt"``, ``"body"``).
        problem: what is wrong (same as ``rule``).
    """

    def __init__(self, field: str, problem: str, accepted: str | None = None,
                 code: str = "invalid") -> None:
        super().__init__(field, problem, accepted, code)
        self.problem = problem


@dataclass(frozen=True)
class Alert:
    """One normalized alert.

    Attributes:
        rule: what fired (Alertmanager ``alertname``).
        asset: what it fired on (host, instance, service...); may be ``""``.
        severity: :class:`Severity`.
        status: :class:`Status`.
        labels: identifying labels (strings), as sent by the source.
        annotations: descriptive text (summary, description, runbook...).
        time: when the source observed this state, epoch seconds.
        starts_at: when the problem began (Alertmanager ``startsAt``), epoch
            seconds, or None when the source did not say.
        ends_at: when it ended (``endsAt``), epoch seconds, or None.
        generator_url: link back to the source (``generatorURL``).
        source: ``"native"`` or ``"alertmanager"`` (decides identity, see
            :mod:`alerting.dedupe`).
        invalid_unicode: how many of its strings held invalid Unicode (lone
            surrogates) that intake replaced by U+FFFD; 0 for clean input.
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
        """Labels that matchers, fingerprints and grouping see: the source
        labels plus ``rule``, ``asset``, ``severity`` and ``alertname`` (the
        vocabulary wins over a source label of the same name). An
        Alertmanager alert without a ``severity`` label has none here
        either (matchers see ``""``, as in Alertmanager), though it is
        handled at the default severity."""
        out = dict(self.labels)
        if self.rule:  # an Alertmanager alert may have no alertname
            out.setdefault("alertname", self.rule)
        out["rule"] = self.rule
        out["asset"] = self.asset
        if self.source != "alertmanager" or "severity" in out:
            out["severity"] = self.severity.label
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (severity and status as lower-case strings; label
        and annotation maps copied). Written by hand: ``dataclasses.asdict``
        deep-copies field by field and was a tenth of the funnel's time."""
        return {"rule": self.rule, "asset": self.asset, "severity": self.severity.label,
                "status": self.status.value, "labels": dict(self.labels),
                "annotations": dict(self.annotations), "time": self.time,
                "starts_at": self.starts_at, "ends_at": self.ends_at,
                "generator_url": self.generator_url, "source": self.source,
                "invalid_unicode": self.invalid_unicode}

    def to_state(self) -> dict[str, Any]:
        """:meth:`to_dict` without the fields that hold their default (no
        labels or annotations, no ``starts_at`` / ``ends_at``, no
        ``generator_url``, source ``native``, clean Unicode): the form kept
        in funnel state (episodes, group members), where every open alert
        holds it in memory and every change writes it to the changelog, and
        carried by router commands on ``alerts.funnel``. :meth:`from_dict`
        reads both forms."""
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
        """Inverse of :meth:`to_dict` and :meth:`to_state` (trusted data: no validation).

        Raises what the dataclass raises for missing or unknown fields, and
        KeyError / ValueError / AttributeError for an unknown severity or
        status (as ``Severity[...]`` and ``Status(...)`` do)."""
        sev, status = d.get("severity"), d.get("status")
        if (type(sev) is str and type(status) is str and sev in _SEVERITY_BY_LABEL
                and status in _STATUSES and _REQUIRED <= d.keys() <= _FIELDS):
            # the usual case (values this module wrote), ~4x faster than the
            # frozen dataclass's __init__: the same attributes, set directly
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
    """The final outcome of one raw alert (topic ``alerts.ledger``).

    Attributes:
        raw_id: id the funnel gave the raw alert on ingest (``"r42"``).
        outcome: :class:`Outcome` value.
        time: when the outcome became final, epoch seconds.
        fingerprint: the alert's fingerprint ("" when rejected).
        message_id: message M for ``delivered`` / ``merged``.
        silence_id: silence S for ``silenced``.
        reason: detail (``"repeat"``, ``"deescalation"``, ``"resolve_repeat"``,
            ``"transient"``, or the rejection text naming the field).
        inhibited_by: for ``inhibited``, the fingerprints of the firing
            source alerts that muted it (Alertmanager's ``inhibitedBy``).
    """

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
    """One webhook message due to be sent to one receiver.

    Attributes:
        id: message id, unique per funnel (``"oncall-7"``).
        receiver: receiver name from the config.
        idempotency_key: stable across every retry of this message.
        attempt: 1 for the first HTTP attempt, 2 for the first retry...
        created_at: when the message was built, epoch seconds.
        sections: one dict per group (or group part) carried; see
            :func:`alerting.group.build_sections` for the keys.
        merged_groups: how many sections waited for a token and were merged in.
        merged_alerts: how many listed alerts those merged sections carry.
        alert_count: listed alerts in the message (never above batch size,
            except a lone section which is already a numbered part).
        traceparent: W3C traceparent of the funnel decision whose alert
            opened the message (its first group's): the parent of every
            delivery attempt's span; None without tracing.
        links: traceparents of other traces merged into the message (other
            groups, later alerts), at most ``plait.tracing.MAX_LINKS``: the
            delivery spans' links (docs/alerting.md, "Traces").
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
        """Plain JSON data. ``sections`` is the message's own list, not a
        copy (:func:`alerting.outbox.to_message` already copied it out of the
        state; a deep copy of a 1,000-alert message cost ~0.3 s): do not
        mutate it."""
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
