"""``GET /alerts/{fingerprint}/history`` and ``GET
/api/v2/alerts/{fingerprint}/history``: every alert's story as
:mod:`alerting.history` keeps it in Redis (docs/alerting.md, "History")."""
from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Depends

from alerting import history as alert_history
from api.alerting_deps import AM_ROUTER, Alerting, get_alerting
from api.envelope import envelope
from api.openapi import Envelope, errors
from plait.errors import FieldError, NotFound

_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


router = APIRouter(tags=["alerting"])
am_router = APIRouter(**AM_ROUTER)


async def story(fingerprint: str, state: Alerting) -> dict[str, Any]:
    """``{"fingerprint", "retentionSeconds", "entries"}``; raises ``FieldError``
    (not 16 lower-case hex) or ``NotFound``."""
    settings = state.settings
    if not _FINGERPRINT.fullmatch(fingerprint):
        raise FieldError("fingerprint", "must be 16 lower-case hex digits",
                         "an alert's fingerprint, e.g. 0123456789abcdef")
    entries = await alert_history.read(state.redis(), settings.redis_prefix, fingerprint)
    if not entries:
        raise NotFound(f"no history kept for alert {fingerprint} (kept "
                       f"{settings.alert_history_retention_seconds:g} s after its last entry)")
    return {"fingerprint": fingerprint,
            "retentionSeconds": settings.alert_history_retention_seconds,
            "entries": entries}


@router.get("/alerts/{fingerprint}/history", operation_id="alertHistory",
            response_model=Envelope, responses=errors(404, 503))
async def get_history(fingerprint: str, state: Alerting = Depends(get_alerting)):
    """Every alert's story, oldest fact first: each ``received`` copy
    (``source``, ``generatorURL``), each ``outcome`` (the
    ledger's: delivered/merged into ``messageId``, deduplicated with its
    ``reason``, silenced by ``silenceId``, inhibited by ``inhibitedBy``),
    each ``message`` that listed it (receiver, split ``part`` of
    ``parts``, attempt) and each HTTP ``attempt`` (receiver, ``httpStatus``,
    ``time``); kept ``alert_history_retention_seconds``."""
    return envelope(200, "ok", await story(fingerprint, state))


@am_router.get("/api/v2/alerts/{fingerprint}/history",
               responses={400: {"model": str}, 404: {"model": str}})
async def get_am_history(fingerprint: str, state: Alerting = Depends(get_alerting)):
    """The same story as ``GET /alerts/{fingerprint}/history``, without
    the envelope (a Plait addition to the Alertmanager API)."""
    return await story(fingerprint, state)
