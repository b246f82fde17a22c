"""``/health/live`` (nothing checked) and ``/health/ready`` (dependencies, as
``python -m streams.health --ready``); Alertmanager's ``/-/healthy`` and
``/-/ready`` on the same checks."""
from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse

from api.services import Services, get_services

router = APIRouter()


@router.get("/health/live")
async def live():
    """200 ``{"status": "live"}`` while the process serves requests."""
    return JSONResponse({"status": "live"})


@router.get("/health/ready")
async def ready(sv: Services = Depends(get_services)):
    """200 or 503 with ``{"status": "ready"|"not ready", "checks": {redis,
    broker, topics, objectStore: {"ok", "ms", "detail"|"error"}}}``."""
    from streams.health import dependencies

    state = await asyncio.to_thread(dependencies, sv.settings, 3.0)
    return JSONResponse({"status": "ready" if state["ready"] else "not ready",
                         "checks": state["checks"]},
                        status_code=200 if state["ready"] else 503)


@router.get("/-/healthy", response_class=PlainTextResponse)
async def am_healthy():
    """Alertmanager's liveness path (api.go ``Register``): 200 ``OK``."""
    return PlainTextResponse("OK")


@router.get("/-/ready", response_class=PlainTextResponse)
async def am_ready(sv: Services = Depends(get_services)):
    """Alertmanager's readiness path: 200 ``OK`` when ``/health/ready`` is
    ready, else 503 naming the failing dependencies."""
    from streams.health import dependencies

    state = await asyncio.to_thread(dependencies, sv.settings, 3.0)
    if state["ready"]:
        return PlainTextResponse("OK")
    failing = sorted(k for k, c in state["checks"].items() if not c.get("ok"))
    return PlainTextResponse(f"not ready: {', '.join(failing)}", status_code=503)
