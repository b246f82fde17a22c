"""Sign requests to the Plait API from a business system (``plait.signature``), e.g.
``httpx.post(url, json=spec, auth=PlaitAuth("crm-app", app_secret))``: fresh nonce and timestamp per
request."""
from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Generator

import httpx

from plait.signature import (HEADER_APP_KEY, HEADER_NONCE, HEADER_SIGNATURE, HEADER_TIMESTAMP,
                             sign_request)


def signed_headers(app_key: str, app_secret: str, method: str, path: str, query: str | bytes,
                   body: bytes, timestamp: int | None = None,
                   nonce: str | None = None) -> dict[str, str]:
    """The four ``X-Plait-*`` headers for one request; ``path`` decoded without query, ``query``
    raw; ``timestamp`` and ``nonce`` default to now and a random one."""
    ts = str(int(time.time()) if timestamp is None else int(timestamp))
    nonce = nonce or secrets.token_urlsafe(16)
    return {HEADER_APP_KEY: app_key, HEADER_TIMESTAMP: ts, HEADER_NONCE: nonce,
            HEADER_SIGNATURE: sign_request(app_secret, method, path, query, body, ts, nonce)}


class PlaitAuth(httpx.Auth):
    """httpx auth signing every request (the body is read first, so streams are buffered); ``clock``
    gives Unix s; the secret stays out of ``repr``."""

    requires_request_body = True

    def __init__(self, app_key: str, app_secret: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.app_key = app_key
        self._secret = app_secret
        self._clock = clock

    def __repr__(self) -> str:
        return f"PlaitAuth(app_key={self.app_key!r})"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers.update(signed_headers(
            self.app_key, self._secret, request.method, request.url.path, request.url.query,
            request.content, timestamp=int(self._clock())))
        yield request


class BearerAuth(httpx.Auth):
    """httpx auth sending ``Authorization: Bearer <token>`` (RFC 6750 s2.1)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def api_auth(app_key: str | None, app_secret: str | None,
             token: str | None = None) -> httpx.Auth | None:
    """How a client of the export and schedule routes authenticates: signed as ``app_key``
    (a caller registry), else with the bearer ``token`` (``PLAIT_ALERTMANAGER_TOKEN`` alone),
    else not at all (open mode)."""
    if app_key and app_secret:
        return PlaitAuth(app_key, app_secret)
    return BearerAuth(token) if token else None
