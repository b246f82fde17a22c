"""The Plait API (docs/events.md, "The export request contract"): services
on ``app.state``, the routers, signed download links."""
from __future__ import annotations

import asyncio
import mimetypes
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import Response, StreamingResponse
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from alerting.counters import CountersCollector
from alerting.silence_store import SILENCE_KEY, SilenceStore
from api import alert_history, alertmanager, alerts
from api import health as health_routes
from api.alerting_deps import Alerting
from api.docs_offline import install_redoc
from api.envelope import envelope, install_error_handlers, refuse_snake_query
from api.openapi import Envelope, errors, install_openapi, required_query_open
from api.ingest import AlertIngest
from api.services import Services, get_services
from api.tasks import create_tasks_router
from plait import keys as K
from plait.callers import load_callers
from plait.errors import AuthError, FieldError, Forbidden, NotFound
from plait.settings import Settings, get_settings
from producers.sdk import PlaitProducer
from sinks.signing import content_disposition, verify_link
from sinks.store import LocalStore

_STATE_COLLECTOR = None
_COLLECTOR: CountersCollector | None = None

router = APIRouter()


def _register_state_collector(collector) -> None:
    """Register the state gauges once per process (the last API built wins)."""
    global _STATE_COLLECTOR
    from prometheus_client import REGISTRY

    if _STATE_COLLECTOR is not None:
        REGISTRY.unregister(_STATE_COLLECTOR)
    REGISTRY.register(collector)
    _STATE_COLLECTOR = collector


@asynccontextmanager
async def lifespan(app: FastAPI):
    """SIGHUP re-reads the alerting config (as Alertmanager); warm the producer."""
    alerting = getattr(app.state, "alerting", None)
    if alerting is not None:
        from alerting.amconfig import on_sighup

        on_sighup(alerting.reload, "api")
        await app.state.ingest.warm()
    yield
    await app.state.services.projection.redis.aclose()


def create_api(settings: Settings | None = None) -> FastAPI:
    """Build the API app for ``settings`` (default: from the environment).

    Raises ``plait.callers.CallerConfigError`` naming the key when the caller
    registry is invalid (the API does not start)."""
    settings = settings or get_settings()
    sv = Services.build(settings)
    from alerting.amconfig import enabled as alerting_enabled
    from api.console import install_console
    from api.schedules import create_schedules_router
    from plait import tracing
    from plait.metrics import StateCollector
    from plait.topics import DLQ, Topics

    tracing.setup("plait-api")
    _register_state_collector(StateCollector(settings.redis_url, settings.redis_prefix,
                                             settings.broker_url, Topics(settings.topic_prefix).name(DLQ)))
    # Swagger UI and ReDoc served locally, never from a CDN (ReDoc's page is ours: its bundle
    # without its remote footer image, api/docs_offline.py)
    app = FastAPIOffline(title="Plait", lifespan=lifespan, redoc_url=None,
                         dependencies=[Depends(refuse_snake_query)])
    install_redoc(app)
    app.state.services = sv
    app.state.stopping = lambda: False  # the server's shutdown flag (ops.cli.cmd_api sets it)

    async def refused(request: Request, exc: AuthError) -> None:
        action = "access.refused" if isinstance(exc, Forbidden) else "auth.refused"
        await sv.audit(request, action, reason=str(exc))

    install_error_handlers(app, refused)
    install_openapi(app, open_mode=sv.callers is None)
    app.include_router(create_tasks_router(sv))
    app.include_router(health_routes.router)
    install_console(app, settings, sv)
    app.include_router(create_schedules_router(sv))
    if alerting_enabled(settings):
        install_alerting(app, settings, sv)
    app.include_router(router)
    return app


def install_alerting(app: FastAPI, settings: Settings, services: Services | None = None) -> None:
    """Put the alerting state on ``app.state`` and include its routers (shares
    ``services``' registry, Redis, producer when given). ``ConfigError`` names
    the bad key."""
    if services is not None:
        callers, redis, producer = services.callers, services.projection.redis, services.producer
    else:
        callers = load_callers(settings.callers_file) if settings.callers_file else None
        redis, producer = None, PlaitProducer(settings.broker_url, settings.topic_prefix,
                                              "plait-api")
    state = app.state.alerting = Alerting(settings, callers, redis)
    ingest = app.state.ingest = AlertIngest(settings, producer)
    app.state.silences = SilenceStore(state.redis, K.alert_silences(settings.redis_prefix),
                                      lambda value: ingest.broadcast(SILENCE_KEY, value))
    _register_collector(settings)
    app.include_router(alerts.router)
    app.include_router(alert_history.router)
    app.include_router(alert_history.am_router)
    app.include_router(alertmanager.router)


def _register_collector(settings: Settings) -> None:
    """Expose the funnel counters on the Prometheus registry, once per process."""
    global _COLLECTOR
    key = K.alert_counters(settings.redis_prefix)
    if _COLLECTOR is None:
        from prometheus_client import REGISTRY

        _COLLECTOR = CountersCollector(settings.redis_url, key)
        REGISTRY.register(_COLLECTOR)
    else:
        _COLLECTOR.redis_url, _COLLECTOR.key = settings.redis_url, key



@router.get("/download/{key:path}", operation_id="download", tags=["export"],
            response_class=StreamingResponse, responses={
                200: {"description": "the file's bytes (Content-Disposition names it)",
                      "content": {"application/octet-stream": {
                          "schema": {"type": "string", "format": "binary"}}}},
                **errors(403, 404, 503)})
async def download(key: str, request: Request,
                   expires: int = Query(description="Unix time (s) the link expires"),
                   name: str = Query(description="the file name to save as"),
                   sig: str = Query(description="HMAC-SHA256 of key, expires and name"),
                   sv: Services = Depends(get_services)):
    """Serve a file behind a signed link; 403 when expired or tampered."""
    reason = verify_link(sv.settings.signing_secret, key, expires, name, sig)
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
    if task is not None:
        await sv.record_download(task_id, request)
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


@router.get("/audit", operation_id="audit",
            response_model=Envelope, tags=["audit"], responses=errors(401, 503),
            openapi_extra=required_query_open("sysCode"))
async def audit(request: Request,
                sysCode: str | None = Query(None, description=(  # noqa: N803
                    "whose entries: required without a caller registry; with one, the "
                    "signed caller's")),
                taskId: str | None = Query(None, description="only this task's entries"),  # noqa: N803
                limit: int = Query(100, ge=1, le=1000),
                sv: Services = Depends(get_services)):
    """Newest audit entries of the signed caller (optionally one task's)."""
    caller = await sv.authenticate(request)
    sys_code = caller.sysCode if caller else sysCode
    if not sys_code:
        raise FieldError("sysCode", "is required without a caller registry",
                         "the query parameter sysCode=<your sysCode>", "required")
    return envelope(200, "ok", {"entries": await sv.audit_entries(sys_code, taskId, limit)})


@router.get("/health", operation_id="health", tags=["ops"],
            responses={200: {"model": Envelope, "description": "Redis answers"},
                       503: {"model": Envelope, "description": "Redis does not answer"}})
async def health(sv: Services = Depends(get_services)):
    """200 when Redis answers; 503 otherwise."""
    try:
        await asyncio.wait_for(sv.projection.redis.ping(), 2)
    except Exception as exc:  # any failure means not healthy
        return envelope(503, f"redis: {exc}")
    return envelope(200, "ok", {"status": "ok"})


@router.get("/metrics", operation_id="metrics", tags=["ops"], response_class=Response,
            responses={200: {"description": "Prometheus text exposition format",
                             "content": {CONTENT_TYPE_LATEST.split(";")[0]: {
                                 "schema": {"type": "string"}}}}})
async def metrics(sv: Services = Depends(get_services)):
    """Prometheus metrics."""
    from api.schedules import refresh_lag

    await refresh_lag(sv)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
