"""Go's ``net/url.Parse`` as far as Alertmanager's ``parseURL`` depends on it: which URLs it
refuses and with which words (``parse "<url>": <problem>``), so alertmanager.yml URLs are taken or
refused as Alertmanager takes them, as written (no trimming)."""
from __future__ import annotations

import json
import re


def quote(text: str) -> str:
    """``text`` as Go's ``%q`` writes printable text: a double-quoted JSON string."""
    return json.dumps(text, ensure_ascii=False)


#: Characters Go's ``net/url`` takes in a host name besides ASCII letters and digits (and any
#: non-ASCII); others are ``invalid character %q in host name``.
_HOST_CHARS = frozenset("-_.~!$&'()*+,;=:[]<>\"%")
#: ... and in userinfo (``validUserinfo``); others are ``net/url: invalid userinfo``.
_USERINFO_CHARS = frozenset("-._:~!$&'()*+,;=%@")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})|%[0-9A-Fa-f]{2}")


def _bad_escape(text: str, host: bool = False) -> str | None:
    """The first ``%`` escape Go's ``unescape`` refuses in ``text`` (not two hex digits; in a
    host name, one for an ASCII byte: RFC 3986 3.2.2 keeps escapes for non-ASCII), or None."""
    for m in _ESCAPE.finditer(text):
        esc = text[m.start():m.start() + 3]
        if len(m.group()) == 1 or (host and int(esc[1:], 16) < 0x80):
            return esc
    return None


def parse(text: str) -> tuple[str, str]:
    """``(scheme, host)`` of ``text`` as Go's ``url.Parse`` gives them (scheme lowercased; host
    with its port, "" without an authority). Raises ValueError with Go's words: control
    characters before the fragment, a colon in a first path segment without scheme, the
    authority's userinfo, host and port, bad ``%`` escapes in the path and fragment."""
    head, _, fragment = text.partition("#")
    if any(c < " " or c == "\x7f" for c in head):
        raise ValueError("net/url: invalid control character in URL")
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", head)
    rest = head[scheme.end():] if scheme else head
    if not scheme and ":" in rest.partition("/")[0]:
        raise ValueError("first path segment in URL cannot contain colon")
    path, host = rest.partition("?")[0], ""
    if rest.startswith("//"):
        authority, slash, path = path[2:].partition("/")
        userinfo, at, host = authority.rpartition("@")
        if at and any(c < "\x80" and not c.isalnum() and c not in _USERINFO_CHARS
                      for c in userinfo):
            raise ValueError("net/url: invalid userinfo")
        if at and (esc := _bad_escape(userinfo)):
            raise ValueError(f"invalid URL escape {quote(esc)}")
        if host.startswith("["):
            end = host.rfind("]")
            if end < 0:
                raise ValueError("missing ']' in host")
            port = host[end + 1:]
        else:
            bad = next((c for c in host
                        if c < "\x80" and not c.isalnum() and c not in _HOST_CHARS), None)
            if bad is not None:
                raise ValueError(f"invalid character {quote(bad)} in host name")
            if esc := _bad_escape(host, host=True):
                raise ValueError(f"invalid URL escape {quote(esc)}")
            port = host[host.rfind(":"):] if ":" in host else ""
        if port and not re.fullmatch(r":[0-9]*", port):
            raise ValueError(f"invalid port {quote(port)} after host")
        path = slash + path
    esc = _bad_escape(path) or _bad_escape(fragment)
    if esc:
        raise ValueError(f"invalid URL escape {quote(esc)}")
    return (scheme.group()[:-1].lower() if scheme else ""), host
