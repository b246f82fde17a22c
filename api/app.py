"""The Plait API (DESIGN.md, "The API contract").

``POST /export/tasks`` validates and emits ExportRequested, answering the task
id at once; reads come from the Redis projection; downloads are served behind
HMAC-signed, expiring links (local store) or presigned S3 URLs.
"""
from __future__ import annotations

import asyncio
import mimetypes
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.envelope import envelope, install_error_handlers, refuse_snake_query
from api.services import Services
from api.tasks import create_tasks_router
from plait.errors import AuthError, FieldError, Forbidden, NotFound
from plait.settings import Settings, get_settings
from sinks.signing import content_disposition, verify_link
from sinks.store import LocalStore


_STATE_COLLECTOR = None


def _register_state_collector(collector) -> None:
    """Register the scrape-time state gauges once per process (the last API
    built wins: tests build several)."""
    global _STATE_COLLECTOR
    from prometheus_client import REGISTRY

    if _STATE_COLLECTOR is not None:
        REGISTRY.unregister(_STATE_COLLECTOR)
    REGISTRY.register(collector)
    _STATE_COLLECTOR = collector


def create_api(settings: Settings | None = None) -> FastAPI:
    """Build the API app for ``settings`` (default: from the environment).

    Raises ``plait.callers.CallerConfigError`` naming the key when the caller
    registry is invalid (the API does not start)."""
    settings = settings or get_settings()
    sv = Services.build(settings)
    from plait import tracing
    from plait.metrics import StateCollector
    from plait.topics import DLQ, Topics

    tracing.setup("plait-api")
    _register_state_collector(StateCollector(settings.redis_url, settings.redis_prefix,
                                             settings.broker_url, Topics(settings.topic_prefix).name(DLQ)))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await sv.projection.redis.aclose()

    app = FastAPI(title="Plait", lifespan=lifespan, dependencies=[Depends(refuse_snake_query)])
    app.state.services = sv

    async def refused(request: Request, exc: AuthError) -> None:
        action = "access.refused" if isinstance(exc, Forbidden) else "auth.refused"
        await sv.audit(request, action, reason=str(exc))

    install_error_handlers(app, refused)

    app.include_router(create_tasks_router(sv))
    from api.console import install_console
    from api.health import create_health_router

    app.include_router(create_health_router(settings))
    install_console(app, settings, sv)
    if settings.alerting_config:
        from api.alerts import create_alerts_router

        app.include_router(create_alerts_router(settings, sv))

    @app.get("/download/{key:path}")
    async def download(key: str, request: Request, expires: int, name: str, sig: str):
        """Serve a file behind a signed link; 403 when expired or tampered."""
        reason = verify_link(settings.signing_secret, key, expires, name, sig)
        if reason is not None:  # audited as access.refused by the error handler
            raise Forbidden(f"download link {reason}")
        store = sv.store
        try:
            present = isinstance(store, LocalStore) and store.exists(key)
        except ValueError:  # a key that escapes the store
            present = False
        if not present:
            raise NotFound("file not found")
        task_id = key.split("/")[1] if key.count("/") >= 2 else None
        task = await sv.projection.get(task_id) if task_id else None
        await sv.audit(request, "task.downloaded", taskId=task_id, fileName=name,
                       sysCode=(task or {}).get("sysCode"), userId=(task or {}).get("userId"),
                       rows=((task or {}).get("file") or {}).get("rows"),
                       bytes=((task or {}).get("file") or {}).get("bytes"))
        fh = store.open(key)

        def chunks():
            with fh:
                while block := fh.read(1 << 20):
                    yield block

        media = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return StreamingResponse(chunks(), media_type=media,
                                 headers={"Content-Disposition": content_disposition(name)})

    @app.get("/audit")
    async def audit(request: Request, sysCode: str | None = None, taskId: str | None = None,
                    limit: int = Query(100, ge=1, le=1000)):
        """Newest audit entries of the signed caller (optionally one task's)."""
        caller = await sv.authenticate(request)
        sys_code = caller.sysCode if caller else sysCode
        if not sys_code:
            raise FieldError("sysCode", "is required without a caller registry",
                             "the query parameter sysCode=<your sysCode>", "required")
        return envelope(200, "ok", {"entries": await sv.audit_entries(sys_code, taskId, limit)})

    @app.get("/health")
    async def health():
        """200 when Redis answers; 503 otherwise."""
        try:
            await asyncio.wait_for(sv.projection.redis.ping(), 2)
        except Exception as exc:  # any failure means not healthy
            return envelope(503, f"redis: {exc}")
        return envelope(200, "ok", {"status": "ok"})

    @app.get("/metrics")
    async def metrics():
        """Prometheus metrics."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app
