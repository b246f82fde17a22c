"""``GET /alerts/{fingerprint}/history`` and ``GET
/api/v2/alerts/{fingerprint}/history``: every alert's story as
:mod:`alerting.history` keeps it in Redis (docs/alerting.md, "History").

A story is kept under the alert's identity (:func:`alerting.dedupe.fingerprint`), the
fingerprint its messages, ``GET /api/v2/alerts``, ``plait alerts list`` and the console show.
Alertmanager's fingerprint of a native alert's shown labels (``alertname``, ``asset``,
``severity`` added), which other tools may compute, also finds the story while the alert is
current (:func:`shown_as`)."""
from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Depends

from alerting import history as alert_history
from alerting.dedupe import labelset_fingerprint
from alerting.view import read_views
from api.alerting_deps import AM_ROUTER, Alerting, get_alerting, get_ingest
from api.envelope import envelope
from api.ingest import AlertIngest
from api.openapi import Envelope, errors
from plait.errors import FieldError, NotFound

_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


router = APIRouter(tags=["alerting"])
am_router = APIRouter(**AM_ROUTER)


async def shown_as(fingerprint: str, state: Alerting, ingest: AlertIngest) -> str | None:
    """The identity of a current alert (``GET /api/v2/alerts``) whose labels, as shown, hash to
    ``fingerprint`` (:func:`alerting.dedupe.labelset_fingerprint`) when it is not that identity,
    else None: a native alert named by the Alertmanager fingerprint of its shown labels."""
    views = await read_views(state.redis(), state.settings.redis_prefix,
                             range(await ingest.funnel_partitions()))
    for v in views:
        shown = v.get("fingerprint")
        if shown and shown != fingerprint and isinstance(v.get("labels"), dict) \
                and labelset_fingerprint(v["labels"]) == fingerprint:
            return shown
    return None


async def story(fingerprint: str, state: Alerting, ingest: AlertIngest) -> dict[str, Any]:
    """``{"fingerprint", "retentionSeconds", "entries"}`` (``fingerprint``: the identity the
    story is kept under, see the module doc); raises ``FieldError`` (not 16 lower-case hex) or
    ``NotFound``."""
    settings = state.settings
    if not _FINGERPRINT.fullmatch(fingerprint):
        raise FieldError("fingerprint", "must be 16 lower-case hex digits",
                         "an alert's fingerprint, e.g. 0123456789abcdef")
    redis = state.redis()
    entries = await alert_history.read(redis, settings.redis_prefix, fingerprint)
    if not entries:
        known = await shown_as(fingerprint, state, ingest)
        if known is not None:
            fingerprint = known
            entries = await alert_history.read(redis, settings.redis_prefix, known)
    if not entries:
        raise NotFound(f"no history kept for alert {fingerprint} (kept "
                       f"{settings.alert_history_retention_seconds:g} s after its last entry)")
    return {"fingerprint": fingerprint,
            "retentionSeconds": settings.alert_history_retention_seconds,
            "entries": entries}


@router.get("/alerts/{fingerprint}/history", operation_id="alertHistory",
            response_model=Envelope, responses=errors(404, 503))
async def get_history(fingerprint: str, state: Alerting = Depends(get_alerting),
                      ingest: AlertIngest = Depends(get_ingest)):
    """Every alert's story, oldest fact first: each ``received`` copy
    (``source``, ``generatorURL``), each ``outcome`` (the
    ledger's: delivered/merged into ``messageId``, deduplicated with its
    ``reason``, silenced by ``silenceId``, inhibited by ``inhibitedBy``),
    each ``message`` that listed it (receiver, split ``part`` of
    ``parts``, attempt) and each HTTP ``attempt`` (receiver, ``httpStatus``,
    ``time``); kept ``alert_history_retention_seconds``."""
    return envelope(200, "ok", await story(fingerprint, state, ingest))


@am_router.get("/api/v2/alerts/{fingerprint}/history",
               responses={400: {"model": str}, 404: {"model": str}})
async def get_am_history(fingerprint: str, state: Alerting = Depends(get_alerting),
                         ingest: AlertIngest = Depends(get_ingest)):
    """The same story as ``GET /alerts/{fingerprint}/history``, without
    the envelope (a Plait addition to the Alertmanager API)."""
    return await story(fingerprint, state, ingest)
