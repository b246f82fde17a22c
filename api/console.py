"""The operator's console: the export center (``/ui/exports``) and the alert
console (``/ui/alerts``), static files from ``api/static`` over the public
JSON API; with a caller registry the browser signs each request
(``plait.signature``), so a caller sees only its own tasks.

The pages alert messages link to (``alerting.templates.task_url`` and
``silence_url``): ``/ui/tasks/<taskId>``, the export center showing that one
task, and ``/ui/silences/new?matchers={name="value",...}``, the alert console
with its silence form filled with those matchers. Both are the same files one
level deeper, with ``<base href="../">`` so their relative links still reach
``/ui/...`` under any route prefix or proxy path; ``api/static/console.js``
takes the API's base from the page's path, these two included."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from alerting.amconfig import enabled as alerting_enabled
from api.auth import bearer_required
from plait.settings import Settings

STATIC = Path(__file__).parent / "static"
_NO_CACHE = {"Cache-Control": "no-cache"}


def deeper_page(name: str) -> HTMLResponse:
    """Static page ``name`` served one level below ``/ui/<page>`` (``/ui/tasks/<id>``): its
    relative links resolved against ``/ui/`` (``<base href="../">``)."""
    return HTMLResponse(_deeper_html(name), headers=_NO_CACHE)


@functools.cache
def _deeper_html(name: str) -> str:
    """:func:`deeper_page`'s HTML, read once (no file read in the event loop per request)."""
    html = (STATIC / name).read_text("utf-8")
    return html.replace("<head>", '<head><base href="../">', 1)


def install_console(app: FastAPI, settings: Settings, services: Any) -> None:
    """Add the ``/ui/...`` routes and static files to ``app``."""
    router = APIRouter()

    @router.get("/ui", include_in_schema=False)
    @router.get("/ui/", include_in_schema=False)
    async def ui_root(request: Request):
        return RedirectResponse(request.scope.get("root_path", "") + "/ui/exports")

    @router.get("/ui/exports", include_in_schema=False)
    async def exports_page():
        return FileResponse(STATIC / "exports.html", headers={"Cache-Control": "no-cache"})

    @router.get("/ui/alerts", include_in_schema=False)
    async def alerts_page():
        return FileResponse(STATIC / "alerts.html", headers={"Cache-Control": "no-cache"})

    @router.get("/ui/tasks/{task_id}", include_in_schema=False)
    async def task_page(task_id: str):
        """The export center on task ``task_id`` alone (``exports.js`` reads the id from the
        path): an alert message's ``task_url``."""
        return deeper_page("exports.html")

    @router.get("/ui/silences/new", include_in_schema=False)
    async def new_silence_page():
        """The alert console, its silence form filled with ``?matchers=`` (``alerts.js``): an
        alert message's ``silence_url``."""
        return deeper_page("alerts.html")

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

        live = getattr(app.state, "alerting", None)
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
