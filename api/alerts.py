"""Alert ingest, silences and counters over HTTP.

- ``POST /alerts``: one native alert or a list (``rule``, ``asset``,
  ``severity``, ``status``, ``labels``, ``annotations``, ``time``); 202 with
  the raw ids (``<event id>:<index>``) the ledger will name.
- ``POST /api/v2/alerts``: Alertmanager's API body (a list of alerts with
  ``labels``, ``annotations``, ``startsAt``, ``endsAt``, ``generatorURL``),
  so a Prometheus server can point at Plait unchanged; 200.
- ``POST /silences`` (refuses broad ones unless ``allowBroad``),
  ``GET /silences``, ``DELETE /silences/{id}``.
- ``GET /alerts/counters``: counters per outcome, summed over partitions.

Both ingest routes validate every alert first and answer 422 naming the field
(``[1].labels.alertname: ...``); nothing reaches Kafka unless all are valid.
Valid alerts go to ``alerts.raw`` as one event per request (chunks of 500).

State: the API has no Faust tables. Silences are kept in Redis
(``<redis_prefix>:alerts:silences``, for listing) and sent as commands to
every partition of ``alerts.funnel``, where each funnel applies them;
counters are read from the Redis hash the funnel partitions publish.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import redis.asyncio as aioredis
from fastapi import APIRouter, Request

from alerting.config import AlertingConfig, load_config
from alerting.counters import CountersCollector, decode_hash, merge
from alerting.model import AlertRejected
from alerting.intake import from_alertmanager, normalize
from alerting.silence import Silence, SilenceRefused, create_silence
from alerting.topics import COUNTERS_KEY, SILENCES_KEY
from alerting.wire import ordering_key, FUNNEL_TOPIC, command, normalize_options, raw_envelope
from api.envelope import envelope
from plait import topics as T
from plait.settings import Settings

CHUNK = 500
_COLLECTOR: CountersCollector | None = None


def _register_collector(settings: Settings) -> None:
    """Expose the funnel counters on the default Prometheus registry (once per
    process; a later router just repoints it)."""
    global _COLLECTOR
    key = COUNTERS_KEY.format(prefix=settings.redis_prefix)
    if _COLLECTOR is None:
        from prometheus_client import REGISTRY

        _COLLECTOR = CountersCollector(settings.redis_url, key)
        REGISTRY.register(_COLLECTOR)
    else:
        _COLLECTOR.redis_url, _COLLECTOR.key = settings.redis_url, key


class _Kafka:
    """A lazily created confluent-kafka producer (murmur2_random, PITFALLS.md #8)."""

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
                "linger.ms": 2, "message.max.bytes": 2 * 1024 * 1024})
        return self._producer

    def _send_sync(self, records: list[tuple[str, bytes, bytes, int | None]]) -> None:
        p = self.producer()
        errors: list[str] = []

        def done(err, _msg):
            if err is not None:
                errors.append(str(err))

        for topic, key, value, partition in records:
            kwargs = {"partition": partition} if partition is not None else {}
            p.produce(topic, key=key, value=value, on_delivery=done, **kwargs)
        remaining = p.flush(10.0)
        if remaining or errors:
            raise RuntimeError(f"Kafka did not take the events: {errors or f'{remaining} unsent'}")

    async def send(self, records: list[tuple[str, bytes, bytes, int | None]]) -> None:
        """Produce and wait for the broker's acks (in a thread: never blocks the loop).

        Raises:
            RuntimeError: an event was not acknowledged within 10 s.
        """
        await asyncio.to_thread(self._send_sync, records)

    async def funnel_partitions(self) -> int:
        """Partition count of ``alerts.funnel`` (metadata; the setting as fallback)."""
        if self._partitions is None:
            name = self.topics.name(FUNNEL_TOPIC)

            def look() -> int | None:
                meta = self.producer().list_topics(name, timeout=5).topics.get(name)
                return len(meta.partitions) if meta is not None and meta.partitions else None

            try:
                self._partitions = await asyncio.to_thread(look) or self.settings.partitions
            except Exception:
                return self.settings.partitions
        return self._partitions


def _silence_view(d: dict[str, Any], now: float, counts: dict[str, int]) -> dict[str, Any]:
    s = Silence.from_dict(d)
    if s.ends_at is not None and now >= s.ends_at:
        state = "expired"
    elif now < s.starts_at:
        state = "pending"
    else:
        state = "active"
    return {"id": s.id, "matchers": [str(m) for m in s.matchers], "startsAt": s.starts_at,
            "endsAt": s.ends_at, "createdBy": s.author, "comment": s.comment,
            "allowBroad": s.allow_broad, "timeIntervals": d.get("time_intervals", []),
            "status": state, "activeNow": s.active(now), "silenced": counts.get(s.id, 0)}


def create_alerts_router(settings: Settings) -> APIRouter:
    """The alerting routes for ``settings``.

    Loads ``settings.alerting_config`` when set (validated now, so a bad file
    stops the API at start-up).

    Raises:
        alerting.config.ConfigError: the config is invalid; the text names the key.
    """
    config: AlertingConfig | None = load_config(settings.alerting_config) if settings.alerting_config else None
    options = normalize_options(config)
    kafka = _Kafka(settings)
    names = T.Topics(settings.topic_prefix)
    state: dict[str, Any] = {}
    silences_key = SILENCES_KEY.format(prefix=settings.redis_prefix)
    counters_key = COUNTERS_KEY.format(prefix=settings.redis_prefix)
    _register_collector(settings)
    router = APIRouter(tags=["alerting"])

    def redis() -> aioredis.Redis:
        if "redis" not in state:
            state["redis"] = aioredis.Redis.from_url(settings.redis_url, socket_timeout=5)
        return state["redis"]

    async def body(request: Request) -> Any:
        raw = await request.body()
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise AlertRejected("body", f"invalid JSON: {e}") from None

    def rejected(e: AlertRejected | SilenceRefused, what: str):
        field = getattr(e, "field", "body")
        return envelope(422, f"invalid {what}: {e}", {"errors": [{"field": field, "rule": str(e)}]})

    async def publish(alerts: list[Any], source: str, received_at: float) -> list[str]:
        """Send alerts keyed by what identifies them (rule and asset), so a
        firing and its resolve share a partition and stay in order. Returns the
        raw ids in input order."""
        by_key: dict[str, list[int]] = {}
        for i, alert in enumerate(alerts):
            by_key.setdefault(ordering_key(alert), []).append(i)
        ids: list[str] = [""] * len(alerts)
        records = []
        for key, positions in by_key.items():
            for start in range(0, len(positions), CHUNK):
                chunk = positions[start:start + CHUNK]
                eid, value = raw_envelope([alerts[i] for i in chunk], source=source,
                                          received_at=received_at)
                for n, i in enumerate(chunk):
                    ids[i] = f"{eid}:{n}"
                records.append((names.name(T.ALERTS_RAW), key.encode(), value, None))
        await kafka.send(records)
        return ids

    @router.post("/alerts", status_code=202)
    async def post_alerts(request: Request):
        """Accept one native alert or a list; 422 names the first bad field."""
        now = time.time()
        try:
            doc = await body(request)
            alerts = doc if isinstance(doc, list) else [doc]
            if not alerts:
                raise AlertRejected("body", "no alerts")
            for i, a in enumerate(alerts):
                try:
                    normalize(a, now, **options)
                except AlertRejected as e:
                    raise AlertRejected(f"[{i}].{e.field}" if isinstance(doc, list) else e.field,
                                        e.problem) from None
        except AlertRejected as e:
            return rejected(e, "alert")
        try:
            ids = await publish(alerts, "plait-api", now)
        except RuntimeError as e:
            return envelope(503, str(e))
        return envelope(202, "accepted", {"accepted": len(ids), "ids": ids})

    @router.post("/api/v2/alerts")
    async def post_alertmanager(request: Request):
        """Alertmanager / Prometheus alert list (``POST /api/v2/alerts``)."""
        now = time.time()
        try:
            doc = await body(request)
            from_alertmanager(doc, now, **options)
        except AlertRejected as e:
            return rejected(e, "alerts")
        if not doc:
            return envelope(200, "ok", {"accepted": 0, "ids": []})
        try:
            ids = await publish(doc, "plait-api-v2", now)
        except RuntimeError as e:
            return envelope(503, str(e))
        return envelope(200, "ok", {"accepted": len(ids), "ids": ids})

    async def broadcast(kind: str, **fields: Any) -> None:
        n = await kafka.funnel_partitions()
        value = command(kind, **fields)
        await kafka.send([(names.name(FUNNEL_TOPIC), b"silence", value, p) for p in range(n)])

    async def counters() -> dict[str, Any]:
        return merge(decode_hash(await redis().hgetall(counters_key)))

    @router.post("/silences", status_code=201)
    async def post_silence(request: Request):
        """Create a silence (``matchers``, ``startsAt``, ``endsAt``, ``createdBy``,
        ``comment``, ``allowBroad``, ``time_intervals``); 422 names the bad key."""
        now = time.time()
        try:
            spec = await body(request)
            silence = create_silence(spec, now, f"s-{uuid.uuid4().hex[:12]}")
        except (AlertRejected, SilenceRefused) as e:
            return rejected(e, "silence")
        d = silence.to_dict()
        await redis().hset(silences_key, silence.id, json.dumps(d))
        try:
            await broadcast("silence", silence=d)
        except RuntimeError as e:
            await redis().hdel(silences_key, silence.id)
            return envelope(503, str(e))
        return envelope(201, "created", {"silenceId": silence.id,
                                         "silence": _silence_view(d, now, {})})

    @router.get("/silences")
    async def list_silences():
        """Every silence with its status and how many alerts it silenced."""
        now = time.time()
        raw = await redis().hgetall(silences_key)
        counts = (await counters()).get("silenced_by", {})
        items = [_silence_view(json.loads(v), now, counts) for v in raw.values()]
        items.sort(key=lambda s: s["startsAt"])
        return envelope(200, "ok", {"silences": items})

    @router.delete("/silences/{silence_id}")
    async def expire_silence(silence_id: str):
        """End a silence now (Alertmanager's expire); 404 if unknown."""
        now = time.time()
        raw = await redis().hget(silences_key, silence_id)
        if raw is None:
            return envelope(404, f"silence {silence_id} not found")
        d = json.loads(raw)
        if d["ends_at"] is None or d["ends_at"] > now:
            d["ends_at"] = max(now, d["starts_at"])
            await redis().hset(silences_key, silence_id, json.dumps(d))
        try:
            await broadcast("expire", id=silence_id)
        except RuntimeError as e:
            return envelope(503, str(e))
        return envelope(200, "expired", {"silence": _silence_view(d, now, {})})

    @router.get("/alerts/counters")
    async def get_counters():
        """Counters per outcome (``received = delivered + deduplicated + silenced
        + merged + rejected + pending``), webhook attempts, per-silence counts."""
        return envelope(200, "ok", await counters())

    return router
