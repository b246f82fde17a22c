"""Request signatures shared by the API (``api.auth``) and callers (``producers.signing``)::

    canonical = METHOD \\n PATH \\n CANONICAL_QUERY \\n SHA256_HEX(BODY) \\n TIMESTAMP \\n NONCE
    signature = hex(HMAC-SHA256(appSecret, canonical))      # RFC 2104, FIPS 180-4

``PATH``: the percent-decoded URL path without the query; ``CANONICAL_QUERY``:
:func:`canonical_query`; ``TIMESTAMP``: Unix seconds; ``NONCE``: a random string used once."""
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
    return quote(value, safe="-_.~")


def canonical_query(query: QueryLike) -> str:
    """``k1=v1&k2=v2``: the pairs of ``query`` (raw string or bytes, mapping, or pairs)
    percent-encoded per RFC 3986, sorted; repeated keys and blank values kept; ``""`` for None."""
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
    """The signed string: six lines joined by ``\\n`` (module docstring); ``path``: decoded, without
    query."""
    return "\n".join([method.upper(), path or "/", canonical_query(query),
                      body_digest(body), str(timestamp), nonce])


def hmac_sha256_hex(secret: str, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) of ``message`` under ``secret``'s UTF-8, lower-case hex: the one MAC
    of every Plait signing scheme. Raises UnicodeEncodeError on a lone surrogate in ``secret``."""
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign(secret: str, canonical: str) -> str:
    """HMAC-SHA256 (RFC 2104) of ``canonical`` under ``secret``, lower-case hex (64 chars)."""
    return hmac_sha256_hex(secret, canonical.encode("utf-8"))


def sign_request(secret: str, method: str, path: str, query: QueryLike,
                 body: bytes | str | None, timestamp: str | int, nonce: str) -> str:
    """``sign(secret, canonical_request(...))``: the value of ``X-Plait-Signature``."""
    return sign(secret, canonical_request(method, path, query, body, timestamp, nonce))


def signatures_match(expected: str, given: str) -> bool:
    """Constant-time, case-insensitive comparison of two hex signatures; False for non-ASCII."""
    try:
        return hmac.compare_digest(expected.lower().encode("ascii"), given.lower().encode("ascii"))
    except (UnicodeEncodeError, AttributeError):
        return False
