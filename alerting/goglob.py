"""Go's ``path/filepath.Glob`` on Unix, which Alertmanager's ``templates`` globs go through
(``template.FromGlobs``), so a pattern matches the files Alertmanager would read, in its order.

Go's pattern syntax (``filepath.Match``): ``*`` any run of non-``/`` characters, ``?`` one
non-``/`` character, ``[`` [``^``] ranges ``]`` a non-empty class (``lo`` or ``lo-hi``, each char
possibly ``\\``-escaped, never a bare ``-`` or ``]``), ``\\c`` the char ``c``, anything else
itself. Unlike Python's :mod:`glob`: ``*`` and ``?`` match a leading dot, ``^`` negates a class
(``!`` is a plain char), a backslash escapes, and a malformed pattern is an error
(``ErrBadPattern``, "syntax error in pattern"), not a pattern matching nothing."""
from __future__ import annotations

import os
import re

#: Go's ``filepath.ErrBadPattern`` text.
BAD_PATTERN = "syntax error in pattern"


def _char(pattern: str, i: int) -> tuple[str, int]:
    """One class char at ``pattern[i]`` (Go's ``getEsc``): the char and the index after it.
    ValueError for a bare ``-`` or ``]``, a lone trailing ``\\``, or nothing after the char."""
    if i >= len(pattern) or pattern[i] in "-]":
        raise ValueError(BAD_PATTERN)
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            raise ValueError(BAD_PATTERN)
    if i + 1 >= len(pattern):  # a class must still close
        raise ValueError(BAD_PATTERN)
    return pattern[i], i + 1


def compile_name(pattern: str) -> re.Pattern[str]:
    """The regex a file name must fully match for ``pattern`` (one path element or more: ``*``
    and ``?`` never match ``/``). ValueError :data:`BAD_PATTERN` when malformed."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "\\":
            if i + 1 >= n:
                raise ValueError(BAD_PATTERN)
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif c == "[":
            i += 1
            negated = i < n and pattern[i] == "^"
            i += negated
            ranges: list[tuple[str, str]] = []
            while not (i < n and pattern[i] == "]" and ranges):
                lo, i = _char(pattern, i)
                hi = lo
                if pattern[i] == "-":
                    hi, i = _char(pattern, i + 1)
                ranges.append((lo, hi))
            i += 1
            kept = "".join(re.escape(lo) + ("" if lo == hi else "-" + re.escape(hi))
                           for lo, hi in ranges if lo <= hi)  # Go: lo > hi matches nothing
            if negated:
                out.append(f"[^{kept}]" if kept else "(?s:.)")
            else:
                out.append(f"[{kept}]" if kept else "(?!)")
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _has_meta(path: str) -> bool:
    return any(c in path for c in "*?[\\")


def glob(pattern: str) -> list[str]:
    """The paths matching ``pattern``, as Go's ``filepath.Glob`` gives them: a pattern without
    meta characters is itself when it exists; else each directory level in name order. I/O
    errors match nothing. ValueError :data:`BAD_PATTERN` when the pattern is malformed, wherever
    it would stop matching."""
    compile_name(pattern)  # Go checks the whole pattern first
    if not _has_meta(pattern):
        return [pattern] if os.path.lexists(pattern) else []
    head, sep, name = pattern.rpartition("/")
    directory = head or ("/" if sep else ".")
    dirs = glob(directory) if _has_meta(directory) else [directory]
    regex, out = compile_name(name), []
    for d in dirs:
        try:
            names = sorted(os.listdir(d)) if os.path.isdir(d) else []
        except OSError:
            continue
        out += [n if d == "." else os.path.join(d, n) for n in names if regex.fullmatch(n)]
    return out
