"""Alert funnel configuration: one YAML file, validated with pydantic.

Shape (every duration is seconds, or a Prometheus-style string ``"30s"``,
``"5m"``, ``"4h"``, ``"1d"``)::

    receivers:
      - name: oncall
        url: https://hooks.example.com/plait
        format: native            # native | alertmanager
        secret: change-me         # HMAC-SHA256 key of the signature header
        bucket: {burst: 3, refill_interval: 10s}
    route:
      receiver: oncall            # default receiver
      routes:                     # first match wins (optional)
        - {matchers: ['team="db"'], receiver: dba}
    grouping: {group_by: [rule], batch_size: 50}
    timing: {group_wait: 30s, group_interval: 30s, repeat_interval: 5m}
    dedupe: {fingerprint_labels: [rule, asset], cooldown: 5m, suppress_transient: false}
    delivery: {timeout: 10s, backoff_initial: 1s, backoff_max: 60s}

Names follow Alertmanager's configuration (``group_by``, ``group_wait``,
``group_interval``, ``repeat_interval``). Errors raise :class:`ConfigError`
whose text names the offending key (``timing.group_wait: ...``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError,
                      field_validator, model_validator)

from plait.errors import ConfigError  # start-up branch; importable from here too

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like ``"90"``, ``"30s"``, ``"5m"``.

    Raises:
        ValueError: not a non-negative number or duration string.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration (seconds or '30s', '5m', '4h')")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNIT[m.group(2)]
    raise ValueError(f"expected a duration (seconds or '30s', '5m', '4h'), got {value!r}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: A float number of seconds that also accepts "30s", "5m", "4h", "1d".
Seconds = Annotated[float, BeforeValidator(parse_duration)]


class BucketConfig(_Model):
    """Token bucket of one receiver: ``burst`` tokens at most, one new token
    every ``refill_interval`` seconds."""

    burst: int = Field(default=3, ge=1)
    refill_interval: Seconds = Field(default=10.0, gt=0)


class ReceiverConfig(_Model):
    """A webhook receiver: where messages go and how they look."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    url: str = Field(min_length=1)
    format: Literal["native", "alertmanager"] = "native"
    secret: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    bucket: BucketConfig = Field(default_factory=BucketConfig)

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v


class SubRoute(_Model):
    """Alerts matching every matcher (``name="v"``, ``!=``, ``=~``, ``!~``) go to ``receiver``."""

    matchers: list[str] = Field(min_length=1)
    receiver: str

    _compiled: tuple = PrivateAttr(default=())

    @field_validator("matchers")
    @classmethod
    def _parse(cls, v: list[str]) -> list[str]:
        from alerting.silence import parse_matcher  # one matcher grammar everywhere
        for text in v:
            parse_matcher(text)
        return v

    def model_post_init(self, _context: Any) -> None:
        """Compile the matchers once, at config load (issue 9.5: never per alert)."""
        from alerting.silence import parse_matcher
        self._compiled = tuple(parse_matcher(m) for m in self.matchers)

    def matches(self, labels: dict[str, str]) -> bool:
        """True when every (compiled) matcher matches ``labels`` (match labels
        of an :class:`~alerting.model.Alert`)."""
        return all(m.matches(labels) for m in self._compiled)


class RouteConfig(_Model):
    """Default receiver plus optional first-match sub-routes."""

    receiver: str
    routes: list[SubRoute] = Field(default_factory=list)

    def receiver_for(self, labels: dict[str, str]) -> str:
        """The first sub-route whose matchers all match ``labels``, else the
        default receiver (matchers compiled at load)."""
        for r in self.routes:
            if r.matches(labels):
                return r.receiver
        return self.receiver


class GroupingConfig(_Model):
    """Group key = receiver + the values of ``group_by`` labels (vocabulary
    names ``rule``, ``asset``, ``severity`` or any source label);
    ``batch_size`` = most alerts listed in one message."""

    group_by: list[str] = Field(default_factory=lambda: ["rule"])
    batch_size: int = Field(default=50, ge=1, le=10_000)


class TimingConfig(_Model):
    """Alertmanager's three timers, seconds.

    ``group_wait``: from the alert that opens a group to its first message;
    ``group_interval``: least time between two messages of a group that changed;
    ``repeat_interval``: exact gap between reminders of an unchanged firing group.
    """

    group_wait: Seconds = Field(default=30.0, ge=0)
    group_interval: Seconds = Field(default=300.0, gt=0)
    repeat_interval: Seconds = Field(default=4 * 3600.0, gt=0)


class DedupeConfig(_Model):
    """Fingerprint labels, repeat cooldown (seconds), transient suppression."""

    fingerprint_labels: list[str] = Field(default_factory=lambda: ["rule", "asset"], min_length=1)
    cooldown: Seconds = Field(default=300.0, ge=0)
    suppress_transient: bool = False


class DeliveryConfig(_Model):
    """Webhook delivery: HTTP ``timeout``; capped exponential backoff
    ``backoff_initial * 2**(n-1)`` up to ``backoff_max``; a Retry-After is
    honoured up to ``max_retry_after`` seconds."""

    timeout: Seconds = Field(default=10.0, gt=0)
    backoff_initial: Seconds = Field(default=1.0, gt=0)
    backoff_max: Seconds = Field(default=60.0, gt=0)
    max_retry_after: Seconds = Field(default=3600.0, gt=0)


class RulesConfig(_Model):
    """Export rules beside FAILED / TIMEOUT: a task still running after
    ``slow_task_after`` seconds raises ``ExportSlow`` (None: off); ``dlq_threshold``
    dead letters within ``dlq_window`` seconds raise ``DLQGrowth``."""

    slow_task_after: Seconds | None = Field(default=900.0, gt=0)
    dlq_window: Seconds = Field(default=300.0, gt=0)
    dlq_threshold: int = Field(default=10, ge=1)


class NormalizeConfig(_Model):
    """Alertmanager input: which label gives the asset (first present wins) and
    the severity used when the ``severity`` label is absent."""

    asset_labels: list[str] = Field(default_factory=lambda: ["asset", "instance", "host", "node"])
    default_severity: Literal["info", "warning", "critical"] = "warning"


class AlertingConfig(_Model):
    """The whole alerting configuration file."""

    receivers: list[ReceiverConfig] = Field(min_length=1)
    route: RouteConfig
    grouping: GroupingConfig = Field(default_factory=GroupingConfig)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    dedupe: DedupeConfig = Field(default_factory=DedupeConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    normalize: NormalizeConfig = Field(default_factory=NormalizeConfig)
    rules: RulesConfig = Field(default_factory=RulesConfig)

    @model_validator(mode="after")
    def _references(self) -> "AlertingConfig":
        names = [r.name for r in self.receivers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"receivers: duplicate name(s) {dupes}")
        wanted = [("route.receiver", self.route.receiver)] + [
            (f"route.routes.{i}.receiver", r.receiver) for i, r in enumerate(self.route.routes)]
        for key, name in wanted:
            if name not in names:
                raise ValueError(f"{key}: unknown receiver {name!r} (known: {names})")
        return self

    def receiver(self, name: str) -> ReceiverConfig:
        """The receiver called ``name``; KeyError when there is none."""
        for r in self.receivers:
            if r.name == name:
                return r
        raise KeyError(name)


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{key}: {msg}")
    return "; ".join(lines)


def parse_config(data: dict[str, Any]) -> AlertingConfig:
    """Validate already-parsed configuration data.

    Raises:
        ConfigError: the text lists each bad key with its problem.
    """
    if not isinstance(data, dict):
        raise ConfigError("(top level): expected a mapping")
    try:
        return AlertingConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_errors(e)) from None


def load_config(source: str | Path) -> AlertingConfig:
    """Read and validate the alerting YAML from a path (or YAML text when
    ``source`` is a string containing a newline).

    Raises:
        ConfigError: unreadable file, bad YAML, or invalid keys (named).
    """
    if isinstance(source, str) and "\n" in source:
        text = source
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read alerting config {source}: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}") from None
    return parse_config(data)
