"""One reader for every shape of ``alerts.funnel`` alert command (old ones stay readable): decided
(``alert`` with the API's or router's ``receiver``, ``fp``, ``route``; one carrying ``cfg``, the
API's :func:`alerting.routing.routing_version`, stands only when that is this worker's version,
else its first copy is routed afresh and further copies are dropped), undecided (routed here by
:func:`alerting.routing.decide`, one decision per route) and invalid (no ``alert``, a
``reason``). The funnel takes the result as given.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alerting.intake import repair_alert
from alerting.model import Alert
from alerting.routing import Decision, decide, routing_version


@dataclass(frozen=True)
class AlertCommand:
    """An alert command in one form: ``alert`` (None when ``rejected``, the reason),
    ``decisions`` ``[(raw id, decision)]`` in route order, ``received_at`` epoch s if known."""

    raw_id: str
    alert: Alert | None = None
    decisions: list[tuple[str, Decision]] = field(default_factory=list)
    received_at: float | None = None
    rejected: str | None = None

    @property
    def fingerprints(self) -> list[str]:
        """The episodes this command may touch."""
        return [d.fingerprint for _rid, d in self.decisions]


def routed(config: Any, alert: Alert, raw_id: str) -> list[tuple[str, Decision]]:
    """``[(raw id, decision)]`` of ``alert`` per route reached, further ones ``<raw_id>~<receiver>``
    (docs/alerting.md, "Routes"). Raises only on a forged alert."""
    ds = decide(config, alert)
    return [(raw_id if k == 0 else f"{raw_id}~{d.receiver}", d) for k, d in enumerate(ds)]


def origin(cmd: dict[str, Any]) -> tuple[Any, Any, int, int, str | None]:
    """``(raw partition, offset, index, copy, receiver)`` of a command, for
    :meth:`alerting.store.PartitionState.seen_raw`."""
    src = (cmd.get("src") or [None, None, 0])[:3]
    receiver = cmd.get("receiver") if isinstance(cmd.get("receiver"), str) else None
    return (*src, int(cmd.get("copy") or 0), receiver)  # type: ignore[return-value]


def decision_stands(config: Any, cmd: dict[str, Any]) -> bool:
    """Whether a decided command's decision is this worker's: it carries no
    ``cfg`` (the router decided, with this worker's configuration) or the
    ``cfg`` of ``config``."""
    cfg = cmd.get("cfg")
    return cfg is None or cfg == routing_version(config)


def read_alert_command(config: Any, cmd: dict[str, Any]) -> AlertCommand:
    """The :class:`AlertCommand` of one ``alert`` command (or an item of an ``alerts`` command) of
    any shape; never raises."""
    rid = cmd["id"]
    received = cmd.get("received_at")
    if not isinstance(received, (int, float)) or isinstance(received, bool):
        received = None
    if "alert" not in cmd:
        return AlertCommand(rid, rejected=str(cmd.get("reason") or "(alert): invalid"))
    try:
        alert = repair_alert(Alert.from_dict(cmd["alert"]))
    except Exception as e:  # a producer forged a normalized command
        return AlertCommand(rid, rejected=f"(alert): unreadable normalized alert: {e}")
    d = Decision.from_command(cmd)
    if d is not None and not decision_stands(config, cmd):
        if cmd.get("copy"):
            return AlertCommand(rid, alert, [], received)
        d = None  # the first copy: its id is the raw id, routed afresh below
    if d is not None:
        return AlertCommand(rid, alert, [(rid, d)], received)
    try:
        return AlertCommand(rid, alert, routed(config, alert, rid), received)
    except Exception as e:  # a forged alert
        return AlertCommand(rid, rejected=f"(alert): unreadable alert: {type(e).__name__}: {e}")
