"""Completion webhooks: an export naming ``jobConfig.notifyUrl`` gets one
POST of its final status and signed link.

- Started by the projector (``streams.app.routes`` wraps its handler with
  :func:`with_notify`; the ``export.lifecycle`` agent) once the terminal state
  is projected, and sent in the background so a slow receiver never holds
  the partition.
- Signed like the alert webhooks (``alerting.delivery.signature``:
  ``X-Plait-Timestamp`` and ``X-Plait-Signature: sha256=HMAC(secret,
  "<timestamp>." + body)``) with the caller's ``appSecret`` (open mode: the
  deployment's ``signing_secret``).
- ``Idempotency-Key: <taskId>:<status>``, the same on every attempt; retried
  with exponential backoff (tenacity) on the answers the alert webhooks
  retry (``alerting.delivery.is_retryable``: connect errors, timeouts, 408,
  425, 429, 5xx), at most :data:`ATTEMPTS` times; another 4xx ends it.
- Once per task and status across workers: ``plait.keys.notify`` (SET NX).

Body (camelCase, RFC 3339)::

    {"taskId", "status", "finishedAt", "error"?, "sysCode", "bizType", "userId",
     "file"?: {"fileName", "rows", "bytes", "url"}}
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from alerting.delivery import (IDEMPOTENCY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
                               is_retryable, signature)
from plait import keys as K
from plait.errors import RetryableError
from plait.events import ExportRequested, Lifecycle
from plait.lifecycle import TERMINAL
from plait.logs import get_logger

log = get_logger("plait.notify")

#: Attempts per webhook (first + retries).
ATTEMPTS = 6
_jobs: set[asyncio.Task] = set()


def body_of(state: dict[str, Any], link: str | None) -> bytes:
    """The webhook body for a task's projected ``state`` and its ``link``."""
    doc: dict[str, Any] = {k: state.get(k) for k in
                           ("taskId", "status", "finishedAt", "sysCode", "bizType", "userId")}
    if state.get("error"):
        doc["error"] = state["error"]
    info = state.get("file")
    if state.get("status") == "SUCCESS" and info:
        doc["file"] = {"fileName": info.get("fileName"), "rows": info.get("rows"),
                       "bytes": info.get("bytes"), "url": link}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


async def deliver(client: httpx.AsyncClient, url: str, body: bytes, key: str, secret: str,
                  attempts: int = ATTEMPTS, wait_max: float = 30.0,
                  clock=time.time) -> int:
    """POST ``body`` to ``url`` until a 2xx, retrying transient failures with
    exponential backoff. Returns the final HTTP status.

    Raises:
        RetryableError: still failing after ``attempts``.
    """
    async for attempt in AsyncRetrying(stop=stop_after_attempt(attempts),
                                       wait=wait_exponential(multiplier=0.2, max=wait_max),
                                       retry=retry_if_exception_type(RetryableError),
                                       reraise=True):
        with attempt:
            ts = int(clock())
            headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: key,
                       TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: signature(secret, body, ts),
                       "X-Plait-Attempt": str(attempt.retry_state.attempt_number)}
            try:
                resp = await client.post(url, content=body, headers=headers, timeout=10)
            except httpx.TransportError as exc:
                raise RetryableError(f"{type(exc).__name__}: {exc}") from None
            if is_retryable(resp.status_code):
                raise RetryableError(f"HTTP {resp.status_code}")
            return resp.status_code
    raise AssertionError("unreachable")


def with_notify(handle):
    """Wrap the projector's handler ``handle(ctx, event) -> emits``: after it
    projected a terminal status, start the completion webhook
    (:func:`after_lifecycle`). A failure to start it is logged, never fails
    the projection."""
    async def project_and_notify(ctx, event: Lifecycle):
        emits = await handle(ctx, event)
        try:
            await after_lifecycle(ctx, event, emits)
        except Exception:
            log.exception("completion webhook not started", taskId=event.taskId)
        return emits

    project_and_notify.__name__ = getattr(handle, "__name__", "project")
    return project_and_notify


async def after_lifecycle(ctx, event: Lifecycle, emits: list) -> None:
    """For a terminal status of a task whose spec names
    ``jobConfig.notifyUrl``, start the webhook delivery in the background."""
    if event.status not in TERMINAL:
        return
    marks = await ctx.checkpoints.get(event.taskId)
    if "request" not in marks:
        return
    spec = ExportRequested.model_validate_json(marks["request"]).spec
    url = spec.jobConfig.notifyUrl
    if not url:
        return
    redis, prefix = ctx.projection.redis, ctx.settings.redis_prefix
    marker = K.notify(prefix, event.taskId, event.status)
    if not await redis.set(marker, "sending", nx=True, ex=600):
        return  # another delivery of this task and status exists
    job = asyncio.create_task(_send(ctx, spec, event, url, marker))
    _jobs.add(job)
    job.add_done_callback(_jobs.discard)


async def _send(ctx, spec, event: Lifecycle, url: str, marker: str) -> None:
    redis = ctx.projection.redis
    caller = ctx.callers.by_sys_code(spec.sysCode) if ctx.callers is not None else None
    secret = caller.secret() if caller else ctx.settings.signing_secret
    ttl = caller.linkTtlSeconds if caller else ctx.settings.link_ttl_seconds
    try:
        state = await ctx.projection.get(event.taskId) or {"taskId": event.taskId,
                                                           "status": event.status}
        info = state.get("file") or {}
        link = None
        if state.get("status") == "SUCCESS" and info.get("key"):
            link = await asyncio.to_thread(ctx.store.link, info["key"], info["fileName"], ttl)
        status = await deliver(ctx.http, url, body_of(state, link),
                               f"{event.taskId}:{event.status}", secret)
        await redis.set(marker, "sent" if status < 300 else f"failed:{status}", ex=7 * 86400)
        log.info("completion webhook", taskId=event.taskId, status=status)
    except Exception as exc:
        log.warning("completion webhook failed", taskId=event.taskId, error=str(exc))
        await redis.set(marker, "failed", ex=7 * 86400)
