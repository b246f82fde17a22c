"""Silences: label matchers, a validity period and recurring maintenance windows.

Matcher semantics follow Alertmanager (docs, "Configuration: matcher"):
operators ``=``, ``!=``, ``=~``, ``!~``; regexes are anchored at both ends
(``^(?:re)$``); an absent label matches as the empty string. Recurring windows
follow Alertmanager's ``time_intervals`` (``weekdays: ["monday:friday"]``,
``times: [{start_time: "22:00", end_time: "24:00"}]``, ``location`` = IANA zone).

A silence whose matchers all match the empty string would silence every alert
lacking those labels; Alertmanager refuses it ("at least one matcher must not
match the empty string"); Plait refuses it too unless ``allow_broad`` is set.
"""
from __future__ import annotations

import json
import re

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import re2

from alerting.intake import parse_time, repair_text
from plait.errors import FieldError

OPERATORS = ("=~", "!~", "!=", "=")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class SilenceRefused(FieldError):
    """A silence that cannot be created (``POST /silences`` answers 422; a
    funnel partition logs and skips the command). ``field`` names the
    offending key as the caller spelt it; ``accepted`` says what would do."""

    def __init__(self, field: str, problem: str, accepted: str | None = None,
                 code: str = "invalid") -> None:
        super().__init__(field, problem, accepted, code)


def _re2_options():
    opts = re2.Options()  # Go's defaults: ``.`` does not match a newline unless ``(?s)``
    opts.log_errors = False  # a bad pattern is the caller's error, raised, not logged
    return opts


_RE2_OPTIONS = _re2_options()


def _anchored(pattern: str):
    """``pattern`` compiled anchored (``^(?:pattern)$``) with RE2, the syntax
    and linear-time matching of Go's ``regexp`` that Alertmanager uses: a
    pattern such as ``(?:a|a)*\\d`` costs time linear in the value, not
    exponential, and what Go refuses (backreferences, possessive
    quantifiers, lookaround) is refused here too.

    Nothing is kept here: the caller holds what it compiled (a
    :class:`Matcher` its own, for its lifetime; a request its filters', until
    it is answered). A compiled pattern costs memory up to RE2's ``max_mem``
    (8 MiB): its program, and the DFA states matching builds, which a
    pattern such as ``[ab]*a[ab]{16}`` grows toward that bound on varied
    values. A process-wide cache of them grew by that much per distinct
    pattern (a 1,024-entry cache of such filters: ~2 GB), so there is none,
    and the binding's own (``re2.compile`` keeps the last 128) is bypassed.

    Raises:
        re2.error: not a valid RE2 pattern.
        UnicodeEncodeError: ``pattern`` holds a lone UTF-16 surrogate.
    """
    return re2._Regexp(f"^(?:{pattern})$", _RE2_OPTIONS)


def regex_hit(rx: Any, value: str) -> bool:
    """Whether ``value`` matches ``rx`` (from :func:`compile_regex`) as Go's
    ``MatchString`` does: a search, so the anchors of ``^(?:pattern)$`` do
    the anchoring (``a)|(b`` becomes ``^(?:a)|(b)$``, which Alertmanager
    finds in ``xb``); a value holding a lone surrogate is matched as intake
    makes it (U+FFFD)."""
    try:
        return rx.search(value) is not None
    except UnicodeEncodeError:
        return rx.search(repair_text(value)[0]) is not None


def _re2_words(e: Exception) -> str:
    """What RE2 said (the binding passes bytes or text)."""
    text = e.args[0] if e.args else str(e)
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


def compile_regex(pattern: str) -> tuple[Any, str | None]:
    """(compiled, None) for a valid matcher regex (:func:`_anchored`), or
    (None, why not: RE2's words, about the pattern as given, not the anchored
    one). RE2 takes one escape Go's ``regexp`` refuses: ``\\C`` (any byte, so
    it can split a UTF-8 character); it is refused here as Go refuses it."""
    if _byte_escape(pattern):
        return None, f"invalid escape sequence: `\\C` in {pattern!r}"
    try:
        return _anchored(pattern), None
    except re2.error as e:
        return None, _re2_words(e).replace(f"^(?:{pattern})$", pattern)
    except UnicodeEncodeError:
        return None, "holds a lone UTF-16 surrogate, which is not Unicode text"


def _byte_escape(pattern: str) -> bool:
    """Whether ``pattern`` holds the escape ``\\C`` outside a ``\\Q...\\E`` quote."""
    i = pattern.find("\\")
    while 0 <= i < len(pattern) - 1:
        nxt = pattern[i + 1]
        if nxt == "C":
            return True
        if nxt == "Q":  # literal up to \E (or the end)
            end = pattern.find("\\E", i + 2)
            if end < 0:
                return False
            i = end
        i = pattern.find("\\", i + 2)
    return False


@dataclass(frozen=True)
class Matcher:
    """``name op value``; ``op`` one of ``=``, ``!=``, ``=~``, ``!~``."""

    name: str
    op: str
    value: str
    _rx: Any = field(default=None, init=False, repr=False, compare=False)  # the compiled regex

    def matches(self, labels: dict[str, str]) -> bool:
        """True when the label set satisfies the matcher (absent label = ``""``).

        Raises:
            re2.error: a regex operator with an invalid pattern (one made by
                :func:`parse_matcher` has been checked)."""
        v = labels.get(self.name, "")
        if self.op == "=":
            return v == self.value
        if self.op == "!=":
            return v != self.value
        rx = self._rx
        if rx is None:  # compiled once, kept while the matcher lives
            rx = _anchored(self.value)
            object.__setattr__(self, "_rx", rx)
        hit = regex_hit(rx, v)
        return hit if self.op == "=~" else not hit

    def __str__(self) -> str:
        """Text :func:`parse_matcher` reads back: ``env="prod"``; a name that
        is not a classic label name is quoted (``"cloud.account.name"="x"``)."""
        name = self.name if _LEGACY_NAME.match(self.name) else json.dumps(self.name, ensure_ascii=False)
        return f"{name}{self.op}{json.dumps(self.value, ensure_ascii=False)}"


#: Characters that end an unquoted name or value (Alertmanager 0.27+ lexer).
_RESERVED = set('{}!=~,\\"\'`')
_OPS_BY_LENGTH = ("=~", "!~", "!=", "=")
_LEGACY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNQUOTED_VALUE_BAD = re.compile(r"[\"'=~!\s]")


def _unquote(text: str, what: str, spec: str) -> str:
    """The content of a double-quoted string (quotes included in ``text``):
    JSON/Go escapes (``\\n``, ``\\"``, ``\\u00e9``); any other escape is kept
    as written (``"a\\.b"`` -> ``a\\.b``, as Alertmanager's classic parser
    keeps it, so regexes survive)."""
    try:
        value = json.loads(text)
        if isinstance(value, str):
            return value
    except ValueError:
        pass
    out, i, body = [], 0, text[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\"}.get(nxt, "\\" + nxt))
            i += 2
            continue
        if ch == '"':
            raise ValueError(f"bad matcher {spec!r}: unescaped double quote in the {what}")
        out.append(ch)
        i += 1
    return "".join(out)


def _quoted_end(text: str, start: int) -> int:
    """Index just past the double-quoted string opening at ``start``; -1 when unclosed."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return -1


def _parse_text(spec: str) -> tuple[str, str, str]:
    """(name, op, value) of one matcher written as text (see :func:`parse_matcher`)."""
    hint = 'expected name="value" with =, !=, =~ or !~'
    s = spec.strip()
    if s.startswith("{") and s.endswith("}"):
        s = s[1:-1].strip()
    if not s:
        raise ValueError(f"bad matcher {spec!r}: {hint}")
    if s[0] == '"':  # UTF-8 label name in quotes (Alertmanager 0.28)
        end = _quoted_end(s, 0)
        if end < 0:
            raise ValueError(f"bad matcher {spec!r}: the quoted label name is not closed")
        name, i = _unquote(s[:end], "label name", spec), end
    else:
        i = 0
        while i < len(s) and s[i] not in _RESERVED and not s[i].isspace():
            i += 1
        name = s[:i]
        if not name or not (name[0].isalpha() or name[0] == "_"):
            raise ValueError(f"bad matcher {spec!r}: {hint} (a name starts with a letter or _; "
                             f'quote any other name: "1st.name"="v")')
    rest = s[i:].lstrip()
    op = next((o for o in _OPS_BY_LENGTH if rest.startswith(o)), None)
    if op is None:
        raise ValueError(f"bad matcher {spec!r}: {hint}")
    raw = rest[len(op):].strip()
    if raw.startswith('"'):
        end = _quoted_end(raw, 0)
        if end != len(raw):
            raise ValueError(f"bad matcher {spec!r}: the quoted value must be closed and "
                             "end the matcher")
        value = _unquote(raw, "value", spec)
    elif len(raw) >= 2 and raw[0] == raw[-1] == "'":
        value = raw[1:-1]
    elif _UNQUOTED_VALUE_BAD.search(raw):
        raise ValueError(f"bad matcher {spec!r}: quote a value with spaces or =~!\"' in it")
    else:
        value = raw
    if not name:
        raise ValueError(f"bad matcher {spec!r}: the label name is empty")
    return name, op, value


def split_matchers(text: str) -> list[str]:
    """The matcher texts of one Alertmanager selector: ``{a="1", b=~"x,y"}``,
    ``a="1",b="2"`` or a single matcher; commas inside quotes do not split;
    a trailing comma is allowed (as in Alertmanager).

    Raises:
        ValueError: an unclosed ``{`` or quote, or an empty matcher between commas.
    """
    s = text.strip()
    if s.startswith("{") or s.endswith("}"):
        if not (s.startswith("{") and s.endswith("}")):
            raise ValueError(f"bad matchers {text!r}: unbalanced braces")
        s = s[1:-1]
    parts, buf, quoted, i = [], [], False, 0
    while i < len(s):
        ch = s[i]
        if quoted and ch == "\\" and i + 1 < len(s):
            buf.append(s[i:i + 2])
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
        i += 1
    if quoted:
        raise ValueError(f"bad matchers {text!r}: a quote is not closed")
    last = "".join(buf).strip()
    if last or not parts:
        parts.append(last)
    if any(not p for p in parts):
        raise ValueError(f"bad matchers {text!r}: an empty matcher between commas")
    return parts


def parse_matchers(spec: Any) -> list[Matcher]:
    """Every matcher of ``spec``: a selector string (``{a="1", b!="2"}``, see
    :func:`split_matchers`), one matcher object, or a list of either.

    Raises:
        ValueError: as :func:`parse_matcher`, naming the bad matcher.
    """
    if isinstance(spec, list):
        return [m for item in spec for m in parse_matchers(item)]
    if isinstance(spec, str):
        return [parse_matcher(t) for t in split_matchers(spec)]
    return [parse_matcher(spec)]


def parse_matcher(spec: Any) -> Matcher:
    """A :class:`Matcher` from text, ``{"name", "op", "value"}`` or
    Alertmanager API's ``{"name", "value", "isRegex", "isEqual"}``.

    Text follows Alertmanager 0.25-0.28 (``pkg/labels`` classic parser and the
    0.27+ UTF-8 parser): ``name op value`` with ``op`` one of ``=``, ``!=``,
    ``=~``, ``!~``; the name is a bare word starting with a letter or ``_``
    (``pod``, ``cloud.account.name``) or any UTF-8 text in double quotes
    (``"cloud.account.name"``); the value is double-quoted (JSON/Go escapes),
    single-quoted, or bare without spaces or ``"'=~!``; one pair of braces
    around it is allowed (``{"a.b"="c"}``).

    Raises:
        ValueError: bad syntax, unknown operator or invalid regex.
    """
    if isinstance(spec, Matcher):
        return spec
    if isinstance(spec, dict):
        name, value = spec.get("name"), spec.get("value")
        if "op" in spec:
            op = spec["op"]
        else:
            is_regex, equal = spec.get("isRegex", False), spec.get("isEqual", True)
            if not isinstance(is_regex, bool) or not isinstance(equal, bool):
                raise ValueError(f"matcher isRegex and isEqual must be booleans: {spec!r}")
            op = {(False, True): "=", (False, False): "!=", (True, True): "=~",
                  (True, False): "!~"}[(is_regex, equal)]
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise ValueError(f"matcher needs a string name and value: {spec!r}")
    elif isinstance(spec, str):
        name, op, value = _parse_text(spec)
    else:
        raise ValueError(f"bad matcher {spec!r}")
    if op not in OPERATORS:
        raise ValueError(f"bad matcher operator {op!r} (use =, !=, =~ or !~)")
    matcher = Matcher(name, op, value)
    if op in ("=~", "!~"):
        rx, problem = compile_regex(value)
        if problem is not None:
            raise ValueError(f"bad regex {value!r} in matcher for {name!r}: {problem} "
                             "(RE2 syntax, as Go's regexp in Alertmanager)")
        object.__setattr__(matcher, "_rx", rx)  # checked by compiling: kept, not compiled again
    return matcher


def is_broad(matchers: list[Matcher]) -> bool:
    """True when every matcher matches the empty string, so an alert without
    any of the named labels is silenced (Alertmanager's refusal rule), or when
    every matcher is negative (``!=``, ``!~``): ``asset!=""`` mutes every alert
    that has an asset, which is all of them."""
    return all(m.matches({}) for m in matchers) or all(m.op in ("!=", "!~") for m in matchers)


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
    """A recurring window: on ``weekdays`` (0 = Monday; empty = every day),
    during ``times`` (minutes of the day, ``[start, end)``; empty = all day),
    in IANA zone ``location``."""

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
        """From ``{"weekdays": [...], "times": [{"start_time", "end_time"}], "location"}``
        (or the ``to_dict`` form).

        Raises:
            SilenceRefused: naming the bad key.
        """
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


#: The order a silence tries its matchers in, by operator: cheapest first.
_MATCH_COST = {"=": 0, "!=": 1, "=~": 2, "!~": 2}


@dataclass(frozen=True)
class Silence:
    """A silence (Alertmanager API field names in brackets).

    ``starts_at`` [startsAt] / ``ends_at`` [endsAt]: validity, epoch seconds,
    ``[starts_at, ends_at)``; ``ends_at`` None = until expired (only with
    ``time_intervals``); ``author`` [createdBy]; ``comment``; ``time_intervals``:
    when set, the silence is active only inside one of them.
    """

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float
    ends_at: float | None
    author: str
    comment: str
    allow_broad: bool = False
    time_intervals: tuple[TimeInterval, ...] = field(default=())
    #: the matchers in the order they are tried: equality first, regexes last, so an
    #: ``alertname="X"`` that fails costs no regex match (up to ms on a long value)
    _order: tuple[Matcher, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        order = sorted(self.matchers, key=lambda m: _MATCH_COST.get(m.op, 2))
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
        """Plain JSON data (matchers as ``{"name", "op", "value"}``)."""
        return {"id": self.id, "matchers": [{"name": m.name, "op": m.op, "value": m.value} for m in self.matchers],
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
    """A silence's regex must also compile as written, unanchored: Alertmanager's
    silence validation (``validateMatcher``) compiles the bare pattern, so
    ``a)|(b``, which a filter or a route takes (``^(?:a)|(b)$``), is refused
    in a silence.

    Raises:
        ValueError: Alertmanager's words, "invalid regular expression"."""
    if m.op in ("=~", "!~"):
        try:
            re2._Regexp(m.value, _RE2_OPTIONS)
        except re2.error as e:
            raise ValueError(f"invalid regular expression {m.value!r}: {_re2_words(e)}") from None


def create_silence(spec: dict[str, Any], now: float, silence_id: str) -> Silence:
    """Validate a silence request into a :class:`Silence`.

    Keys: ``matchers`` (list of matcher strings or objects), ``starts_at``
    [``startsAt``] (default ``now``), ``ends_at`` [``endsAt``], ``author``
    [``createdBy``], ``comment``, ``allow_broad``, ``time_intervals``.

    Raises:
        SilenceRefused: naming the key; in particular ``matchers`` when the
            silence is broad (see module doc) and ``allow_broad`` is not set.
    """
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
            for p in parsed:
                _bare_regex_valid(p)
        except ValueError as e:
            raise SilenceRefused(f"matchers.{i}", str(e),
                                 'name="value" with =, !=, =~ or !~ (a string), or '
                                 '{"name", "value", "isRegex", "isEqual"}', "matcher") from None
        matchers.extend(parsed)
    allow_broad = spec.get("allow_broad", spec.get("allowBroad", False)) is True
    if is_broad(matchers) and not allow_broad:
        raise SilenceRefused("matchers", "every matcher matches the empty string, so this silence "
                             "would mute every alert without these labels",
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
    author = spec.get("author", spec.get("createdBy"))
    if not isinstance(author, str) or not author.strip():
        raise SilenceRefused("author", "is required", "a non-empty string: who created the silence",
                             "required")
    comment = spec.get("comment")
    if not isinstance(comment, str) or not comment.strip():
        raise SilenceRefused("comment", "is required", "a non-empty string: why the silence exists",
                             "required")
    return Silence(silence_id, tuple(matchers), starts, ends, author, comment, allow_broad, intervals)


def silenced_by(silences: list[Silence], labels: dict[str, str], now: float) -> str | None:
    """Id of the first silence that mutes ``labels`` at ``now``, else None."""
    for s in silences:
        if s.matches(labels, now):
            return s.id
    return None
