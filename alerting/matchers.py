"""Label matchers for silences, routes, inhibit rules and ``alertmanager.yml`` (Alertmanager's
``pkg/labels/matcher.go``): :class:`MatchOp`; RE2 regexes anchored ``^(?:re)$``; absent = ``""``."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import re2

from alerting import matcher_text
from alerting.intake import repair_text


class MatchOp(StrEnum):
    """A matcher's operator (Alertmanager's ``MatchType``)."""

    EQUAL = "="
    NOT_EQUAL = "!="
    REGEX = "=~"
    NOT_REGEX = "!~"

    @property
    def is_regex(self) -> bool:
        return self in (MatchOp.REGEX, MatchOp.NOT_REGEX)

    @property
    def is_equal(self) -> bool:  # the API's isEqual
        return self in (MatchOp.EQUAL, MatchOp.REGEX)

    @property
    def cost(self) -> int:  # try cheapest first
        return 0 if self is MatchOp.EQUAL else 1 if self is MatchOp.NOT_EQUAL else 2

    @classmethod
    def from_api(cls, is_regex: bool, is_equal: bool) -> "MatchOp":  # {"isRegex", "isEqual"}
        if is_regex:
            return cls.REGEX if is_equal else cls.NOT_REGEX
        return cls.EQUAL if is_equal else cls.NOT_EQUAL


def _re2_options():
    opts = re2.Options()  # Go's defaults: ``.`` does not match a newline unless ``(?s)``
    opts.log_errors = False  # a bad pattern is the caller's error, raised, not logged
    return opts


RE2_OPTIONS = _re2_options()


def compile_re2(pattern: str):
    """``pattern`` compiled with RE2 outside the binding's cache (up to ``max_mem``, 8 MiB, each:
    the caller holds it). Raises re2.error, or UnicodeEncodeError for a lone surrogate."""
    return re2._Regexp(pattern, RE2_OPTIONS)


def re2_words(e: Exception) -> str:
    """What RE2 said (the binding passes bytes or text)."""
    text = e.args[0] if e.args else str(e)
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


def _anchored(pattern: str):
    """``pattern`` compiled anchored, ``^(?:pattern)$`` (:func:`compile_re2`)."""
    return compile_re2(f"^(?:{pattern})$")


def regex_hit(rx: Any, value: str) -> bool:
    """Go's ``MatchString``: a search, so ``a)|(b`` finds ``xb``; a lone surrogate in ``value`` is
    matched as U+FFFD."""
    try:
        return rx.search(value) is not None
    except UnicodeEncodeError:
        return rx.search(repair_text(value)[0]) is not None


def compile_regex(pattern: str) -> tuple[Any, str | None]:
    """(compiled, None) for a valid matcher regex, anchored, or (None, RE2's words); ``\\C``, which
    Go refuses, is refused."""
    if _byte_escape(pattern):
        return None, f"invalid escape sequence: `\\C` in {pattern!r}"
    try:
        return _anchored(pattern), None
    except re2.error as e:
        return None, re2_words(e).replace(f"^(?:{pattern})$", pattern)
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
    """``name op value``; ``op`` a :class:`MatchOp` (its text is taken too)."""

    name: str
    op: MatchOp
    value: str
    _rx: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.op, MatchOp):
            object.__setattr__(self, "op", MatchOp(self.op))

    def matches(self, labels: dict[str, str]) -> bool:
        """True when ``labels`` satisfy the matcher (absent label = ``""``); re2.error for an
        invalid pattern not from :func:`parse_matcher`."""
        v = labels.get(self.name, "")
        op = self.op
        if op is MatchOp.EQUAL:
            return v == self.value
        if op is MatchOp.NOT_EQUAL:
            return v != self.value
        rx = self._rx
        if rx is None:
            rx = _anchored(self.value)
            object.__setattr__(self, "_rx", rx)
        hit = regex_hit(rx, v)
        return hit if op is MatchOp.REGEX else not hit

    def __str__(self) -> str:
        """Text :func:`parse_matcher` reads back (``env="prod"``, ``"a.b"="x"``)."""
        name = self.name if _LEGACY_NAME.match(self.name) else _quoted(self.name)
        return f"{name}{self.op.value}{_quoted(self.value)}"

    def to_dict(self) -> dict[str, str]:
        """``{"name", "op", "value"}``, plain JSON data."""
        return {"name": self.name, "op": self.op.value, "value": self.value}


_LEGACY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _quoted(text: str) -> str:
    """``text`` in double quotes, backslash, newline and ``"`` escaped (OpenMetrics) as
    Alertmanager's ``Matcher.String``: both of its grammars read that back as ``text``."""
    return '"' + text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') + '"'


def _attempt(parse: Callable[[str], Any], text: str) -> tuple[list | None, str | None]:
    """(``[(name, op, value)]``, None) when ``parse`` reads ``text``, else (None, why)."""
    try:
        found = parse(text)
        return (found if isinstance(found, list) else [found]), None
    except ValueError as e:
        return None, str(e)


def _compiled(triples: list | None, why: str | None) -> tuple[list[Matcher] | None, str | None]:
    """The matchers of ``triples``, or (None, why): a parse refusal or an invalid regex."""
    try:
        return ([_built(*t) for t in triples], None) if triples is not None else (None, why)
    except ValueError as e:
        return None, str(e)


def _fallback(text: str, utf8: Callable[[str], Any], classic: Callable[[str], Any]) -> list[Matcher]:
    """Alertmanager 0.27+'s default reading (``matcher/compat/parse.go`` ``Fallback*Parser``): the
    UTF-8 grammar's matchers, unless it refuses ``text`` (or a regex in it) or the classic grammar
    reads it differently: then the classic grammar's. Refused by both: ValueError with both
    reasons."""
    new_read, new_error = _attempt(utf8, text)
    old_read, old_error = _attempt(classic, text)
    new, new_error = _compiled(new_read, new_error)
    if old_read is not None and old_read == new_read:  # one reading: its regexes compiled once
        old, old_error = new, new_error
    else:
        old, old_error = _compiled(old_read, old_error)
    if new is not None:
        return old if old is not None and old != new else new
    if old is not None:
        return old
    why = old_error if old_error == new_error else (
        f"{new_error} (UTF-8 matcher syntax, Alertmanager 0.27+); {old_error} (classic syntax)")
    raise ValueError(f"bad matcher {text!r}: {why}")


def parse_matchers(spec: Any) -> list[Matcher]:
    """Every matcher of a selector string (``{a="1",b=~"x"}``, ``a=1,b=2``, ``""`` none), a
    matcher or a list of either, read as Alertmanager's ``compat.Matchers`` (config ``matchers``
    lines); ValueError names the bad one."""
    if isinstance(spec, list):
        return [m for item in spec for m in parse_matchers(item)]
    if isinstance(spec, str):
        return _fallback(spec, matcher_text.utf8_matchers, matcher_text.classic_matchers)
    return [parse_matcher(spec)]


def _from_dict(spec: dict) -> tuple[Any, Any, Any]:
    name, value = spec.get("name"), spec.get("value")
    if "op" in spec:
        op = spec["op"]
    else:
        is_regex, equal = spec.get("isRegex", False), spec.get("isEqual", True)
        if not isinstance(is_regex, bool) or not isinstance(equal, bool):
            raise ValueError(f"matcher isRegex and isEqual must be booleans: {spec!r}")
        op = MatchOp.from_api(is_regex, equal)
    if not isinstance(name, str) or not name or not isinstance(value, str):
        raise ValueError(f"matcher needs a string name and value: {spec!r}")
    return name, op, value


def parse_matcher(spec: Any) -> Matcher:
    """A :class:`Matcher` from text, ``{"name", "op", "value"}`` or the API's ``{"name", "value",
    "isRegex", "isEqual"}``. Text is one matcher read as Alertmanager's ``compat.Matcher`` (API
    filters, amtool), braces allowed: :func:`_fallback`. Raises ValueError: bad syntax, unknown
    operator or invalid regex.
    """
    if isinstance(spec, Matcher):
        return spec
    if isinstance(spec, str):
        return _fallback(spec, matcher_text.utf8_matcher, matcher_text.classic_matcher)[0]
    if not isinstance(spec, dict):
        raise ValueError(f"bad matcher {spec!r}")
    return _built(*_from_dict(spec))


def _built(name: str, op: Any, value: str) -> Matcher:
    """The matcher, its regex compiled; ValueError for an unknown operator or invalid regex."""
    try:
        op = MatchOp(op)
    except ValueError:
        raise ValueError(f"bad matcher operator {op!r} (use =, !=, =~ or !~)") from None
    matcher = Matcher(name, op, value)
    if op.is_regex:
        rx, problem = compile_regex(value)
        if problem is not None:
            raise ValueError(f"bad regex {value!r} in matcher for {name!r}: {problem} "
                             "(RE2 syntax, as Go's regexp in Alertmanager)")
        object.__setattr__(matcher, "_rx", rx)
    return matcher
