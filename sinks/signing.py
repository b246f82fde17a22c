"""Signed download links for the local store, and RFC 6266 file names."""
from __future__ import annotations

import hmac
import time
from urllib.parse import quote

from plait.signature import hmac_sha256_hex


def sign_link(secret: str, key: str, expires: int, file_name: str) -> str:
    """HMAC-SHA256 (hex) over ``key``, ``expires`` (Unix seconds) and ``file_name``."""
    msg = f"{key}\n{expires}\n{file_name}".encode("utf-8", "surrogatepass")
    return hmac_sha256_hex(secret, msg)


def verify_link(secret: str, key: str, expires: int, file_name: str, sig: str,
                now: float | None = None) -> str | None:
    """None when the link is valid, else ``"expired"`` or ``"bad signature"``; the signature is
    compared as UTF-8 bytes, so a non-ASCII ``sig`` is a bad signature, not an error."""
    expected = sign_link(secret, key, expires, file_name).encode()
    if not hmac.compare_digest(expected, sig.encode("utf-8", "surrogatepass")):
        return "bad signature"
    if (now if now is not None else time.time()) > expires:
        return "expired"
    return None


def content_disposition(file_name: str) -> str:
    """``Content-Disposition: attachment`` per RFC 6266 / RFC 5987: an ASCII
    fallback ``filename`` plus the exact UTF-8 ``filename*``."""
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in file_name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(file_name, safe='')}"
