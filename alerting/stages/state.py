"""The funnel's state as JSON dicts (``Funnel(config, state)`` resumes from it), one entity per
episode, group and receiver so :mod:`alerting.store` writes each changed one alone."""
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
    """One fingerprint's life (:func:`alerting.dedupe.decide`); times in epoch seconds."""

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
    """An aggregation group (:func:`alerting.group.new_group`); ``members`` by fingerprint."""

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
    """Per receiver: bucket, outbox, message in flight and last delivery result."""

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
    foreign: dict[str, dict[str, Any]]  # inhibition sources of other partitions, by fingerprint
    next_foreign_expiry: float | None
    reloaded_at: float  # the configuration reload the group timers were restarted at (epoch s)


def new_state() -> FunnelState:
    """An empty funnel state."""
    return {"version": STATE_VERSION, "seq": {"raw": 0, "message": 0, "silence": 0},
            "episodes": {}, "groups": {}, "foreign": {}, "silences": {}, "silenced": {}, "receivers": {},
            "counters": dict.fromkeys(COUNTERS, 0) | {"silenced_by": {}, "dedupe_reasons": {},
                                                      "inhibited_by_rule": {}},
            "ledger_out": []}


@dataclass
class Step:
    """One :meth:`alerting.funnel.Funnel.step`: ``messages`` to send, ``ledger`` entries made final,
    ``groups``: id -> member fps before the step of the groups it changed; ``members``: id -> fps
    whose member or episode it changed (the runner writes those, their episodes, the headers)."""

    messages: list[Message] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
