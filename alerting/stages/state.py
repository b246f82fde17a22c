"""The funnel's declared state: plain JSON data (changelog tables,
:mod:`alerting.store`), one entity per episode, group and receiver, so a
store can write each entity that changed on its own.

The types below are the shapes; the values stay dicts so that a state is
its own JSON image (``Funnel(config, state)`` resumes from it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from alerting.model import LedgerEntry, Message

STATE_VERSION = 1
COUNTERS = ("received", "delivered", "merged", "deduplicated", "silenced", "inhibited", "rejected",
            "deescalations", "transient_suppressed", "messages_delivered", "messages_superseded",
            "attempts", "attempts_failed", "attempts_lost", "http_429", "http_5xx",
            "client_errors", "network_errors", "rate_limited_ticks", "invalid_unicode")


class Episode(TypedDict, total=False):
    """One alert identity's life (:func:`alerting.dedupe.decide`). Times are
    epoch seconds; ``route``/``receiver`` only when not the root's."""

    fp: str
    status: str  # "firing" | "resolved"
    alert: dict[str, Any]  # Alert.to_state()
    severity: int
    seen_severity: int
    started_at: float
    last_seen: float
    last_pass_at: float
    resolved_at: float | None
    expires_at: float
    notified: bool
    group: str | None
    silenced_by: str | None
    inhibited_by: list[str] | None  # source fingerprints
    route: str
    receiver: str
    auto_resolved: bool


class Group(TypedDict, total=False):
    """An aggregation group (:func:`alerting.group.new_group`); ``members``
    by fingerprint; ``route``/``timing`` only below the root route."""

    id: str
    receiver: str
    labels: dict[str, str]
    opened_at: float
    last_sent_at: float | None
    news_at: float | None
    notified_at: float | None
    members: dict[str, dict[str, Any]]
    route: str
    timing: tuple[float, float, float]  # group_wait, group_interval, repeat_interval


class ReceiverState(TypedDict, total=False):
    """Per receiver: token bucket, queued sections, the message in flight
    (:func:`alerting.outbox.new_inflight`) and the last delivery result."""

    bucket: dict[str, float] | None  # {"tokens", "updated_at"}
    outbox: list[dict[str, Any]]
    inflight: dict[str, Any] | None
    last: dict[str, Any]


class FunnelState(TypedDict, total=False):
    """The whole state of one funnel (one ``alerts.funnel`` partition)."""

    version: int
    seq: dict[str, int]  # raw, message, silence
    episodes: dict[str, Episode]
    groups: dict[str, Group]
    silences: dict[str, dict[str, Any]]  # Silence.to_dict() by id
    silenced: dict[str, str]  # fp -> silence id, derived from the episodes
    receivers: dict[str, ReceiverState]
    counters: dict[str, Any]
    ledger_out: list[dict[str, Any]]  # entries made final by a tick, not drained yet
    next_expiry: float | None


def new_state() -> FunnelState:
    """An empty funnel state."""
    return {"version": STATE_VERSION, "seq": {"raw": 0, "message": 0, "silence": 0},
            "episodes": {}, "groups": {}, "silences": {}, "silenced": {}, "receivers": {},
            "counters": dict.fromkeys(COUNTERS, 0) | {"silenced_by": {}, "dedupe_reasons": {},
                                                      "inhibited_by_rule": {}},
            "ledger_out": []}


@dataclass
class Step:
    """What one :meth:`alerting.funnel.Funnel.step` did.

    Attributes:
        messages: messages to send now (at most one per receiver).
        ledger: entries the step made final (suppressed transients, alerts
            resolved while muted).
        groups: group id -> its member fingerprints before the step, for
            every group the step evaluated, released alerts into, ended
            alerts of or whose message left.
        members: group id -> fingerprints whose member (set or removed) or
            episode the step changed, for the same groups; the runner writes
            these, their episodes and the groups' headers.
    """

    messages: list[Message] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
