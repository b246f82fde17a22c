"""Completion webhooks to ``jobConfig.notifyUrl``: one POST per task and
status (``plait.keys.notify``, SET NX), in the background, signed as the
alert webhooks with the caller's ``appSecret``; ``Idempotency-Key:
<taskId>:<status>``; retried as ``alerting.delivery.is_retryable`` says.
Body: ``{taskId, status, finishedAt, error?, sysCode, bizType, userId,
file?: {fileName, rows, bytes, url}}``."""
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
    """POST until not retryable; the final status. ``RetryableError`` after ``attempts``."""
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
    """Wrap the projector's handler to start the webhook after a terminal
    status; a failure is logged, never fails the projection."""
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
    """Start the webhook of a terminal status, once."""
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
        return
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
