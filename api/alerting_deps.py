"""What the alerting routes share on ``app.state`` (config, silence store,
alert publisher) and the credential gates: with a registry or token
configured, state changes need a signature or bearer token of a caller with
the allowance (401 / 403); ``/api/v2`` needs a bearer token."""
from __future__ import annotations

import time
from typing import Any, Callable, Coroutine

import redis.asyncio as aioredis
from fastapi import Depends, Request, Response
from fastapi.routing import APIRoute
from prometheus_client import Counter

from alerting.amconfig import enabled as alerting_enabled, load_configured
from alerting.config import AlertingConfig
from alerting.model import AlertRejected
from alerting.silence_store import SilenceStore
from alerting.view import RecentAlerts
from alerting.wire import normalize_options
from api.alerting_edge import scrub_text, scrub_utf8
from api.auth import bearer_required, verify_bearer, verify_starlette_request
from api.envelope import parse_json_body
from api.ingest import AlertIngest
from api.openapi import ErrorEnvelope
from plait.callers import Caller, CallerRegistry
from plait.errors import FieldError, Forbidden
from plait.settings import Settings

#: Largest request body the alerting routes read, bytes.
MAX_BODY = 16 * 1024 * 1024
REPLACED = Counter("plait_alert_edge_replaced_characters_total",
                   "Lone UTF-16 surrogates in alert or silence input replaced by U+FFFD")
REFUSED = Counter("plait_alert_edge_refused_total",
                  "Alerts refused at the HTTP edge (bad field), by route", ["route"])


class Alerting:
    """The alerting configuration in use and what the gates check."""

    def __init__(self, settings: Settings, callers: CallerRegistry | None,
                 redis: aioredis.Redis | None = None) -> None:
        self.settings, self.callers = settings, callers
        self.config: AlertingConfig | None = (load_configured(settings)
                                              if alerting_enabled(settings) else None)
        self.options = normalize_options(self.config)
        self.shared_token = settings.alertmanager_token.get_secret_value()
        self._redis = redis
        self.recent = RecentAlerts()

    def redis(self) -> aioredis.Redis:
        if self._redis is None:
            self._redis = aioredis.Redis.from_url(self.settings.redis_url, socket_timeout=5)
        return self._redis

    def reload(self) -> Any:
        """Re-read and use the configuration file; ``ConfigError`` keeps the old one."""
        config = load_configured(self.settings)
        self.config, self.options = config, normalize_options(config)
        return config


def get_alerting(request: Request) -> Alerting:
    return request.app.state.alerting


def silence_store(request: Request) -> SilenceStore:
    return request.app.state.silences


def get_ingest(request: Request) -> AlertIngest:
    return request.app.state.ingest


def signed(allowance: str, what: str):
    """Dependency: the caller holding ``allowance`` (None: shared token or
    open mode). Raises AuthError 401 / Forbidden 403."""

    async def check(request: Request, state: Alerting = Depends(get_alerting)) -> Caller | None:
        callers, token = state.callers, state.shared_token
        if not bearer_required(callers, token):
            return None
        if callers is None or "authorization" in request.headers:
            caller = verify_bearer(request.headers, callers, token)
        else:
            caller = await verify_starlette_request(
                request, callers, state.redis(), state.settings.redis_prefix, time.time(),
                state.settings.auth_skew_seconds)
        if caller is not None and not getattr(caller, allowance):
            raise Forbidden(f"caller {caller.sysCode} may not {what}: its registry entry "
                            f"needs '{allowance}: true'")
        return caller

    return check


async def bearer(request: Request, state: Alerting = Depends(get_alerting)) -> Caller | None:
    """The ``/api/v2`` gate: a valid bearer token when one is required."""
    if not bearer_required(state.callers, state.shared_token):
        return None
    return verify_bearer(request.headers, state.callers, state.shared_token)


class _GoTextRequest(Request):
    """A request whose body has each byte that is not part of UTF-8 replaced by U+FFFD
    (:func:`api.alerting_edge.scrub_utf8`), so every Alertmanager route reads text as
    Alertmanager (Go's ``encoding/json``) does; the count is ``scope["plait.replaced"]``."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            self._body, self.scope["plait.replaced"] = scrub_utf8(await super().body())
        return self._body


class GoTextRoute(APIRoute):
    """An :class:`APIRoute` reading its request as :class:`_GoTextRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(_GoTextRequest(request.scope, request.receive))
        return handle


AM_ROUTER: dict[str, Any] = dict(
    route_class=GoTextRoute,
    tags=["alerting", "alertmanager"], dependencies=[Depends(bearer)], responses={
        401: {"model": ErrorEnvelope, "description": "A bearer token is required and was "
              "missing or not accepted (Plait envelope)"},
        403: {"model": ErrorEnvelope, "description": "The token's caller lacks alertIngest "
              "(or silenceManage for silence changes)"},
        503: {"model": str, "description": "A dependency (Kafka, Redis) did not answer; retry "
              "later (Alertmanager's shape: a JSON string)"}})


async def read_body(request: Request, accepted: str = "an alert or a list of alerts",
                    ) -> tuple[Any, int]:
    """(JSON body, characters replaced: lone surrogates and bytes that are not
    UTF-8, each by U+FFFD); ``AlertRejected`` when empty, too large, not JSON
    or sent with a non-JSON Content-Type."""
    ctype = request.headers.get("content-type")
    media = (ctype or "").split(";")[0].strip().lower()
    if ctype is not None and media != "application/json" and not media.endswith("+json"):
        raise AlertRejected("body", f"was sent with Content-Type {ctype[:64]!r}",
                            "a JSON body sent with Content-Type: application/json", "content_type")
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise AlertRejected("body", f"is {len(raw)} bytes", f"at most {MAX_BODY} bytes; "
                            "split the alerts over several requests", "size")
    raw, bad_bytes = scrub_utf8(raw)
    bad_bytes += request.scope.get("plait.replaced", 0)  # scrubbed already on its way in
    try:
        doc = parse_json_body(raw)
    except FieldError as e:
        raise AlertRejected(e.field, e.rule, f"JSON ({accepted}), sent with "
                            "Content-Type: application/json", e.code) from None
    doc, replaced = scrub_text(doc, raw)
    replaced += bad_bytes
    if replaced:
        REPLACED.inc(replaced)
    return doc, replaced
