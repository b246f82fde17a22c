"""``/health/live`` and ``/health/ready`` (issue 15 item 5).

``/health/live``: the process answers (200, nothing checked), for a liveness
probe. ``/health/ready``: 200 when Redis, the broker, every Plait topic and
the object store (a probe object written and deleted: the bucket exists and
is writable) are fine, else 503; the body names each dependency's state
(``streams.health.dependencies``). Workers answer the same with
``python -m streams.health --ready``. The old ``/health`` (Redis only) stays
for the probes that use it.
"""
from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from plait.settings import Settings


def create_health_router(settings: Settings) -> APIRouter:
    """The two health routes for ``settings``."""
    router = APIRouter()

    @router.get("/health/live")
    async def live():
        """200 ``{"status": "live"}`` while the process serves requests."""
        return JSONResponse({"status": "live"})

    @router.get("/health/ready")
    async def ready():
        """200 or 503 with ``{"status": "ready"|"not ready", "checks": {redis,
        broker, topics, objectStore: {"ok", "ms", "detail"|"error"}}}``."""
        from streams.health import dependencies

        state = await asyncio.to_thread(dependencies, settings, 3.0)
        return JSONResponse({"status": "ready" if state["ready"] else "not ready",
                             "checks": state["checks"]},
                            status_code=200 if state["ready"] else 503)

    return router
