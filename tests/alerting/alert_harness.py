"""Fixture factories for the alert funnel tests: the common configuration of
docs/alerting.md ("The alerting cases"), native events, and a fake-clock driver that ticks
the funnel every second, plays a scripted webhook, and checks the ledger
invariant after every tick."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from alerting.config import AlertingConfig, parse_config
from alerting.funnel import Funnel
from alerting.model import LedgerEntry, Message

#: What the fake webhook answers: None = 200, else (status or None, retry_after)
#: or (status, retry_after, maybe_delivered).
Answer = tuple | None


def case_config(**overrides: Any) -> AlertingConfig:
    """The common configuration of the cases; ``overrides`` replace whole
    sections (``timing={...}``) or receiver fields (``receiver={...}``)."""
    data: dict[str, Any] = {
        "receivers": [dict({"name": "oncall", "url": "http://127.0.0.1:9/hook", "format": "native",
                            "secret": "s3cret", "bucket": {"burst": 3, "refill_interval": 10}},
                           **overrides.pop("receiver", {}))],
        "route": {"receiver": "oncall"},
        "grouping": {"group_by": ["rule"], "batch_size": 50},
        # the cases hold alerts firing without re-sending them: resolve_timeout
        # (default 5 m) is set past every case's end (tests/alerting/test_resolution.py
        # covers it)
        "timing": {"group_wait": 30, "group_interval": 30, "repeat_interval": 300,
                   "resolve_timeout": 86400},
        "dedupe": {"fingerprint_labels": ["rule", "asset"], "cooldown": 300},
        "delivery": {"timeout": 10, "backoff_initial": 1, "backoff_max": 60},
    }
    for key, value in overrides.items():
        data[key] = dict(data.get(key, {}), **value) if isinstance(value, dict) else value
    return parse_config(data)


def ev(rule: str, asset: str, severity: str = "warning", status: str = "firing",
       **extra: Any) -> dict[str, Any]:
    """A native raw alert."""
    return dict({"rule": rule, "asset": asset, "severity": severity, "status": status}, **extra)


@dataclass
class Sent:
    """One HTTP attempt the fake webhook saw."""

    at: float
    message: Message
    answer: Answer


@dataclass
class Run:
    """Drives one funnel with a fake clock (see :func:`run`)."""

    funnel: Funnel
    webhook: Callable[[Message, float], Answer] = lambda m, t: None
    restart_every_tick: bool = False
    attempts: list[Sent] = field(default_factory=list)
    delivered: list[tuple[float, Message]] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)

    def at(self, t: float, raw: Any) -> None:
        """Ingest ``raw`` at ``t``."""
        self.ledger += self.funnel.ingest(raw, t)

    def tick(self, t: float) -> None:
        """Tick at ``t``, answer every message with the scripted webhook,
        then check the ledger invariant."""
        for msg in self.funnel.tick(t):
            answer = self.webhook(msg, t)
            self.attempts.append(Sent(t, msg, answer))
            if answer is None:
                self.ledger += self.funnel.delivered(msg.id, t)
                self.delivered.append((t, msg))
            else:
                status, retry_after, *maybe = answer
                self.funnel.delivery_failed(msg.id, t, status=status, retry_after=retry_after,
                                            maybe_delivered=bool(maybe and maybe[0]))
        self.ledger += self.funnel.drain_ledger()
        self.check_invariant()
        if self.restart_every_tick:  # state must survive a JSON round trip (changelog table)
            state = json.loads(json.dumps(self.funnel.state))
            self.funnel = Funnel(self.funnel.config, state)

    def check_invariant(self) -> None:
        """received = delivered + deduplicated + silenced + inhibited + merged +
        rejected + pending, and every final raw alert has exactly one ledger entry."""
        c = self.funnel.counters()
        total = (c["delivered"] + c["deduplicated"] + c["silenced"] + c["inhibited"] + c["merged"]
                 + c["rejected"])
        assert c["received"] == total + c["pending"], c
        ids = [e.raw_id for e in self.ledger]
        assert len(ids) == len(set(ids)), "a raw alert has two outcomes"
        assert len(ids) == total, (len(ids), total)

    def messages(self) -> list[tuple[float, Message]]:
        """Delivered messages with their delivery time."""
        return list(self.delivered)

    def outcomes(self) -> dict[str, int]:
        """Ledger entries by outcome."""
        out: dict[str, int] = {}
        for e in self.ledger:
            out[e.outcome] = out.get(e.outcome, 0) + 1
        return out


def run(config: AlertingConfig, events: list[tuple[float, Any]], until: float,
        webhook: Callable[[Message, float], Answer] | None = None,
        restart_every_tick: bool = False, setup: Callable[[Funnel], None] | None = None) -> Run:
    """Play ``events`` ``(t, raw)`` in time order and tick every whole second
    from 0 to ``until``; at equal times events come before the tick."""
    funnel = Funnel(config)
    if setup is not None:
        setup(funnel)
    r = Run(funnel, webhook or (lambda m, t: None), restart_every_tick)
    pending = sorted(events, key=lambda e: e[0])
    i = 0
    for second in range(0, int(until) + 1):
        while i < len(pending) and pending[i][0] <= second:
            r.at(pending[i][0], pending[i][1])
            i += 1
        r.tick(float(second))
    return r


def assets(msg: Message, **where: Any) -> list[str]:
    """Assets listed in ``msg`` whose view fields equal ``where``."""
    return [a["asset"] for a in msg.alerts() if all(a.get(k) == v for k, v in where.items())]
