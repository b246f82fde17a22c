"""The public vocabulary of the native alerting routes (``/alerts``,
``/silences``): camelCase keys and RFC 3339 times, in requests and answers.

Inside, the funnel keeps its own names (``starts_at``, epoch seconds...); this
module is the only translation. Only the camelCase spelling is accepted: a
snake_case key (``allow_broad``) is a 422 naming the key and the accepted
spelling (``allowBroad``); an unknown key is a 422 listing the known ones.
The Alertmanager-compatible routes (``/api/v2/...``) keep Alertmanager's names
and are not translated here.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from alerting.intake import format_time
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
#: Internal silence names -> the public spelling (for error messages).
_PUBLIC = {"starts_at": "startsAt", "ends_at": "endsAt", "author": "createdBy",
           "allow_broad": "allowBroad", "time_intervals": "timeIntervals",
           "start_time": "startTime", "end_time": "endTime", "(silence)": "body"}
_PUBLIC_RE = re.compile(r"\b(" + "|".join(re.escape(k) for k in _PUBLIC if k[0] != "(") + r")\b")
RFC3339_EXAMPLE = "an RFC 3339 timestamp such as 2026-11-30T17:00:00Z"
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_text(doc: Any) -> tuple[Any, int]:
    """``doc`` (parsed JSON) with every lone UTF-16 surrogate (``"cut \\ud83d"``,
    which JSON allows and UTF-8 cannot carry) replaced by U+FFFD, in keys and
    values at any depth; returns (document, characters replaced). A valid
    surrogate pair was already joined by the JSON parser, so any surrogate
    left is lone."""
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
    """Refuse keys outside ``known``; ``where`` prefixes field names (``[1].``).

    Raises:
        FieldError (or ``error``): ``spelling`` for a snake_case spelling of a
            known key (accepted: the camelCase one), ``unknown`` otherwise
            (accepted: the known keys).
    """
    for key in doc:
        if key in known:
            continue
        name = f"{where}{key}"
        if isinstance(key, str) and camel(key) in known and camel(key) != key:
            raise error(name, "snake_case spelling is not accepted", camel(key), "spelling")
        raise error(name, "is not a known field", _join(known), "unknown")


def parse_rfc3339(value: Any, field: str, error: type[FieldError] = FieldError) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp string; None when absent.

    Raises:
        FieldError (or ``error``): a number, or a string that is not RFC 3339
            with a zone (``Z`` or ``+hh:mm``), or names no real time
            (``2024-01-01T12:99:00Z``).
    """
    if value is None:
        return None
    if not isinstance(value, str) or not _RFC3339.match(value.strip()):
        got = type(value).__name__ if not isinstance(value, str) else repr(value[:40])
        raise error(field, f"must be an RFC 3339 timestamp with a time zone, got {got}",
                    RFC3339_EXAMPLE, "time")
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError):  # month 99, hour 25...
        raise error(field, f"is not a real date and time: {value[:40]!r}", RFC3339_EXAMPLE,
                    "time") from None


def rfc3339(ts: float | None) -> str | None:
    """RFC 3339 UTC text of epoch seconds (``None`` stays None)."""
    return None if ts is None else format_time(ts)


# -- alerts ---------------------------------------------------------------------

def check_native_alert(raw: Any, where: str = "") -> None:
    """The edge rules of one native alert before intake: an object, only the
    camelCase keys of :data:`ALERT_KEYS`, times as RFC 3339 strings.

    Raises:
        AlertRejected: naming the field as sent (``[1].starts_at``) and the
            accepted spelling or form.
    """
    if not isinstance(raw, dict):
        raise AlertRejected(where.rstrip(".") or "body", "must be a JSON object",
                            "an alert object or a list of them", "type")
    check_keys(raw, ALERT_KEYS, where, AlertRejected)
    for key in ALERT_TIMES:
        parse_rfc3339(raw.get(key), f"{where}{key}", AlertRejected)


def counters_view(counters: dict[str, Any]) -> dict[str, Any]:
    """The funnel counters with camelCase keys (``silenced_by`` ->
    ``silencedBy``, ``http_5xx`` -> ``http5xx``); names inside maps (silence
    ids, dedupe reasons) are data and stay as they are."""
    return {camel(k): v for k, v in counters.items()}


# -- silences -------------------------------------------------------------------

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
    except Exception:  # not found, malformed ("../x", NUL), a directory...
        return False
    return True


def parse_silence_request(doc: Any, now: float, silence_id: str) -> Silence:
    """A :class:`Silence` from a ``POST /silences`` body (keys
    :data:`SILENCE_KEYS`; ``startsAt`` / ``endsAt`` RFC 3339; ``timeIntervals``
    of ``{weekdays, times: [{startTime, endTime}], location}``).

    Raises:
        SilenceRefused: naming the field as the caller spelt it and what would
            be accepted (every internal name is translated back).
    """
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
    """The public JSON of a stored silence (``Silence.to_dict`` form) at
    ``now`` (epoch seconds): camelCase, RFC 3339 times, ``status``
    (``pending`` / ``active`` / ``expired``), ``activeNow`` (inside its time
    intervals too) and ``silenced`` (alerts it silenced, from ``counts``)."""
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
