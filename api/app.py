"""The Plait API (DESIGN.md, "The API contract").

``POST /export/tasks`` validates and emits ExportRequested, answering the task
id at once; reads come from the Redis projection; downloads are served behind
HMAC-signed, expiring links (local store) or presigned S3 URLs.
"""
from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import redis.asyncio as aioredis
from fastapi import FastAPI, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, Counter, generate_latest

from api.envelope import envelope, validation_error
from plait import topics as T
from plait.clock import new_task_id, utcnow_iso
from plait.events import CancelRequested, ExportRequested, Lifecycle
from plait.lifecycle import TERMINAL
from plait.projection import Projection
from plait.settings import Settings, get_settings
from plait.spec import ExportSpec
from producers.sdk import PlaitProducer
from sinks.signing import content_disposition, verify_link
from sinks.store import LocalStore, open_store

TASKS_CREATED = Counter("plait_api_tasks_created_total", "Export tasks accepted", ["sysCode"])


def sse(state: dict) -> str:
    """One Server-Sent Event (WHATWG HTML, "Server-sent events") for a task state."""
    return f"event: {state['status']}\ndata: {json.dumps(state, separators=(',', ':'))}\n\n"


async def sse_stream(projection: Projection, task_id: str) -> AsyncIterator[str]:
    """The task's current state, then each published change, until terminal."""
    pubsub = projection.redis.pubsub()
    await pubsub.subscribe(projection.channel(task_id))
    try:
        state = await projection.get(task_id)  # read after subscribing: no gap
        yield sse(state)
        while state["status"] not in TERMINAL:
            msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=4)
            if msg is None:
                yield ": keep-alive\n\n"
                continue
            state = json.loads(msg["data"])
            yield sse(state)
    finally:
        await pubsub.aclose()


def create_api(settings: Settings | None = None) -> FastAPI:
    """Build the API app for ``settings`` (default: from the environment)."""
    settings = settings or get_settings()
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        redis = aioredis.Redis.from_url(settings.redis_url, socket_timeout=5)
        state["projection"] = Projection(redis, settings.redis_prefix)
        state["producer"] = PlaitProducer(settings.broker_url, settings.topic_prefix, "plait-api")
        state["store"] = open_store(settings.storage_url, settings.api_url,
                                    settings.signing_secret, settings.s3_endpoint_url,
                                    settings.s3_region)
        yield
        await redis.aclose()

    app = FastAPI(title="Plait", lifespan=lifespan)
    app.add_exception_handler(RequestValidationError, validation_error)

    def projection() -> Projection:
        return state["projection"]

    async def emit(topic: str, key: str, payload) -> None:
        producer: PlaitProducer = state["producer"]
        producer.send(topic, key, payload)
        await asyncio.to_thread(producer.flush, 10.0)

    async def with_fresh_link(task: dict) -> dict:
        info = task.get("file")
        if task.get("status") == "SUCCESS" and info:
            info["url"] = await asyncio.to_thread(
                state["store"].link, info["key"], info["fileName"], settings.link_ttl_seconds)
        return task

    @app.post("/export/tasks", status_code=202)
    async def create_task(spec: ExportSpec):
        """Accept an export; answers ``{"taskId", "status": "CREATED"}`` at once."""
        url = spec.dataConfig.dataApiUrl
        allow = settings.data_api_allowlist
        if url and allow and not any(url.startswith(p) for p in allow):
            return envelope(422, "invalid request: dataConfig.dataApiUrl: not in the allowed "
                                 "data-API URL prefixes", {"errors": [
                                     {"field": "dataConfig.dataApiUrl", "rule": "allowlist"}]})
        task_id, now = new_task_id(), utcnow_iso()
        fingerprint = spec.fingerprint()
        existing, reused = await projection().claim_fingerprint(
            fingerprint, task_id, settings.reuse_window_seconds)
        if existing is not None:
            message = "reused a recent identical export" if reused else "identical task running"
            return envelope(200, message, {**await with_fresh_link(existing),
                                           "reused": reused, "deduplicated": not reused})
        doc = spec.documentConfig
        await projection().apply(Lifecycle(
            taskId=task_id, status="CREATED", at=now, sysCode=spec.sysCode,
            bizType=spec.bizType, userId=spec.userId, fileName=doc.fileName,
            fileFormat=doc.fileFormat, fingerprint=fingerprint, timeout=spec.jobConfig.timeout))
        await emit(T.REQUESTS, task_id, ExportRequested(
            taskId=task_id, spec=spec, fingerprint=fingerprint, requestedAt=now))
        TASKS_CREATED.labels(spec.sysCode).inc()
        return envelope(202, "accepted", {"taskId": task_id, "status": "CREATED",
                                          "reused": False, "deduplicated": False})

    @app.get("/export/tasks/{task_id}")
    async def get_task(task_id: str):
        """One task's state: status, counts, progress, file info with a fresh link."""
        task = await projection().get(task_id)
        if task is None:
            return envelope(404, f"task {task_id} not found")
        return envelope(200, "ok", await with_fresh_link(task))

    @app.get("/export/tasks")
    async def list_tasks(sysCode: str = Query(min_length=1), userId: str | None = None,
                         limit: int = Query(100, ge=1, le=1000)):
        """Tasks of ``sysCode`` (and ``userId``), newest first."""
        tasks = await projection().list(sysCode, userId, limit)
        return envelope(200, "ok", {"tasks": [await with_fresh_link(t) for t in tasks]})

    @app.get("/export/tasks/{task_id}/events")
    async def task_events(task_id: str):
        """Server-Sent Events: the task's state now, then every change, until it ends
        (``event:`` = status, ``data:`` = the task JSON; a comment every 4 s)."""
        if await projection().get(task_id) is None:
            return envelope(404, f"task {task_id} not found")
        return StreamingResponse(sse_stream(projection(), task_id),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.post("/export/tasks/{task_id}/cancel", status_code=202)
    async def cancel_task(task_id: str):
        """Ask to cancel; 409 when the task already ended."""
        task = await projection().get(task_id)
        if task is None:
            return envelope(404, f"task {task_id} not found")
        if task["status"] in TERMINAL:
            return envelope(409, f"task {task_id} already ended as {task['status']}",
                            {"status": task["status"]})
        await emit(T.CONTROL, task_id, CancelRequested(taskId=task_id))
        return envelope(202, "cancel requested", {"taskId": task_id})

    @app.get("/download/{key:path}")
    async def download(key: str, expires: int, name: str, sig: str):
        """Serve a file behind a signed link; 403 when expired or tampered."""
        store = state["store"]
        reason = verify_link(settings.signing_secret, key, expires, name, sig)
        if reason is not None:
            return envelope(403, f"download link {reason}")
        if not isinstance(store, LocalStore) or not store.exists(key):
            return envelope(404, "file not found")
        fh = store.open(key)

        def chunks():
            with fh:
                while block := fh.read(1 << 20):
                    yield block

        return StreamingResponse(chunks(), media_type="application/octet-stream",
                                 headers={"Content-Disposition": content_disposition(name)})

    @app.get("/health")
    async def health():
        """200 when Redis answers; 503 otherwise."""
        try:
            await asyncio.wait_for(projection().redis.ping(), 2)
        except Exception as exc:  # any failure means not healthy
            return envelope(503, f"redis: {exc}")
        return envelope(200, "ok", {"status": "ok"})

    @app.get("/metrics")
    async def metrics():
        """Prometheus metrics."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app
