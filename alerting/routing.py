"""What the router decides once per alert and carries in the ``alerts.funnel``
command, so the funnel does not decide it again (issue 9.5).

A :class:`Decision` is the receiver (first matching route; matchers compiled
at config load, :meth:`alerting.config.RouteConfig.receiver_for`) and the
alert's identity (its fingerprint, :func:`alerting.dedupe.fingerprint` over
``dedupe.fingerprint_labels``). The router computes it right after
normalization; :meth:`alerting.funnel.Funnel.ingest` takes it as given and
computes it itself only when called without one (unit tests, replays of
commands written before this field existed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alerting.config import AlertingConfig
from alerting.dedupe import fingerprint
from alerting.model import Alert


@dataclass(frozen=True)
class Decision:
    """Receiver name and fingerprint (16 hex digits) of one normalized alert."""

    receiver: str
    fingerprint: str

    def to_dict(self) -> dict[str, str]:
        """The command fields: ``{"receiver", "fp"}``."""
        return {"receiver": self.receiver, "fp": self.fingerprint}

    @classmethod
    def from_command(cls, cmd: dict[str, Any]) -> "Decision | None":
        """The decision a command carries, or None (an older command)."""
        r, fp = cmd.get("receiver"), cmd.get("fp")
        if isinstance(r, str) and isinstance(fp, str):
            return cls(r, fp)
        return None


def decide(config: AlertingConfig, alert: Alert) -> Decision:
    """Receiver and identity of ``alert`` under ``config`` (pure)."""
    labels = alert.match_labels()
    return Decision(config.route.receiver_for(labels),
                    fingerprint(alert, config.dedupe.fingerprint_labels))
