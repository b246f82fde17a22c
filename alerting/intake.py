"""Alert intake: raw alerts (native JSON, Alertmanager / Prometheus) into :class:`Alert`.

Native JSON::

    {"rule": "DiskFull", "asset": "h1", "severity": "critical",
     "status": "firing", "labels": {...}, "annotations": {...},
     "time": 1700000000.0 | "2023-11-14T22:13:20Z"}

Alertmanager / Prometheus (``POST /api/v2/alerts`` body, a list of)::

    {"labels": {"alertname": "...", "instance": "...", "severity": "..."},
     "annotations": {...}, "startsAt": "RFC3339", "endsAt": "RFC3339",
     "generatorURL": "..."}

Alertmanager's rule (API docs, "postableAlert"): a past ``endsAt`` is resolved, a missing or
future one firing. A bad alert raises :class:`AlertRejected` naming the field; nothing else escapes.

Limits (docs/alerting.md, "Limits of one alert"): :data:`MAX_LABELS` labels,
:data:`MAX_ANNOTATIONS` annotations, names of 1..:data:`MAX_NAME` characters (any UTF-8, as
Alertmanager 0.28), values of at most :data:`MAX_TEXT`; values are strings (numbers as text).
A lone UTF-16 surrogate in any name or value becomes U+FFFD (``Alert.invalid_unicode`` counts)."""
from __future__ import annotations

import dataclasses
import math
import re
import time as _time
from datetime import datetime, timezone
from typing import Any

import orjson

from alerting.model import Alert, AlertRejected, Severity, Status

#: Severity spellings seen in the wild, mapped to the vocabulary.
SEVERITY_ALIASES = {
    "info": Severity.INFO, "information": Severity.INFO, "informational": Severity.INFO,
    "none": Severity.INFO, "low": Severity.INFO, "notice": Severity.INFO,
    "warning": Severity.WARNING, "warn": Severity.WARNING, "minor": Severity.WARNING,
    "medium": Severity.WARNING,
    "critical": Severity.CRITICAL, "crit": Severity.CRITICAL, "error": Severity.CRITICAL,
    "major": Severity.CRITICAL, "high": Severity.CRITICAL, "page": Severity.CRITICAL,
    "fatal": Severity.CRITICAL, "emergency": Severity.CRITICAL,
}
#: Alertmanager's "zero time": Go's time.Time{} rendered in RFC3339.
ZERO_TIME = "0001-01-01T00:00:00Z"
#: Most characters in any one value (label, annotation, rule, asset, URL).
MAX_TEXT = 8192
_MAX_TEXT = MAX_TEXT
#: Most characters in a label or annotation name.
MAX_NAME = 256
#: Most labels one alert may carry (Prometheus' ``label_limit`` is off by default).
MAX_LABELS = 128
#: Most annotations one alert may carry.
MAX_ANNOTATIONS = 128
#: Deepest nesting the Unicode repair walks.
_REPAIR_DEPTH = 4
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Spellings of native keys that are refused, with the one accepted instead.
_SNAKE_SPELLINGS = {"starts_at": "startsAt", "ends_at": "endsAt", "generator_url": "generatorURL"}


#: Epoch seconds of the first instant an RFC 3339 timestamp names in UTC and of the first it
#: does not (years 0001-9999, RFC 3339 s5.6): a time outside cannot be written back as one.
MIN_EPOCH, END_EPOCH = -62_135_596_800.0, 253_402_300_800.0
OUT_OF_RANGE = "lies outside the years 0001-9999 in UTC, the times an RFC3339 timestamp names"


def in_range(ts: float) -> bool:
    """Whether epoch seconds ``ts`` lie in [:data:`MIN_EPOCH`, :data:`END_EPOCH`)."""
    return MIN_EPOCH <= ts < END_EPOCH


def parse_time(value: Any, field: str) -> float | None:
    """Epoch seconds from a number or RFC3339 string; None for absent, empty or the zero time.
    Raises AlertRejected: not a finite number nor RFC3339, or outside
    :func:`in_range`."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise AlertRejected(field, "expected epoch seconds or an RFC3339 timestamp")
    if isinstance(value, int):
        ts = value  # any size: compared before it becomes a float
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise AlertRejected(field, "timestamp must be finite")
        ts = value
    elif isinstance(value, str):
        if value.startswith("0001-01-01T00:00:00"):
            return None
        text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise AlertRejected(field, f"not an RFC3339 timestamp: {value[:64]!r}") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        ts = dt.timestamp()
    else:
        raise AlertRejected(field, "expected epoch seconds or an RFC3339 timestamp")
    if not in_range(ts):
        raise AlertRejected(field, OUT_OF_RANGE)
    return float(ts)


def format_time(ts: float | None) -> str:
    """RFC3339 UTC (``2023-11-14T22:13:20Z``, milliseconds when not whole); ``None`` gives
    Alertmanager's zero time ``0001-01-01T00:00:00Z``."""
    if ts is None:
        return ZERO_TIME
    # hot path: instants recur, so answers are memoized (bounded); an f-string pads years to
    # 4 digits (strftime's %Y does not)
    text = _TIMES.get(ts)
    if text is not None:
        return text
    dt = datetime.fromtimestamp(_clamped(ts), _UTC)
    text = (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}"
            f"T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}")
    text = f"{text}.{dt.microsecond // 1000:03d}Z" if dt.microsecond else text + "Z"
    if len(_TIMES) >= 4096:
        _TIMES.clear()
    _TIMES[ts] = text
    return text


def go_time(ts: float | None) -> str:
    """RFC 3339 UTC as Go's ``time.Time`` marshals to JSON (``RFC3339Nano``: the fraction without
    its trailing zeros, ``2024-03-05T11:00:00.25Z``), to the microsecond an epoch float holds:
    what Alertmanager's webhook body echoes of the ``startsAt`` it was sent. ``None`` gives the
    zero time ``0001-01-01T00:00:00Z``."""
    if ts is None:
        return ZERO_TIME
    dt = datetime.fromtimestamp(_clamped(ts), _UTC)
    fraction = f"{dt.microsecond:06d}".rstrip("0")
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}"
            f":{dt.second:02d}{'.' + fraction if fraction else ''}Z")


def _clamped(ts: float) -> float:
    """``ts`` within :func:`in_range` to the millisecond: a stored time outside lists as the
    first or last millisecond RFC 3339 names rather than failing the list."""
    return MIN_EPOCH if ts < MIN_EPOCH else min(ts, END_EPOCH - 0.0005)


_UTC = timezone.utc
#: format_time's memo: epoch seconds -> RFC3339 text (at most 4,096)
_TIMES: dict[float, str] = {}


def repair_text(text: str) -> tuple[str, int]:
    """(``text`` with lone surrogates replaced by U+FFFD, 1 if any) else (``text``, 0): such a str
    cannot be encoded as UTF-8."""
    if text.isascii() or not _SURROGATE.search(text):
        return text, 0
    return _SURROGATE.sub("\ufffd", text), 1


def repair_doc(value: Any) -> tuple[Any, int]:
    """:func:`_repair` of a parsed JSON value, skipped when orjson can encode it: orjson refuses a
    str holding a lone surrogate, so its success proves there is none at any depth (~2 us for an
    alert, where the walk cost ~20 us). What it refuses for another reason (an integer past 64
    bits, nesting past its limit) takes the walk."""
    try:
        orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError included
        return _repair(value)
    return value, 0


def _repair(value: Any, depth: int = 0) -> tuple[Any, int]:
    """(``value`` with every string repaired, keys included, down to :data:`_REPAIR_DEPTH`; the
    number repaired); the same object when clean."""
    if isinstance(value, str):
        return repair_text(value)
    if depth >= _REPAIR_DEPTH:
        return value, 0
    if isinstance(value, dict):
        fixed, out = 0, {}
        for k, v in value.items():
            k2, n1 = repair_text(k) if isinstance(k, str) else (k, 0)
            v2, n2 = _repair(v, depth + 1)
            fixed += n1 + n2
            out[k2] = v2
        return (out, fixed) if fixed else (value, 0)
    if isinstance(value, list):
        fixed, out = 0, []
        for v in value:
            v2, n = _repair(v, depth + 1)
            fixed += n
            out.append(v2)
        return (out, fixed) if fixed else (value, 0)
    return value, 0


def repair_alert(alert: Alert) -> Alert:
    """An :class:`Alert` built elsewhere (a Kafka command) checked and repaired as in intake; the
    same object when clean. Raises AlertRejected: a wrong type (``labels.<name>``), over limits."""
    for name in ("rule", "asset", "generator_url"):
        if not isinstance(getattr(alert, name), str):
            raise AlertRejected(name, "must be a string")
    for field, most in (("labels", MAX_LABELS), ("annotations", MAX_ANNOTATIONS)):
        value = getattr(alert, field)
        if not isinstance(value, dict) or len(value) > most:
            raise AlertRejected(field, f"must be an object of at most {most} strings")
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise AlertRejected(f"{field}.{k}", "must be a string")
    # fast path: no surrogate in its strings joined
    text = "".join((alert.rule, alert.asset, alert.generator_url, *alert.labels,
                    *alert.labels.values(), *alert.annotations, *alert.annotations.values()))
    if text.isascii() or not _SURROGATE.search(text):
        return alert
    d = {"rule": alert.rule, "asset": alert.asset, "labels": alert.labels,
         "annotations": alert.annotations, "generator_url": alert.generator_url}
    fixed, n = _repair(d)
    if not n:
        return alert
    return dataclasses.replace(alert, **fixed, invalid_unicode=alert.invalid_unicode + n)


def _text(value: Any, field: str, required: bool = True) -> str:
    if value is None or value == "":
        if required:
            raise AlertRejected(field, "is required and must be a non-empty string")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AlertRejected(field, f"must be a string, got {type(value).__name__}")
    text = str(value)
    if len(text) > _MAX_TEXT:
        raise AlertRejected(field, f"longer than {_MAX_TEXT} characters")
    return text


def _str_map(value: Any, field: str, most: int = MAX_LABELS) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AlertRejected(field, f"must be an object of strings, got {type(value).__name__}",
                            "an object of string names to string values", "type")
    if len(value) > most:
        raise AlertRejected(field, f"has {len(value)} entries, at most {most} are accepted",
                            f"at most {most} names", "limit")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise AlertRejected(field, f"keys must be non-empty strings, got {k!r}")
        if len(k) > MAX_NAME:
            raise AlertRejected(field, f"name {k[:40]!r}... is longer than {MAX_NAME} characters",
                                f"names of at most {MAX_NAME} characters", "limit")
        # the usual value, a short string, as it is; the rest by _text's rules
        out[k] = v if type(v) is str and len(v) <= _MAX_TEXT else _text(v, f"{field}.{k}",
                                                                         required=False)
    return out


def parse_severity(value: Any, field: str) -> Severity:
    """:class:`Severity` from a name or alias (case-insensitive). Raises AlertRejected."""
    if not isinstance(value, str) or value.strip().lower() not in SEVERITY_ALIASES:
        raise AlertRejected(field, f"unknown severity {str(value)[:40]!r}",
                            "info, warning or critical (or an alias such as warn, error, page)",
                            "literal")
    return SEVERITY_ALIASES[value.strip().lower()]


def from_native(raw: Any, now: float) -> Alert:
    """Normalize one native JSON alert; ``time`` defaults to ``now`` (s). Keys camelCase, times RFC
    3339 or epoch seconds. Raises AlertRejected naming the first bad field (a snake_case spelling
    names the accepted one)."""
    if not isinstance(raw, dict):
        raise AlertRejected("(alert)", f"expected a JSON object, got {type(raw).__name__}")
    raw, repaired = repair_doc(raw)
    for snake, camel in _SNAKE_SPELLINGS.items():
        if snake in raw:
            raise AlertRejected(snake, "snake_case spelling is not accepted", camel, "spelling")
    rule = _text(raw.get("rule"), "rule")
    asset = _text(raw.get("asset"), "asset")
    if "severity" not in raw:
        raise AlertRejected("severity", "is required", "info, warning or critical", "required")
    severity = parse_severity(raw["severity"], "severity")
    status_text = raw.get("status", "firing")
    try:
        status = Status(status_text)
    except ValueError:
        raise AlertRejected("status", f"unknown status {str(status_text)[:40]!r}",
                            "firing or resolved", "literal") from None
    t = parse_time(raw.get("time"), "time")
    t = now if t is None else t
    starts = parse_time(raw.get("startsAt"), "startsAt")
    ends = parse_time(raw.get("endsAt"), "endsAt")
    return Alert(
        rule=rule, asset=asset, severity=severity, status=status,
        labels=_str_map(raw.get("labels"), "labels"),
        annotations=_str_map(raw.get("annotations"), "annotations", MAX_ANNOTATIONS),
        # a firing alert resolves at its future endsAt unless re-sent
        time=t, starts_at=starts, ends_at=ends,
        generator_url=_text(raw.get("generatorURL"), "generatorURL", required=False),
        source="native", invalid_unicode=repaired,
    )


def from_alertmanager_alert(raw: Any, now: float,
                            asset_labels: tuple[str, ...] = ("asset", "instance", "host", "node"),
                            default_severity: Severity = Severity.WARNING,
                            prefix: str = "", resolve_timeout: float = 300.0) -> Alert:
    """Normalize one Alertmanager / Prometheus alert (see module doc).

    ``rule`` = ``labels.alertname`` (may be ``""``, as ``Alert.Validate``, alert/alert.go),
    ``asset`` = first present of ``asset_labels``, ``severity`` = ``labels.severity`` when it
    names one (:data:`SEVERITY_ALIASES`), else ``default_severity``, status from ``endsAt`` vs
    ``now`` (s). As ``postAlerts`` (api/v2/api.go): empty labels dropped (``removeEmptyLabels``);
    missing ``startsAt`` = a past ``endsAt``, else first seen; missing ``endsAt`` = ``now +
    resolve_timeout``; an end before the start refused.
    Raises AlertRejected naming the field after ``prefix`` (``"[1]."``).
    """
    if not isinstance(raw, dict):
        raise AlertRejected(prefix.rstrip(".") or "(alert)",
                            f"must be a JSON object, got {type(raw).__name__}",
                            "an object with labels, annotations, startsAt, endsAt, generatorURL",
                            "type")
    raw, repaired = repair_doc(raw)
    labels = {k: v for k, v in _str_map(raw.get("labels"), prefix + "labels").items() if v != ""}
    if not labels:
        raise AlertRejected(prefix + "labels", "is required and must not be empty")
    rule = _text(labels.get("alertname"), prefix + "labels.alertname", required=False)
    asset = next((labels[k] for k in asset_labels if labels.get(k)), "")
    # any severity label is a label (P1, ticket...): Plait's severity is its alias, else the default
    severity = SEVERITY_ALIASES.get(labels.get("severity", "").strip().lower(), default_severity)
    starts = parse_time(raw.get("startsAt"), prefix + "startsAt")
    ends = parse_time(raw.get("endsAt"), prefix + "endsAt")
    if (ends if ends is not None else now + resolve_timeout) < (
            starts if starts is not None else ends if ends is not None else now):
        raise AlertRejected(prefix + ("endsAt" if ends is not None else "startsAt"),
                            "start time must be before end time",
                            f"startsAt no later than endsAt (a missing endsAt is now + "
                            f"resolve_timeout, {resolve_timeout:g} s)", "range")
    resolved = ends is not None and ends <= now
    return Alert(
        rule=rule, asset=asset, severity=severity,
        status=Status.RESOLVED if resolved else Status.FIRING,
        labels=labels,
        annotations=_str_map(raw.get("annotations"), prefix + "annotations", MAX_ANNOTATIONS),
        time=ends if resolved else now,
        # no startsAt: the end when it is over (Alertmanager), else when first seen
        starts_at=starts if starts is not None else ends if resolved else None,
        ends_at=ends,  # firing: the future endsAt, when it resolves unless re-sent
        generator_url=_text(raw.get("generatorURL"), prefix + "generatorURL", required=False),
        source="alertmanager", invalid_unicode=repaired,
    )


def from_alertmanager(payload: list[dict], now: float | None = None, **options: Any) -> list[Alert]:
    """Normalize an Alertmanager ``POST /api/v2/alerts`` body (a JSON list); ``now`` (epoch s,
    default the wall clock) decides status. Raises AlertRejected: not a list, or the first bad
    alert (``"[1].labels"``)."""
    if not isinstance(payload, list):
        raise AlertRejected("body", f"must be a JSON list of alerts, got {type(payload).__name__}",
                            "a list of Alertmanager postableAlert objects", "type")
    now = _time.time() if now is None else now
    return [from_alertmanager_alert(a, now, prefix=f"[{i}].", **options)
            for i, a in enumerate(payload)]


def normalize(raw: Any, now: float, **options: Any) -> Alert:
    """One raw alert of either format (``rule``: native; ``labels``: Alertmanager; an
    :class:`Alert` passes) into an :class:`Alert`. Raises only AlertRejected, naming the field."""
    if isinstance(raw, Alert):
        try:
            return repair_alert(raw)
        except Exception as e:  # a forged Alert (wrong types inside)
            raise AlertRejected("(alert)", f"unreadable alert: {type(e).__name__}: {e}") from None
    try:
        if isinstance(raw, dict) and "rule" not in raw and "labels" in raw:
            return from_alertmanager_alert(raw, now, **options)
        return from_native(raw, now)
    except AlertRejected:
        raise
    except Exception as e:  # a bug here must never crash the funnel
        raise AlertRejected("(alert)", f"unreadable alert: {type(e).__name__}: {e}") from None
