"""Alert funnel configuration: one YAML file (``examples/alerting.yaml``) validated with pydantic;
durations in seconds or ``"30s"``/``"5m"``/``"4h"``/``"1d"``; names as Alertmanager's. Errors raise
:class:`ConfigError` naming the key (``timing.group_wait: ...``)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError,
                      field_validator, model_validator)

from alerting.matchers import Matcher, parse_matcher, parse_matchers
from alerting.receivers.registry import receiver_type, receiver_types
from plait.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number or ``"90"``, ``"30s"``, ``"5m"``. Raises ValueError otherwise."""
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


Seconds = Annotated[float, BeforeValidator(parse_duration)]


class BucketConfig(_Model):
    """A receiver's token bucket: ``burst`` tokens, one more every ``refill_interval`` s."""

    burst: int = Field(default=3, ge=1)
    refill_interval: Seconds = Field(default=10.0, gt=0)


class TemplatesConfig(_Model):
    """Sandboxed Jinja2 ``title`` and ``text`` of a receiver's message (empty:
    :mod:`alerting.templates`' defaults), checked at start-up."""

    title: str = ""
    text: str = ""


class EmailConfig(_Model):
    """SMTP delivery (``type: email``); ``to``: comma-separated or a list; ``hello``: the
    ``EHLO`` name ("": the host's FQDN, Python's ``smtplib`` default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    to: list[str] = Field(min_length=1)
    from_: str = Field(alias="from", min_length=3)
    smarthost: str = Field(pattern=r"^[^:\s]+:\d+$")
    auth_username: str = ""
    auth_password: str = ""
    require_tls: bool = False
    hello: str = ""

    @field_validator("to", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return [a.strip() for a in v.split(",") if a.strip()] if isinstance(v, str) else v


class TlsConfig(_Model):
    """TLS to an HTTP receiver (Alertmanager's ``http_config.tls_config``; absolute paths):
    ``ca_file`` instead of the system CAs, ``cert_file`` + ``key_file`` a client certificate,
    ``insecure_skip_verify``."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure_skip_verify: bool = False

    @model_validator(mode="after")
    def _pair(self) -> "TlsConfig":
        if bool(self.cert_file) != bool(self.key_file):  # Prometheus common's rule
            raise ValueError("cert_file and key_file: give both or neither")
        return self


class ReceiverConfig(_Model):
    """One receiver (docs/alerting.md, "Receivers"); ``type`` a registered type
    (:mod:`alerting.receivers.registry`), which checks its fields; ``max_alerts`` 0 = all;
    ``alertmanager_fields``: the Go-template fields of an ``alertmanager.yml`` notifier, as written
    (empty otherwise); ``timeout``: seconds one attempt may take (Alertmanager's webhook
    ``timeout``), at most ``delivery.timeout`` (None: ``delivery.timeout``)."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    type: str = "webhook"
    url: str = ""
    format: Literal["native", "alertmanager"] = "native"
    secret: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    bucket: BucketConfig = Field(default_factory=BucketConfig)
    send_resolved: bool = True
    max_alerts: int = Field(default=0, ge=0)
    templates: TemplatesConfig = Field(default_factory=TemplatesConfig)
    routing_key: str = ""
    api_key: str = ""
    email: EmailConfig | None = None
    tls: TlsConfig | None = None
    alertmanager_fields: dict[str, Any] = Field(default_factory=dict)
    timeout: Seconds | None = Field(default=None, gt=0)

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        names = sorted(receiver_types())
        if v not in names:
            raise ValueError(f"Input should be one of {', '.join(repr(n) for n in names)}")
        return v

    @model_validator(mode="after")
    def _by_type(self) -> "ReceiverConfig":
        kind = receiver_type(self.type)
        if not self.url and kind.default_url:
            object.__setattr__(self, "url", kind.default_url)
        kind.check(self)
        return self


class SubRoute(_Model):
    """A route (Alertmanager's ``route``; walked by :mod:`alerting.routing`); unset settings are
    the parent's."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    matchers: list[str] = Field(default_factory=list)
    receiver: str | None = None
    continue_: bool = Field(default=False, alias="continue")
    routes: list["SubRoute"] = Field(default_factory=list)
    group_by: list[str] | None = None
    group_wait: Seconds | None = Field(default=None, ge=0)
    group_interval: Seconds | None = Field(default=None, gt=0)
    repeat_interval: Seconds | None = Field(default=None, gt=0)
    mute_time_intervals: list[str] = Field(default_factory=list)
    active_time_intervals: list[str] = Field(default_factory=list)

    _compiled: tuple = PrivateAttr(default=())

    @field_validator("group_by")
    @classmethod
    def _group_by(cls, v: list[str] | None) -> list[str] | None:
        return check_group_by(v)

    @field_validator("matchers")
    @classmethod
    def _parse(cls, v: list[str]) -> list[str]:
        """One matcher or a selector of several per item; stored as one canonical matcher text each."""
        return [str(m) for text in v for m in parse_matchers(text)]

    def model_post_init(self, _context: Any) -> None:
        """Compile the matchers once, at config load, never per alert."""
        self._compiled = tuple(parse_matcher(m) for m in self.matchers)

    @property
    def compiled_matchers(self) -> tuple[Matcher, ...]:
        """:attr:`matchers` parsed, regexes compiled."""
        return self._compiled


#: Go's ``time.Weekday`` numbers (Sunday 0): ``saturday:sunday`` is refused
_WEEKDAYS = {d: i for i, d in enumerate(
    ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"])}
_MONTH_NAMES = ["january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december"]


def _ranges(items: list[str], known: Any, bad: str, number: Any, backwards: str) -> list[str]:
    """``items``, each ``a`` or ``a:b``, checked with Alertmanager's ``timeinterval`` words. Raises
    ValueError: ``bad`` for an unknown part, ``backwards`` for a backwards range by ``number``."""
    for item in items:
        parts = item.lower().split(":")
        for part in parts:
            if not known(part):
                raise ValueError(bad.format(p=repr(part)))
        if len(parts) == 2 and number(parts[0]) > number(parts[1]):
            raise ValueError(backwards.format(a=parts[0], b=parts[1]))
    return items
_HHMM = re.compile(r"^([01]\d|2[0-4]):([0-5]\d)$")


class TimeRange(_Model):
    """``start_time`` / ``end_time`` ``HH:MM`` (end exclusive, ``24:00`` allowed)."""

    start_time: str
    end_time: str

    @field_validator("start_time", "end_time")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not _HHMM.match(v) or (v.startswith("24") and v != "24:00"):
            raise ValueError(f"expected HH:MM (00:00..24:00), got {v!r}")
        return v

    @model_validator(mode="after")
    def _forward(self) -> "TimeRange":
        a, b = self.minutes()
        if a >= b:
            raise ValueError("start time cannot be equal or greater than end time")
        return self

    def minutes(self) -> tuple[int, int]:
        """(start, end) minutes of the day."""
        a, b = (int(x[:2]) * 60 + int(x[3:]) for x in (self.start_time, self.end_time))
        return a, b


class TimeInterval(_Model):
    """One Alertmanager ``time_interval``: every given field must match; an absent one matches all."""

    times: list[TimeRange] = Field(default_factory=list)
    weekdays: list[str] = Field(default_factory=list)
    days_of_month: list[str] = Field(default_factory=list)
    months: list[str] = Field(default_factory=list)
    years: list[str] = Field(default_factory=list)
    location: str = "UTC"

    @field_validator("weekdays")
    @classmethod
    def _days(cls, v: list[str]) -> list[str]:
        return _ranges(v, lambda p: p in _WEEKDAYS, "unknown weekday {p} (monday..sunday, ranges a:b)",
                       _WEEKDAYS.get, "start day cannot be before end day ({a}:{b}; "
                                      "a week runs sunday:saturday)")

    @field_validator("days_of_month")
    @classmethod
    def _mdays(cls, v: list[str]) -> list[str]:
        return _ranges(v, lambda p: p.isdigit() and 1 <= int(p) <= 31,
                       "bad day of month {p} (1..31, ranges a:b; negative days are not supported)",
                       int, "end day {b} is always before start day {a}")

    @field_validator("months")
    @classmethod
    def _months(cls, v: list[str]) -> list[str]:
        return _ranges(v, lambda p: p in _MONTH_NAMES or p.isdigit() and 1 <= int(p) <= 12,
                       "bad month {p} (1..12 or january..december, ranges a:b)",
                       lambda p: int(p) if p.isdigit() else _MONTH_NAMES.index(p) + 1,
                       "end month {b} is before start month {a}")

    @field_validator("years")
    @classmethod
    def _years(cls, v: list[str]) -> list[str]:
        return _ranges(v, str.isdigit, "bad year {p} (a year like 2026, ranges a:b)", int,
                       "end year {b} is before start year {a}")

    @field_validator("location")
    @classmethod
    def _zone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo
        try:
            ZoneInfo(v)
        except Exception:
            raise ValueError(f"unknown time zone {v!r} (IANA name like Europe/Paris)") from None
        return v


class NamedTimeIntervals(_Model):
    """``{name, time_intervals: [...]}`` (Alertmanager's top-level ``time_intervals``); with no
    entries it never matches, as Alertmanager loads it (a route active only in it is always
    muted)."""

    name: str = Field(min_length=1)
    time_intervals: list[TimeInterval] = Field(default_factory=list)


def _matcher_list(v: list[str]) -> list[str]:
    """Check every matcher (:func:`alerting.matchers.parse_matcher`); the error names the item
    (``[1] bad matcher ...``)."""
    for i, text in enumerate(v):
        try:
            parse_matcher(text)
        except ValueError as e:
            raise ValueError(f"[{i}] {e}") from None
    return v


class InhibitRule(_Model):
    """One Alertmanager inhibition rule (docs, "inhibit_rule"; docs/alerting.md, "Inhibition")."""

    source_matchers: list[str] = Field(min_length=1)
    target_matchers: list[str] = Field(min_length=1)
    equal: list[str] = Field(default_factory=list)

    @field_validator("source_matchers", "target_matchers")
    @classmethod
    def _parse(cls, v: list[str]) -> list[str]:
        return _matcher_list(v)

    @field_validator("equal")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            if not name:
                raise ValueError(f"[{i}] label names must not be empty")
        return v


class RouteConfig(_Model):
    """The root route: default receiver plus sub-routes."""

    receiver: str
    routes: list[SubRoute] = Field(default_factory=list)


#: ``group_by: ['...']``: every label of the alert is a group label (Alertmanager).
GROUP_BY_ALL = "..."


def check_group_by(v: list[str] | None) -> list[str] | None:
    """A ``group_by`` checked as Alertmanager's loader (its words): ``...`` alone, no label twice.
    Raises ValueError."""
    if v and GROUP_BY_ALL in v:
        if set(v) != {GROUP_BY_ALL}:
            raise ValueError("cannot have wildcard group_by (`...`) and other labels at the same time")
        return [GROUP_BY_ALL]
    for i, name in enumerate(v or []):
        if name in v[:i]:
            raise ValueError(f"duplicated label {name!r} in group_by")
    return v


class GroupingConfig(_Model):
    """Group key = receiver + ``group_by`` label values (``['...']``: all); ``batch_size``: most
    alerts in one message; ``merge_groups``: due groups share a message (false: one group per
    message, as Alertmanager)."""

    group_by: list[str] = Field(default_factory=lambda: ["rule"])
    batch_size: int = Field(default=50, ge=1, le=10_000)
    merge_groups: bool = True

    @field_validator("group_by")
    @classmethod
    def _group_by(cls, v: list[str] | None) -> list[str] | None:
        return check_group_by(v)


class TimingConfig(_Model):
    """Alertmanager's timers, seconds; ``resolve_timeout``: a firing alert without ``endsAt`` not
    re-sent within it resolves."""

    group_wait: Seconds = Field(default=30.0, ge=0)
    group_interval: Seconds = Field(default=300.0, gt=0)
    repeat_interval: Seconds = Field(default=4 * 3600.0, gt=0)
    resolve_timeout: Seconds = Field(default=300.0, gt=0)


class DedupeConfig(_Model):
    """Fingerprint labels, repeat cooldown (seconds), transient suppression."""

    fingerprint_labels: list[str] = Field(default_factory=lambda: ["rule", "asset"], min_length=1)
    cooldown: Seconds = Field(default=300.0, ge=0)
    suppress_transient: bool = False


class DeliveryConfig(_Model):
    """Per-attempt ``timeout``; backoff ``backoff_initial * 2**(n-1)`` up to ``backoff_max``;
    Retry-After honoured up to ``max_retry_after`` s."""

    timeout: Seconds = Field(default=10.0, gt=0)
    backoff_initial: Seconds = Field(default=1.0, gt=0)
    backoff_max: Seconds = Field(default=60.0, gt=0)
    max_retry_after: Seconds = Field(default=3600.0, gt=0)


class RulesConfig(_Model):
    """Export rules: ``ExportSlow`` after ``slow_task_after`` s (None: off); ``DLQGrowth`` at
    ``dlq_threshold`` dead letters within ``dlq_window`` s; ``ExportFailed`` / ``ExportTimeout``
    end ``failed_resolve_after`` s after the event unless a later export resolves them first."""

    slow_task_after: Seconds | None = Field(default=900.0, gt=0)
    failed_resolve_after: Seconds = Field(default=24 * 3600.0, gt=0)
    dlq_window: Seconds = Field(default=300.0, gt=0)
    dlq_threshold: int = Field(default=10, ge=1)


class NormalizeConfig(_Model):
    """Alertmanager input: the asset label (first present) and the default severity."""

    asset_labels: list[str] = Field(default_factory=lambda: ["asset", "instance", "host", "node"])
    default_severity: Literal["info", "warning", "critical"] = "warning"


class AlertingConfig(_Model):
    """The whole alerting configuration file. ``external_url``: console links (empty:
    ``PLAIT_EXTERNAL_URL``); ``fanout``: an Alertmanager receiver's name -> the receivers of its
    further integrations; ``ledger``: write ``alerts.ledger``; ``templates``: an
    ``alertmanager.yml``'s Go-template files, absolute."""

    receivers: list[ReceiverConfig] = Field(min_length=1)
    route: RouteConfig
    grouping: GroupingConfig = Field(default_factory=GroupingConfig)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    dedupe: DedupeConfig = Field(default_factory=DedupeConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    normalize: NormalizeConfig = Field(default_factory=NormalizeConfig)
    rules: RulesConfig = Field(default_factory=RulesConfig)
    inhibit_rules: list[InhibitRule] = Field(default_factory=list)
    time_intervals: list[NamedTimeIntervals] = Field(default_factory=list)
    external_url: str = ""
    fanout: dict[str, list[str]] = Field(default_factory=dict)
    ledger: bool = True
    templates: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> "AlertingConfig":
        names = [r.name for r in self.receivers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"receivers: duplicate name(s) {dupes}")
        intervals = [t.name for t in self.time_intervals]
        wanted = [("route.receiver", self.route.receiver)]
        def walk(routes: list[SubRoute], path: str) -> None:
            for i, r in enumerate(routes):
                key = f"{path}.{i}"
                if r.receiver is not None:
                    wanted.append((f"{key}.receiver", r.receiver))
                for field in ("mute_time_intervals", "active_time_intervals"):
                    for j, n in enumerate(getattr(r, field)):
                        if n not in intervals:
                            raise ValueError(f"{key}.{field}.{j}: unknown time interval {n!r} "
                                             f"(known: {intervals})")
                walk(r.routes, f"{key}.routes")
        walk(self.route.routes, "route.routes")
        wanted += [(f"fanout.{k}", n) for k, more in self.fanout.items() for n in [k, *more]]
        for key, name in wanted:
            if name not in names:
                raise ValueError(f"{key}: unknown receiver {name!r} (known: {names})")
        if not self.external_url:
            import os
            object.__setattr__(self, "external_url",
                               os.environ.get("PLAIT_EXTERNAL_URL", "").rstrip("/"))
        from alerting.templates import check_templates
        for i, r in enumerate(self.receivers):
            check_templates(r, f"receivers.{i}.templates")
        return self

    def receiver(self, name: str) -> ReceiverConfig:
        """The receiver called ``name``; KeyError when there is none."""
        for r in self.receivers:
            if r.name == name:
                return r
        raise KeyError(name)


def format_errors(err: ValidationError, prefix: str = "") -> str:
    """``key: problem; ...`` for each error, keys under ``prefix`` when given."""
    lines = []
    for e in err.errors():
        key = ".".join([prefix] * bool(prefix) + [str(p) for p in e["loc"]]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{key}: {msg}")
    return "; ".join(lines)


def parse_config(data: dict[str, Any]) -> AlertingConfig:
    """Validate parsed configuration data. Raises ConfigError listing each bad key."""
    if not isinstance(data, dict):
        raise ConfigError("(top level): expected a mapping")
    try:
        return AlertingConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(e)) from None


def load_config(source: str | Path) -> AlertingConfig:
    """Read and validate the alerting YAML at a path (or text holding a newline). Raises
    ConfigError: unreadable, bad YAML or invalid keys (named)."""
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
    try:
        return parse_config(data)
    except ConfigError as e:
        if _looks_like_alertmanager_yml(data):
            raise ConfigError(f"{e}\n(this file looks like an alertmanager.yml: give it as "
                              "PLAIT_ALERTMANAGER_CONFIG, or plait dev --alertmanager-config)"
                              ) from None
        raise


def _looks_like_alertmanager_yml(data: Any) -> bool:
    """Whether ``data`` has keys only Alertmanager's file has (``global``, ``templates``,
    ``mute_time_intervals``, a receiver's ``*_configs``)."""
    if not isinstance(data, dict):
        return False
    receivers = data.get("receivers") if isinstance(data.get("receivers"), list) else []
    return bool({"global", "templates", "mute_time_intervals"} & set(data)) or any(
        isinstance(r, dict) and any(str(k).endswith("_configs") for k in r) for r in receivers)
