"""Schedule routes (camelCase JSON, RFC 3339 times), with the signing and
tenancy of ``api.tasks``; the API writes definitions and queues manual
requests, the workers' ``schedules.runner`` runs them."""
from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from prometheus_client import Gauge
from pydantic import ValidationError

from api.envelope import envelope, validation_errors
from api.openapi import Envelope, errors, link
from api.services import Services, get_services
from api.tasks import check_request
from plait.callers import Caller, NotAllowed
from plait.errors import FieldError, Forbidden, NotFound, RequestInvalid
from schedules import core
from schedules.model import BackfillIn, ScheduleIn, SchedulePatch, rfc3339
from schedules.runner import new_schedule_id
from schedules.store import Store

LAG = Gauge("plait_schedule_lag_seconds",
            "Now minus the fire time of the oldest due slot not yet decided", ["schedule"])

_COUNTERS = {"fired": "fired", "skipped_missed": "skippedMissed",
             "skipped_overlap": "skippedOverlap", "skipped_paused": "skippedPaused",
             "succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled"}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _history(entry: dict) -> dict:
    out = {k: v for k, v in entry.items() if k not in ("slot", "slots", "at", "firedAt", "ref")}
    if "slot" in entry:
        out["slot"] = rfc3339(entry["slot"])
    if "slots" in entry:
        out["slots"] = [rfc3339(s) for s in entry["slots"]]
    if entry.get("firedAt") is not None:
        out["firedAt"] = rfc3339(entry["firedAt"])
    if entry.get("ref"):
        out["taskId"] = entry["ref"]
    out["at"] = rfc3339(entry.get("at"))
    return out


def spec_of(data: dict[str, Any]) -> ScheduleIn:
    """``data`` (a stored definition, or one merged from a patch) as a
    :class:`ScheduleIn`; ``RequestInvalid`` naming each field that breaks a rule."""
    try:
        return ScheduleIn.model_validate(data)
    except ValidationError as exc:
        raise validation_errors([e | {"loc": ("body", *e["loc"])} for e in exc.errors()],
                                ScheduleIn) from None


async def view(store: Store, doc: dict[str, Any], now_ms: int | None = None) -> dict[str, Any]:
    """The public JSON of a schedule: definition, next 5 fire times, last
    runs (newest first), counters, running slots, lag in seconds. A stored
    definition that breaks a rule added since is shown as stored, with no
    fire times and ``definitionErrors`` (``[{"field", "rule", "code"}]``)."""
    now_ms = now_ms or _now_ms()
    state = await store.state(doc["id"]) or core.State(cursor=doc["createdMs"] - 1)
    try:
        spec = spec_of(doc["spec"])
    except RequestInvalid as exc:
        spec, problems = None, [e.entry() for e in exc.errors]
    if spec is not None:
        trig = spec.trigger.core(doc["createdMs"])
        after = max(state.cursor, now_ms - 1)
        nxt = [rfc3339(trig.fire_at(doc["id"], s)) for s in trig.next_slots(after, 5)]
        lag = core.lag(doc["id"], trig, state, now_ms)
        definition = spec.model_dump(mode="json", exclude_none=True)
    else:
        nxt, lag, definition = [], 0.0, doc["spec"]
    LAG.labels(doc["id"]).set(lag)
    out = {"id": doc["id"], "sysCode": doc["sysCode"], **definition,
           "paused": bool(doc.get("paused")), "note": doc.get("note"),
           "createdAt": rfc3339(doc["createdMs"]), "updatedAt": rfc3339(doc.get("updatedMs")),
           "nextFireTimes": [] if doc.get("paused") else nxt,
           "lastRuns": [_history(h) for h in reversed(state.history)][:20],
           "running": [{"slot": rfc3339(r.slot), "kind": r.kind, "taskId": r.ref,
                        "firedAt": rfc3339(r.fired_at)} for r in state.running],
           "counters": {v: state.counters.get(k, 0) for k, v in _COUNTERS.items()},
           "lagSeconds": lag}
    if spec is None:
        out["definitionErrors"] = problems
    return out


SV = Annotated[Services, Depends(get_services)]


def schedule_store(sv: SV) -> Store:
    """The schedules' Redis store over the app's services (a dependency)."""
    return Store(sv.projection.redis, sv.settings.redis_prefix)


Schedules = Annotated[Store, Depends(schedule_store)]
LINKS = {"links": {
    "GetSchedule": link("getSchedule", "/data/id", "scheduleId", "the schedule"),
    "TriggerSchedule": link("triggerSchedule", "/data/id", "scheduleId", "run it now"),
    "DeleteSchedule": link("deleteSchedule", "/data/id", "scheduleId", "delete it")}}
ONE = errors(401, 404, 503)


def owner_of(spec: ScheduleIn, caller: Caller | None) -> str:
    """The sysCode a new schedule belongs to; FieldError ``sysCode`` when
    it is not the signed caller's, or none can be told."""
    if caller is not None:
        if spec.sysCode and spec.sysCode != caller.sysCode:
            raise FieldError("sysCode", "is not the sysCode of the authenticated caller",
                             caller.sysCode, "owner")
        return caller.sysCode
    if spec.sysCode:
        return spec.sysCode
    if spec.action.export is not None:
        return spec.action.export.sysCode
    raise FieldError("sysCode", "is required for a probe schedule without a caller registry",
                     "your sysCode", "required")


def may_probe(probe: Any, caller: Caller | None) -> None:
    """A probe's failing targets become alerts, so defining or running a schedule whose
    ``action.probe`` is set takes what sending alerts takes: a signed caller with
    ``alertIngest``. Raises Forbidden (403)."""
    if probe is not None and caller is not None and not caller.alertIngest:
        raise Forbidden(f"caller {caller.sysCode} may not raise alerts, which a probe schedule "
                        "does when a target fails: its registry entry needs 'alertIngest: true'")


def check(sv: Services, spec: ScheduleIn, caller: Caller | None) -> None:
    """The shortest interval allowed, :func:`may_probe` and the export's allowances; FieldError
    naming the field (``action.export.<field>``)."""
    may_probe(spec.action.probe, caller)
    floor = sv.settings.schedule_min_interval_seconds
    if spec.trigger.interval is not None and spec.trigger.interval < floor:
        raise FieldError("trigger.interval", f"is {spec.trigger.interval:g} s, shorter than "
                         f"the shortest interval allowed ({floor:g} s, "
                         "PLAIT_SCHEDULE_MIN_INTERVAL_SECONDS)",
                         f"at least {floor:g}", "minimum")
    if spec.action.export is None:
        return
    try:
        check_request(sv, caller, spec.action.export)
    except NotAllowed as exc:
        raise FieldError(f"action.export.{exc.field}", exc.rule, exc.accepted,
                         exc.code) from None


async def visible(store: Store, scheduleId: str, caller: Caller | None,
                  sys_code: str | None) -> dict:
    """The schedule's document; NotFound when unknown or another tenant's."""
    doc = await store.get(scheduleId)
    want = caller.sysCode if caller is not None else sys_code
    if doc is None or (want is not None and doc["sysCode"] != want) or (
            caller is not None and want is None):
        raise NotFound(f"schedule {scheduleId} not found")
    return doc


router = APIRouter()


@router.post("/schedules", status_code=201, operation_id="createSchedule",
             response_model=Envelope, responses={201: LINKS, **errors(401, 503)})
async def create_schedule(spec: ScheduleIn, request: Request, sv: SV, store: Schedules):
    """Create a schedule; 201 with its view. 422 names the field."""
    caller = await sv.authenticate(request, changes=True)
    owner = owner_of(spec, caller)
    check(sv, spec, caller)
    now = _now_ms()
    doc = {"id": new_schedule_id(), "sysCode": owner, "createdMs": now, "updatedMs": now,
           "paused": spec.paused, "note": spec.note,
           "spec": spec.model_dump(mode="json", exclude_none=True)}
    shown = await view(store, doc, now)
    await store.put(doc)
    await sv.audit(request, "schedule.created", caller, sysCode=owner,
                   details={"scheduleId": doc["id"], "name": spec.name})
    return envelope(201, "created", shown)


@router.get("/schedules", operation_id="listSchedules", response_model=Envelope,
            responses=errors(401, 503))
async def list_schedules(request: Request, sv: SV, store: Schedules,
                         sysCode: str | None = None):
    """Schedules of the caller (open mode: of ``sysCode``, or all)."""
    caller = await sv.authenticate(request)
    want = caller.sysCode if caller is not None else sysCode
    docs = [d for d in await store.all() if want is None or d["sysCode"] == want]
    return envelope(200, "ok", {"schedules": [await view(store, d) for d in docs]})


@router.get("/schedules/{scheduleId}", operation_id="getSchedule",
            response_model=Envelope, responses=ONE)
async def get_schedule(scheduleId: str, request: Request, sv: SV, store: Schedules,
                       sysCode: str | None = None):
    """One schedule: definition, next 5 fire times, last runs, counters."""
    caller = await sv.authenticate(request)
    return envelope(200, "ok", await view(store, await visible(store, scheduleId, caller,
                                                               sysCode)))


@router.patch("/schedules/{scheduleId}", operation_id="updateSchedule",
              response_model=Envelope, responses=ONE)
async def patch_schedule(scheduleId: str, patch: SchedulePatch, request: Request, sv: SV,
                         store: Schedules, sysCode: str | None = None):
    """Replace the given fields (``paused`` and ``note`` pause/resume)."""
    caller = await sv.authenticate(request, changes=True)
    doc = await visible(store, scheduleId, caller, sysCode)
    given = patch.model_dump(mode="json", exclude_unset=True)
    merged = doc["spec"] | {k: v for k, v in given.items() if k not in ("paused", "note")}
    spec = spec_of(merged)
    if set(given) - {"paused", "note"}:  # pausing, resuming, noting: whatever rules changed since
        check(sv, spec, caller)
    if "paused" in given:
        doc["paused"] = given["paused"]
        doc["note"] = given.get("note")
    elif "note" in given:
        doc["note"] = given["note"]
    doc.update(spec=spec.model_dump(mode="json", exclude_none=True), updatedMs=_now_ms())
    shown = await view(store, doc)
    if not await store.replace(doc):
        raise NotFound(f"schedule {scheduleId} not found")
    await sv.audit(request, "schedule.updated", caller, sysCode=doc["sysCode"],
                   details={"scheduleId": scheduleId, "fields": sorted(given)})
    return envelope(200, "ok", shown)


@router.delete("/schedules/{scheduleId}", operation_id="deleteSchedule",
               response_model=Envelope, responses=ONE)
async def delete_schedule(scheduleId: str, request: Request, sv: SV, store: Schedules,
                          sysCode: str | None = None):
    """Delete a schedule (running exports go on)."""
    caller = await sv.authenticate(request, changes=True)
    doc = await visible(store, scheduleId, caller, sysCode)
    await store.delete(scheduleId)
    await sv.audit(request, "schedule.deleted", caller, sysCode=doc["sysCode"],
                   details={"scheduleId": scheduleId})
    return envelope(200, "deleted", {"id": scheduleId})


@router.post("/schedules/{scheduleId}/trigger", status_code=202,
             operation_id="triggerSchedule", response_model=Envelope, responses=ONE)
async def trigger_schedule(scheduleId: str, request: Request, sv: SV, store: Schedules,
                           sysCode: str | None = None):
    """Run now (slot = now; obeys overlap; works while paused)."""
    caller = await sv.authenticate(request, changes=True)
    doc = await visible(store, scheduleId, caller, sysCode)
    may_probe(doc["spec"].get("action", {}).get("probe"), caller)
    at = _now_ms()
    if not await store.request(scheduleId, {"kind": "trigger", "at": at}):
        raise NotFound(f"schedule {scheduleId} not found")
    await sv.audit(request, "schedule.triggered", caller, sysCode=doc["sysCode"],
                   details={"scheduleId": scheduleId, "slot": rfc3339(at)})
    return envelope(202, "trigger requested", {"id": scheduleId, "slot": rfc3339(at)})


@router.post("/schedules/{scheduleId}/backfill", status_code=202,
             operation_id="backfillSchedule", response_model=Envelope, responses=ONE)
async def backfill_schedule(scheduleId: str, body: BackfillIn, request: Request, sv: SV,
                            store: Schedules, sysCode: str | None = None):
    """Run the past slots in ``[start, end]`` (obeying overlap); 422 naming
    ``end`` when it is in the future or the range holds over 1000 slots."""
    caller = await sv.authenticate(request, changes=True)
    doc = await visible(store, scheduleId, caller, sysCode)
    may_probe(doc["spec"].get("action", {}).get("probe"), caller)
    trig = spec_of(doc["spec"]).trigger.core(doc["createdMs"])
    start, end = int(body.start.timestamp() * 1000), int(body.end.timestamp() * 1000)
    now = _now_ms()
    if end > now:
        raise FieldError("end", "is in the future; a backfill runs past slots only (the "
                         "schedule runs the later ones itself)", f"at most now ({rfc3339(now)})",
                         "range")
    try:
        slots = core.backfill_slots(trig, start, end)
    except (ValueError, OverflowError) as exc:
        if str(exc).startswith("end: "):  # too many slots
            raise FieldError("end", str(exc).removeprefix("end: "),
                             "a range of at most 1000 slots", "range") from None
        # the slots cannot be counted from so early a start (a date before year 1 in the zone)
        raise FieldError("start", f"cannot be counted from ({exc})",
                         "a start the schedule's zone can count slots from", "range") from None
    if not await store.request(scheduleId, {"kind": "backfill", "start": start, "end": end}):
        raise NotFound(f"schedule {scheduleId} not found")
    await sv.audit(request, "schedule.backfilled", caller, sysCode=doc["sysCode"],
                   details={"scheduleId": scheduleId, "slots": len(slots)})
    return envelope(202, "backfill requested", {"id": scheduleId, "slots": len(slots),
                                                "first": rfc3339(slots[0]) if slots else None,
                                                "last": rfc3339(slots[-1]) if slots else None})


def create_schedules_router(services: Services) -> APIRouter:
    """The ``/schedules`` routes (services from ``app.state.services``, the
    same for every app: ``services`` is not needed to build them)."""
    return router


async def refresh_lag(services: Services) -> None:
    """Set ``plait_schedule_lag_seconds`` for every schedule (``/metrics``)."""
    store = Store(services.projection.redis, services.settings.redis_prefix)
    docs = await store.all()
    LAG.clear()  # deleted schedules drop out
    for doc in docs:
        try:
            await view(store, doc)
        except Exception:  # a broken definition must not break /metrics
            continue
