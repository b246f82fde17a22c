"""Alertmanager's notification templates: Go's ``text/template``, in Python.

Parsed and rendered as Alertmanager 0.25 (``template/template.go``, ``FromGlobs``): its
``default.tmpl`` (``alerting/templates_am/``, Apache-2.0) first, then the files the ``templates:``
globs match; a later ``define`` replaces an earlier one.

The language is the subset of Go 1.19's ``text/template`` notification templates use: actions,
field and method chains, variables, pipelines, ``if``/``else if``, ``range`` (maps in sorted key
order, ``break``/``continue``), ``with``, ``define``/``template``/``block``, trim markers,
comments, literals; Go's functions ``and or not eq ne lt le gt ge len index slice print printf
println html urlquery js`` and Alertmanager's ``toUpper toLower title trimSpace join match
reReplaceAll safeHtml stringSlice`` (RE2 regexps). Anything else (``call``, later Alertmanager
functions such as ``date``, ``tz``, ``toJson``) is refused at load with :class:`TemplateError`
naming the file, line and construct. ``html/template`` context escaping is not done.

Go semantics kept: truth, short-circuit ``and``/``or``, ``missingkey=zero`` (a missing label
renders ``""``, a plain ``dict``'s ``<no value>``), ``fmt.Print`` formatting. The data
(:func:`alertmanager_data`) is Alertmanager's ``template.Data``.
"""
from __future__ import annotations

import functools
import math
import os
import re
import unicodedata
from datetime import datetime, timezone
from decimal import Decimal
from importlib import resources
from typing import Any, Callable
from urllib.parse import quote_plus

import re2

from alerting.delivery import am_alert_labels, am_group_labels, am_order, common_labels
from alerting.matchers import compile_re2, re2_words

__all__ = ["TemplateError", "TemplateSet", "load_templates", "alertmanager_data",
           "data_from_json", "parse", "default_template_text", "Data", "Alert", "Alerts",
           "KV", "Pair", "Pairs", "GoTime", "HTML"]

#: the packaged copies of Alertmanager 0.25's ``template/default.tmpl`` and
#: ``template/email.tmpl``, parsed first in this order, as ``FromGlobs`` does
DEFAULT_FILES = ("default.tmpl", "email.tmpl")
MAX_DEPTH = 100  # nested {{ template }} calls (Go allows 100,000; Python frames are dearer)
_SPACE = " \t\r\n"


class TemplateError(ValueError):
    """A template that cannot be loaded or rendered: ``file`` (or ``render`` source), 1-based
    ``line``, offending ``construct`` (``printf``, ``.Foo.Bar``, ``{{ else with }}``)."""

    def __init__(self, file: str, line: int, construct: str, problem: str) -> None:
        self.file, self.line, self.construct = file, line, construct
        where = "" if not construct or construct in problem else f" (at `{construct}`)"
        super().__init__(f"{file}:{line}: {problem}{where}")


def _unsupported(file: str, line: int, construct: str, why: str = "") -> TemplateError:
    tail = f" ({why})" if why else ""
    return TemplateError(file, line, construct, f"unsupported construct `{construct}`{tail}")


# ---------------------------------------------------------------- Go values

class GoStruct(dict):
    """A Go struct: ``.Field`` reads a key; a field it lacks is an execution error (``can't
    evaluate field X in type T``), as in Go."""

    go_type = "struct"


class Data(GoStruct):
    """Alertmanager's ``template.Data`` (template/template.go)."""

    go_type = "template.Data"


class Alert(GoStruct):
    """Alertmanager's ``template.Alert``."""

    go_type = "template.Alert"


class Pair(GoStruct):
    """``template.Pair``: ``Name``, ``Value``."""

    go_type = "template.Pair"


class Pairs(list):
    """``template.Pairs``: ``.Names``, ``.Values``."""

    go_type = "template.Pairs"
    go_methods = ("Names", "Values")

    def Names(self) -> list[str]:  # noqa: N802 - Go's method name
        return [p["Name"] for p in self]

    def Values(self) -> list[str]:  # noqa: N802
        return [p["Value"] for p in self]


class KV(dict):
    """``template.KV``, a ``map[string]string``: a missing key reads ``""`` (``missingkey=zero``);
    ``.SortedPairs`` puts ``alertname`` first, then the other names sorted; ``.Names`` /
    ``.Values`` follow that order."""

    go_type = "template.KV"
    go_methods = ("SortedPairs", "Names", "Values", "Remove")
    zero = ""

    def SortedPairs(self) -> Pairs:  # noqa: N802
        keys = sorted(k for k in self if k != "alertname")
        if "alertname" in self:
            keys.insert(0, "alertname")
        return Pairs(Pair(Name=k, Value=self[k]) for k in keys)

    def Names(self) -> list[str]:  # noqa: N802
        return self.SortedPairs().Names()

    def Values(self) -> list[str]:  # noqa: N802
        return self.SortedPairs().Values()

    def Remove(self, keys: list[str]) -> "KV":  # noqa: N802
        drop = set(keys or ())
        if not all(isinstance(k, str) for k in drop):
            raise _GoError(f"wrong type for value; expected []string; got {go_type(keys)}")
        return KV({k: v for k, v in self.items() if k not in drop})


class Alerts(list):
    """``template.Alerts``: ``.Firing``, ``.Resolved``."""

    go_type = "template.Alerts"
    go_methods = ("Firing", "Resolved")

    def Firing(self) -> list[Alert]:  # noqa: N802
        return [a for a in self if a["Status"] == "firing"]

    def Resolved(self) -> list[Alert]:  # noqa: N802
        return [a for a in self if a["Status"] == "resolved"]


_GO_EPOCH = datetime(1, 1, 1, tzinfo=timezone.utc)


class GoTime:
    """A ``time.Time`` in UTC; ``None`` is Go's zero time (0001-01-01). Prints as
    ``time.Time.String`` (``2024-01-02 03:04:05.5 +0000 UTC``)."""

    go_type = "time.Time"
    go_methods = ("Format", "Unix", "UTC", "Local", "IsZero", "String")
    __slots__ = ("dt",)

    def __init__(self, epoch: float | None) -> None:
        self.dt = _GO_EPOCH if epoch is None else datetime.fromtimestamp(epoch, timezone.utc)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoTime) and other.dt == self.dt

    __hash__ = None  # type: ignore[assignment]

    def Format(self, layout: str) -> str:  # noqa: N802
        _want(layout, str, "string", "Format")
        return go_time_format(self.dt, layout)

    def Unix(self) -> int:  # noqa: N802
        return math.floor((self.dt - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds())

    def UTC(self) -> "GoTime":  # noqa: N802
        return self

    Local = UTC  # Plait renders in UTC, as Alertmanager in a container without TZ

    def IsZero(self) -> bool:  # noqa: N802
        return self.dt == _GO_EPOCH

    def String(self) -> str:  # noqa: N802
        return go_time_format(self.dt, "2006-01-02 15:04:05.999999999 -0700 MST")


#: Go layout elements, longest first (time/format.go ``nextStdChunk``)
_LAYOUT = ("January", "Monday", "Jan", "Mon", "MST", "2006", "Z07:00", "-07:00", "Z0700",
           "-0700", "Z07", "-07", "_2", "01", "02", "03", "04", "05", "06", "15", "PM", "pm",
           "1", "2", "3", "4", "5")


def go_time_format(dt: datetime, layout: str) -> str:
    """``dt`` (UTC) written as Go's ``time.Time.Format(layout)`` writes it (reference time ``Mon
    Jan 2 15:04:05 MST 2006``; ``.000`` / ``.999`` fractions)."""
    out, i = [], 0
    while i < len(layout):
        if layout[i] in ".," and i + 1 < len(layout) and layout[i + 1] in "09":
            j = i + 1
            while j < len(layout) and layout[j] == layout[i + 1]:
                j += 1
            if j == len(layout) or not layout[j].isdigit():
                out.append(_fraction(dt, layout[i], layout[i + 1], j - i - 1))
                i = j
                continue
        for el in _LAYOUT:
            if layout.startswith(el, i) and not (  # "Month" is text, as in Go
                    el in ("Jan", "Mon") and layout[i + 3:i + 4].islower()):
                out.append(_layout_element(dt, el))
                i += len(el)
                break
        else:
            out.append(layout[i])
            i += 1
    return "".join(out)


def _fraction(dt: datetime, sep: str, digit: str, n: int) -> str:
    frac = f"{dt.microsecond:06d}000"[:n]
    if digit == "9":
        frac = frac.rstrip("0")
        return sep + frac if frac else ""
    return sep + frac


def _layout_element(dt: datetime, el: str) -> str:
    """One element of a Go layout for a UTC time (zones print ``Z`` / ``+0000`` / ``UTC``)."""
    h12 = dt.hour % 12 or 12
    return {
        "January": dt.strftime("%B"), "Monday": dt.strftime("%A"), "Jan": dt.strftime("%b"),
        "Mon": dt.strftime("%a"), "MST": "UTC", "2006": f"{dt.year:04d}", "Z07:00": "Z",
        "-07:00": "+00:00", "Z0700": "Z", "-0700": "+0000", "Z07": "Z", "-07": "+00",
        "_2": f"{dt.day:2d}", "01": f"{dt.month:02d}", "02": f"{dt.day:02d}",
        "03": f"{h12:02d}", "04": f"{dt.minute:02d}", "05": f"{dt.second:02d}",
        "06": f"{dt.year % 100:02d}", "15": f"{dt.hour:02d}", "PM": "PM" if dt.hour >= 12 else "AM",
        "pm": "pm" if dt.hour >= 12 else "am", "1": str(dt.month), "2": str(dt.day),
        "3": str(h12), "4": str(dt.minute), "5": str(dt.second),
    }[el]


class HTML(str):
    """``html/template.HTML``, what ``safeHtml`` returns: a string kind (printed, compared,
    measured as one) that a function taking a plain ``string`` refuses, as Go does."""

    go_type = "template.HTML"


class _GoError(Exception):
    """An execution error inside a function or method (Go's ``error`` return)."""


def _want(value: Any, kind: type, go: str, where: str) -> None:
    if (not isinstance(value, kind) or (kind is int and isinstance(value, bool))
            or value.__class__ is HTML):
        raise _GoError(f"wrong type for value in {where}; expected {go}; got {go_type(value)}")


# ---------------------------------------------------------------- printing

_GO_NAMES = {bool: "bool", int: "int", float: "float64", str: "string"}


def go_type(v: Any) -> str:
    """Go's name of a value's type (``string``, ``int``, ``[]string``...)."""
    if v is None:
        return "<nil>"
    t = getattr(v, "go_type", None) or _GO_NAMES.get(type(v))
    if t:
        return t
    if isinstance(v, list):
        return "[]string" if all(isinstance(x, str) for x in v) else "[]interface {}"
    if isinstance(v, dict):
        return "map[string]interface {}"
    return type(v).__name__


def format_float(f: float, verb: str = "g", prec: int = -1) -> str:
    """``strconv.FormatFloat(f, verb, prec, 64)`` for ``g``, ``e`` and ``f``; ``g`` with the
    shortest digits (``%v``) switches to the exponent form below 1e-4 and from 1e6 on (``1e+06``),
    as Go's does."""
    if math.isinf(f) or math.isnan(f):
        return "NaN" if math.isnan(f) else ("+Inf" if f > 0 else "-Inf")
    if verb in "ef" or prec >= 0:
        return f"{f:.{6 if prec < 0 else prec}{verb}}"
    sign, digits, exp = Decimal(repr(float(f))).as_tuple()
    ds = "".join(map(str, digits)).lstrip("0")
    point = len(ds) + exp
    ds, neg = ds.rstrip("0"), "-" if sign else ""
    if not ds:
        return neg + "0"
    x = point - 1
    if x < -4 or x >= 6:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        return f"{neg}0.{'0' * -point}{ds}"
    if point >= len(ds):
        return f"{neg}{ds}{'0' * (point - len(ds))}"
    return f"{neg}{ds[:point]}.{ds[point:]}"


def print_value(v: Any, top: bool = True) -> str:
    """``fmt.Sprint(v)`` (what an action ``{{ v }}`` writes): ``<no value>`` for a missing value at
    the top, ``<nil>`` inside a collection."""
    if v is None:
        return "<no value>" if top else "<nil>"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, GoTime):
        return v.String()
    if isinstance(v, GoStruct):
        return "{" + " ".join(print_value(x, False) for x in v.values()) + "}"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{print_value(k, False)}:{print_value(v[k], False)}"
                                 for k in sorted(v)) + "]"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(print_value(x, False) for x in v) + "]"
    return str(v)


def truth(v: Any) -> bool:
    """Go's ``template.IsTrue``: false for nil, false, 0, and empty strings, lists, maps."""
    if v is None:
        return False
    if isinstance(v, (bool, int, float, str, list, tuple)) or type(v) is dict or isinstance(v, KV):
        return bool(v)
    return True


# ---------------------------------------------------------------- lexer

class _Tok:
    """One token of an action: ``kind`` (``field``, ``var``, ``ident``, ``string``, ``number``,
    ``char``, ``space``, ``|``, ``(``, ``)``, ``:=``, ``=``, ``,``, ``.``, ``end``), its ``value``
    and source ``text``."""

    __slots__ = ("kind", "value", "text", "line")

    def __init__(self, kind: str, value: Any, text: str, line: int) -> None:
        self.kind, self.value, self.text, self.line = kind, value, text, line


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", '"': '"', "'": "'"}


def _unquote(body: str) -> str:
    """The value of a Go interpreted string literal's body (``strconv.Unquote``); ``\\x`` and octal
    escapes are bytes, the result read as UTF-8."""
    out, i = bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogatepass")
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            out += _ESCAPES[e].encode()
            i += 2
        elif e in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[e]
            code = int(body[i + 2:i + 2 + n], 16)
            out += bytes([code]) if e == "x" else chr(code).encode("utf-8", "surrogatepass")
            i += 2 + n
        else:
            out += bytes([int(body[i + 1:i + 4], 8)])
            i += 4
    return out.decode("utf-8", "replace")


# the lexer's own fixed patterns use the stdlib's re: matching at a position of a long file costs
# the RE2 binding a text-to-bytes offset conversion per call
_STRING_RX = re.compile(r'"(?:[^"\\\n]|\\(?:[abfnrtv\\"\']|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}'
                         r'|U[0-9a-fA-F]{8}|[0-7]{3}))*"')
_CHAR_RX = re.compile(r"'(?:[^'\\\n]|\\(?:[abfnrtv\\\"']|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}"
                       r"|U[0-9a-fA-F]{8}|[0-7]{3}))'")
_NUMBER_RX = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|"
                         r"(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?)i?")
_WORD_RX = re.compile(r"\w*")  # Go: letters, digits and _ (unicode.IsLetter / IsDigit)


def _number(text: str) -> int | float | None:
    """A Go number literal's value: int (decimal, ``0x``, ``0o``, ``0b``, leading-``0`` octal),
    float with ``.`` or exponent, None for imaginary. Raises ValueError (``1e``, ``08``)."""
    if text.endswith("i"):
        return None
    t = text.replace("_", "")
    body = t.lstrip("+-")
    try:
        if body[:2].lower() in ("0x", "0b", "0o") or not any(c in body for c in ".eE"):
            if re.fullmatch(r"0[0-7]+", body):  # Go: a leading 0 is octal
                t = t.replace("0", "0o", 1)
            return int(t, 0)
        return float(t)
    except ValueError:
        raise ValueError(f"bad number syntax: {text!r}") from None


class _Lexer:
    """Splits a file into text and actions (``{{ ... }}``), as Go's ``text/template/parse/lex.go``:
    trim markers ``{{- `` / `` -}}`` (a space after or before the dash), comments ``{{/* */}}``,
    raw strings spanning lines."""

    def __init__(self, src: str, file: str) -> None:
        self.src, self.file, self.pos, self.line = src, file, 0, 1
        self.items: list[tuple] = []  # ("text", str, line) | ("action", [tokens], line, source)

    def error(self, msg: str, construct: str, line: int | None = None) -> TemplateError:
        return TemplateError(self.file, line or self.line, construct, msg)

    def run(self) -> list[tuple]:
        src = self.src
        while True:
            i = src.find("{{", self.pos)
            text = src[self.pos:] if i < 0 else src[self.pos:i]
            trim = i >= 0 and src.startswith("-", i + 2) and src[i + 3:i + 4] in tuple(_SPACE)
            self._text(text.rstrip(_SPACE) if trim else text)
            if i < 0:
                return self.items
            self.line += text.count("\n")
            self.pos = i + (4 if trim else 2)
            if src.startswith("/*", self.pos):
                self._comment()
            else:
                self._action()

    def _text(self, text: str) -> None:
        if self.items and self.items[-1][0] == "rtrim":
            self.items.pop()
            text = text.lstrip(_SPACE)
        if text:
            self.items.append(("text", text, self.line))

    def _after_close(self, at: int, start_line: int) -> None:
        """Consumes ``}}`` or `` -}}`` at ``at`` (a right trim marker trims the next text)."""
        src = self.src
        if src[at:at + 1] in tuple(_SPACE) and src.startswith("-}}", at + 1):
            self.items.append(("rtrim",))
            self.pos = at + 4
        else:
            self.pos = at + 2
        self.line += src[self._start:self.pos].count("\n")

    def _comment(self) -> None:
        start_line, self._start = self.line, self.pos
        end = self.src.find("*/", self.pos + 2)
        if end < 0:
            raise self.error("unclosed comment", "{{/*")
        at = end + 2
        if not (self.src.startswith("}}", at) or (self.src[at:at + 1] in tuple(_SPACE)
                                                     and self.src.startswith("-}}", at + 1))):
            raise self.error("comment ends before closing delimiter", "*/", start_line)
        self._after_close(at, start_line)

    def _action(self) -> None:
        start_line, self._start = self.line, self.pos
        toks: list[_Tok] = []
        src, line = self.src, self.line
        pos = self.pos
        while True:
            if pos >= len(src):
                raise self.error("unclosed action", "{{", start_line)
            if src.startswith("}}", pos) or (src[pos] in _SPACE and src.startswith("-}}", pos + 1)):
                break
            tok, pos = self._token(pos, line)
            line += tok.text.count("\n")
            toks.append(tok)
        source = src[self.pos:pos].strip(_SPACE)
        toks.append(_Tok("end", None, "}}", line))
        self.items.append(("action", toks, start_line, source))
        self._after_close(pos, start_line)

    def _token(self, pos: int, line: int) -> tuple[_Tok, int]:
        """The token at ``pos`` and the position after it."""
        src, c = self.src, self.src[pos]
        if c in _SPACE:
            end = pos
            while end < len(src) and src[end] in _SPACE and not (
                    src.startswith("-}}", end + 1)):
                end += 1
            return _Tok("space", None, src[pos:end] or c, line), max(end, pos + 1)
        if c == ":" and src.startswith(":=", pos):
            return _Tok(":=", None, ":=", line), pos + 2
        if c in "|(),=":
            return _Tok(c, None, c, line), pos + 1
        if c == '"':
            m = _STRING_RX.match(src, pos)
            if not m:
                raise self.error("unterminated quoted string", src[pos:pos + 20].split("\n")[0], line)
            return _Tok("string", _unquote(m.group()[1:-1]), m.group(), line), m.end()
        if c == "`":
            end = src.find("`", pos + 1)
            if end < 0:
                raise self.error("unterminated raw quoted string", "`", line)
            return _Tok("string", src[pos + 1:end], src[pos:end + 1], line), end + 1
        if c == "'":
            m = _CHAR_RX.match(src, pos)
            if not m:
                raise self.error("unterminated character constant", src[pos:pos + 6], line)
            return _Tok("number", ord(_unquote(m.group()[1:-1].replace('\\"', '"'))[0]),
                        m.group(), line), m.end()
        if c == "$" or (c == "." and not src[pos + 1:pos + 2].isdigit()):
            m = _WORD_RX.match(src, pos + 1)
            kind = "var" if c == "$" else ("field" if m.end() > pos + 1 else ".")
            return _Tok(kind, src[pos:m.end()], src[pos:m.end()], line), m.end()
        if c.isdigit() or c in "+-." :
            m = _NUMBER_RX.match(src, pos)
            if m and m.end() > pos:
                return self._number_tok(m.group(), line), m.end()
        m = _WORD_RX.match(src, pos)
        if m.end() > pos and not c.isdigit():
            return _Tok("ident", m.group(), m.group(), line), m.end()
        raise self.error(f"unrecognized character in action: {c!r}", c, line)

    def _number_tok(self, text: str, line: int) -> _Tok:
        try:
            value = _number(text)
        except ValueError as e:
            raise self.error(str(e), text, line) from None
        if value is None:
            raise _unsupported(self.file, line, text, "complex numbers")
        return _Tok("number", value, text, line)


# ---------------------------------------------------------------- parser

class _Node:
    """An executable node: ``kind`` (``text``, ``action``, ``if``, ``with``, ``range``,
    ``template``, ``break``, ``continue``), where it is (``file``, ``line``, ``src``: the action's
    text) and its parts."""

    __slots__ = ("kind", "file", "line", "src", "pipe", "body", "orelse", "name")

    def __init__(self, kind: str, file: str, line: int, src: str, pipe: Any = None,
                 body: list | None = None, orelse: list | None = None, name: str = "") -> None:
        self.kind, self.file, self.line, self.src = kind, file, line, src
        self.pipe, self.body, self.orelse, self.name = pipe, body, orelse, name


class _Pipe:
    """``decl`` (variable names), ``assign`` (``=`` rather than ``:=``) and ``cmds``: each a list
    of operands, tuples ``("field", idents)``, ``("var", name, idents)``, ``("dot",)``, ``("func",
    name)``, ``("lit", value)``, ``("nil",)``, ``("pipe", _Pipe, idents)``."""

    __slots__ = ("decl", "assign", "cmds")

    def __init__(self, decl: list[str], assign: bool, cmds: list[list[tuple]]) -> None:
        self.decl, self.assign, self.cmds = decl, assign, cmds


_KEYWORDS = frozenset({"if", "else", "end", "range", "with", "define", "template", "block",
                       "break", "continue"})


class _Parser:
    """Go's ``text/template/parse`` over one file's lexed items: the file's top-level body and its
    ``define``d templates (``defines``)."""

    def __init__(self, items: list[tuple], file: str) -> None:
        self.items, self.i, self.file = items, 0, file
        self.defines: dict[str, list] = {}
        self.vars: list[str] = ["$"]
        self.loops = 0
        self.toks: list[_Tok] = []
        self.t = 0
        self.line, self.src = 1, ""

    def error(self, msg: str, construct: str | None = None, line: int | None = None) -> TemplateError:
        return TemplateError(self.file, line or self.line, construct or self.src, msg)

    def parse(self) -> list:
        body, term = self.parse_list(top=True)
        if term is not None:
            raise self.error(f"unexpected {{{{{term}}}}}", "{{" + self.src + "}}")
        return body

    def parse_list(self, top: bool = False) -> tuple[list, str | None]:
        """Nodes up to ``{{end}}`` / ``{{else}}`` (returned as the terminator, the else's tokens
        left to read) or the end of the file."""
        nodes: list = []
        while self.i < len(self.items):
            item = self.items[self.i]
            self.i += 1
            if item[0] == "text":
                nodes.append(item[1])
                continue
            self.toks, self.t, self.line, self.src = item[1], 0, item[2], item[3]
            first = self.peek_nonspace()
            word = first.value if first.kind == "ident" and first.value in _KEYWORDS else None
            if word in ("end", "else"):
                self.next_nonspace()
                if word == "end":
                    self.expect_end("end")
                return nodes, word
            node = self.keyword(word, top) if word else self.action()
            if node is not None:
                nodes.append(node)
        return nodes, None

    def keyword(self, word: str, top: bool) -> _Node | None:
        self.next_nonspace()
        if word in ("if", "with", "range"):
            return self.control(word)
        if word == "define":
            if not top:
                raise self.error("unexpected {{define}} inside another action", "define")
            self.definition()
            return None
        if word in ("template", "block"):
            return self.template(word, top)
        if not self.loops:
            raise self.error(f"{{{{{word}}}}} outside {{{{range}}}}", word)
        self.expect_end(word)
        return _Node(word, self.file, self.line, self.src)

    def action(self) -> _Node:
        line, src = self.line, self.src
        return _Node("action", self.file, line, src, self.pipeline("command", "end"))

    def control(self, kind: str) -> _Node:
        line, src, mark = self.line, self.src, len(self.vars)
        pipe = self.pipeline(kind, "end")
        self.loops += kind == "range"
        body, term = self.parse_list()
        self.loops -= kind == "range"
        orelse = None
        if term is None:
            raise self.error(f"unexpected EOF: {{{{{kind}}}}} has no {{{{end}}}}",
                             "{{" + src + "}}", line)
        if term == "else":
            nxt = self.peek_nonspace()
            if nxt.kind == "ident" and nxt.value in ("if", "with"):
                if nxt.value == "with" or kind != "if":
                    raise _unsupported(self.file, self.line, f"{{{{else {nxt.value}}}}}",
                                       f"in {{{{{kind}}}}}: Go 1.19 has {{{{else if}}}} in {{{{if}}}} only")
                self.next_nonspace()
                orelse = [self.control("if")]  # {{else if}}: the inner if takes the {{end}}
            else:
                self.expect_end("else")
                orelse, term = self.parse_list()
                if term != "end":
                    raise self.error(f"expected {{{{end}}}} after {{{{else}}}} of {{{{{kind}}}}}",
                                     "{{" + src + "}}", line)
        del self.vars[mark:]
        return _Node(kind, self.file, line, src, pipe, body, orelse)

    def string_name(self, context: str) -> str:
        tok = self.next_nonspace()
        if tok.kind != "string":
            raise self.error(f"unexpected {tok.text!r} in {context}; want a quoted name", tok.text)
        return tok.value

    def definition(self) -> None:
        line, src = self.line, self.src
        name = self.string_name("define clause")
        self.expect_end("define clause")
        saved, self.vars = self.vars, ["$"]
        body, term = self.parse_list()
        self.vars = saved
        if term != "end":
            raise self.error(f"unexpected EOF: {{{{define {name!r}}}}} has no {{{{end}}}}",
                             "{{" + src + "}}", line)
        self.add(name, body, line)

    def add(self, name: str, body: list, line: int) -> None:
        """Go's ``Tree.add``: an empty body never replaces a definition; two non-empty definitions
        of one name in one file are an error."""
        old = self.defines.get(name)
        if old is not None and not _is_empty(old):
            if _is_empty(body):
                return
            raise self.error(f'multiple definition of template "{name}"',
                             f'define "{name}"', line)
        self.defines[name] = body

    def template(self, word: str, top: bool) -> _Node:
        line, src = self.line, self.src
        name = self.string_name(f"{word} clause")
        pipe = None
        if self.peek_nonspace().kind != "end":
            pipe = self.pipeline(word, "end")
        else:
            self.next_nonspace()
        if word == "block":
            if pipe is None:
                raise self.error("missing pipeline in block clause", "{{" + src + "}}")
            saved, self.vars = self.vars, ["$"]
            body, term = self.parse_list()
            self.vars = saved
            if term != "end":
                raise self.error("unexpected EOF in block clause", "{{" + src + "}}", line)
            self.add(name, body, line)
        return _Node("template", self.file, line, src, pipe, name=name)

    # -- tokens of the current action

    def peek_nonspace(self) -> _Tok:
        while self.toks[self.t].kind == "space":
            self.t += 1
        return self.toks[self.t]

    def next_nonspace(self) -> _Tok:
        tok = self.peek_nonspace()
        self.t += 1
        return tok

    def expect_end(self, context: str) -> None:
        tok = self.next_nonspace()
        if tok.kind != "end":
            raise self.error(f"unexpected {tok.text!r} in {context}", tok.text)

    def pipeline(self, context: str, end: str) -> _Pipe:
        """``[decl :=] command | command ...`` up to ``end`` (``end`` / ``)``)."""
        decl, assign = self.declaration(context)
        cmds: list[list[tuple]] = []
        while True:
            tok = self.peek_nonspace()
            if tok.kind in ("end", ")"):
                if tok.kind != end:
                    raise self.error(f"unexpected {tok.text!r} in {context}", tok.text)
                self.t += 1
                break
            cmds.append(self.command(context))
        if not cmds:
            raise self.error(f"missing value for {context}", "{{" + self.src + "}}")
        for i, cmd in enumerate(cmds[1:], 1):
            if cmd[0][0] in ("lit", "nil", "dot"):
                raise self.error(f"non executable command in pipeline stage {i + 1}", self.src)
        return _Pipe(decl, assign, cmds)

    def declaration(self, context: str) -> tuple[list[str], bool]:
        """The variables a pipeline declares (``$x :=``, ``$i, $v :=``) or assigns (``$x =``)."""
        start = self.t
        names = []
        while self.peek_nonspace().kind == "var":
            names.append(self.next_nonspace().value)
            op = self.peek_nonspace()
            if op.kind == "," and context == "range" and len(names) == 1:
                self.t += 1
                continue
            if op.kind in (":=", "=") and (op.kind == ":=" or len(names) == 1):
                self.t += 1
                if op.kind == "=":
                    for n in names:
                        self.check_var(n)
                else:
                    self.vars.extend(names)
                return names, op.kind == "="
            break
        self.t = start
        return [], False

    def check_var(self, name: str) -> None:
        if name not in self.vars:
            raise self.error(f"undefined variable {name!r}", name)

    def command(self, context: str) -> list[tuple]:
        args: list[tuple] = []
        while True:
            self.peek_nonspace()
            args.append(self.operand())
            tok = self.toks[self.t]
            if tok.kind == "space":
                self.t += 1
                if self.peek_nonspace().kind not in ("end", ")", "|"):
                    continue
                tok = self.toks[self.t]
            if tok.kind == "|":
                self.t += 1
                if self.peek_nonspace().kind in ("end", ")"):
                    raise self.error("missing command after |", "|")
                return args
            if tok.kind in ("end", ")"):
                return args
            raise self.error(f"unexpected {tok.text!r} in operand", tok.text)

    def operand(self) -> tuple:
        node = self.term()
        idents: list[str] = []
        while self.toks[self.t].kind == "field":
            idents.append(self.toks[self.t].value[1:])
            self.t += 1
        if not idents:
            return node
        if node[0] == "field":
            return ("field", node[1] + tuple(idents))
        if node[0] in ("var", "pipe"):
            return (node[0], node[1], node[2] + tuple(idents))
        raise self.error(f"unexpected . after term {self.src!r}", "." + ".".join(idents))

    def term(self) -> tuple:
        tok = self.next_nonspace()
        kind, value = tok.kind, tok.value
        if kind == "field":
            return ("field", (value[1:],))
        if kind == ".":
            return ("dot",)
        if kind in ("string", "number"):
            return ("lit", value)
        if kind == "var":
            self.check_var(value)
            return ("var", value, ())
        if kind == "(":
            return ("pipe", self.pipeline("parenthesized pipeline", ")"), ())
        if kind == "ident" and value in ("true", "false"):
            return ("lit", value == "true")
        if kind == "ident" and value == "nil":
            return ("nil",)
        if kind == "ident" and value not in _KEYWORDS:
            return ("func", self.function(value, tok.line))
        raise self.error(f"unexpected {tok.text!r} in operand", tok.text or "}}")

    def function(self, name: str, line: int) -> str:
        if name in FUNCS or name in LAZY_FUNCS:
            return name
        if name in UNSUPPORTED_FUNCS:
            raise _unsupported(self.file, line, name, UNSUPPORTED_FUNCS[name])
        raise TemplateError(self.file, line, name, f"function {name!r} not defined "
                            f"(unsupported construct `{name}`)")


# ---------------------------------------------------------------- functions

_KINDS = {bool: "bool", int: "int", float: "float", str: "string", HTML: "string"}


def _kind(v: Any) -> str:
    """Go's basic kind of a value for comparisons (``invalid`` for a missing one)."""
    return "invalid" if v is None else _KINDS.get(type(v), "other")


def _eq(a: Any, *others: Any) -> bool:
    """Go's ``eq``: true when ``a`` equals any of ``others``; values of different basic kinds are
    an error (``eq 1 "1"``), a missing value equals nothing."""
    if not others:
        raise _GoError("missing argument for comparison")
    ka = _kind(a)
    for b in others:
        kb = _kind(b)
        if ka != kb:
            if ka != "invalid" and kb != "invalid":
                raise _GoError("incompatible types for comparison")
            continue
        if ka == "other" and isinstance(a, (list, dict)):
            raise _GoError(f"non-comparable type {print_value(a)}: {go_type(a)}")
        if a == b:
            return True
    return False


def _lt(a: Any, b: Any) -> bool:
    ka, kb = _kind(a), _kind(b)
    if ka not in ("int", "float", "string") or kb not in ("int", "float", "string"):
        raise _GoError("invalid type for comparison")
    if ka != kb:
        raise _GoError("incompatible types for comparison")
    return a < b


def _length(v: Any) -> int:
    if isinstance(v, str):
        return len(v.encode("utf-8", "surrogatepass"))
    if isinstance(v, (list, tuple, dict)) and not isinstance(v, GoStruct):
        return len(v)
    raise _GoError(f"len of type {go_type(v)}")


def _zero(container: Any) -> Any:
    return getattr(container, "zero", None)


def _int_index(i: Any, n: int, slicing: bool = False) -> int:
    if not isinstance(i, int) or isinstance(i, bool):
        raise _GoError(f"cannot index slice/array with type {go_type(i)}")
    if i < 0 or i > n or (i == n and not slicing):
        raise _GoError(f"index out of range: {i}")
    return i


def _index(item: Any, *keys: Any) -> Any:
    """Go's ``index``: ``index .Labels "severity"`` (a missing key gives the map's zero value),
    ``index .Alerts 0``."""
    if item is None:
        raise _GoError("index of untyped nil")
    for k in keys:
        if isinstance(item, dict) and not isinstance(item, GoStruct):
            if not isinstance(k, str):
                raise _GoError(f"value has type {go_type(k)}; should be string")
            item = item.get(k, _zero(item))
        elif isinstance(item, (list, tuple)):
            item = item[_int_index(k, len(item))]
        elif isinstance(item, str):
            data = item.encode("utf-8", "surrogatepass")
            item = data[_int_index(k, len(data))]
        else:
            raise _GoError(f"can't index item of type {go_type(item)}")
    return item


def _slice(item: Any, *idx: Any) -> Any:
    """Go's ``slice x 1 2``: a sub-list, or a sub-string by bytes."""
    if isinstance(item, str):
        if len(idx) > 2:
            raise _GoError("cannot 3-index slice a string")
        data = item.encode("utf-8", "surrogatepass")
        lo, hi = _bounds(idx, len(data))
        return data[lo:hi].decode("utf-8", "replace")
    if isinstance(item, (list, tuple)):
        lo, hi = _bounds(idx[:2], len(item))
        return type(item)(item[lo:hi]) if isinstance(item, (Alerts, Pairs)) else item[lo:hi]
    raise _GoError(f"can't slice item of type {go_type(item)}")


def _bounds(idx: tuple, n: int) -> tuple[int, int]:
    bounds = [_int_index(i, n, True) for i in idx]
    lo = bounds[0] if bounds else 0
    hi = bounds[1] if len(bounds) > 1 else n
    if lo > hi:
        raise _GoError(f"invalid slice index: {lo} > {hi}")
    return lo, hi


def _sprint(*args: Any) -> str:
    """``fmt.Sprint``: a space between two operands when neither is a string."""
    out = []
    for i, a in enumerate(args):
        if i and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(print_value(a, False))
    return "".join(out)


def _sprintln(*args: Any) -> str:
    return " ".join(print_value(a, False) for a in args) + "\n"


def _eval_args(args: tuple) -> str:
    """The text ``html``, ``js`` and ``urlquery`` escape (Go's ``evalArgs``: a nil operand is ``<no
    value>``, then ``fmt.Sprint``)."""
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return _sprint(*("<no value>" if a is None else a for a in args))


def _html(*args: Any) -> str:
    """Go's ``html`` (``template.HTMLEscapeString``: ``&#34;`` and ``&#39;`` for quotes)."""
    s = _eval_args(args)
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&#34;").replace("'", "&#39;").replace("\0", "\ufffd"))


def _js(*args: Any) -> str:
    """Go 1.19's ``js`` (``template.JSEscapeString``)."""
    out = []
    for c in _eval_args(args):
        if c in "\\'\"":
            out.append("\\" + c)
        elif c in "<>&=":
            out.append(f"\\u{ord(c):04X}")
        elif c < " " or (c >= "\x7f" and not c.isprintable()):
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def _urlquery(*args: Any) -> str:
    """Go's ``urlquery`` (``url.QueryEscape``: a space is ``+``)."""
    return quote_plus(_eval_args(args), safe="")


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(s: str) -> str:
    """``strconv.Quote``: printable characters kept, others escaped."""
    out = ['"']
    for c in s:
        if c in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
    return "".join(out) + '"'


_VERB_RX = re.compile(r"%([-+# 0]*)(\*|[0-9]+)?(?:\.(\*|[0-9]*))?(.)?", re.DOTALL)


def _sprintf(fmt: str, *args: Any) -> str:
    """Go's ``printf`` (``fmt.Sprintf``) for the verbs ``%v %s %q %d %f %e %g %x %X %t %c %%`` with
    flags, width and precision; a wrong type writes ``%!d(string=x)``, a missing operand
    ``%!d(MISSING)``, extra ones ``%!(EXTRA int=1)``, as Go does."""
    _want(fmt, str, "string", "printf")
    out, pos, argi = [], 0, 0
    while True:
        j = fmt.find("%", pos)
        if j < 0:
            out.append(fmt[pos:])
            break
        out.append(fmt[pos:j])
        m = _VERB_RX.match(fmt, j)
        pos = m.end()
        flags, width, prec, verb = m.group(1), m.group(2), m.group(3), m.group(4)
        if verb is None:
            out.append("%!(NOVERB)")
            break
        if verb == "%":
            out.append("%")
            continue
        if any(spec and spec != "*" and _too_large(spec) for spec in (width, prec)):
            out.append("%!(NOVERB)")  # Go's parsenum gives up and skips to the end
            break
        nums = []
        for spec, bad in ((width, "%!(BADWIDTH)"), (prec, "%!(BADPREC)")):
            if spec == "*":
                n = args[argi] if argi < len(args) and isinstance(args[argi], int) else None
                argi += 1
                if n is None or abs(n) > 1_000_000:  # Go's fmt: no width past a million
                    out.append(bad)
                    n = -1
            else:
                n = int(spec) if spec else (0 if spec == "" else -1)
            nums.append(n)
        if argi >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        out.append(_format_one(args[argi], verb, flags, nums[0], nums[1]))
        argi += 1
    if argi < len(args):
        extra = ", ".join(f"{go_type(a)}={print_value(a, False)}" for a in args[argi:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def _too_large(digits: str) -> bool:
    """Whether Go's ``parsenum`` overflows on ``digits`` (a number past a million before its last
    digit is read)."""
    return int(digits[:-1] or "0") > 1_000_000


def _pad(text: str, flags: str, width: int, numeric: bool) -> str:
    if width <= len(text):
        return text
    if "-" in flags:
        return text.ljust(width)
    if "0" in flags:
        sign = text[0] if numeric and text[:1] in "+-" else ""
        return sign + text[len(sign):].rjust(width - len(sign), "0")
    return text.rjust(width)


def _rune(n: int) -> str:
    """``n`` as a character; U+FFFD when it is none (Go's ``%c`` / ``%q``)."""
    return chr(n) if 0 <= n <= 0x10FFFF and not 0xD800 <= n <= 0xDFFF else "\ufffd"


_INT_VERBS: dict[str, Callable[[int], str]] = {
    "d": str, "v": str, "x": lambda n: format(n, "x"), "X": lambda n: format(n, "X"),
    "o": lambda n: format(n, "o"), "b": lambda n: format(n, "b"), "c": _rune,
    "q": lambda n: "'" + go_quote(_rune(n))[1:-1].replace("'", "\\'") + "'"}


def _format_one(v: Any, verb: str, flags: str, width: int, prec: int) -> str:
    """One operand of ``printf`` under ``verb``, padded to ``width``; a list's, map's or struct's
    elements each (as Go's ``fmt``); a wrong verb writes ``%!verb(type=value)``, the value under
    ``%v`` padded."""
    if isinstance(v, GoTime):
        v = v.String()
    text = None
    if isinstance(v, bool):
        text = ("true" if v else "false") if verb in "tv" else None
    elif isinstance(v, int):
        if verb in "cq":
            text = _INT_VERBS[verb](v)
        elif verb in _INT_VERBS:  # a precision is the fewest digits
            sign = "-" if v < 0 else ("+" if "+" in flags else (" " if " " in flags else ""))
            digits = "" if prec == 0 and v == 0 else _INT_VERBS[verb](abs(v))
            text = sign + digits.rjust(max(prec, 0), "0")
    elif isinstance(v, float):
        if verb in "vfFeEgG":
            text = format_float(v, "g" if verb == "v" else verb.lower(), prec)
            text = text.upper() if verb in "EG" else text
            text = "+" + text if "+" in flags and not text.startswith("-") else text
    elif isinstance(v, str):
        if verb in "sv":
            text = v if prec < 0 else v[:prec]
        elif verb == "q":
            text = go_quote(v if prec < 0 else v[:prec])
        elif verb in "xX":
            h = v.encode("utf-8", "surrogatepass").hex()
            text = h.upper() if verb == "X" else h
    elif isinstance(v, GoStruct):
        return "{" + " ".join(_format_one(x, verb, flags, width, prec) for x in v.values()) + "}"
    elif isinstance(v, dict):
        return "map[" + " ".join(f"{_format_one(k, verb, flags, width, prec)}:"
                                 f"{_format_one(v[k], verb, flags, width, prec)}"
                                 for k in sorted(v)) + "]"
    elif isinstance(v, (list, tuple)):
        return "[" + " ".join(_format_one(x, verb, flags, width, prec) for x in v) + "]"
    elif v is None:
        text = "<nil>" if verb == "v" else None
    numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
    if text is not None:
        return _pad(text, flags, width, numeric)
    if v is None:
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({go_type(v)}={_format_one(v, 'v', flags, width, prec)})"


def _str_func(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A Go function of string parameters: any other argument is an execution error."""
    def call(*args: Any) -> Any:
        for a in args:
            _want(a, str, "string", name)
        return fn(*args)
    return call


def _to_upper(s: str) -> str:
    """Go's ``strings.ToUpper``: one character for one (``ß`` stays ``ß``)."""
    return "".join(u if len(u := c.upper()) == 1 else c for c in s)


def _to_lower(s: str) -> str:
    """Go's ``strings.ToLower``: the simple mapping (``İ`` gives ``i``)."""
    return "".join(c.lower()[0] for c in s)


#: Unicode word-break MidLetter, MidNumLet and Single_Quote: inside a word between letters
#: (``it's``, ``x.y``), for ``title``
_MID = frozenset(":·\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a.\u2018\u2019\u2024\ufe52\uff07\uff0e'")


def _is_cased(c: str) -> bool:
    return c.lower() != c or c.upper() != c or c.title() != c


def _is_break(c: str) -> bool:
    """Whether ``c`` ends a word for ``title``: not a letter (ideographs and hiragana excepted:
    each breaks), digit, connector, mark or format character."""
    cat = unicodedata.category(c)
    if cat[0] == "L":
        o = ord(c)
        return 0x3040 <= o <= 0x309F or 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or o >= 0x20000
    return not (cat[0] in "NM" or cat in ("Pc", "Cf") or c in _MID)


def _title(s: str) -> str:
    """Alertmanager's ``title`` (``cases.Title(language.AmericanEnglish)``): a word's first cased
    letter title case, the rest lower case; a word runs on over digits, ``_`` and one of ``.:'``
    between letters, and ends at a space, ``-``, ``/``, ``,`` and other punctuation (``foo_bar x.y
    3rd`` gives ``Foo_bar X.y 3Rd``, as Go's)."""
    out, in_word, prev_mid = [], False, False
    for c in s:
        is_mid = c in _MID
        if prev_mid and is_mid:
            in_word = False
        if _is_cased(c):
            out.append(c.lower() if in_word else c.title())
            in_word = True
        else:
            out.append(c)
            if _is_break(c):
                in_word = False
        prev_mid = is_mid
    return "".join(out)


_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007" \
            "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


@functools.lru_cache(maxsize=64)
def _regexp(pattern: str) -> Any:
    """``pattern`` compiled with RE2 (Go's ``regexp`` syntax); a bad one is an execution error."""
    try:
        return compile_re2(pattern)
    except re2.error as e:
        raise _GoError(f"error parsing regexp: {re2_words(e)}: `{pattern}`") from None


def _match(pattern: str, text: str) -> bool:
    return _regexp(pattern).search(text) is not None


def _expand(rx: Any, template: str, m: Any) -> str:
    """Go's ``Regexp.Expand``: ``$1``, ``${1}``, ``$name``, ``${name}``, ``$$``; ``$1x`` names the
    group ``1x`` (nothing); a malformed ``$`` is kept."""
    out, i = [], 0
    names = rx.groupindex
    while True:
        j = template.find("$", i)
        if j < 0:
            out.append(template[i:])
            return "".join(out)
        out.append(template[i:j])
        if template.startswith("$", j + 1):
            out.append("$")
            i = j + 2
            continue
        brace = template.startswith("{", j + 1)
        k = start = j + 1 + brace
        while k < len(template) and (template[k].isalnum() or template[k] == "_"):
            k += 1
        name = template[start:k]
        if not name or (brace and not template.startswith("}", k)):
            out.append("$")
            i = j + 1
            continue
        i = k + brace
        num = int(name) if name.isdigit() and (name == "0" or name[0] != "0") else None
        group = num if num is not None else names.get(name)
        if group is not None and group <= rx.groups and m.start(group) >= 0:
            out.append(m.group(group))


def _re_replace_all(pattern: str, repl: str, text: str) -> str:
    """Alertmanager's ``reReplaceAll`` (Go's ``ReplaceAllString``): an empty match right after a
    previous match is not replaced."""
    rx = _regexp(pattern)
    out, last, pos = [], 0, 0
    while pos <= len(text):
        m = rx.search(text, pos)
        if m is None:
            break
        a, b = m.span()
        out.append(text[last:a])
        if b > last or a == 0:
            out.append(_expand(rx, repl, m))
        last = b
        pos = pos + 1 if pos + 1 > b else b
    out.append(text[last:])
    return "".join(out)


def _join(sep: str, items: Any) -> str:
    _want(sep, str, "string", "join")
    items = [] if items is None else items  # Go passes nil as an empty []string
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise _GoError(f"wrong type for value; expected []string; got {go_type(items)}")
    return sep.join(items)


def _string_slice(*args: Any) -> list[str]:
    for a in args:
        _want(a, str, "string", "stringSlice")
    return list(args)


#: name -> (function, fewest arguments, most arguments or None)
FUNCS: dict[str, tuple[Callable[..., Any], int, int | None]] = {
    "not": (lambda v: not truth(v), 1, 1),
    "eq": (_eq, 1, None),
    "ne": (lambda a, b: not _eq(a, b), 2, 2),
    "lt": (_lt, 2, 2),
    "le": (lambda a, b: _lt(a, b) or _eq(a, b), 2, 2),
    "gt": (lambda a, b: not (_lt(a, b) or _eq(a, b)), 2, 2),
    "ge": (lambda a, b: not _lt(a, b), 2, 2),
    "len": (_length, 1, 1),
    "index": (_index, 1, None),
    "slice": (_slice, 1, 4),
    "print": (_sprint, 0, None),
    "println": (_sprintln, 0, None),
    "printf": (_sprintf, 1, None),
    "html": (_html, 0, None),
    "urlquery": (_urlquery, 0, None),
    "js": (_js, 0, None),
    "toUpper": (_str_func("toUpper", _to_upper), 1, 1),
    "toLower": (_str_func("toLower", _to_lower), 1, 1),
    "title": (_str_func("title", _title), 1, 1),
    "trimSpace": (_str_func("trimSpace", lambda s: s.strip(_GO_SPACE)), 1, 1),
    "join": (_join, 2, 2),
    "match": (_str_func("match", _match), 2, 2),
    "reReplaceAll": (_str_func("reReplaceAll", _re_replace_all), 3, 3),
    "safeHtml": (_str_func("safeHtml", HTML), 1, 1),
    "stringSlice": (_string_slice, 0, None),
}

#: functions known from Go, newer Alertmanagers or Prometheus, refused at load
UNSUPPORTED_FUNCS = {
    "call": "Go's call",
    **{n: "a newer Alertmanager's function" for n in (
        "safeUrl", "urlUnescape", "routeLabels", "date", "tz", "now", "since",
        "humanizeDuration", "toDate", "mustToDate", "toJson", "base64encode", "base64decode",
        "list", "append", "dict")},
    **{n: "a Prometheus rule template function" for n in (
        "humanize", "humanize1024", "humanizePercentage", "humanizeTimestamp", "query",
        "first", "label", "value", "sortByLabel", "strvalue", "args", "tmpl", "pathPrefix",
        "externalURL", "graphLink", "tableLink", "parseDuration", "toTime")},
}


# ---------------------------------------------------------------- execution

_NOFINAL = object()  # no value piped into a command


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


def _and_or(want: bool) -> Callable[..., Any]:
    """Go's ``and`` (``want`` False) / ``or`` (True): the first operand whose truth is ``want``,
    else the last; later operands are not evaluated."""
    def run(ex: "_Exec", dot: Any, args: tuple, final: Any) -> Any:
        if not args and final is _NOFINAL:
            raise _GoError("wrong number of args: want at least 1 got 0")
        value = None
        for a in args:
            value = ex.arg(dot, a)
            if truth(value) is want:
                return value
        return final if final is not _NOFINAL else value
    return run


LAZY_FUNCS = {"and": _and_or(False), "or": _and_or(True)}


class _Exec:
    """One execution: the templates by name, the variable stack (``[name, value]`` pairs, ``$``
    first) and the ``{{ template }}`` depth."""

    def __init__(self, templates: dict[str, list], dot: Any, depth: int = 0) -> None:
        self.templates, self.depth = templates, depth
        self.vars: list[list] = [["$", dot]]

    def run(self, nodes: list, dot: Any, out: list[str]) -> None:
        for n in nodes:
            if n.__class__ is str:
                out.append(n)
            else:
                _NODES[n.kind](self, n, dot, out)

    def eval(self, node: _Node, dot: Any, declare: bool = True) -> Any:
        """The value of ``node``'s pipeline; an execution error names the node."""
        try:
            return self.pipe(node.pipe, dot, declare)
        except _GoError as e:
            raise TemplateError(node.file, node.line, "{{" + node.src + "}}",
                                f"executing at <{{{{{node.src}}}}}>: {e}") from None
        except RecursionError:
            raise TemplateError(node.file, node.line, "{{" + node.src + "}}",
                                "exceeded maximum template depth") from None

    def pipe(self, pipe: _Pipe, dot: Any, declare: bool = True) -> Any:
        value = _NOFINAL
        for cmd in pipe.cmds:
            value = self.command(cmd, dot, value)
        if declare:
            for name in pipe.decl:
                self.set_var(name, value) if pipe.assign else self.vars.append([name, value])
        return value

    def set_var(self, name: str, value: Any) -> None:
        for pair in reversed(self.vars):
            if pair[0] == name:
                pair[1] = value
                return
        raise _GoError(f"undefined variable: {name}")

    def var(self, name: str) -> Any:
        for pair in reversed(self.vars):
            if pair[0] == name:
                return pair[1]
        raise _GoError(f"undefined variable: {name}")

    def command(self, cmd: list[tuple], dot: Any, final: Any) -> Any:
        first, args = cmd[0], cmd[1:]
        kind = first[0]
        if kind == "func":
            return self.call_func(first[1], dot, args, final)
        if kind == "field":
            return self.chain(dot, dot, first[1], args, final)
        if kind in ("var", "pipe") and first[2]:
            base = self.var(first[1]) if kind == "var" else self.pipe(first[1], dot)
            return self.chain(dot, base, first[2], args, final)
        if args or final is not _NOFINAL:
            raise _GoError(f"can't give argument to non-function {_operand_text(first)}")
        if kind == "nil":
            raise _GoError("nil is not a command")
        return self.arg(dot, first)

    def arg(self, dot: Any, a: tuple) -> Any:
        """The value of operand ``a`` given as an argument."""
        kind = a[0]
        if kind == "dot":
            return dot
        if kind == "lit":
            return a[1]
        if kind == "nil":
            return None
        if kind == "field":
            return self.chain(dot, dot, a[1], (), _NOFINAL)
        if kind == "func":
            return self.call_func(a[1], dot, (), _NOFINAL)
        base = self.var(a[1]) if kind == "var" else self.pipe(a[1], dot)
        return self.chain(dot, base, a[2], (), _NOFINAL) if a[2] else base

    def chain(self, dot: Any, receiver: Any, idents: tuple, args: tuple, final: Any) -> Any:
        for name in idents[:-1]:
            receiver = self.field(dot, name, receiver, (), _NOFINAL)
        return self.field(dot, idents[-1], receiver, args, final)

    def field(self, dot: Any, name: str, receiver: Any, args: tuple, final: Any) -> Any:
        """``receiver.name``: a method (called with ``args``), a struct field or a map key."""
        if receiver is None:
            return None
        if receiver.__class__ in _STRUCTS and name in receiver and not args and final is _NOFINAL:
            return receiver[name]
        if name in getattr(receiver, "go_methods", ()):
            vals = [self.arg(dot, a) for a in args] + ([] if final is _NOFINAL else [final])
            try:
                return getattr(receiver, name)(*vals)
            except TypeError:
                raise _GoError(f"wrong number of args for {name}: got {len(vals)}") from None
        has_args = bool(args) or final is not _NOFINAL
        if isinstance(receiver, GoStruct):
            if name not in receiver:
                raise _GoError(f"can't evaluate field {name} in type {receiver.go_type}")
            if has_args:
                raise _GoError(f"{name} has arguments but cannot be invoked as function")
            return receiver[name]
        if isinstance(receiver, dict):
            if has_args:
                raise _GoError(f"{name} is not a method but has arguments")
            return receiver.get(name, _zero(receiver))
        raise _GoError(f"can't evaluate field {name} in type {go_type(receiver)}")

    def call_func(self, name: str, dot: Any, args: tuple, final: Any) -> Any:
        lazy = LAZY_FUNCS.get(name)
        if lazy is not None:
            return lazy(self, dot, args, final)
        fn, least, most = FUNCS[name]
        vals = [self.arg(dot, a) for a in args] + ([] if final is _NOFINAL else [final])
        if len(vals) < least or (most is not None and len(vals) > most):
            want = least if most == least else f"{least}..{most if most is not None else ''}"
            raise _GoError(f"wrong number of args for {name}: want {want} got {len(vals)}")
        try:
            return fn(*vals)
        except _GoError as e:
            raise _GoError(f"error calling {name}: {e}") from None

    # -- nodes

    def _action(self, node: _Node, dot: Any, out: list[str]) -> None:
        value = self.eval(node, dot)
        if not node.pipe.decl:
            out.append(print_value(value))

    def _if(self, node: _Node, dot: Any, out: list[str]) -> None:
        mark = len(self.vars)
        value = self.eval(node, dot)
        if truth(value):
            self.run(node.body, value if node.kind == "with" else dot, out)
        elif node.orelse:
            self.run(node.orelse, dot, out)
        del self.vars[mark:]

    _with = _if

    def _range(self, node: _Node, dot: Any, out: list[str]) -> None:
        mark = len(self.vars)
        value = self.eval(node, dot, declare=False)
        items = _range_items(value, node)
        decl = node.pipe.decl
        for key, elem in items:
            if decl:
                pairs = [elem] if len(decl) == 1 else [key, elem]
                for name, v in zip(decl, pairs):
                    self.set_var(name, v) if node.pipe.assign else self.vars.append([name, v])
            try:
                self.run(node.body, elem, out)
            except _Break:
                break
            except _Continue:
                pass
            finally:
                del self.vars[mark:]
        if not items and node.orelse:
            self.run(node.orelse, dot, out)

    def _break(self, node: _Node, dot: Any, out: list[str]) -> None:
        raise _Break

    def _continue(self, node: _Node, dot: Any, out: list[str]) -> None:
        raise _Continue

    def _template(self, node: _Node, dot: Any, out: list[str]) -> None:
        body = self.templates.get(node.name)
        if body is None:
            raise TemplateError(node.file, node.line, "{{" + node.src + "}}",
                                f'template "{node.name}" not defined')
        if self.depth >= MAX_DEPTH:
            raise TemplateError(node.file, node.line, "{{" + node.src + "}}",
                                "exceeded maximum template depth")
        value = self.eval(node, dot) if node.pipe is not None else None
        _Exec(self.templates, value, self.depth + 1).run(body, value, out)


_NODES = {kind: getattr(_Exec, "_" + kind)
          for kind in ("action", "if", "with", "range", "break", "continue", "template")}
_STRUCTS = frozenset({Data, Alert, Pair})


def _range_items(value: Any, node: _Node) -> list[tuple[Any, Any]]:
    """(key, element) pairs ``range`` visits: a list's (index, item), a map's (key, value) in
    sorted key order; nothing for a missing value."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(enumerate(value))
    if isinstance(value, dict) and not isinstance(value, GoStruct):
        return [(k, value[k]) for k in sorted(value)]
    raise TemplateError(node.file, node.line, "{{" + node.src + "}}",
                        f"range can't iterate over {print_value(value)}")


def _operand_text(a: tuple) -> str:
    kind = a[0]
    if kind == "lit":
        return go_quote(a[1]) if isinstance(a[1], str) else print_value(a[1])
    return {"dot": ".", "nil": "nil", "var": a[1] if kind == "var" else ""}.get(kind, "(...)")


# ---------------------------------------------------------------- loading

def parse(src: str, file: str) -> tuple[list, dict[str, list]]:
    """(top-level body, ``define``d templates) of one file's text. Raises TemplateError naming
    ``file``, line and construct."""
    parser = _Parser(_Lexer(src, file).run(), file)
    return parser.parse(), parser.defines


def _is_empty(body: list) -> bool:
    return all(n.__class__ is str and not n.strip(_SPACE) for n in body)


def _add(templates: dict[str, list], name: str, body: list) -> None:
    """Go's ``AddParseTree``: a later definition replaces an earlier one, except an empty body,
    which never replaces a non-empty one."""
    if name in templates and _is_empty(body) and not _is_empty(templates[name]):
        return
    templates[name] = body


class TemplateSet:
    """The templates of an Alertmanager configuration, by name; immutable once loaded
    (:func:`load_templates`)."""

    def __init__(self, templates: dict[str, list]) -> None:
        self._templates = templates
        self._texts: dict[tuple[str, str], tuple[list, dict]] = {}

    def names(self) -> list[str]:
        """The defined template names, sorted."""
        return sorted(self._templates)

    def __contains__(self, name: str) -> bool:
        return name in self._templates

    def check(self, text: str, source: str = "<text>") -> None:
        """Parses ``text`` (a receiver field) without rendering it; raises as :meth:`render`."""
        self._parsed(text, source)

    def _parsed(self, text: str, source: str) -> tuple[list, dict]:
        key = (text, source)
        hit = self._texts.get(key)
        if hit is None:
            hit = parse(text, source)
            if len(self._texts) >= 256:
                self._texts.clear()
            self._texts[key] = hit
        return hit

    def render(self, text: str, data: Any, source: str = "<text>") -> str:
        """``text`` (a receiver field) rendered against ``data`` (:func:`alertmanager_data`) as
        Alertmanager's ``ExecuteTextString`` (``""`` gives ``""``; ``text`` may ``define``).
        Raises TemplateError (parse or execution) naming ``source`` or file, line and construct.
        """
        if text == "":
            return ""
        body, defines = self._parsed(text, source)
        templates = self._templates
        if defines:
            templates = dict(templates)
            for name, tree in defines.items():
                _add(templates, name, tree)
        return _execute(templates, body, data)

    def render_named(self, name: str, data: Any) -> str:
        """Template ``name`` rendered against ``data``. Raises TemplateError."""
        body = self._templates.get(name)
        if body is None:
            raise TemplateError("<render_named>", 1, name, f'template "{name}" not defined')
        return _execute(self._templates, body, data)


def _execute(templates: dict[str, list], body: list, data: Any) -> str:
    out: list[str] = []
    try:
        _Exec(templates, data).run(body, data, out)
    except RecursionError:
        raise TemplateError("<render>", 1, "{{template}}", "exceeded maximum template depth") from None
    return "".join(out)


def default_template_text(name: str = "default.tmpl") -> str:
    """Alertmanager 0.25's ``template/<name>`` as packaged with Plait."""
    return resources.files("alerting").joinpath("templates_am", name).read_text("utf-8")


def load_templates(paths: list[str]) -> TemplateSet:
    """Alertmanager's default templates, then the files ``paths`` (the ``templates:`` globs as
    ``alerting.goglob.glob`` expands them, in order; each path read as it is); each file's top
    level is also a template named by its base name (``ParseGlob``). Raises TemplateError naming
    the file, line and construct, or a file that cannot be read (a directory: ``read <name>: is
    a directory``, as Go's ``ReadFile``)."""
    templates: dict[str, list] = {}
    sources = [(name, default_template_text(name)) for name in DEFAULT_FILES]
    for path in paths:
        if os.path.isdir(path):
            raise TemplateError(path, 1, path, f"read {os.path.basename(path)}: is a directory")
        try:
            with open(path, encoding="utf-8") as fh:
                sources.append((path, fh.read()))
        except (OSError, UnicodeDecodeError) as e:
            raise TemplateError(path, 1, path, f"cannot read template file: {e}") from None
    for path, text in sources:
        body, defines = parse(text, path)
        _add(templates, os.path.basename(path), body)
        for name, tree in defines.items():
            _add(templates, name, tree)
    return TemplateSet(templates)


# ---------------------------------------------------------------- data

_META = frozenset("\\.+*?()|[]{}^$")


def quote_meta(text: str) -> str:
    """Go's ``regexp.QuoteMeta`` (Alertmanager quotes the receiver name so in ``Data``)."""
    return "".join("\\" + c if c in _META else c for c in text)


def alertmanager_data(sections: list[dict[str, Any]], receiver: str,
                      external_url: str) -> Data:
    """Alertmanager's template ``Data`` (template/template.go) of ``sections``, the alerts and
    labels of :func:`alerting.delivery.render_alertmanager`: ``Receiver`` (regexp-quoted, as
    Alertmanager), ``Status``, ``Alerts`` (``EndsAt`` zero while firing), ``GroupLabels`` (common
    to all sections), ``CommonLabels``, ``CommonAnnotations``, ``ExternalURL``."""
    alerts = Alerts()
    for view in am_order([view for s in sections for view in s["alerts"]]):
        resolved = view["status"] == "resolved"
        alerts.append(Alert(
            Status=view["status"], Labels=KV(am_alert_labels(view)),
            Annotations=KV(view["annotations"]), StartsAt=GoTime(view["starts_at"]),
            EndsAt=GoTime(view["ends_at"] if resolved else None),
            GeneratorURL=view.get("generator_url", "") or "",
            Fingerprint=view["fingerprint"].partition("~")[0]))
    return Data(
        Receiver=quote_meta(receiver),
        Status="firing" if any(a["Status"] == "firing" for a in alerts) else "resolved",
        Alerts=alerts,
        GroupLabels=KV(am_group_labels(common_labels([s["group_labels"] for s in sections]))),
        CommonLabels=KV(common_labels([a["Labels"] for a in alerts])),
        CommonAnnotations=KV(common_labels([a["Annotations"] for a in alerts])),
        ExternalURL=external_url)


def data_from_json(doc: dict[str, Any]) -> Data:
    """``Data`` from Alertmanager's webhook JSON (``receiver``, ``status``, ``alerts[]`` with RFC
    3339 ``startsAt`` / ``endsAt``, ``groupLabels``...), the layout ``amtool template render
    --template.data`` reads."""
    def when(text: str | None) -> GoTime:
        if not text or text.startswith("0001-01-01"):
            return GoTime(None)
        return GoTime(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())

    return Data(
        Receiver=doc.get("receiver", ""), Status=doc.get("status", ""),
        Alerts=Alerts(Alert(
            Status=a.get("status", ""), Labels=KV(a.get("labels") or {}),
            Annotations=KV(a.get("annotations") or {}), StartsAt=when(a.get("startsAt")),
            EndsAt=when(a.get("endsAt")), GeneratorURL=a.get("generatorURL", ""),
            Fingerprint=a.get("fingerprint", "")) for a in doc.get("alerts") or []),
        GroupLabels=KV(doc.get("groupLabels") or {}), CommonLabels=KV(doc.get("commonLabels") or {}),
        CommonAnnotations=KV(doc.get("commonAnnotations") or {}),
        ExternalURL=doc.get("externalURL", ""))
