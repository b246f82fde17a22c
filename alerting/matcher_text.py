"""Alertmanager's two matcher grammars, text -> ``[(name, op, value)]``: the UTF-8 one of 0.27+
(``matcher/parse``: lexer.go, parse.go, token.go) and the classic one (``pkg/labels/parse.go``,
all of 0.25). Which one wins is ``matcher/compat`` (:mod:`alerting.matchers`). Both raise
ValueError in Alertmanager's words; the UTF-8 one puts ``start:end`` columns (characters, from 0)
first. Regexes are not compiled here."""
from __future__ import annotations

import re

Triple = tuple[str, str, str]

#: Go's ``unicode.IsSpace`` (str.isspace also takes U+001C..U+001F, which Go does not).
_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                   "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_SPACE_TEXT = "".join(sorted(_SPACE))
_RESERVED = _SPACE | frozenset('{}!=~,\\"\'`')
_OPS = ("=", "!=", "=~", "!~")
_NAMED_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}
_HEX = frozenset("0123456789abcdefABCDEF")


def go_unquote(token: str) -> str:
    """Go's ``strconv.Unquote`` of a double-quoted ``token``, whose result must be UTF-8
    (token.go ``unquote``): ``\\x``/octal escapes are bytes, so ``"\\xf0\\x9f\\x99\\x82"`` is
    one character; ``\\u``/``\\U`` are code points (no surrogates); a raw newline, a lone
    ``"``, ``\\'`` or any other escape is refused."""
    if len(token) < 2 or token[0] != '"' or token[-1] != '"':
        raise ValueError("not a double-quoted string")
    body, out, i = token[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch in '\n"':
            raise ValueError(f"unescaped {ch!r} in a quoted string")
        if ch != "\\":
            out += ch.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError, a ValueError
            i += 1
            continue
        esc = body[i + 1:i + 2]
        if esc in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[esc])
            i += 2
        elif esc and esc in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[esc]
            digits = body[i + 2:i + 2 + width]
            if len(digits) < width or not set(digits) <= _HEX:
                raise ValueError(f"bad \\{esc} escape")
            code = int(digits, 16)
            if esc == "x":
                out.append(code)
            elif code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"\\{esc}{digits} is not a Unicode code point")
            else:
                out += chr(code).encode("utf-8")
            i += 2 + width
        elif esc and esc in "01234567":
            digits = body[i + 1:i + 4]
            if len(digits) < 3 or not set(digits) <= set("01234567") or int(digits, 8) > 255:
                raise ValueError("bad octal escape")
            out.append(int(digits, 8))
            i += 4
        else:
            raise ValueError(f"unknown escape \\{esc}")
    return out.decode("utf-8")  # invalid UTF-8 raises UnicodeDecodeError, a ValueError


# A token: (kind, text, first column, end column); kind is the text for { } , and operators,
# "quoted", "unquoted", "eof", or "error" (text = the lexer's message; nothing follows it).
Token = tuple[str, str, int, int]


def _operator(text: str, i: int) -> Token:
    """The operator at ``text[i]`` (``=`` or ``!``), lexer.go ``scanOperator``."""
    two = text[i:i + 2]
    if two in ("!=", "!~", "=~"):
        return two, two, i, i + 2
    if text[i] == "=":
        return "=", "=", i, i + 1
    if i + 1 >= len(text):
        return "error", f"{i}:{i + 1}: unexpected end of input, expected one of '=~'", i, i + 1
    return "error", f"{i}:{i + 1}: !: expected one of '=~'", i, i + 1


def _quoted_end(text: str, i: int) -> int:
    """Index just past the double-quoted string opening at ``text[i]``; -1 when unclosed."""
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
        elif text[j] == '"':
            return j + 1
        else:
            j += 1
    return -1


def tokens(text: str) -> list[Token]:
    """lexer.go ``scan`` over all of ``text``; the list ends with an eof or an error token."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "{},":
            tok: Token = (ch, ch, i, i + 1)
        elif ch in "=!":
            tok = _operator(text, i)
        elif ch == '"':
            end = _quoted_end(text, i)
            tok = (("quoted", text[i:end], i, end) if end > 0
                   else ("error", f'{i}:{n}: {text[i:]}: missing end "', i, n))
        elif ch not in _RESERVED:
            end = i
            while end < n and text[end] not in _RESERVED:
                end += 1
            tok = ("unquoted", text[i:end], i, end)
        elif ch in _SPACE:
            i += 1
            continue
        else:
            tok = ("error", f"{i}:{i + 1}: {ch}: invalid input", i, i + 1)
        out.append(tok)
        if tok[0] == "error":
            return out
        i = tok[3]
    return out + [("eof", "", n, n)]


class _EndOfInput(ValueError):
    """parse.go ``errEOF``."""

    def __init__(self) -> None:
        super().__init__("end of input")


class _Utf8Parser:
    """parse.go's ``parser`` over :func:`tokens`: ``peek``/``expect``/``accept`` and its states."""

    def __init__(self, text: str) -> None:
        self.toks, self.k, self.end = tokens(text), 0, 0  # end: column after the last consumed
        self.out: list[Triple] = []
        self.open_brace = False

    def peek(self) -> Token:
        tok = self.toks[self.k]
        if tok[0] == "error":
            raise ValueError(tok[1])
        return tok

    def take(self) -> Token:
        tok = self.peek()
        if tok[0] != "eof":
            self.k, self.end = self.k + 1, tok[3]
        return tok

    def expect_peek(self, *kinds: str) -> Token:
        tok = self.peek()
        if tok[0] == "eof":
            raise _EndOfInput()
        if tok[0] not in kinds:
            raise ValueError(f"{tok[2]}:{tok[3]}: unexpected {tok[1]}")
        return tok

    def expect(self, *kinds: str) -> Token:
        self.expect_peek(*kinds)
        return self.take()

    def accept_peek(self, kind: str) -> bool:
        tok = self.peek()
        if tok[0] == "eof":
            raise _EndOfInput()
        return tok[0] == kind

    def parse(self) -> list[Triple]:
        state = self.open_state
        while state is not None:
            state = state()
        return self.out

    def open_state(self):
        try:
            self.open_brace = self.accept_peek("{")
            if self.open_brace:
                self.take()
            closed = self.accept_peek("}")
        except _EndOfInput:
            return self.close_state if self.open_brace else self.eof_state
        return self.close_state if closed else self.matcher_state

    def close_state(self):
        if self.open_brace:
            try:
                self.expect("}")
            except ValueError as e:
                raise ValueError(f"0:{self.end}: {e}: expected close brace") from None
        elif self.peek()[0] == "}":
            self.take()
            raise ValueError(f"0:{self.end}: }}: expected opening brace")
        return self.eof_state

    def eof_state(self):
        try:
            tok = self.take()
        except ValueError as e:
            raise ValueError(f"{e}: expected end of input") from None
        if tok[0] != "eof":
            raise ValueError(f"{tok[2]}:{tok[3]}: {tok[1]}: expected end of input")
        return None

    def matcher_state(self):
        name = self.operand("expected label name")
        try:
            op = self.expect(*_OPS)[0]
        except ValueError as e:
            raise ValueError(f"{e}: expected an operator such as '=', '!=', '=~' or '!~'") from None
        self.out.append((name, op, self.operand("expected label value")))
        return self.after_matcher_state

    def operand(self, missing: str) -> str:
        """A label name or value: unquoted as written, quoted by :func:`go_unquote`."""
        try:
            tok = self.expect("quoted", "unquoted")
        except ValueError as e:
            raise ValueError(f"{e}: {missing}") from None
        if tok[0] == "unquoted":
            return tok[1]
        try:
            return go_unquote(tok[1])
        except ValueError:
            raise ValueError(f"{tok[2]}:{tok[3]}: {tok[1]}: invalid input") from None

    def after_matcher_state(self):
        try:
            tok = self.expect_peek(",", "}")
        except _EndOfInput:
            return self.close_state
        except ValueError as e:
            raise ValueError(f"{e}: expected a comma or close brace") from None
        return self.comma_state if tok[0] == "," else self.close_state

    def comma_state(self):
        self.take()
        try:
            tok = self.expect_peek("}", "unquoted", "quoted")
        except _EndOfInput:
            return self.close_state
        except ValueError as e:
            raise ValueError(f"{e}: expected a matcher or close brace after comma") from None
        return self.close_state if tok[0] == "}" else self.matcher_state


def utf8_matchers(text: str) -> list[Triple]:
    """parse.go ``Matchers``: zero or more matchers, ``{}`` and a trailing comma allowed; names and
    values unquoted (no reserved character: space ``{}!=~,\\"'`` and backquote) or double-quoted
    Go strings."""
    return _Utf8Parser(text).parse()


def utf8_matcher(text: str) -> Triple:
    """parse.go ``Matcher``: exactly one matcher."""
    found = utf8_matchers(text)
    if len(found) != 1:
        raise ValueError("no matchers" if not found else f"expected 1 matcher, found {len(found)}")
    return found[0]


#: pkg/labels/parse.go's ``re``: Go's ``\s`` is ``[\t\n\f\r ]``; ``$`` is the end of the text.
_CLASSIC = re.compile(r"[\t\n\f\r ]*([a-zA-Z_:][a-zA-Z0-9_:]*)[\t\n\f\r ]*(=~|=|!=|!~)"
                      r"[\t\n\f\r ]*(.*?)[\t\n\f\r ]*", re.S)


def classic_matcher(text: str) -> Triple:
    """pkg/labels ``ParseMatcher``: a legacy name, an operator, then the rest, optionally in double
    quotes, where only ``\\n``, ``\\"`` and ``\\\\`` are escapes (another ``\\`` is kept)."""
    found = _CLASSIC.fullmatch(text)
    if found is None:
        raise ValueError(f"bad matcher format: {text}")
    name, op, raw = found.groups()
    body, quoted = (raw[1:], True) if raw.startswith('"') else (raw, False)
    unquote_error = ValueError(f"matcher value contains unescaped double quote: {raw}")
    out, escaped = [], False
    for i, ch in enumerate(body):
        if escaped:
            escaped = False
            out.append("\n" if ch == "n" else ch if ch in '"\\' else "\\" + ch)
        elif ch == "\\" and i < len(body) - 1:
            escaped = True
        elif ch == '"':
            if not quoted or i < len(body) - 1:
                raise unquote_error
            quoted = False
        else:
            out.append(ch)
    if quoted:
        raise unquote_error
    return name, op, "".join(out)


def classic_matchers(text: str) -> list[Triple]:
    """pkg/labels ``ParseMatchers``: one ``{`` and one ``}`` trimmed, split at commas outside double
    quotes (``\\"`` does not toggle), a last empty part dropped, each part
    :func:`classic_matcher`."""
    s = text.removeprefix("{").removesuffix("}")
    parts, buf, quoted, escaped = [], [], False, False
    for ch in s:
        if ch == "," and not quoted:
            parts.append("".join(buf))
            buf = []
            continue
        if ch == '"':
            quoted, escaped = (not quoted, False) if not escaped else (quoted, False)
        elif ch == "\\":
            escaped = not escaped
        elif ch != ",":
            escaped = False
        buf.append(ch)
    last = "".join(buf).strip(_SPACE_TEXT)
    return [classic_matcher(p) for p in parts + ([last] if last else [])]
