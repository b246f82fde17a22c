"""The only translation between the native alerting routes' public
vocabulary (camelCase, RFC 3339) and the funnel's names (``starts_at``, epoch
seconds). A snake_case or unknown key is a 422 naming the accepted keys."""
from __future__ import annotations

import codecs
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from alerting.intake import OUT_OF_RANGE, format_time, in_range
from alerting.model import AlertRejected
from alerting.silence import WEEKDAYS, Silence, SilenceRefused, create_silence
from plait.errors import FieldError

#: Keys of one native alert (``POST /alerts``).
ALERT_KEYS = ("rule", "asset", "severity", "status", "labels", "annotations", "time",
              "startsAt", "endsAt", "generatorURL")
ALERT_TIMES = ("time", "startsAt", "endsAt")
#: Keys of a silence request (``POST /silences``).
SILENCE_KEYS = ("matchers", "startsAt", "endsAt", "createdBy", "comment", "allowBroad",
                "timeIntervals")
INTERVAL_KEYS = ("weekdays", "times", "location")
RANGE_KEYS = ("startTime", "endTime")
_PUBLIC = {"starts_at": "startsAt", "ends_at": "endsAt", "author": "createdBy",
           "allow_broad": "allowBroad", "time_intervals": "timeIntervals",
           "start_time": "startTime", "end_time": "endTime", "(silence)": "body"}
_PUBLIC_RE = re.compile(r"\b(" + "|".join(re.escape(k) for k in _PUBLIC if k[0] != "(") + r")\b")
RFC3339_EXAMPLE = "an RFC 3339 timestamp such as 2026-11-30T17:00:00Z"
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


_SURROGATE = re.compile("[\ud800-\udfff]")
#: A JSON escape of a UTF-16 surrogate (``\uD800``-``\uDFFF``, RFC 8259 section 7): in a body
#: that is UTF-8 the only way a lone surrogate reaches a parsed string.
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _per_byte(e: UnicodeError) -> tuple[str, int]:
    return "\ufffd" * (e.end - e.start), e.end  # type: ignore[attr-defined]


codecs.register_error("plait.per_byte", _per_byte)


def scrub_utf8(raw: bytes) -> tuple[bytes, int]:
    """(``raw`` with each byte that is not part of UTF-8 replaced by U+FFFD, as Go's
    ``encoding/json`` reads a string, so an Alertmanager client's alert is taken and fingerprinted
    as Alertmanager takes it; count replaced)."""
    if raw.isascii():
        return raw, 0
    try:
        raw.decode()
        return raw, 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "plait.per_byte")
        return text.encode(), text.count("\ufffd") - raw.count("\ufffd".encode())


def scrub_text(doc: Any, raw: bytes | None = None) -> tuple[Any, int]:
    """(``doc`` with each lone UTF-16 surrogate, which JSON allows and UTF-8
    cannot carry, replaced by U+FFFD; count replaced). ``raw``: the UTF-8 JSON ``doc`` was
    parsed from; without a surrogate escape in it ``doc`` is returned as it is, unwalked."""
    if raw is not None and _ESCAPED_SURROGATE.search(raw) is None:
        return doc, 0
    count = 0

    def fix(value: Any) -> Any:
        nonlocal count
        if isinstance(value, str):
            if value.isascii():
                return value
            fixed, n = _SURROGATE.subn("\ufffd", value)
            count += n
            return fixed
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            return {fix(k): fix(v) for k, v in value.items()}
        return value

    return fix(doc), count


def camel(name: str) -> str:
    """``allow_broad`` -> ``allowBroad`` (names without ``_`` unchanged)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _join(items: tuple[str, ...] | list[str]) -> str:
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else items[0]


def check_keys(doc: dict[str, Any], known: tuple[str, ...], where: str = "",
               error: type[FieldError] = FieldError) -> None:
    """Raises ``error`` (``spelling`` or ``unknown``) for a key outside ``known``."""
    for key in doc:
        if key in known:
            continue
        name = f"{where}{key}"
        if isinstance(key, str) and camel(key) in known and camel(key) != key:
            raise error(name, "snake_case spelling is not accepted", camel(key), "spelling")
        raise error(name, "is not a known field", _join(known), "unknown")


def parse_rfc3339(value: Any, field: str, error: type[FieldError] = FieldError) -> float | None:
    """Epoch seconds of an RFC 3339 string with a zone, None when absent;
    raises ``error`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not _RFC3339.match(value.strip()):
        got = type(value).__name__ if not isinstance(value, str) else repr(value[:40])
        raise error(field, f"must be an RFC 3339 timestamp with a time zone, got {got}",
                    RFC3339_EXAMPLE, "time")
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        ts = datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError):
        raise error(field, f"is not a real date and time: {value[:40]!r}", RFC3339_EXAMPLE,
                    "time") from None
    if not in_range(ts):
        raise error(field, OUT_OF_RANGE, RFC3339_EXAMPLE, "time")
    return ts


def rfc3339(ts: float | None) -> str | None:
    return None if ts is None else format_time(ts)


def check_native_alert(raw: Any, where: str = "") -> None:
    """Raises ``AlertRejected`` unless an object of :data:`ALERT_KEYS`, RFC 3339 times."""
    if not isinstance(raw, dict):
        raise AlertRejected(where.rstrip(".") or "body", "must be a JSON object",
                            "an alert object or a list of them", "type")
    check_keys(raw, ALERT_KEYS, where, AlertRejected)
    for key in ALERT_TIMES:
        parse_rfc3339(raw.get(key), f"{where}{key}", AlertRejected)


def counters_view(counters: dict[str, Any]) -> dict[str, Any]:
    """The funnel counters with camelCase top-level keys."""
    return {camel(k): v for k, v in counters.items()}


def public_field(field: str) -> str:
    parts = field.split(".")
    return ".".join(_PUBLIC.get(p, p) for p in parts)


def public_text(text: str) -> str:
    return _PUBLIC_RE.sub(lambda m: _PUBLIC[m.group(1)], text)


def _interval(spec: Any, where: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise SilenceRefused(where, "must be an object", "{weekdays, times, location}", "type")
    check_keys(spec, INTERVAL_KEYS, f"{where}.", SilenceRefused)
    weekdays = spec.get("weekdays") or []
    if not isinstance(weekdays, list) or not all(isinstance(d, str) for d in weekdays):
        raise SilenceRefused(f"{where}.weekdays", "must be a list of day names",
                             '["monday", "tuesday:friday"] (monday..sunday, ranges a:b)', "type")
    location = spec.get("location") or "UTC"
    if not isinstance(location, str) or not _zone_exists(location):
        raise SilenceRefused(f"{where}.location", f"is not an IANA time zone, got {location!r:.40}",
                             "an IANA time zone name such as UTC or Europe/Paris", "time_zone")
    times = spec.get("times") or []
    if not isinstance(times, list):
        raise SilenceRefused(f"{where}.times", "must be a list", '[{"startTime": "22:00", '
                             '"endTime": "24:00"}]', "type")
    out_times = []
    for i, t in enumerate(times):
        if not isinstance(t, dict):
            raise SilenceRefused(f"{where}.times.{i}", "must be an object",
                                 '{"startTime": "HH:MM", "endTime": "HH:MM"}', "type")
        check_keys(t, RANGE_KEYS, f"{where}.times.{i}.", SilenceRefused)
        out_times.append({"start_time": t.get("startTime"), "end_time": t.get("endTime")})
    return {"weekdays": weekdays, "times": out_times, "location": location}


def _zone_exists(name: str) -> bool:
    try:
        ZoneInfo(name)
    except Exception:
        return False
    return True


def parse_silence_request(doc: Any, now: float, silence_id: str) -> Silence:
    """A :class:`Silence` from a ``POST /silences`` body; ``SilenceRefused``
    names the field as the caller spelt it."""
    if not isinstance(doc, dict):
        raise SilenceRefused("body", "must be a JSON object",
                             "{matchers, endsAt, createdBy, comment, ...}", "type")
    check_keys(doc, SILENCE_KEYS, "", SilenceRefused)
    intervals = doc.get("timeIntervals") or []
    if not isinstance(intervals, list):
        raise SilenceRefused("timeIntervals", "must be a list", "a list of "
                             "{weekdays, times, location}", "type")
    spec = {"matchers": doc.get("matchers"),
            "starts_at": parse_rfc3339(doc.get("startsAt"), "startsAt", SilenceRefused),
            "ends_at": parse_rfc3339(doc.get("endsAt"), "endsAt", SilenceRefused),
            "author": doc.get("createdBy"), "comment": doc.get("comment"),
            "allow_broad": doc.get("allowBroad", False),
            "time_intervals": [_interval(t, f"timeIntervals.{i}") for i, t in enumerate(intervals)]}
    if "allowBroad" in doc and not isinstance(doc["allowBroad"], bool):
        raise SilenceRefused("allowBroad", "must be a boolean", "true or false", "type")
    try:
        return create_silence(spec, now, silence_id)
    except SilenceRefused as e:
        raise SilenceRefused(public_field(e.field), public_text(e.rule),
                             public_text(e.accepted) if e.accepted else None, e.code) from None


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def silence_view(d: dict[str, Any], now: float, counts: dict[str, int]) -> dict[str, Any]:
    """The public JSON of a stored silence at ``now`` (epoch s), with
    ``status``, ``activeNow`` and ``silenced`` (from ``counts``)."""
    s = Silence.from_dict(d)
    if s.ends_at is not None and now >= s.ends_at:
        state = "expired"
    elif now < s.starts_at:
        state = "pending"
    else:
        state = "active"
    intervals = [{"weekdays": [WEEKDAYS[w] for w in t.weekdays],
                  "times": [{"startTime": _hhmm(a), "endTime": _hhmm(b)} for a, b in t.times],
                  "location": t.location} for t in s.time_intervals]
    return {"id": s.id, "matchers": [str(m) for m in s.matchers],
            "startsAt": rfc3339(s.starts_at), "endsAt": rfc3339(s.ends_at),
            "createdBy": s.author, "comment": s.comment, "allowBroad": s.allow_broad,
            "timeIntervals": intervals, "status": state, "activeNow": s.active(now),
            "silenced": counts.get(s.id, 0)}
