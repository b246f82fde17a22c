"""``/health/live`` (nothing checked) and ``/health/ready`` (dependencies, as
``python -m streams.health --ready``)."""
from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

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
