"""Request authentication (signed requests, ``plait.signature``: HMAC-SHA256,
RFC 2104; bearer tokens, RFC 6750) and tenant scoping: another tenant's task
answers 404 like an unknown one."""
from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from redis.exceptions import RedisError

from plait import keys as K
from plait.callers import Caller, CallerRegistry
from plait.errors import AuthError, Forbidden  # noqa: F401  (re-exported)
from plait.signature import (HEADER_APP_KEY, HEADER_NONCE, HEADER_SIGNATURE, HEADER_TIMESTAMP,
                             NONCE_RE, TIMESTAMP_RE, QueryLike, sign_request, signatures_match)

#: Largest allowed difference between the request's timestamp and now, seconds.
DEFAULT_SKEW_SECONDS = 300


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:  # plain dicts are case-sensitive; HTTP headers are not
        lower = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lower), None)
    if value is None or value == "":
        raise AuthError(f"missing header {name}: requests must be signed "
                        f"({HEADER_APP_KEY}, {HEADER_TIMESTAMP}, {HEADER_NONCE}, "
                        f"{HEADER_SIGNATURE})")
    return value


async def verify_request(method: str, path: str, query: QueryLike, body: bytes,
                         headers: Mapping[str, str], registry: CallerRegistry, redis: Any,
                         prefix: str, now: float, skew: int = DEFAULT_SKEW_SECONDS) -> Caller:
    """The :class:`Caller` of a signed request (raw query and body as received;
    ``now``, ``skew`` in seconds; nonces kept ``2 * skew``, recorded only once
    the signature is valid). Raises ``AuthError`` 401, or 503 without Redis."""
    app_key = _header(headers, HEADER_APP_KEY)
    timestamp = _header(headers, HEADER_TIMESTAMP)
    nonce = _header(headers, HEADER_NONCE)
    signature = _header(headers, HEADER_SIGNATURE)
    if not TIMESTAMP_RE.match(timestamp):
        raise AuthError(f"{HEADER_TIMESTAMP} must be Unix time in whole seconds")
    if not NONCE_RE.match(nonce):
        raise AuthError(f"{HEADER_NONCE} must be 16-128 characters of [A-Za-z0-9_-]")
    caller = registry.by_app_key(app_key)
    if caller is None:
        raise AuthError("unknown appKey")
    if abs(now - int(timestamp)) > skew:
        raise AuthError(f"{HEADER_TIMESTAMP} is more than {skew} s away from server time; "
                        "check the caller's clock")
    expected = sign_request(caller.secret(), method, path, query, body, timestamp, nonce)
    if not signatures_match(expected, signature):
        raise AuthError("bad signature: it does not match the request (method, path, query, "
                        "body, timestamp, nonce) signed with this appKey's secret")
    try:
        fresh = await redis.set(K.nonce(prefix, app_key, nonce), b"1", nx=True, ex=2 * skew)
    except (RedisError, OSError, TimeoutError) as exc:
        raise AuthError(f"cannot check the request nonce now ({type(exc).__name__}); retry",
                        status=503) from None
    if not fresh:
        raise AuthError("nonce already used: replayed request refused")
    return caller


async def verify_starlette_request(request: Any, registry: CallerRegistry, redis: Any,
                                   prefix: str, now: float,
                                   skew: int = DEFAULT_SKEW_SECONDS) -> Caller:
    """:func:`verify_request` of a Starlette ``Request`` (its body cached)."""
    body = await request.body()
    return await verify_request(request.method, request.url.path, request.url.query, body,
                                request.headers, registry, redis, prefix, now, skew)


def task_visible(task: Mapping[str, Any] | None, caller: Caller, user_id: str | None) -> bool:
    """Whether ``task`` is ``caller``'s and ``user_id``'s (no ``user_id``: never)."""
    if not task or not user_id:
        return False
    return task.get("sysCode") == caller.sysCode and task.get("userId") == user_id


def bearer_required(registry: CallerRegistry | None, shared_token: str) -> bool:
    """Whether alerting routes need a credential: when a caller registry or
    ``PLAIT_ALERTMANAGER_TOKEN`` is configured."""
    return registry is not None or bool(shared_token)


def verify_bearer(headers: Mapping[str, str], registry: CallerRegistry | None,
                  shared_token: str) -> Caller | None:
    """The caller of ``Authorization: Bearer <token>`` (RFC 6750 s2.1), None
    for the shared token. Raises ``AuthError`` (401) or ``Forbidden`` (403:
    no ``alertIngest``)."""
    value = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, token = value.strip().partition(" ")
    if not value:
        raise AuthError("missing header Authorization: this route needs "
                        "'Authorization: Bearer <token>' (PLAIT_ALERTMANAGER_TOKEN or the "
                        "caller's alertmanagerToken)")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("Authorization must be 'Bearer <token>'")
    token = token.strip()
    if shared_token and hmac.compare_digest(shared_token.encode(), token.encode()):
        return None
    caller = registry.by_bearer_token(token) if registry is not None else None
    if caller is None:
        raise AuthError("bearer token not accepted: it is neither PLAIT_ALERTMANAGER_TOKEN nor "
                        "a caller's alertmanagerToken")
    if not caller.alertIngest:
        raise Forbidden(f"caller {caller.sysCode} may not send alerts: its registry entry "
                        "needs 'alertIngest: true'")
    return caller
