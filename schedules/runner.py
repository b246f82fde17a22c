"""The scheduler: carries out what ``schedules.core`` decides.

One worker at a time holds the lease (``plait.keys.schedule_owner``), which
fences state writes; a turn renews it as it goes and stops once it is lost.
Exactly once per slot: a slot is claimed (``SET NX``,
``plait.keys.schedule_slot``) with its task id before it fires; a claimed
slot not marked ``fired`` is re-driven with the same task id and fingerprint
(admission drops the repeat), and one marked ``fired`` by a worker killed
before it saved is adopted (:func:`schedules.core.adopt`)."""
from __future__ import annotations

import time
import uuid
from collections import deque
from typing import Awaitable, Callable

import httpx
from prometheus_client import Counter
from pydantic import ValidationError

from alerting.wire import ordering_key, raw_envelope
from plait import keys as K
from plait import topics as T
from plait.audit import Audit
from plait.clock import new_task_id
from plait.events import CancelRequested, ExportRequested, Payload, encode
from plait.lifecycle import TERMINAL, created
from plait.logs import get_logger
from plait.projection import Projection
from schedules import core
from schedules.events import SlotEvent
from schedules.model import ScheduleIn, rfc3339
from schedules.probes import alerts_for_changes, run_probe
from schedules.store import Store

log = get_logger("plait.schedules")

#: Audit entries kept per caller (as ``api.services.AUDIT_KEEP``).
AUDIT_KEEP = 10_000
LEASE_MS = 15_000
#: Most recent slots a turn looks up claims of before deciding (:func:`schedules.core.adopt`).
ADOPT_SLOTS = 1000
#: ``send(records)``: records are (base topic, key, value bytes); returns once acked.
Send = Callable[[list[tuple[str, str, bytes]]], Awaitable[None]]

SLOTS = Counter("plait_schedule_slots_total", "Schedule slots decided by this worker",
                ["status"])


class LeaseLost(Exception):
    """This worker no longer holds the scheduler lease: its turn stops."""


class Scheduler:
    """One worker's scheduler; ``clock``: epoch seconds; ``lease_ms``: how
    long the lease lasts unrenewed (a killed worker blocks scheduling this
    long). A turn renews it before each schedule and checks it before each
    action; one schedule's work (a probe: <= 10 s) must fit in it."""

    def __init__(self, store: Store, projection: Projection, send: Send, owner: str,
                 http: httpx.AsyncClient, clock: Callable[[], float] = time.time,
                 lease_ms: int = LEASE_MS) -> None:
        self.store, self.projection, self._send = store, projection, send
        self.owner, self.http, self.clock, self.lease_ms = owner, http, clock, lease_ms
        #: schedule id -> ``updatedMs`` of a definition reported as breaking the rules
        self._invalid: dict[str, int | None] = {}

    async def turn(self) -> int:
        """One turn if this worker gets the lease; schedules looked at (0: none)."""
        if not await self.store.take_turn(self.owner, self.lease_ms):
            return 0
        docs: list[dict] = []
        try:
            docs = await self.store.all()
            for doc in docs:
                await self.hold()
                try:
                    await self.run_schedule(doc)
                except LeaseLost:
                    raise
                except Exception:
                    log.exception("schedule turn failed", schedule=doc.get("id"))
        except LeaseLost:
            log.warning("lost the scheduler lease; turn stopped")
        finally:
            await self.store.release(self.owner)
        return len(docs)

    async def hold(self) -> None:
        """Renew the lease; ``LeaseLost`` when another worker has it now."""
        if not await self.store.renew(self.owner, self.lease_ms):
            raise LeaseLost()

    async def run_schedule(self, doc: dict) -> None:
        """Decide and carry out one schedule's slots; save its state (fenced).
        A definition stored before a rule it breaks is not run (logged once
        per version)."""
        sid = doc["id"]
        try:
            spec = ScheduleIn.model_validate(doc["spec"])
        except ValidationError as exc:
            if self._invalid.get(sid, -1) != doc.get("updatedMs"):
                self._invalid[sid] = doc.get("updatedMs")
                log.warning("schedule definition breaks the rules; not run", schedule=sid,
                            errors=[f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                    for e in exc.errors()])
            return
        self._invalid.pop(sid, None)
        trig, pol = spec.trigger.core(doc["createdMs"]), spec.policy.core()
        state = await self.store.state(sid) or core.State(cursor=doc["createdMs"] - 1)
        if state.paused and not doc.get("paused"):
            state.failures = 0  # resumed by hand
        state.paused, state.note = bool(doc.get("paused")), doc.get("note")
        now = self._now()
        actions: list[core.Action] = []
        for run in list(state.running):  # an export run, even if the action changed since
            if run.ref:
                status = await self.projection.status(run.ref)
                if status in TERMINAL:
                    actions += core.finished(sid, trig, pol, state, run.slot, status == "SUCCESS",
                                             now, {"status": status})
        for req in await self.store.take_requests(sid):
            if req["kind"] == "trigger":
                actions += core.trigger_now(sid, trig, pol, state, req["at"])
            elif req["kind"] == "backfill":  # past slots only, whoever queued it
                end = min(req["end"], now)
                ran = await self.store.fired(sid, core.backfill_slots(trig, req["start"], end))
                core.backfill(trig, state, req["start"], end, done=ran)
        # slots a killed worker fired but could not save: decided, not missed nor run again
        recent = deque(trig.slots(max(state.cursor, now - pol.grace_ms - self.lease_ms
                                      - core.ON_TIME_MS), now), maxlen=ADOPT_SLOTS)
        core.adopt(state, await self.store.claims(sid, list(recent)), now)
        actions += core.tick(sid, trig, pol, state, now)
        await self.carry_out(sid, doc, spec, trig, pol, state, actions)
        if not await self.store.save_state(sid, state, self.owner):
            log.warning("state not saved: the scheduler lease was lost or the schedule "
                        "deleted", schedule=sid)

    async def carry_out(self, sid: str, doc: dict, spec: ScheduleIn, trig: core.Trigger,
                        pol: core.Policy, state: core.State, actions: list[core.Action]) -> None:
        queue = list(actions)
        while queue:
            a = queue.pop(0)
            await self.hold()
            SLOTS.labels(a.kind).inc()
            if a.kind == "skip":
                slots = [rfc3339(s) for s in a.slots]
                await self.event(sid, "skipped", reason=a.reason, count=a.count, slots=slots)
                if a.reason == "missed":  # paused and overlap skips are routine: topic only
                    await self.audit(doc, "schedule.skipped", reason=a.reason, count=a.count,
                                     slots=slots)
            elif a.kind == "cancel":
                if a.ref:
                    await self._send([(T.CONTROL, a.ref, encode(
                        CancelRequested(taskId=a.ref), a.ref, self.owner))])
                await self.event(sid, "cancelled", slot=a.slot, taskId=a.ref)
            elif a.kind == "pause":
                current = await self.store.get(sid)
                if current is None:
                    continue  # deleted meanwhile: it stays deleted
                doc = current | {"paused": True, "note": a.reason}
                if not await self.store.replace(doc):
                    continue
                await self.event(sid, "paused", reason=a.reason)
                await self.audit(doc, "schedule.paused", reason=a.reason)
            elif a.kind == "fire":
                queue += await self.fire(sid, spec, trig, pol, state, a)

    async def fire(self, sid: str, spec: ScheduleIn, trig: core.Trigger, pol: core.Policy,
                   state: core.State, a: core.Action) -> list[core.Action]:
        """Fire one slot exactly once: claim, send, then mark ``fired`` (a crash
        between re-drives it). Returns follow-up actions (probes end at once)."""
        slot = a.slot
        run = next(r for r in state.running if r.slot == slot)
        claim = {"state": "claimed", "ref": new_task_id(), "worker": self.owner,
                 "at": self._now()}
        existing = await self.store.claim(sid, slot, claim)
        adopted = existing is not None and existing.get("state") == "fired"
        if existing is not None:
            claim = existing | {"worker": self.owner}
            log.info("slot claimed before; " + ("adopted" if adopted else "re-driving"),
                     schedule=sid, slot=slot)
        if spec.action.export is not None:
            run.ref = claim.get("ref")
            if not adopted:
                await self.start_export(sid, spec, slot, run, a)
                await self.store.mark(sid, slot, claim | {"state": "fired", "ref": run.ref})
            return []
        if not adopted:
            await self.event(sid, "fired", slot=slot, reason=a.reason, lateMs=a.late)
            await self.store.mark(sid, slot, claim | {"state": "fired", "ref": None})
        probe = spec.action.probe
        checks = await run_probe(probe, self.http)
        await self.hold()  # the next owner re-runs an adopted probe slot
        last = await self.store.probe_states(sid)
        alerts = alerts_for_changes(sid, spec.name, probe.severity, checks, last, self.clock())
        if alerts:
            records = []
            for alert in alerts:
                _, value = raw_envelope([alert], source=f"schedules@{self.owner}")
                records.append((T.ALERTS_RAW, ordering_key(alert), value))
            await self._send(records)
        for c in checks:
            await self.store.set_probe_state(sid, c.target, "up" if c.up else "down")
        ok = all(c.up for c in checks)
        result = {c.target: ("up" if c.up else f"down: {c.detail}") for c in checks}
        now = self._now()
        follow = core.finished(sid, trig, pol, state, slot, ok, now, result)
        await self.event(sid, "succeeded" if ok else "failed", slot=slot, result=result,
                         durationMs=now - run.fired_at)
        return follow

    async def start_export(self, sid: str, spec: ScheduleIn, slot: int, run: core.Run,
                           a: core.Action) -> None:
        """Create and send the slot's export (task id from the claim; the
        fingerprint holds the slot key) with its ``fired`` event."""
        export = spec.action.export
        fp = export.fingerprint(slot=f"{sid}:{slot}")
        existing, _ = await self.projection.claim_fingerprint(fp, run.ref, 0)
        if existing is not None and existing.get("taskId") not in (None, run.ref):
            run.ref = existing["taskId"]
        task_id, now = run.ref, rfc3339(self._now())
        if await self.projection.get(task_id) is None:
            await self.projection.apply(created(export, task_id, fp, now))
        await self._send([(T.REQUESTS, task_id, encode(ExportRequested(
            taskId=task_id, spec=export, fingerprint=fp, requestedAt=now), task_id, self.owner)),
            self._event_record(sid, "fired", slot, reason=a.reason, taskId=task_id,
                               lateMs=a.late)])

    async def audit(self, doc: dict, action: str, **details) -> None:
        """An audit entry for the schedule's owner (as ``Services.audit``); never raises."""
        try:
            sys_code = doc.get("sysCode")
            entry = Audit(action=action, sysCode=sys_code,
                          details={"scheduleId": doc["id"], **details})
            key = K.audit(self.store.prefix, sys_code)
            await self.store.redis.lpush(key, entry.model_dump_json(exclude_none=True))
            await self.store.redis.ltrim(key, 0, AUDIT_KEEP - 1)
            await self._send([(T.AUDIT, sys_code or "-", encode(entry, sys_code or "-",
                                                                self.owner))])
        except Exception:
            log.exception("audit entry not recorded", action=action)

    async def event(self, sid: str, status: str, slot: int | None = None, **fields) -> None:
        await self._send([self._event_record(sid, status, slot, **fields)])

    def _event_record(self, sid: str, status: str, slot: int | None = None,
                      **fields) -> tuple[str, str, bytes]:
        ev: Payload = SlotEvent(scheduleId=sid, status=status, slot=rfc3339(slot), slotMs=slot,
                                workerId=self.owner, at=rfc3339(self._now()), **fields)
        return (T.SCHEDULE_SLOTS, sid, encode(ev, sid, self.owner))

    def _now(self) -> int:
        return int(self.clock() * 1000)


def new_schedule_id() -> str:
    return f"sch_{uuid.uuid4().hex[:16]}"
