"""What the API's routes share: Redis projection, producer, object store, the
caller registry, authentication and the audit trail."""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from confluent_kafka import KafkaException
from fastapi import Request

from api.auth import task_visible, verify_bearer, verify_starlette_request
from plait import keys as K
from plait import topics as T
from plait.audit import Audit
from plait.callers import Caller, CallerRegistry, load_callers
from plait.clock import utcnow_iso
from plait.errors import Unavailable
from plait.logs import get_logger
from plait.projection import Projection
from plait.settings import Settings
from producers.sdk import PlaitProducer
from sinks.store import LocalStore, S3Store, open_store

log = get_logger("plait.api")

#: Audit entries kept per caller in Redis for ``GET /audit``.
AUDIT_KEEP = 10_000


@dataclass
class Services:
    """One per API process (built in the app's lifespan)."""

    settings: Settings
    projection: Projection
    producer: PlaitProducer
    store: LocalStore | S3Store
    callers: CallerRegistry | None

    @classmethod
    def build(cls, settings: Settings) -> "Services":
        """Connect everything; a bad caller registry stops start-up
        (``CallerConfigError`` naming the key)."""
        callers = load_callers(settings.callers_file) if settings.callers_file else None
        if callers is None:
            log.warning("PLAIT_CALLERS_FILE is not set: the API runs without authentication")
        redis = aioredis.Redis.from_url(settings.redis_url, socket_timeout=5)
        return cls(settings, Projection(redis, settings.redis_prefix),
                   PlaitProducer(settings.broker_url, settings.topic_prefix, "plait-api"),
                   open_store(settings.storage_url, settings.api_url, settings.signing_secret,
                              settings.s3_endpoint_url, settings.s3_region,
                              settings.s3_public_url), callers)

    #: Seconds ``emit`` waits for the broker's ack before answering 503.
    emit_timeout: float = 10.0

    async def emit(self, topic: str, key: str, payload) -> None:
        """Send one event and wait for the broker's ack (in a thread).

        Raises:
            Unavailable: the broker did not acknowledge within
                :attr:`emit_timeout` seconds, refused the event, or the local
                queue is full (503: the caller may retry).
        """
        try:
            self.producer.send(topic, key, payload)
            await asyncio.to_thread(self.producer.flush, self.emit_timeout)
        except (RuntimeError, BufferError, KafkaException) as exc:
            raise Unavailable(f"Kafka did not take the event; retry later ({exc})") from None

    async def authenticate(self, request: Request, changes: bool = False) -> Caller | None:
        """The signed caller of ``request``; None without a caller registry. Without one, a
        route that changes state (``changes``) still needs ``Authorization: Bearer
        <PLAIT_ALERTMANAGER_TOKEN>`` when that token is set: once any credential is configured,
        every route that changes state needs one (README, "Security").

        Raises ``AuthError`` (401; 503 when Redis cannot check the nonce)."""
        if self.callers is None:
            token = self.settings.alertmanager_token.get_secret_value()
            if changes and token:
                verify_bearer(request.headers, None, token)
            return None
        return await verify_starlette_request(
            request, self.callers, self.projection.redis, self.settings.redis_prefix,
            time.time(), self.settings.auth_skew_seconds)

    def visible(self, task: dict[str, Any] | None, caller: Caller | None,
                user_id: str | None) -> bool:
        """Whether ``caller`` acting for ``user_id`` may see ``task`` (all
        tasks when authentication is off)."""
        if caller is None:
            return task is not None
        return task_visible(task, caller, user_id)

    def link_ttl(self, caller: Caller | None) -> int:
        """Lifetime of download links for ``caller``, seconds."""
        return caller.linkTtlSeconds if caller else self.settings.link_ttl_seconds

    def reuse_window(self, caller: Caller | None) -> float:
        """Reuse window of identical exports for ``caller``, seconds."""
        return caller.reuseWindowSeconds if caller else self.settings.reuse_window_seconds

    async def with_fresh_link(self, task: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        """The task with a newly signed download link when it succeeded."""
        info = task.get("file")
        if task.get("status") == "SUCCESS" and info:
            info["url"] = await asyncio.to_thread(self.store.link, info["key"], info["fileName"],
                                                  self.link_ttl(caller))
        return task

    async def record_download(self, task_id: str, request: Request) -> None:
        """Count one download of ``task_id``'s file (:func:`plait.keys.task_downloads`:
        count, time, client IP and user agent); never raises."""
        by = {"clientIp": request.client.host if request.client else None,
              "userAgent": request.headers.get("user-agent")}
        try:
            key = K.task_downloads(self.settings.redis_prefix, task_id)
            async with self.projection.redis.pipeline(transaction=True) as pipe:
                pipe.hincrby(key, "count", 1)
                pipe.hset(key, mapping={"lastAt": utcnow_iso(), "lastBy": json.dumps(by)})
                await pipe.execute()
        except Exception:  # counting must not fail the download
            log.exception("download not counted", taskId=task_id)

    async def task_views(self, tasks: list[dict[str, Any]],
                         caller: Caller | None) -> list[dict[str, Any]]:
        """The public JSON of ``tasks``: fresh links, and ``downloads``
        ``{"count", "lastAt" (RFC 3339), "lastBy": {"clientIp", "userAgent"}}``
        of each (count 0, the others null, before the first); one Redis round trip."""
        async with self.projection.redis.pipeline(transaction=False) as pipe:
            for t in tasks:
                pipe.hgetall(K.task_downloads(self.settings.redis_prefix, t["taskId"]))
            counts = await pipe.execute()
        for task, raw in zip(tasks, counts):
            got = {k.decode(): v.decode() for k, v in raw.items()}
            task["downloads"] = {"count": int(got.get("count", 0)), "lastAt": got.get("lastAt"),
                                 "lastBy": json.loads(got["lastBy"]) if "lastBy" in got else None}
            await self.with_fresh_link(task, caller)
        return tasks

    async def audit(self, request: Request | None, action: str, caller: Caller | None = None,
                    **fields: Any) -> None:
        """Record one action on the ``audit`` topic and in Redis (never raises:
        an audit failure is logged, the request goes on)."""
        client = request.client.host if request and request.client else None
        agent = request.headers.get("user-agent") if request else None
        given = fields.pop("sysCode", None)
        sys_code = caller.sysCode if caller else given
        try:
            entry = Audit(action=action, sysCode=sys_code, clientIp=client, userAgent=agent,
                          appKey=caller.appKey if caller else None, **fields)
            key = K.audit(self.settings.redis_prefix, sys_code)
            async with self.projection.redis.pipeline(transaction=False) as pipe:
                pipe.lpush(key, entry.model_dump_json(exclude_none=True))
                pipe.ltrim(key, 0, AUDIT_KEEP - 1)
                await pipe.execute()
            self.producer.send(T.AUDIT, sys_code or "-", entry)
        except Exception:  # the trail must not take the API down
            log.exception("audit entry not recorded", action=action)

    async def audit_entries(self, sys_code: str, task_id: str | None,
                            limit: int) -> list[dict[str, Any]]:
        """Newest audit entries of a caller (optionally of one task)."""
        key = K.audit(self.settings.redis_prefix, sys_code)
        raws = await self.projection.redis.lrange(key, 0, AUDIT_KEEP - 1)
        entries = (json.loads(r) for r in raws)
        picked = [e for e in entries if task_id is None or e.get("taskId") == task_id]
        return picked[:limit]


def get_services(request: Request) -> Services:
    """The app's :class:`Services` (``app.state.services``): a FastAPI dependency."""
    return request.app.state.services
