"""What every funnel stage may use of the funnel it is part of."""
from __future__ import annotations

from typing import Any

from alerting.config import AlertingConfig
from alerting.stages.state import FunnelState


class StageBase:
    """Attributes the stages share (set by :class:`alerting.funnel.Funnel`)."""

    config: AlertingConfig
    state: FunnelState
    #: groups the running tick changed (:attr:`alerting.stages.state.Step.groups`)
    ticked: dict[str, list[str]]
    #: members the running tick changed (:attr:`alerting.stages.state.Step.members`)
    changed: dict[str, set[str]]

    def start(self) -> None:
        """Derive this stage's in-memory indexes from :attr:`state` (on load)."""

    def _final(self, rid: str, outcome: Any, now: float, **kw: Any) -> Any:
        raise NotImplementedError
