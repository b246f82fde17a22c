"""The schedule resource as callers send it (camelCase JSON, RFC 3339 times,
durations in seconds; unknown fields refused, 422), and its translation into
``schedules.core`` types."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from plait.spec import ExportSpec
from schedules.core import OVERLAPS, Policy, Trigger, cron_problem


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _ms(dt: datetime | None) -> int | None:
    return None if dt is None else int(dt.timestamp() * 1000)


def rfc3339(ms: int | None) -> str | None:
    """Epoch ms -> RFC 3339 UTC with milliseconds (``...Z``)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


class TriggerIn(_Model):
    """When slots are: an ``interval`` grid (seconds, from ``anchor``,
    default the schedule's creation time) or a ``cron`` in ``timeZone``."""

    interval: float | None = Field(default=None, ge=0.1, le=366 * 86400)
    anchor: AwareDatetime | None = None
    cron: str | None = Field(default=None, max_length=256)
    timeZone: str = "UTC"
    jitter: float = Field(default=0.0, ge=0, le=0.9)
    startAt: AwareDatetime | None = None
    endAt: AwareDatetime | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "TriggerIn":
        if (self.interval is None) == (self.cron is None):
            raise ValueError("give exactly one of interval (seconds) or cron")
        if self.cron is not None and (problem := cron_problem(self.cron)):
            raise ValueError(f"cron: {problem}")
        try:
            ZoneInfo(self.timeZone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timeZone: unknown IANA time zone {self.timeZone!r}") from None
        if self.startAt and self.endAt and self.endAt <= self.startAt:
            raise ValueError("endAt: must be after startAt")
        return self

    def core(self, created_ms: int) -> Trigger:
        return Trigger(interval_ms=None if self.interval is None else int(self.interval * 1000),
                       anchor_ms=_ms(self.anchor) if self.anchor else created_ms,
                       cron=self.cron, time_zone=self.timeZone, jitter=self.jitter,
                       start_at_ms=_ms(self.startAt), end_at_ms=_ms(self.endAt))


class PolicyIn(_Model):
    """Catch-up (``grace`` seconds, ``maxCatchup``), ``overlap`` and
    ``pauseOnFailure`` (see ``schedules.core``)."""

    grace: float = Field(default=60, ge=0, le=366 * 86400)
    maxCatchup: int = Field(default=1, ge=0, le=1000)
    overlap: Literal["skip", "bufferOne", "allow", "cancelPrevious"] = "skip"
    pauseOnFailure: int = Field(default=0, ge=0, le=1000)

    def core(self) -> Policy:
        return Policy(grace_ms=int(self.grace * 1000), max_catchup=self.maxCatchup,
                      overlap=self.overlap, pause_on_failure=self.pauseOnFailure)


assert set(OVERLAPS) == {"skip", "bufferOne", "allow", "cancelPrevious"}


class ProbeTarget(_Model):
    """One target: ``http`` URL (GET, ``expectStatus``) or ``tcp`` ``host:port``;
    ``timeout`` seconds. The alert's asset is the URL or ``host:port``."""

    http: str | None = Field(default=None, max_length=2048)
    tcp: str | None = Field(default=None, max_length=300)
    expectStatus: int = Field(default=200, ge=100, le=599)
    timeout: float = Field(default=2.0, gt=0, le=10)

    @model_validator(mode="after")
    def _one(self) -> "ProbeTarget":
        if (self.http is None) == (self.tcp is None):
            raise ValueError("give exactly one of http (URL) or tcp (host:port)")
        if self.http is not None and not self.http.startswith(("http://", "https://")):
            raise ValueError("http: must be an http:// or https:// URL")
        if self.tcp is not None:
            host, _, port = self.tcp.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError("tcp: must be host:port")
        return self

    @property
    def asset(self) -> str:
        return self.http or self.tcp or ""


class ProbeAction(_Model):
    """Check ``targets`` each slot; raise ``TargetDown`` alerts of ``severity`` on change."""

    targets: list[ProbeTarget] = Field(min_length=1, max_length=100)
    severity: Literal["info", "warning", "critical"] = "critical"


class ActionIn(_Model):
    """Exactly one of ``export`` (an export spec) or ``probe``."""

    export: ExportSpec | None = None
    probe: ProbeAction | None = None

    @model_validator(mode="after")
    def _one(self) -> "ActionIn":
        if (self.export is None) == (self.probe is None):
            raise ValueError("give exactly one of export or probe")
        return self


class ScheduleIn(_Model):
    """``POST /schedules`` body. ``sysCode``: the owner; with a caller
    registry it is the signed caller's (and may be omitted), in open mode it
    defaults to the export's ``sysCode`` (a probe must name it)."""

    name: str = Field(min_length=1, max_length=128)
    sysCode: str | None = Field(default=None, min_length=1, max_length=64,
                                pattern=r"^[A-Za-z0-9_.-]+$")
    trigger: TriggerIn
    action: ActionIn
    policy: PolicyIn = Field(default_factory=PolicyIn)
    paused: bool = False
    note: str | None = Field(default=None, max_length=1024)


class SchedulePatch(_Model):
    """``PATCH /schedules/{id}`` body: any of the fields, replaced whole;
    ``note: null`` clears the note, null for another field is refused (422)."""

    name: str | None = Field(default=None, min_length=1, max_length=128)
    trigger: TriggerIn | None = None
    action: ActionIn | None = None
    policy: PolicyIn | None = None
    paused: bool | None = None
    note: str | None = Field(default=None, max_length=1024)

    @model_validator(mode="after")
    def _no_null(self) -> "SchedulePatch":
        for name in ("name", "trigger", "action", "policy", "paused"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name}: must not be null (leave it out to keep it)")
        return self


class BackfillIn(_Model):
    """``POST /schedules/{id}/backfill``: run the slots in ``[start, end]``."""

    start: AwareDatetime
    end: AwareDatetime

    @model_validator(mode="after")
    def _order(self) -> "BackfillIn":
        if self.end < self.start:
            raise ValueError("end: must not be before start")
        return self
