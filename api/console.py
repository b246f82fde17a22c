"""The operator's console served by the API (issue 15): the export center
(``/ui/exports``) and the alert console (``/ui/alerts``).

Static HTML, CSS and vanilla JavaScript from ``api/static`` (no build step,
no run-time dependency). The pages use the existing JSON API: the export
center lists ``/export/tasks``, follows ``/export/tasks/{id}/events`` (SSE)
and cancels/downloads through the same routes; with a caller registry it
signs each request in the browser (WebCrypto HMAC-SHA256 of the canonical
request of ``plait.signature``) with the appKey/appSecret the operator types
(kept in the tab's sessionStorage), so a caller sees its own tasks only,
exactly as through the API. The alert console reads the Alertmanager API v2
(``/api/v2/...``, bearer token when required), ``/alerts/counters`` and
``/ui/receivers`` (receiver token buckets and last delivery results from the
alert view read model, ``alerting.view.read_receivers``); its silence preview
asks ``GET /api/v2/alerts?filter=...`` so the matcher rules stay the server's.
"Run again" in the export center posts the ``spec`` of ``GET
/export/tasks/{taskId}`` to ``POST /export/tasks?reuse=false``. Every label,
annotation and task field is inserted as text (``Plait.el``), links only when
http(s).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from alerting.amconfig import enabled as alerting_enabled
from api.auth import bearer_required
from plait.settings import Settings

STATIC = Path(__file__).parent / "static"


def install_console(app: FastAPI, settings: Settings, services: Any) -> None:
    """Add ``/ui/...`` to ``app``: the two pages, their static files,
    ``/ui/config`` (``{"signed", "alerting", "bearer"}``: what the pages must
    ask for) and ``/ui/receivers``."""
    router = APIRouter()

    @router.get("/ui", include_in_schema=False)
    @router.get("/ui/", include_in_schema=False)
    async def ui_root():
        return RedirectResponse("/ui/exports")

    @router.get("/ui/exports", include_in_schema=False)
    async def exports_page():
        """The export center page."""
        return FileResponse(STATIC / "exports.html", headers={"Cache-Control": "no-cache"})

    @router.get("/ui/alerts", include_in_schema=False)
    async def alerts_page():
        """The alert console page."""
        return FileResponse(STATIC / "alerts.html", headers={"Cache-Control": "no-cache"})

    @router.get("/ui/config")
    async def ui_config():
        """What the pages need to know: ``signed`` (a caller registry is loaded:
        sign requests with appKey/appSecret), ``alerting`` (alert routes on),
        ``bearer`` (the ``/api/v2`` routes need a bearer token)."""
        token = settings.alertmanager_token.get_secret_value()
        return JSONResponse({"signed": services.callers is not None,
                             "alerting": alerting_enabled(settings),
                             "bearer": bearer_required(services.callers, token)})

    @router.get("/ui/receivers")
    async def ui_receivers():
        """``{"receivers": [{"name", "tokens", "burst", "outbox", "inflight",
        "last"}]}``: every configured receiver, with the levels the funnel
        workers published (missing fields until a worker published)."""
        from alerting.view import read_receivers

        live = getattr(app.state, "alerting", None)  # the configuration in use (reloads too)
        config = live.config if live is not None else None
        if config is None:
            return JSONResponse({"receivers": []})
        levels = await read_receivers(services.projection.redis, settings.redis_prefix,
                                      range(settings.partitions))
        out = [{"name": r.name, "burst": r.bucket.burst, **levels.get(r.name, {})}
               for r in config.receivers]
        return JSONResponse({"receivers": out})

    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
