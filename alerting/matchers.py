"""Label matchers for silences, routes, inhibit rules and ``alertmanager.yml`` (Alertmanager's
``pkg/labels/matcher.go``): :class:`MatchOp`; RE2 regexes anchored ``^(?:re)$``; absent = ``""``."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import re2

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


_OPS_BY_LENGTH = tuple(sorted(MatchOp, key=lambda o: -len(o.value)))


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
        name = self.name if _LEGACY_NAME.match(self.name) else json.dumps(self.name, ensure_ascii=False)
        return f"{name}{self.op.value}{json.dumps(self.value, ensure_ascii=False)}"

    def to_dict(self) -> dict[str, str]:
        """``{"name", "op", "value"}``, plain JSON data."""
        return {"name": self.name, "op": self.op.value, "value": self.value}


#: Characters that end an unquoted name or value (Alertmanager 0.27+ lexer).
_RESERVED = set('{}!=~,\\"\'`')
_LEGACY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNQUOTED_VALUE_BAD = re.compile(r"[\"'=~!\s]")


def _unquote(text: str, what: str, spec: str) -> str:
    """A double-quoted string's content: JSON/Go escapes; others kept as written (``"a\\.b"`` ->
    ``a\\.b``, as Alertmanager's classic parser)."""
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


def _parse_text(spec: str) -> tuple[str, MatchOp, str]:
    """(name, op, value) of one matcher text."""
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
    op = next((o for o in _OPS_BY_LENGTH if rest.startswith(o.value)), None)
    if op is None:
        raise ValueError(f"bad matcher {spec!r}: {hint}")
    raw = rest[len(op.value):].strip()
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
    """Matcher texts of ``{a="1", b=~"x,y"}``, ``a="1",b="2"`` or one matcher (trailing comma
    allowed). Raises ValueError: unclosed ``{`` or quote, or an empty matcher."""
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
    """Every matcher of a selector string, a matcher or a list of either; ValueError names the bad
    one."""
    if isinstance(spec, list):
        return [m for item in spec for m in parse_matchers(item)]
    if isinstance(spec, str):
        return [parse_matcher(t) for t in split_matchers(spec)]
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
    "isRegex", "isEqual"}``. Text as Alertmanager 0.25-0.28's parsers: name bare or double-quoted;
    value double-quoted, single-quoted or bare; braces allowed. Raises ValueError: bad syntax,
    unknown operator or invalid regex.
    """
    if isinstance(spec, Matcher):
        return spec
    if isinstance(spec, dict):
        name, op, value = _from_dict(spec)
    elif isinstance(spec, str):
        name, op, value = _parse_text(spec)
    else:
        raise ValueError(f"bad matcher {spec!r}")
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
