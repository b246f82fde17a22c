"""Silences: label matchers (:mod:`alerting.matchers`), a validity period and Alertmanager's
``time_intervals`` (``weekdays``, ``times``, IANA ``location``). Matchers that all match the empty
string would mute every alert lacking those labels: refused, as Alertmanager does, unless
``allow_broad``."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import re2

from alerting.intake import parse_time
from alerting.matchers import Matcher, compile_re2, parse_matcher, parse_matchers, re2_words
from plait.errors import FieldError

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class SilenceRefused(FieldError):
    """A silence that cannot be created (``POST /silences``: 422); ``field`` names the key as the
    caller spelt it, ``accepted`` what would do."""

    def __init__(self, field: str, problem: str, accepted: str | None = None,
                 code: str = "invalid") -> None:
        super().__init__(field, problem, accepted, code)


def is_broad(matchers: list[Matcher]) -> bool:
    """True when every matcher matches the empty string (``env!~"prod.*"`` mutes every alert
    without ``env``) or every matcher is negative (``asset!="h1"`` mutes all the others): Plait's
    own API refuses those without ``allow_broad`` (docs/alerting.md, "Differences from
    Alertmanager")."""
    return all(m.matches({}) for m in matchers) or all(not m.op.is_equal for m in matchers)


def end_now(d: dict[str, Any], now: float) -> bool:
    """End the stored silence ``d`` at ``now`` unless it ended already; True when it changed. A
    pending one ends before it began: Alertmanager sets both times to now (``silence.go``
    ``expire``)."""
    if d["ends_at"] is not None and d["ends_at"] <= now:
        return False
    d["starts_at"], d["ends_at"] = min(d["starts_at"], now), now
    return True


def alertmanager_refuses(matchers: list[Matcher]) -> bool:
    """Alertmanager's rule for its API (``silence/silence.go``, ``validateSilence`` and
    ``matchesEmpty``): refused when every matcher is ``=`` or ``=~`` and matches the empty string;
    a negative matcher never counts as matching it, so ``env!~"prod.*"`` passes there."""
    return all(m.op.is_equal and m.matches({}) for m in matchers)


def _hhmm(text: Any, field: str) -> int:
    m = re.match(r"^(\d{1,2}):(\d{2})$", str(text))
    if not m or int(m.group(1)) > 24 or int(m.group(2)) > 59 or (int(m.group(1)) == 24 and m.group(2) != "00"):
        raise SilenceRefused(field, f"expected HH:MM between 00:00 and 24:00, got {text!r}")
    return int(m.group(1)) * 60 + int(m.group(2))


def _weekdays(specs: list[Any], field: str) -> list[int]:
    days: set[int] = set()
    for s in specs:
        parts = str(s).lower().split(":")
        try:
            idx = [WEEKDAYS.index(p.strip()) for p in parts]
        except ValueError:
            raise SilenceRefused(field, f"unknown weekday in {s!r} (monday..sunday, ranges 'monday:friday')") from None
        if len(idx) == 1:
            days.add(idx[0])
        elif len(idx) == 2 and idx[0] <= idx[1]:
            days.update(range(idx[0], idx[1] + 1))
        else:
            raise SilenceRefused(field, f"bad weekday range {s!r}")
    return sorted(days)


@dataclass(frozen=True)
class TimeInterval:
    """A recurring window: on ``weekdays`` (0 = Monday; empty = every day), during ``times``
    (minutes of the day, ``[start, end)``; empty = all day), in IANA zone ``location``."""

    weekdays: tuple[int, ...] = ()
    times: tuple[tuple[int, int], ...] = ()
    location: str = "UTC"

    def contains(self, ts: float) -> bool:
        """True when epoch second ``ts`` falls inside the window."""
        local = datetime.fromtimestamp(ts, tz=ZoneInfo(self.location))
        if self.weekdays and local.weekday() not in self.weekdays:
            return False
        if not self.times:
            return True
        minute = local.hour * 60 + local.minute
        return any(start <= minute < end for start, end in self.times)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {"weekdays": list(self.weekdays), "times": [list(t) for t in self.times],
                "location": self.location}

    @classmethod
    def parse(cls, spec: Any, field: str) -> "TimeInterval":
        """From ``{"weekdays", "times": [{"start_time", "end_time"}], "location"}`` or
        ``to_dict``'s form. Raises SilenceRefused naming the bad key."""
        if not isinstance(spec, dict):
            raise SilenceRefused(field, "expected an object with weekdays / times / location")
        unknown = set(spec) - {"weekdays", "times", "location"}
        if unknown:
            raise SilenceRefused(f"{field}.{sorted(unknown)[0]}", "unknown key")
        wd = spec.get("weekdays") or []
        days = wd if all(isinstance(d, int) for d in wd) else _weekdays(wd, f"{field}.weekdays")
        times = []
        for i, t in enumerate(spec.get("times") or []):
            if isinstance(t, (list, tuple)):
                start, end = int(t[0]), int(t[1])
            else:
                start = _hhmm(t.get("start_time"), f"{field}.times.{i}.start_time")
                end = _hhmm(t.get("end_time"), f"{field}.times.{i}.end_time")
            if start >= end:
                raise SilenceRefused(f"{field}.times.{i}", "start_time must be before end_time")
            times.append((start, end))
        location = spec.get("location") or "UTC"
        try:
            ZoneInfo(location)
        except (ZoneInfoNotFoundError, ValueError):
            raise SilenceRefused(f"{field}.location", f"unknown IANA time zone {location!r}") from None
        return cls(tuple(days), tuple(times), location)


@dataclass(frozen=True)
class Silence:
    """A silence: valid in ``[starts_at, ends_at)`` epoch seconds (``ends_at`` None: until expired,
    only with ``time_intervals``, which then bound it)."""

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float
    ends_at: float | None
    author: str
    comment: str
    allow_broad: bool = False
    time_intervals: tuple[TimeInterval, ...] = field(default=())
    #: the matchers cheapest first (:attr:`alerting.matchers.MatchOp.cost`)
    _order: tuple[Matcher, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        order = sorted(self.matchers, key=lambda m: m.op.cost)
        object.__setattr__(self, "_order", tuple(order))

    def active(self, now: float) -> bool:
        """True when the silence mutes alerts at epoch second ``now``."""
        if now < self.starts_at or (self.ends_at is not None and now >= self.ends_at):
            return False
        return not self.time_intervals or any(t.contains(now) for t in self.time_intervals)

    def matches(self, labels: dict[str, str], now: float) -> bool:
        """True when active at ``now`` and every matcher matches ``labels``."""
        return self.active(now) and all(m.matches(labels) for m in self._order)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {"id": self.id, "matchers": [m.to_dict() for m in self.matchers],
                "starts_at": self.starts_at, "ends_at": self.ends_at, "author": self.author,
                "comment": self.comment, "allow_broad": self.allow_broad,
                "time_intervals": [t.to_dict() for t in self.time_intervals]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Silence":
        """Inverse of :meth:`to_dict`."""
        return cls(d["id"], tuple(Matcher(**m) for m in d["matchers"]), d["starts_at"],
                   d["ends_at"], d["author"], d["comment"], d.get("allow_broad", False),
                   tuple(TimeInterval.parse(t, "time_intervals") for t in d.get("time_intervals", [])))


def _bare_regex_valid(m: Matcher) -> None:
    """A silence's regex must also compile unanchored (Alertmanager's ``validateMatcher``: ``a)|(b``
    passes in a route, not here). Raises ValueError "invalid regular expression"."""
    if m.op.is_regex:
        try:
            compile_re2(m.value)
        except re2.error as e:
            raise ValueError(f"invalid regular expression {m.value!r}: {re2_words(e)}") from None


def create_silence(spec: dict[str, Any], now: float, silence_id: str) -> Silence:
    """Validate a silence request (``matchers``, ``starts_at``/``startsAt`` default ``now``,
    ``ends_at``/``endsAt``, ``author``/``createdBy``, ``comment``, ``allow_broad``,
    ``time_intervals``). Raises SilenceRefused naming the key (``matchers`` when broad)."""
    if not isinstance(spec, dict):
        raise SilenceRefused("(silence)", "expected an object")
    raw = spec.get("matchers")
    if not isinstance(raw, list) or not raw:
        raise SilenceRefused("matchers", "at least one matcher is required",
                             'a list such as ["asset=\\"h1\\"", "rule=~\\"Disk.*\\""]', "required")
    matchers = []
    for i, m in enumerate(raw):
        try:
            parsed = parse_matchers(m) if isinstance(m, str) else [parse_matcher(m)]
            if not parsed:  # "" or "{}": Alertmanager reads no matcher there
                raise ValueError(f"no matchers in {m!r}")
            for p in parsed:
                _bare_regex_valid(p)
        except ValueError as e:
            raise SilenceRefused(f"matchers.{i}", str(e),
                                 'name="value" with =, !=, =~ or !~ (a string), or '
                                 '{"name", "value", "isRegex", "isEqual"}', "matcher") from None
        matchers.extend(parsed)
    allow_broad = spec.get("allow_broad", spec.get("allowBroad", False)) is True
    if is_broad(matchers) and not allow_broad:
        raise SilenceRefused("matchers", "every matcher matches the empty string or is negative, "
                             "so this silence would mute every alert without these labels or "
                             "with any other value",
                             'a matcher that does not match the empty string (asset="h1"), '
                             "or allow_broad: true", "broad")
    try:
        starts = parse_time(spec.get("starts_at", spec.get("startsAt")), "starts_at")
        ends = parse_time(spec.get("ends_at", spec.get("endsAt")), "ends_at")
    except Exception as e:
        raise SilenceRefused(getattr(e, "field", "starts_at"), str(e)) from None
    starts = now if starts is None else starts
    intervals = tuple(TimeInterval.parse(t, f"time_intervals.{i}")
                      for i, t in enumerate(spec.get("time_intervals") or []))
    if ends is None and not intervals:
        raise SilenceRefused("ends_at", "is required (only recurring silences may be open-ended)",
                             "a time after starts_at", "required")
    if ends is not None and ends <= starts:
        raise SilenceRefused("ends_at", "must be after starts_at", "a time after starts_at",
                             "order")
    # present and text, empty allowed: Alertmanager's postableSilence requires both fields and
    # takes "" (amtool silence add --no-require-comment sends one)
    author = spec.get("author", spec.get("createdBy"))
    if not isinstance(author, str):
        raise SilenceRefused("author", "is required", "a string: who created the silence",
                             "required")
    comment = spec.get("comment")
    if not isinstance(comment, str):
        raise SilenceRefused("comment", "is required", "a string: why the silence exists",
                             "required")
    return Silence(silence_id, tuple(matchers), starts, ends, author, comment, allow_broad, intervals)


def silenced_by(silences: list[Silence], labels: dict[str, str], now: float) -> str | None:
    """Id of the first silence that mutes ``labels`` at ``now``, else None."""
    for s in silences:
        if s.matches(labels, now):
            return s.id
    return None
