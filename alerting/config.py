"""Alert funnel configuration: one YAML file, validated with pydantic.

Shape (every duration is seconds, or a Prometheus-style string ``"30s"``,
``"5m"``, ``"4h"``, ``"1d"``)::

    receivers:
      - name: oncall
        type: webhook             # webhook | slack | teams | pagerduty | opsgenie | email
        url: https://hooks.example.com/plait
        format: native            # native | alertmanager (webhook only)
        secret: change-me         # HMAC-SHA256 key of the signature header
        bucket: {burst: 3, refill_interval: 10s}
        send_resolved: true
        max_alerts: 0             # 0 = all
        templates: {title: "", text: ""}   # Jinja2 (sandboxed); "" = defaults
      - {name: pd, type: pagerduty, routing_key: <32 chars>}
      - {name: mail, type: email, email: {to: a@example.com, from: plait@example.com,
                                          smarthost: "smtp.example.com:587"}}
    route:
      receiver: oncall            # default receiver
      routes:                     # Alertmanager's tree (docs/alerting.md, "Routes")
        - {matchers: ['team="db"'], receiver: dba, continue: true, group_by: [asset],
           group_wait: 10s, mute_time_intervals: [night], routes: [...]}
    time_intervals:
      - {name: night, time_intervals: [{times: [{start_time: "00:00", end_time: "06:00"}]}]}
    external_url: https://plait.example.com   # console links (else PLAIT_EXTERNAL_URL)
    grouping: {group_by: [rule], batch_size: 50}
    timing: {group_wait: 30s, group_interval: 30s, repeat_interval: 5m, resolve_timeout: 5m}
    dedupe: {fingerprint_labels: [rule, asset], cooldown: 5m, suppress_transient: false}
    delivery: {timeout: 10s, backoff_initial: 1s, backoff_max: 60s}
    inhibit_rules:                # Alertmanager's (optional)
      - source_matchers: ['severity="critical"']
        target_matchers: ['severity="warning"']
        equal: [alertname, instance]

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

from alerting.matchers import Matcher, parse_matcher, parse_matchers
from alerting.receivers.registry import receiver_type, receiver_types
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


class TemplatesConfig(_Model):
    """Jinja2 templates (sandboxed) of a receiver's message: ``title`` (one
    line) and ``text`` (the body). Empty: Plait's defaults
    (:mod:`alerting.templates`). Checked at start-up: an error names the
    template and its line."""

    title: str = ""
    text: str = ""


class EmailConfig(_Model):
    """SMTP delivery (``type: email``): ``to`` (comma-separated or a list),
    ``from``, ``smarthost`` ``host:port``, optional AUTH and STARTTLS."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    to: list[str] = Field(min_length=1)
    from_: str = Field(alias="from", min_length=3)
    smarthost: str = Field(pattern=r"^[^:\s]+:\d+$")
    auth_username: str = ""
    auth_password: str = ""
    require_tls: bool = False

    @field_validator("to", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return [a.strip() for a in v.split(",") if a.strip()] if isinstance(v, str) else v


class TlsConfig(_Model):
    """TLS to an HTTP receiver (Alertmanager's ``http_config.tls_config``):
    ``ca_file`` (PEM CAs the server's certificate must chain to, instead of
    the system's), ``cert_file`` + ``key_file`` (a client certificate),
    ``insecure_skip_verify`` (no server certificate check). Paths absolute."""

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
    """One receiver: where messages go and how they look.

    ``type``: ``webhook`` (``format`` native | alertmanager), ``slack``
    (incoming webhook URL), ``teams`` (workflow webhook URL), ``pagerduty``
    (``routing_key``), ``opsgenie`` (``api_key``), ``email`` (``email``),
    ``none`` (no integration: Alertmanager's receiver without ``*_configs``;
    its messages are settled without a request).
    ``send_resolved`` (default true): resolved alerts are sent; ``max_alerts``
    (0 = all): most alerts listed in one message, the rest counted
    (Alertmanager's ``max_alerts``); ``templates``: title/text."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    type: str = "webhook"  # a registered type (alerting.receivers.registry)
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
    #: TLS settings of an HTTP receiver (None: system CAs, no client certificate)
    tls: TlsConfig | None = None
    #: the notifier's Go-template fields of an Alertmanager file (``title``,
    #: ``text``, ``details``...), kept as written for the Go-template renderer
    #: (:func:`alerting.amconfig.template_set`); empty for Plait's own file
    alertmanager_fields: dict[str, Any] = Field(default_factory=dict)

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
    """A route (Alertmanager's ``route``): alerts matching every matcher
    (``name="v"``, ``!=``, ``=~``, ``!~``) go to ``receiver`` (default: the
    parent's). ``continue``: matching goes on to the next sibling (one alert
    to several receivers); ``routes``: nested routes, tried first;
    ``group_by`` / timings: override the parent's; ``mute_time_intervals`` /
    ``active_time_intervals``: names from ``time_intervals``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    matchers: list[str] = Field(default_factory=list)  # none: matches every alert
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
        """Each item is one matcher or a selector of several (``'{a="1", b=~"x"}'``,
        Alertmanager 0.25-0.28 syntax, UTF-8 names quoted); stored as one
        canonical matcher per item, which :func:`alerting.matchers.parse_matcher`
        reads back."""
        return [str(m) for text in v for m in parse_matchers(text)]

    def model_post_init(self, _context: Any) -> None:
        """Compile the matchers once, at config load, never per alert."""
        self._compiled = tuple(parse_matcher(m) for m in self.matchers)

    @property
    def compiled_matchers(self) -> tuple[Matcher, ...]:
        """:attr:`matchers` parsed, regexes compiled."""
        return self._compiled


#: Go's ``time.Weekday`` numbers (Sunday 0), which Alertmanager's ranges use:
#: ``sunday:saturday`` is the whole week, ``saturday:sunday`` is refused
_WEEKDAYS = {d: i for i, d in enumerate(
    ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"])}
_MONTH_NAMES = ["january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december"]


def _ranges(items: list[str], known: Any, bad: str, number: Any, backwards: str) -> list[str]:
    """``items`` of a time interval field, each ``a`` or a range ``a:b``
    (case-insensitive): a part that is not ``known`` raises ``bad`` (``{p}``
    the part), a range running backwards by ``number`` raises ``backwards``
    (Alertmanager's ``timeinterval`` words; ``{a}`` / ``{b}`` as written).

    Raises:
        ValueError: as above.
    """
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
    """One Alertmanager ``time_interval``: every given field must match
    (``times``, ``weekdays`` like ``monday:friday`` or ``saturday``,
    ``days_of_month`` like ``1:5``, ``months`` 1-12 or names, ``location`` an
    IANA zone, default UTC); an absent field matches everything."""

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
    """``{name, time_intervals: [...]}`` (Alertmanager's top-level ``time_intervals``)."""

    name: str = Field(min_length=1)
    time_intervals: list[TimeInterval] = Field(min_length=1)


def _matcher_list(v: list[str]) -> list[str]:
    """Check every matcher (:func:`alerting.matchers.parse_matcher`); the
    error names the item (``[1] bad matcher ...``)."""
    for i, text in enumerate(v):
        try:
            parse_matcher(text)
        except ValueError as e:
            raise ValueError(f"[{i}] {e}") from None
    return v


class InhibitRule(_Model):
    """One Alertmanager inhibition rule (docs, "inhibit_rule"): while an alert
    matching every ``source_matchers`` fires, alerts matching every
    ``target_matchers`` whose ``equal`` labels have the same values (absent =
    ``""`` on both sides) are muted. An alert matching both sides never
    inhibits an alert that also matches both (so never itself). Matchers see
    the labels silences see (source labels plus ``rule``, ``asset``,
    ``severity``, ``alertname``)."""

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
    """The root route: default receiver plus sub-routes (first match wins
    unless a route says ``continue``; nested ``routes`` allowed)."""

    receiver: str
    routes: list[SubRoute] = Field(default_factory=list)


#: ``group_by: ['...']``: every label of the alert is a group label (Alertmanager).
GROUP_BY_ALL = "..."


def check_group_by(v: list[str] | None) -> list[str] | None:
    """A ``group_by`` as Alertmanager's config loader takes it (its words):
    ``...`` stands alone (repeated, it is still the wildcard), and no label
    is named twice."""
    if v and GROUP_BY_ALL in v:
        if set(v) != {GROUP_BY_ALL}:
            raise ValueError("cannot have wildcard group_by (`...`) and other labels at the same time")
        return [GROUP_BY_ALL]
    for i, name in enumerate(v or []):
        if name in v[:i]:
            raise ValueError(f"duplicated label {name!r} in group_by")
    return v


class GroupingConfig(_Model):
    """Group key = receiver + the values of ``group_by`` labels (vocabulary
    names ``rule``, ``asset``, ``severity`` or any source label; ``['...']``:
    all of the alert's labels, as in Alertmanager);
    ``batch_size`` = most alerts listed in one message; ``merge_groups``
    (default true): sections of several due groups share a message up to
    ``batch_size`` alerts (false: one group per message, as Alertmanager)."""

    group_by: list[str] = Field(default_factory=lambda: ["rule"])
    batch_size: int = Field(default=50, ge=1, le=10_000)
    merge_groups: bool = True

    @field_validator("group_by")
    @classmethod
    def _group_by(cls, v: list[str] | None) -> list[str] | None:
        return check_group_by(v)


class TimingConfig(_Model):
    """Alertmanager's three timers, seconds.

    ``group_wait``: from the alert that opens a group to its first message;
    ``group_interval``: least time between two messages of a group that changed;
    ``repeat_interval``: exact gap between reminders of an unchanged firing group.
    """

    group_wait: Seconds = Field(default=30.0, ge=0)
    group_interval: Seconds = Field(default=300.0, gt=0)
    repeat_interval: Seconds = Field(default=4 * 3600.0, gt=0)
    #: a firing alert without ``endsAt`` that is not re-sent within this
    #: many seconds resolves (Alertmanager's ``global.resolve_timeout``)
    resolve_timeout: Seconds = Field(default=300.0, gt=0)


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
    #: ``ExportFailed`` / ``ExportTimeout`` carry ``endsAt`` = event time +
    #: this: they resolve then even if no later export of the same
    #: sysCode/bizType succeeds (one succeeding resolves them at once)
    failed_resolve_after: Seconds = Field(default=24 * 3600.0, gt=0)
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
    inhibit_rules: list[InhibitRule] = Field(default_factory=list)
    time_intervals: list[NamedTimeIntervals] = Field(default_factory=list)
    #: the console's base URL for links (empty: ``PLAIT_EXTERNAL_URL``)
    external_url: str = ""
    #: an Alertmanager receiver of several integrations: its name (its first
    #: integration) -> the receivers of the others, which every route
    #: reaching it reaches too (:func:`alerting.routing.decide`)
    fanout: dict[str, list[str]] = Field(default_factory=dict)
    #: every raw alert's outcome is written to ``alerts.ledger`` (false: only
    #: counted; the counters and their balance are kept either way)
    ledger: bool = True
    #: Go-template files of an Alertmanager file (``templates:``), absolute,
    #: globs expanded (:func:`alerting.amconfig.template_set` loads them)
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
        from alerting.templates import check_templates  # start-up check, names template + line
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
    """Validate already-parsed configuration data.

    Raises:
        ConfigError: the text lists each bad key with its problem.
    """
    if not isinstance(data, dict):
        raise ConfigError("(top level): expected a mapping")
    try:
        return AlertingConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(e)) from None


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
