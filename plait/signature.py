"""Request signatures shared by the API (``api.auth``) and callers
(``producers.signing``): one canonical string, one HMAC, so both sides can
never disagree on what was signed.

A business system signs every API call with its ``appSecret``::

    canonical = METHOD \\n PATH \\n CANONICAL_QUERY \\n SHA256_HEX(BODY) \\n TIMESTAMP \\n NONCE
    signature = hex(HMAC-SHA256(appSecret, canonical))      # RFC 2104, FIPS 180-4

and sends it with the headers named below. ``PATH`` is the percent-decoded
URL path without the query (what Starlette's ``request.url.path`` and httpx's
``request.url.path`` both give); ``CANONICAL_QUERY`` is the query re-encoded
per RFC 3986 with its pairs sorted (:func:`canonical_query`); ``TIMESTAMP`` is
Unix time in whole seconds; ``NONCE`` is a random string used once.
"""
from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, quote

#: Header names (case-insensitive on the wire).
HEADER_APP_KEY = "X-Plait-AppKey"
HEADER_TIMESTAMP = "X-Plait-Timestamp"
HEADER_NONCE = "X-Plait-Nonce"
HEADER_SIGNATURE = "X-Plait-Signature"
SIGNED_HEADERS = (HEADER_APP_KEY, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE)

#: A nonce: 16..128 characters of ``[A-Za-z0-9_-]`` (e.g. ``secrets.token_urlsafe(16)``).
NONCE_RE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
#: A timestamp: Unix seconds, decimal digits only (no sign, no fraction).
TIMESTAMP_RE = re.compile(r"^[0-9]{1,12}$")

QueryLike = str | bytes | Mapping[str, str] | Iterable[tuple[str, str]] | None


def _rfc3986(value: str) -> str:
    # Unreserved characters (RFC 3986 s2.3) stay; everything else is %XX of UTF-8.
    return quote(value, safe="-_.~")


def canonical_query(query: QueryLike) -> str:
    """The query in canonical form: ``k1=v1&k2=v2`` sorted by (key, value).

    Args:
        query: a raw query string (``"b=2&a=1"``, with or without ``%``
            escapes or ``+`` for spaces, bytes allowed), a mapping or an
            iterable of ``(key, value)`` pairs. ``None`` or empty gives ``""``.
    Returns:
        Keys and values percent-encoded per RFC 3986 (unreserved characters
        kept), pairs sorted, repeated keys kept, blank values kept (``a=``).
    """
    if not query:
        return ""
    if isinstance(query, bytes):
        query = query.decode("utf-8", errors="replace")
    if isinstance(query, str):
        pairs = parse_qsl(query, keep_blank_values=True)
    elif isinstance(query, Mapping):
        pairs = [(str(k), str(v)) for k, v in query.items()]
    else:
        pairs = [(str(k), str(v)) for k, v in query]
    encoded = sorted((_rfc3986(k), _rfc3986(v)) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def body_digest(body: bytes | str | None) -> str:
    """SHA-256 (hex, lower case) of the raw body bytes; an empty body hashes ``b""``."""
    if body is None:
        body = b""
    if isinstance(body, str):
        body = body.encode("utf-8")
    return hashlib.sha256(body).hexdigest()


def canonical_request(method: str, path: str, query: QueryLike, body: bytes | str | None,
                      timestamp: str | int, nonce: str) -> str:
    """The string that is signed (module docstring): six lines joined by ``\\n``.

    ``method`` is upper-cased; ``path`` must be the decoded path without the
    query (``"/"`` when empty); ``timestamp`` is Unix seconds.
    """
    return "\n".join([method.upper(), path or "/", canonical_query(query),
                      body_digest(body), str(timestamp), nonce])


def hmac_sha256_hex(secret: str, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104, FIPS 180-4) of ``message`` under ``secret``
    (its UTF-8 bytes), lower-case hex (64 chars).

    The one MAC of every Plait signing scheme: request signatures
    (:func:`sign`), data tokens (``plait.tokens``), download links
    (``sinks.signing``) and webhook signatures (``alerting.delivery``). Each
    scheme builds its own ``message`` bytes (its wire format); this only MACs them.

    Raises:
        UnicodeEncodeError: ``secret`` holds a lone surrogate.
    """
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign(secret: str, canonical: str) -> str:
    """HMAC-SHA256 (RFC 2104) of ``canonical`` under ``secret``, lower-case hex (64 chars)."""
    return hmac_sha256_hex(secret, canonical.encode("utf-8"))


def sign_request(secret: str, method: str, path: str, query: QueryLike,
                 body: bytes | str | None, timestamp: str | int, nonce: str) -> str:
    """``sign(secret, canonical_request(...))``: the value of ``X-Plait-Signature``."""
    return sign(secret, canonical_request(method, path, query, body, timestamp, nonce))


def signatures_match(expected: str, given: str) -> bool:
    """Constant-time comparison of two hex signatures (case-insensitive);
    False for anything that is not ASCII."""
    try:
        return hmac.compare_digest(expected.lower().encode("ascii"), given.lower().encode("ascii"))
    except (UnicodeEncodeError, AttributeError):
        return False
