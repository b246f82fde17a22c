"""Native alert ingest, silences and counters over HTTP (camelCase, RFC 3339,
``api.alerting_edge``). Each alert is validated on its own: the valid ones
of a request go on, the bad ones (or too large for one ``alerts.funnel`` record, code ``size``)
are named by index and field."""
from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request

from alerting.counters import decode_hash, merge
from alerting.intake import normalize
from alerting.model import AlertRejected
from alerting.silence_store import SilenceStore
from api.alerting_deps import (REFUSED, Alerting, get_alerting, get_ingest, read_body,
                               signed, silence_store)
from api.alerting_edge import (check_native_alert, counters_view, parse_silence_request,
                               scrub_text, silence_view)
from api.envelope import envelope, parse_json_body
from api.ingest import AlertIngest
from api.openapi import Envelope, NativeAlert, SilenceBody, errors, link, request_body
from plait import keys as K
from plait.callers import Caller
from plait.errors import RequestInvalid

#: Most alerts one request may carry (``alerting.wire.MAX_ALERTS`` per raw event).
MAX_ALERTS = 10_000

router = APIRouter(tags=["alerting"])


@router.post("/alerts", status_code=202, operation_id="postAlerts",
             response_model=Envelope,
             responses=errors(401, 403, 503), openapi_extra=request_body(
                 NativeAlert, "one native alert or a non-empty list of them", either=True))
async def post_alerts(request: Request,
                      caller: Caller | None = Depends(signed("alertIngest", "send alerts")),
                      state: Alerting = Depends(get_alerting),
                      ingest: AlertIngest = Depends(get_ingest)):
    """Accept one native alert or a list (camelCase keys, RFC 3339 times).

    Each alert is checked on its own: the valid ones go on (202 with their
    raw ids, ``rejected`` listing each refused one by ``index`` and
    ``field``); when none is valid the answer is 422 naming every bad
    field (``[1].severity``)."""
    now = time.time()
    doc, replaced = await read_body(request)
    alerts = doc if isinstance(doc, list) else [doc]
    if not alerts:
        raise AlertRejected("body", "has no alerts", "an alert object or a non-empty list",
                            "required")
    if len(alerts) > MAX_ALERTS:
        raise AlertRejected("body", f"has {len(alerts)} alerts", f"at most {MAX_ALERTS}", "size")
    good, indexes, refused = [], [], []
    for i, a in enumerate(alerts):
        where = f"[{i}]." if isinstance(doc, list) else ""
        try:
            check_native_alert(a, where)
            try:
                good.append((where, normalize(a, now, **state.options)))
                indexes.append(i)
            except AlertRejected as e:
                raise AlertRejected(f"{where}{e.field}", e.problem, e.accepted, e.code) from None
        except AlertRejected as e:
            refused.append((i, e))
    ids: list[str] = []
    if good:
        ids, too_large = await ingest.publish(good, "plait-api", now, state.config)
        refused = sorted(refused + [(indexes[pos], e) for pos, e in too_large],
                         key=lambda r: r[0])
    if refused:
        REFUSED.labels("/alerts").inc(len(refused))
    if not ids:
        raise RequestInvalid([e for _i, e in refused])
    rejected = [{"index": i, **e.entry()} for i, e in refused]
    data: dict[str, Any] = {"accepted": len(ids), "ids": ids}
    if rejected:
        data["rejected"] = rejected
    if replaced:
        data["replacedCharacters"] = replaced
    message = "accepted" if not rejected else f"accepted {len(ids)}, refused {len(rejected)}"
    return envelope(202, message, data)


async def counters(state: Alerting) -> dict[str, Any]:
    """The funnel counters summed over partitions (the Redis hash they publish)."""
    raw = await state.redis().hgetall(K.alert_counters(state.settings.redis_prefix))
    return merge(decode_hash(raw))


@router.post("/silences", status_code=201, operation_id="createSilence",
             response_model=Envelope,
             responses={201: {"links": {"ExpireSilence": link(
                 "expireSilence", "/data/silenceId", "silenceId", "end the silence")}},
                 **errors(401, 403, 503)},
             openapi_extra=request_body(SilenceBody, "the silence"))
async def post_silence(request: Request, caller: Caller | None = Depends(
        signed("silenceManage", "manage silences")),
        silences: SilenceStore = Depends(silence_store)):
    """Create a silence (``matchers``, ``startsAt``, ``endsAt``, ``createdBy``,
    ``comment``, ``allowBroad``, ``timeIntervals``; times RFC 3339);
    422 names the bad key as sent and the accepted spelling."""
    now = time.time()
    spec, _replaced = scrub_text(parse_json_body(await request.body()))
    silence = parse_silence_request(spec, now, str(uuid.uuid4()))
    d = await silences.save(silence, now)
    return envelope(201, "created", {"silenceId": silence.id,
                                     "silence": silence_view(d, now, {})})


@router.get("/silences", operation_id="listSilences",
            response_model=Envelope,
            responses=errors(503, validated=False))
async def list_silences(state: Alerting = Depends(get_alerting),
                        silences: SilenceStore = Depends(silence_store)):
    """Every silence with its status and how many alerts it silenced."""
    now = time.time()
    counts = (await counters(state)).get("silenced_by", {})
    items = [silence_view(d, now, counts) for d in await silences.all()]
    items.sort(key=lambda s: s["startsAt"])
    return envelope(200, "ok", {"silences": items})


@router.delete("/silences/{silenceId}", operation_id="expireSilence",
               response_model=Envelope,
               responses=errors(401, 403, 404, 503))
async def expire_silence(silenceId: str, caller: Caller | None = Depends(  # noqa: N803
        signed("silenceManage", "manage silences")),
        silences: SilenceStore = Depends(silence_store)):
    """End a silence now (Alertmanager's expire); 404 if unknown."""
    now = time.time()
    d = await silences.expire(silenceId, now)
    return envelope(200, "expired", {"silence": silence_view(d, now, {})})


@router.get("/alerts/counters", operation_id="alertCounters",
            response_model=Envelope,
            responses=errors(503, validated=False))
async def get_counters(state: Alerting = Depends(get_alerting)):
    """Counters per outcome (``received = delivered + deduplicated + silenced
    + merged + rejected + pending``), webhook attempts, per-silence counts;
    camelCase keys (``silencedBy``, ``http5xx``)."""
    return envelope(200, "ok", counters_view(await counters(state)))
