"""Alert ingest, silences and counters over HTTP.

- ``POST /alerts``: one native alert or a list (``rule``, ``asset``,
  ``severity``, ``status``, ``labels``, ``annotations``, ``time``); 202 with
  the raw ids (``<event id>:<index>``) the ledger will name.
- ``/api/v2/...``: Alertmanager's API v2 (alerts, groups, silences, status,
  receivers), so Prometheus and amtool point at Plait unchanged
  (``api.alertmanager``).
- ``POST /silences`` (refuses broad ones unless ``allowBroad``),
  ``GET /silences``, ``DELETE /silences/{id}``.
- ``GET /alerts/counters``: counters per outcome, summed over partitions.

Vocabulary: the native routes speak camelCase with RFC 3339 times
(``api.alerting_edge``); ``/api/v2/...`` keeps Alertmanager's names.

Authentication (with a caller registry, ``PLAIT_CALLERS_FILE``): ``POST
/alerts`` needs a signed request from a caller with ``alertIngest``;
``POST /silences`` and ``DELETE /silences/{id}`` one with ``silenceManage``
(unsigned or badly signed -> 401, no allowance -> 403). ``/api/v2/...`` needs
``Authorization: Bearer <token>`` (``PLAIT_ALERTMANAGER_TOKEN`` or a caller's
``alertmanagerToken``) whenever a registry or that token is set.

Both ingest routes validate every alert on its own: a bad alert is refused
naming its index and field (``[1].labels.severity: ...``) and the valid ones
of the same request go on (``POST /alerts``: 202 listing the refused ones, or
422 when none is valid; ``/api/v2/alerts``: Alertmanager's 400). A lone
UTF-16 surrogate in a string becomes U+FFFD and is counted
(``plait_alert_edge_replaced_characters_total``, and ``replacedCharacters``
in the answer). Valid alerts go to ``alerts.raw`` as events per ordering key
and request, each of at most 500 alerts and ``plait.records.MAX_RECORD_BYTES``
(256 KiB) of key and value; an alert too large for an event of its own is
refused like a bad one, naming its index (``code`` ``size``), as is a
silence too large for one ``alerts.funnel`` record, naming its field.
Errors are raised (``plait.errors``) and answered by the app's one handler
(``api.envelope.install_error_handlers``).

State: the API has no Faust tables. Silences are kept in Redis
(``plait.keys.alert_silences``, for listing) and sent as commands to
every partition of ``alerts.funnel``, where each funnel applies them;
counters are read from the Redis hash the funnel partitions publish.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

import redis.asyncio as aioredis
from fastapi import APIRouter, Depends, Request
from prometheus_client import Counter

from alerting.amconfig import enabled as alerting_enabled, load_configured
from alerting.config import AlertingConfig
from alerting.counters import CountersCollector, decode_hash, merge
from alerting.intake import normalize
from alerting.model import AlertRejected
from alerting.silence import Silence
from alerting.wire import ordering_key, FUNNEL_TOPIC, command, normalize_options, pack_raw
from api.alerting_edge import (check_native_alert, counters_view, parse_silence_request, scrub_text,
                               SILENCE_KEY, silence_command, silence_view,
                               sized_alert)
from api.auth import bearer_required, verify_bearer, verify_starlette_request
from api.envelope import envelope, parse_json_body
from api.openapi import Envelope, ErrorEnvelope, NativeAlert, SilenceBody, errors, link, request_body
from plait import keys as K
from plait import topics as T
from plait.callers import Caller, CallerRegistry, load_callers
from plait.errors import FieldError, Forbidden, NotFound, RequestInvalid, Unavailable
from plait.settings import Settings

CHUNK = 500
#: Largest request body the alerting routes read, bytes.
MAX_BODY = 16 * 1024 * 1024
#: Most alerts one request may carry (``alerting.wire.MAX_ALERTS`` per raw event).
MAX_ALERTS = 10_000
_COLLECTOR: CountersCollector | None = None
REPLACED = Counter("plait_alert_edge_replaced_characters_total",
                   "Lone UTF-16 surrogates in alert or silence input replaced by U+FFFD")
REFUSED = Counter("plait_alert_edge_refused_total",
                  "Alerts refused at the HTTP edge (bad field), by route", ["route"])


def _register_collector(settings: Settings) -> None:
    """Expose the funnel counters on the default Prometheus registry (once per
    process; a later router just repoints it)."""
    global _COLLECTOR
    key = K.alert_counters(settings.redis_prefix)
    if _COLLECTOR is None:
        from prometheus_client import REGISTRY

        _COLLECTOR = CountersCollector(settings.redis_url, key)
        REGISTRY.register(_COLLECTOR)
    else:
        _COLLECTOR.redis_url, _COLLECTOR.key = settings.redis_url, key


class _Kafka:
    """A lazily created confluent-kafka producer (murmur2_random, docs/kafka-rules.md #8)."""

    #: Seconds to wait for the broker's acks (and topic metadata) before a 503.
    ack_timeout: float = 10.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topics = T.Topics(settings.topic_prefix)
        self._producer = None
        self._partitions: int | None = None

    def producer(self):
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer({
                "bootstrap.servers": self.settings.broker_url, "enable.idempotence": True,
                "acks": "all", "partitioner": "murmur2_random", "compression.type": "lz4",
                "linger.ms": 2, "message.max.bytes": 2 * 1024 * 1024},
                logger=logging.getLogger("plait.kafka"))  # librdkafka logs via logging
        return self._producer

    def _send_sync(self, records: list[tuple[str, bytes, bytes, int | None]]) -> None:
        p = self.producer()
        errors: list[str] = []

        def done(err, _msg):
            if err is not None:
                errors.append(str(err))

        from plait import tracing

        tp = tracing.current_traceparent()  # to_thread copied the caller's context
        for topic, key, value, partition in records:
            kwargs = {"partition": partition} if partition is not None else {}
            if tp:
                kwargs["headers"] = [(tracing.TRACEPARENT, tp.encode())]
            p.produce(topic, key=key, value=value, on_delivery=done, **kwargs)
        remaining = p.flush(self.ack_timeout)
        if remaining or errors:
            raise RuntimeError(f"Kafka did not take the events: {errors or f'{remaining} unsent'}")

    async def send(self, records: list[tuple[str, bytes, bytes, int | None]]) -> None:
        """Produce and wait for the broker's acks (in a thread: never blocks the loop).

        Raises:
            RuntimeError: an event was not acknowledged within :attr:`ack_timeout` s.
        """
        await asyncio.to_thread(self._send_sync, records)

    async def warm(self) -> None:
        """Create the producer and look up ``alerts.funnel``'s partitions now
        (the producer, its broker connection and the topic's metadata) so the
        first POST does not pay for them; a broker that does not answer leaves
        them to the first POST (logged, never raised)."""
        try:
            await self.funnel_partitions()
        except Exception as exc:  # the API still starts; the first POST retries
            logging.getLogger("plait.api").warning("Kafka producer warm-up failed: %s", exc)

    async def funnel_partitions(self) -> int:
        """Partition count of ``alerts.funnel`` (metadata; the setting as fallback)."""
        if self._partitions is None:
            name = self.topics.name(FUNNEL_TOPIC)

            def look() -> int | None:
                meta = self.producer().list_topics(
                    name, timeout=min(5.0, self.ack_timeout)).topics.get(name)
                return len(meta.partitions) if meta is not None and meta.partitions else None

            try:
                self._partitions = await asyncio.to_thread(look) or self.settings.partitions
            except Exception:
                return self.settings.partitions
        return self._partitions


def create_alerts_router(settings: Settings, services: Any = None) -> APIRouter:
    """The alerting routes for ``settings``.

    Loads ``settings.alerting_config`` when set (validated now, so a bad file
    stops the API at start-up). ``services`` (``api.services.Services``) gives
    the caller registry; without it the registry is loaded from
    ``settings.callers_file``. The app must install
    ``api.envelope.install_error_handlers``.

    Raises:
        plait.errors.ConfigError: the alerting config or the caller registry is
            invalid; the text names the key.
    """
    config: AlertingConfig | None = load_configured(settings) if alerting_enabled(settings) else None
    options = normalize_options(config)
    kafka = _Kafka(settings)
    names = T.Topics(settings.topic_prefix)
    state: dict[str, Any] = {}
    silences_key = K.alert_silences(settings.redis_prefix)
    counters_key = K.alert_counters(settings.redis_prefix)
    callers: CallerRegistry | None = (services.callers if services is not None else
                                      load_callers(settings.callers_file) if settings.callers_file
                                      else None)
    shared_token = settings.alertmanager_token.get_secret_value()
    _register_collector(settings)

    def redis() -> aioredis.Redis:
        if "redis" not in state:
            state["redis"] = (services.projection.redis if services is not None else
                              aioredis.Redis.from_url(settings.redis_url, socket_timeout=5))
        return state["redis"]

    def signed(allowance: str, what: str):
        """A dependency of the native routes that change alerting state: the
        caller holding ``allowance``, None for the shared token or when no
        credential is configured (open). With any credential configured the
        request must carry one (:func:`api.auth.bearer_required`): a signed
        request (caller registry) or ``Authorization: Bearer`` (the shared
        token or a caller's ``alertmanagerToken``). Raises AuthError 401 /
        Forbidden 403."""

        async def check(request: Request) -> Caller | None:
            if not bearer_required(callers, shared_token):
                return None
            if callers is None or "authorization" in request.headers:
                caller = verify_bearer(request.headers, callers, shared_token)
            else:
                caller = await verify_starlette_request(
                    request, callers, redis(), settings.redis_prefix, time.time(),
                    settings.auth_skew_seconds)
            if caller is not None and not getattr(caller, allowance):
                raise Forbidden(f"caller {caller.sysCode} may not {what}: its registry entry "
                                f"needs '{allowance}: true'")
            return caller

        return check

    async def bearer(request: Request) -> Caller | None:
        """The ``/api/v2`` gate: a valid bearer token when one is required."""
        if not bearer_required(callers, shared_token):
            return None
        return verify_bearer(request.headers, callers, shared_token)

    router = APIRouter(tags=["alerting"])
    am_router = APIRouter(tags=["alertmanager"], dependencies=[Depends(bearer)], responses={
        401: {"model": ErrorEnvelope, "description": "A bearer token is required and was "
              "missing or not accepted (Plait envelope)"},
        403: {"model": ErrorEnvelope, "description": "The token's caller lacks alertIngest "
              "(or silenceManage for silence changes)"},
        503: {"model": str, "description": "A dependency (Kafka, Redis) did not answer; retry "
              "later (Alertmanager's shape: a JSON string)"}})

    async def body(request: Request, accepted: str = "an alert or a list of alerts") -> tuple[Any, int]:
        """(the JSON body with lone surrogates replaced, characters replaced);
        ``accepted`` says what the route takes, for the error.

        Raises:
            AlertRejected: ``body`` empty, too large, not UTF-8 or not JSON,
                or sent with a Content-Type other than JSON (none is taken
                as JSON; Alertmanager answers such a body 415).
        """
        ctype = request.headers.get("content-type")
        media = (ctype or "").split(";")[0].strip().lower()
        if ctype is not None and media != "application/json" and not media.endswith("+json"):
            raise AlertRejected("body", f"was sent with Content-Type {ctype[:64]!r}",
                                "a JSON body sent with Content-Type: application/json", "content_type")
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise AlertRejected("body", f"is {len(raw)} bytes", f"at most {MAX_BODY} bytes; "
                                "split the alerts over several requests", "size")
        try:
            doc = parse_json_body(raw)
        except FieldError as e:  # the body itself: same field, as an alert rejection
            raise AlertRejected(e.field, e.rule, f"JSON ({accepted}), sent with "
                                "Content-Type: application/json", e.code) from None
        doc, replaced = scrub_text(doc)
        if replaced:
            REPLACED.inc(replaced)
        return doc, replaced

    async def publish(alerts: list[tuple[Any, bytes]], source: str, received_at: float) -> list[str]:
        """Send alerts (``(alert, its JSON)`` from ``sized_alert``) keyed by
        what identifies them (rule and asset), so a firing and its resolve
        share a partition and stay in order; each record holds at most
        ``CHUNK`` alerts and :data:`plait.records.MAX_RECORD_BYTES` bytes
        (``alerting.wire.pack_raw``). Returns the raw ids in input order.

        Raises:
            Unavailable: Kafka did not acknowledge in time (503).
        """
        by_key: dict[str, list[int]] = {}
        for i, (alert, _data) in enumerate(alerts):
            by_key.setdefault(ordering_key(alert), []).append(i)
        ids: list[str] = [""] * len(alerts)
        records = []
        for key, positions in by_key.items():
            done = 0
            for eid, n, value in pack_raw([alerts[i][1] for i in positions], key.encode(),
                                          source, received_at, CHUNK):
                for k, i in enumerate(positions[done:done + n]):
                    ids[i] = f"{eid}:{k}"
                done += n
                records.append((names.name(T.ALERTS_RAW), key.encode(), value, None))
        from plait import tracing

        with tracing.span("alert.ingest", **{"plait.source": source,
                                             "plait.alerts": len(alerts)}):
            await send(records)  # the records carry this span's traceparent header
        return ids

    async def send(records: list[tuple[str, bytes, bytes, int | None]]) -> None:
        try:
            await kafka.send(records)
        except RuntimeError as e:
            raise Unavailable(str(e)) from None

    @router.post("/alerts", status_code=202, operation_id="postAlerts",
                 response_model=Envelope,
                 responses=errors(401, 403, 503), openapi_extra=request_body(
                     NativeAlert, "one native alert or a non-empty list of them", either=True))
    async def post_alerts(request: Request,
                          caller: Caller | None = Depends(signed("alertIngest", "send alerts"))):
        """Accept one native alert or a list (camelCase keys, RFC 3339 times).

        Each alert is checked on its own: the valid ones go on (202 with their
        raw ids, ``rejected`` listing each refused one by ``index`` and
        ``field``); when none is valid the answer is 422 naming every bad
        field (``[1].severity``)."""
        now = time.time()
        doc, replaced = await body(request)
        alerts = doc if isinstance(doc, list) else [doc]
        if not alerts:
            raise AlertRejected("body", "has no alerts", "an alert object or a non-empty list",
                                "required")
        if len(alerts) > MAX_ALERTS:
            raise AlertRejected("body", f"has {len(alerts)} alerts", f"at most {MAX_ALERTS}", "size")
        good, errors, rejected = [], [], []
        for i, a in enumerate(alerts):
            where = f"[{i}]." if isinstance(doc, list) else ""
            try:
                check_native_alert(a, where)
                try:
                    normalize(a, now, **ctx.options)  # ctx: below; a reload replaces them
                except AlertRejected as e:
                    raise AlertRejected(f"{where}{e.field}", e.problem, e.accepted, e.code) from None
                good.append(sized_alert(a, where, "plait-api", now))
            except AlertRejected as e:
                errors.append(e)
                rejected.append({"index": i, **e.entry()})
        if errors:
            REFUSED.labels("/alerts").inc(len(errors))
        if not good:
            raise RequestInvalid(errors)
        ids = await publish(good, "plait-api", now)
        data: dict[str, Any] = {"accepted": len(ids), "ids": ids}
        if rejected:
            data["rejected"] = rejected
        if replaced:
            data["replacedCharacters"] = replaced
        message = "accepted" if not rejected else f"accepted {len(ids)}, refused {len(rejected)}"
        return envelope(202, message, data)

    async def broadcast(value: bytes) -> None:
        n = await kafka.funnel_partitions()
        await send([(names.name(FUNNEL_TOPIC), SILENCE_KEY, value, p) for p in range(n)])

    async def counters() -> dict[str, Any]:
        return merge(decode_hash(await redis().hgetall(counters_key)))

    async def save_silence(silence: Silence, now: float) -> dict[str, Any]:
        """Store ``silence`` (the one silence store of ``/silences`` and
        ``/api/v2/silences``) and send it to every funnel partition; returns
        the stored form (``Silence.to_dict`` plus ``updated_at``).

        Raises:
            SilenceRefused: the silence is too large for one record (nothing
                is stored; ``silence_command``).
            Unavailable: Kafka did not take the command (the store is rolled back).
        """
        d = silence.to_dict()
        value = silence_command(d, SILENCE_KEY)
        old = await redis().hget(silences_key, silence.id)
        await redis().hset(silences_key, silence.id, json.dumps(d | {"updated_at": now}))
        try:
            await broadcast(value)
        except Unavailable:
            if old is None:
                await redis().hdel(silences_key, silence.id)
            else:
                await redis().hset(silences_key, silence.id, old)
            raise
        return d | {"updated_at": now}

    async def load_silence(silence_id: str) -> dict[str, Any] | None:
        """The stored silence ``silence_id``, or None."""
        raw = await redis().hget(silences_key, silence_id)
        return json.loads(raw) if raw is not None else None

    async def all_silences() -> list[dict[str, Any]]:
        """Every stored silence (active, pending or expired)."""
        return [json.loads(v) for v in (await redis().hgetall(silences_key)).values()]

    async def end_silence(silence_id: str, now: float) -> dict[str, Any]:
        """Expire a silence now (a no-op for an expired one) on every partition.

        Raises:
            NotFound: no such silence (404).
        """
        d = await load_silence(silence_id)
        if d is None:
            raise NotFound(f"silence {silence_id} not found")
        if d["ends_at"] is None or d["ends_at"] > now:
            d["ends_at"] = max(now, d["starts_at"])
            d["updated_at"] = now
            await redis().hset(silences_key, silence_id, json.dumps(d))
        await broadcast(command("expire", id=silence_id))
        return d

    @router.post("/silences", status_code=201, operation_id="createSilence",
                 response_model=Envelope,
                 responses={201: {"links": {"ExpireSilence": link(
                     "expireSilence", "/data/silenceId", "silenceId", "end the silence")}},
                     **errors(401, 403, 503)},
                 openapi_extra=request_body(SilenceBody, "the silence"))
    async def post_silence(request: Request, caller: Caller | None = Depends(
            signed("silenceManage", "manage silences"))):
        """Create a silence (``matchers``, ``startsAt``, ``endsAt``, ``createdBy``,
        ``comment``, ``allowBroad``, ``timeIntervals``; times RFC 3339);
        422 names the bad key as sent and the accepted spelling."""
        now = time.time()
        spec, _replaced = scrub_text(parse_json_body(await request.body()))
        silence = parse_silence_request(spec, now, str(uuid.uuid4()))
        d = await save_silence(silence, now)
        return envelope(201, "created", {"silenceId": silence.id,
                                         "silence": silence_view(d, now, {})})

    @router.get("/silences", operation_id="listSilences",
                response_model=Envelope,
                responses=errors(503, validated=False))
    async def list_silences():
        """Every silence with its status and how many alerts it silenced."""
        now = time.time()
        counts = (await counters()).get("silenced_by", {})
        items = [silence_view(d, now, counts) for d in await all_silences()]
        items.sort(key=lambda s: s["startsAt"])
        return envelope(200, "ok", {"silences": items})

    @router.delete("/silences/{silenceId}", operation_id="expireSilence",
                   response_model=Envelope,
                   responses=errors(401, 403, 404, 503))
    async def expire_silence(silenceId: str, caller: Caller | None = Depends(
            signed("silenceManage", "manage silences"))):
        """End a silence now (Alertmanager's expire); 404 if unknown."""
        silence_id = silenceId
        now = time.time()
        d = await end_silence(silence_id, now)
        return envelope(200, "expired", {"silence": silence_view(d, now, {})})

    @router.get("/alerts/counters", operation_id="alertCounters",
                response_model=Envelope,
                responses=errors(503, validated=False))
    async def get_counters():
        """Counters per outcome (``received = delivered + deduplicated + silenced
        + merged + rejected + pending``), webhook attempts, per-silence counts;
        camelCase keys (``silencedBy``, ``http5xx``)."""
        return envelope(200, "ok", counters_view(await counters()))

    from api.alert_history import add_history_routes

    add_history_routes(router, am_router, settings, redis)
    from api.alertmanager import AlertingContext, add_alertmanager_routes

    ctx = AlertingContext(
        settings=settings, config=config, options=options, redis=redis, bearer=bearer,
        read_body=body, publish=publish, partitions=kafka.funnel_partitions,
        save_silence=save_silence, load_silence=load_silence, all_silences=all_silences,
        end_silence=end_silence, refused=REFUSED)
    add_alertmanager_routes(am_router, ctx)
    router.include_router(am_router)
    router.alerting = ctx  # the app reloads the configuration through it (SIGHUP)
    router.warm = kafka.warm  # the app runs it before it answers (ready means ready)
    return router
