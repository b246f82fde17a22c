"""The scheduler on a real Redis with Kafka replaced by a recorder and an
injected clock: slot claims (exactly once, re-drive of a lost slot), probes
(one firing and one resolved alert for a target that goes down and up)."""
from __future__ import annotations

import asyncio
import json
import socket
import uuid

import httpx
import pytest
import redis.asyncio as aioredis

from plait import keys as K
from plait import topics as T
from plait.events import Lifecycle
from plait.projection import Projection
from schedules.runner import Scheduler
from schedules.store import Store

REDIS_URL = "redis://127.0.0.1:6379/0"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def env():
    r = aioredis.Redis.from_url(REDIS_URL, socket_timeout=5)
    prefix = f"plait-schedtest-{uuid.uuid4().hex[:10]}"
    sent: list[tuple[str, str, bytes]] = []
    http = httpx.AsyncClient()
    yield r, prefix, sent, http
    await http.aclose()
    async for key in r.scan_iter(match=K.everything(prefix), count=1000):
        await r.delete(key)
    await r.aclose()


def scheduler(r, prefix, sent, http, clock, owner="w1", fail_on=None) -> Scheduler:
    async def send(records):
        for rec in records:
            if fail_on and rec[0] == fail_on:
                raise RuntimeError("broker gone (simulated crash)")
            sent.append(rec)
    return Scheduler(Store(r, prefix), Projection(r, prefix), send, owner, http, clock)


def export_schedule(sid: str, interval: float = 1.0) -> dict:
    return {"id": sid, "sysCode": "crm", "createdMs": int(T0 * 1000) - 1, "spec": {
        "name": "every-second", "trigger": {"interval": interval, "anchor": "2026-01-01T00:00:00Z"},
        "action": {"export": {"sysCode": "crm", "bizType": "orders", "userId": "u1",
                              "dataConfig": {"dataApiUrl": "http://data.example/rows"}}},
        "policy": {"overlap": "allow"}}}


def of(sent, topic):
    return [(k, json.loads(v)) for t, k, v in sent if t == topic]


async def test_two_schedulers_racing_fire_every_slot_exactly_once(env):
    r, prefix, sent, http = env
    clock = Clock(T0)
    await Store(r, prefix).put(export_schedule("s1"))
    a = scheduler(r, prefix, sent, http, clock, "w1")
    b = scheduler(r, prefix, sent, http, clock, "w2")
    for i in range(20):
        clock.t = T0 + i * 0.5
        await asyncio.gather(a.turn(), b.turn())
    reqs = of(sent, T.REQUESTS)
    fired = [e["data"] for _, e in of(sent, T.SCHEDULE_SLOTS) if e["data"]["status"] == "fired"]
    slots = [f["slotMs"] for f in fired]
    assert slots == [int(T0 * 1000) + i * 1000 for i in range(10)]  # 0..9.5 s: 10 slots
    assert len({e["data"]["taskId"] for _, e in reqs}) == len(reqs) == 10


async def test_a_slot_lost_after_its_claim_is_re_driven_with_the_same_task(env):
    r, prefix, sent, http = env
    clock = Clock(T0 + 0.2)
    store = Store(r, prefix)
    await store.put(export_schedule("s1", interval=60))
    # given worker 1 claimed slot 0 and died before the ExportRequested was acked
    dying = scheduler(r, prefix, sent, http, clock, "w1", fail_on=T.REQUESTS)
    await dying.turn()
    claim = json.loads(await r.get(K.schedule_slot(prefix, "s1", int(T0 * 1000))))
    assert claim["state"] == "claimed" and of(sent, T.REQUESTS) == []
    # when worker 2 takes the next turn
    clock.t += 1
    await scheduler(r, prefix, sent, http, clock, "w2").turn()
    # then the slot fires once, with the task id chosen in the claim
    (req,) = of(sent, T.REQUESTS)
    assert req[1]["data"]["taskId"] == claim["ref"]
    again = json.loads(await r.get(K.schedule_slot(prefix, "s1", int(T0 * 1000))))
    assert again["state"] == "fired" and again["ref"] == claim["ref"]
    # and a further turn neither fires it again nor creates another task
    clock.t += 1
    await scheduler(r, prefix, sent, http, clock, "w1").turn()
    assert len(of(sent, T.REQUESTS)) == 1
    state = await store.state("s1")
    assert state.counters["fired"] == 1 and state.running[0].ref == claim["ref"]


async def test_a_slot_fired_by_an_owner_that_died_before_saving_is_adopted(env):
    r, prefix, sent, http = env
    clock = Clock(T0 + 0.2)
    store = Store(r, prefix)
    await store.put(export_schedule("s1", interval=60))
    await scheduler(r, prefix, sent, http, clock, "w1").turn()
    await r.delete(K.schedule_state(prefix, "s1"))  # the state save was lost
    await scheduler(r, prefix, sent, http, clock, "w2").turn()
    assert len(of(sent, T.REQUESTS)) == 1
    assert (await store.state("s1")).running[0].ref == of(sent, T.REQUESTS)[0][0]


async def test_a_slot_fired_by_a_worker_killed_before_saving_is_not_missed_later(env):
    # given an export every 10 s (overlap skip), slot 0 fired by a worker killed before it
    # saved the state, and the next worker taking over when the lease ran out (15 s)
    r, prefix, sent, http = env
    clock = Clock(T0 + 0.1)
    store = Store(r, prefix)
    doc = export_schedule("s1", interval=10)
    doc["spec"]["policy"] = {"overlap": "skip"}
    await store.put(doc)
    await scheduler(r, prefix, sent, http, clock, "w1").turn()
    await r.delete(K.schedule_state(prefix, "s1"))  # killed: the state save never happened
    clock.t = T0 + 15.1
    await scheduler(r, prefix, sent, http, clock, "w2").turn()
    # then slot 0 counts as fired and running, not missed; slot 10 is skipped for the overlap,
    # and one export runs
    slots = [e[1]["data"] for e in of(sent, T.SCHEDULE_SLOTS)]
    assert [(d["status"], d.get("reason")) for d in slots] == [("fired", "scheduled"),
                                                                ("skipped", "overlap")]
    assert len(of(sent, T.REQUESTS)) == 1
    state = await store.state("s1")
    assert [run.slot for run in state.running] == [int(T0 * 1000)]
    assert state.counters["fired"] == 1 and state.counters["skipped_missed"] == 0


async def test_lease_fences_state_writes(env):
    r, prefix, *_ = env
    store = Store(r, prefix)
    from schedules.core import State
    await store.put(export_schedule("s"))
    assert await store.take_turn("w1", 10_000)
    assert not await store.take_turn("w2", 10_000)
    assert await store.save_state("s", State(cursor=1), "w1")
    assert not await store.save_state("s", State(cursor=2), "w2")
    assert (await store.state("s")).cursor == 1


class Target:
    """A local HTTP server that can go down (port closed) and up again."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = None

    async def _handle(self, reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def up(self):
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port,
                                                 reuse_address=True)

    async def down(self):
        self.server.close()
        await self.server.wait_closed()


async def test_probe_target_down_then_up_gives_one_firing_and_one_resolved_alert(env):
    r, prefix, sent, http = env
    target = Target()
    await target.up()
    url = f"http://127.0.0.1:{target.port}/health"
    await Store(r, prefix).put({"id": "p1", "sysCode": "ops", "createdMs": int(T0 * 1000) - 1,
                                "spec": {"name": "web", "trigger": {
                                    "interval": 1, "anchor": "2026-01-01T00:00:00Z"},
                                    "action": {"probe": {"targets": [
                                        {"http": url, "timeout": 1},
                                        {"tcp": f"127.0.0.1:{target.port}", "timeout": 1}]}}}})
    clock = Clock(T0)
    sch = scheduler(r, prefix, sent, http, clock)

    async def ticks(n):
        for _ in range(n):
            await sch.turn()
            clock.t += 1

    await ticks(3)       # up: nothing to say
    await target.down()
    await ticks(3)       # down for 3 slots: fire once
    await target.up()
    await ticks(3)       # up again: resolve once
    alerts = [a for _, e in of(sent, T.ALERTS_RAW) for a in e["data"]["alerts"]]
    http_alerts = [(a["status"], a["asset"]) for a in alerts if a["asset"] == url]
    assert http_alerts == [("firing", url), ("resolved", url)]
    tcp = f"127.0.0.1:{target.port}"
    assert [(a["status"], a["asset"]) for a in alerts if a["asset"] == tcp] == [
        ("firing", tcp), ("resolved", tcp)]
    assert all(a["rule"] == "TargetDown" for a in alerts)
    state = await Store(r, prefix).state("p1")
    assert state.counters["fired"] == 9 and state.counters["failed"] == 3
    await target.down()


async def test_missed_slots_are_skipped_in_history_on_the_topic_and_in_the_audit(env):
    r, prefix, sent, http = env
    doc = export_schedule("s1", interval=300)
    doc["spec"]["policy"] = {"grace": 600, "maxCatchup": 1}
    await Store(r, prefix).put(doc)
    # the scheduler was down 6 h (state says the last slot decided was T0)
    from schedules.core import State
    await Store(r, prefix).save_state("s1", State(cursor=int(T0 * 1000)))
    clock = Clock(T0 + 6 * 3600 + 120)
    await scheduler(r, prefix, sent, http, clock).turn()
    assert len(of(sent, T.REQUESTS)) == 1
    (skip,) = [e["data"] for _, e in of(sent, T.SCHEDULE_SLOTS) if e["data"]["status"] == "skipped"]
    assert skip["count"] == 71 and skip["reason"] == "missed" and len(skip["slots"]) == 71
    (audit,) = of(sent, T.AUDIT)
    assert audit[1]["data"]["action"] == "schedule.skipped"
    assert audit[1]["data"]["details"]["count"] == 71
    stored = json.loads(await r.lindex(K.audit(prefix, "crm"), 0))
    assert stored["details"]["scheduleId"] == "s1"


async def test_cancel_previous_cancels_the_running_export(env):
    r, prefix, sent, http = env
    doc = export_schedule("s1", interval=60)
    doc["spec"]["policy"] = {"overlap": "cancelPrevious"}
    await Store(r, prefix).put(doc)
    clock = Clock(T0 + 0.1)
    sch = scheduler(r, prefix, sent, http, clock)
    await sch.turn()
    first = of(sent, T.REQUESTS)[0][0]
    clock.t = T0 + 60.1  # the first export is still CREATED (running)
    await sch.turn()
    (cancel,) = of(sent, T.CONTROL)
    assert cancel[0] == first and cancel[1]["data"]["taskId"] == first
    assert len(of(sent, T.REQUESTS)) == 2
    state = await Store(r, prefix).state("s1")
    assert state.counters["cancelled"] == 1 and len(state.running) == 1


async def test_pause_on_failure_pauses_the_definition_and_later_slots_are_skipped(env):
    r, prefix, sent, http = env
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    store = Store(r, prefix)
    await store.put({"id": "p1", "sysCode": "ops", "createdMs": int(T0 * 1000) - 1, "spec": {
        "name": "dead", "trigger": {"interval": 1, "anchor": "2026-01-01T00:00:00Z"},
        "action": {"probe": {"targets": [{"tcp": f"127.0.0.1:{dead}", "timeout": 0.5}]}},
        "policy": {"pauseOnFailure": 2}}})
    clock = Clock(T0)
    sch = scheduler(r, prefix, sent, http, clock)
    for _ in range(4):
        await sch.turn()
        clock.t += 1
    doc = await store.get("p1")
    assert doc["paused"] and "2 consecutive failures" in doc["note"]
    state = await store.state("p1")
    assert state.counters["failed"] == 2 and state.counters["skipped_paused"] == 2
    events = [e["data"]["status"] for _, e in of(sent, T.SCHEDULE_SLOTS)]
    assert events[:5] == ["fired", "failed", "fired", "failed", "paused"]
    # and the audit log has the pause, not each slot skipped while paused (routine: topic only)
    assert [e["data"]["action"] for _, e in of(sent, T.AUDIT)] == ["schedule.paused"]
    # resumed by hand, it fires again (and counts failures afresh)
    doc.update(paused=False, note=None)
    await store.put(doc)
    await sch.turn()
    state = await store.state("p1")
    assert state.counters["fired"] == 3 and not state.paused and state.failures == 1


async def test_a_repeated_backfill_runs_and_counts_each_slot_once(env):
    r, prefix, sent, http = env
    store, projection = Store(r, prefix), Projection(r, prefix)
    hour = 3600_000
    t0 = int(T0 * 1000)
    doc = export_schedule("b1", interval=3600)
    doc["createdMs"] = t0 + 1000 * 1000  # no scheduled slot due before t0 + 1 h
    doc["spec"]["trigger"]["anchor"] = "2025-12-31T00:00:00Z"
    await store.put(doc)
    clock = Clock(T0 + 1800)
    sch = scheduler(r, prefix, sent, http, clock)
    backfill = {"kind": "backfill", "start": t0 - 3 * hour, "end": t0 - hour}

    async def run_backfill() -> None:
        await store.request("b1", backfill)
        await sch.turn()  # fires the queued slots
        for task_id, _ in of(sent, T.REQUESTS):
            await projection.apply(Lifecycle(taskId=task_id, status="SUCCESS",
                                             at="2026-01-01T00:30:00Z"))
        await sch.turn()  # sees them end

    # given a backfill of three past slots that ran to success
    await run_backfill()
    # when the same range is backfilled again
    await run_backfill()
    # then each slot ran once and is counted once, in the counters and the history
    assert len(of(sent, T.REQUESTS)) == 3
    state = await store.state("b1")
    assert state.counters["fired"] == 3 and state.counters["succeeded"] == 3, state.counters
    assert sorted(h["slot"] for h in state.history) == [t0 - 3 * hour, t0 - 2 * hour, t0 - hour]


class Logged:
    """Stands in for the runner's logger: records (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def __getattr__(self, level):
        return lambda event, **kw: self.lines.append((level, event, kw))


async def test_a_stored_cron_that_never_fires_is_not_run_and_the_others_are(env, monkeypatch):
    from schedules import runner
    r, prefix, sent, http = env
    logged = Logged()
    monkeypatch.setattr(runner, "log", logged)
    store = Store(r, prefix)
    # given a definition stored by an older version that let a never-firing cron in
    bad = export_schedule("a-bad", interval=60)
    bad["spec"]["trigger"] = {"cron": "0 0 30 2 *"}
    await store.put(bad)
    await store.put(export_schedule("b-good", interval=60))
    clock = Clock(T0 + 0.1)
    sch = scheduler(r, prefix, sent, http, clock)
    for _ in range(3):
        await sch.turn()
        clock.t += 60
    # then the good schedule fires every slot, and the bad one is reported once, not run
    fired = [e["data"]["scheduleId"] for _, e in of(sent, T.SCHEDULE_SLOTS)
             if e["data"]["status"] == "fired"]
    assert fired == ["b-good"] * 3
    assert [level for level, *_ in logged.lines if level in ("warning", "error", "exception")] \
        == ["warning"], logged.lines
    assert await store.state("a-bad") is None


async def test_an_export_run_ends_after_the_action_is_switched_to_a_probe(env):
    r, prefix, sent, http = env
    store = Store(r, prefix)
    doc = export_schedule("s1", interval=60)
    doc["spec"]["policy"] = {"overlap": "skip"}
    await store.put(doc)
    clock = Clock(T0 + 0.1)
    sch = scheduler(r, prefix, sent, http, clock)
    await sch.turn()
    (task, _), = of(sent, T.REQUESTS)
    # given the owner switches the schedule to a probe while its export runs
    doc["spec"]["action"] = {"probe": {"targets": [{"tcp": "127.0.0.1:1", "timeout": 0.5}]}}
    await store.put(doc)
    # when the export ends
    await Projection(r, prefix).apply(Lifecycle(taskId=task, status="SUCCESS",
                                                at="2026-01-01T00:00:30Z"))
    clock.t = T0 + 60.1
    await sch.turn()
    # then its run is recorded as ended and the next slot fires (no overlap skip)
    state = await store.state("s1")
    assert state.running == [] and state.counters["succeeded"] == 1, state
    assert state.counters["skipped_overlap"] == 0 and state.counters["fired"] == 2
    assert [h["ref"] for h in state.history if h["status"] == "succeeded"] == [task]


async def test_a_schedule_deleted_during_its_turn_stays_deleted_and_leaves_no_keys(env):
    r, prefix, sent, http = env
    store = Store(r, prefix)
    in_flight, release = asyncio.Event(), asyncio.Event()

    async def failing_slowly(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        in_flight.set()
        await release.wait()
        writer.write(b"HTTP/1.1 500 Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(failing_slowly, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    await store.put({"id": "p1", "sysCode": "ops", "createdMs": int(T0 * 1000) - 1, "spec": {
        "name": "web", "trigger": {"interval": 60, "anchor": "2026-01-01T00:00:00Z"},
        "action": {"probe": {"targets": [{"http": f"http://127.0.0.1:{port}/", "timeout": 5}]}},
        "policy": {"pauseOnFailure": 1}}})
    turn = asyncio.create_task(scheduler(r, prefix, sent, http, Clock(T0 + 0.1)).turn())
    try:
        # given the probe is in flight when the schedule is deleted
        await asyncio.wait_for(in_flight.wait(), 5)
        assert await store.delete("p1")
        # when the probe fails (which pauses the schedule) and the turn ends
        release.set()
        await asyncio.wait_for(turn, 10)
    finally:
        server.close()
    # then the schedule stays deleted, and only slot claims (with a TTL) are left
    assert await store.get("p1") is None
    left = [k.decode() async for k in r.scan_iter(match=f"{prefix}:schedule:p1:*")]
    assert all(":slot:" in k for k in left), left
    assert all(ttl > 0 for ttl in [await r.ttl(k) for k in left]), left
    assert "paused" not in [e["data"]["status"] for _, e in of(sent, T.SCHEDULE_SLOTS)]


async def test_requests_and_replacements_of_a_deleted_schedule_are_refused(env):
    r, prefix, *_ = env
    store = Store(r, prefix)
    doc = export_schedule("s1")
    await store.put(doc)
    assert await store.request("s1", {"kind": "trigger", "at": 1})
    assert await store.replace(doc | {"paused": True})
    assert (await store.get("s1"))["paused"] is True
    await store.delete("s1")
    assert not await store.request("s1", {"kind": "trigger", "at": 2})
    assert not await store.replace(doc)
    assert await store.get("s1") is None
    assert not await r.exists(K.schedule_requests(prefix, "s1"))


async def test_a_queued_backfill_fires_only_its_past_slots(env):
    r, prefix, sent, http = env
    store = Store(r, prefix)
    hour, t0 = 3600_000, int(T0 * 1000)
    doc = export_schedule("b1", interval=3600)
    doc["spec"]["policy"] = {"overlap": "allow"}
    await store.put(doc)
    clock = Clock(T0 + 1800)  # 00:30
    sch = scheduler(r, prefix, sent, http, clock)
    await sch.turn()  # the 00:00 slot
    # given a backfill request reaching into the future (queued by an older API)
    await store.request("b1", {"kind": "backfill", "start": t0, "end": t0 + 3 * hour})
    await sch.turn()
    # then nothing beyond now fires early
    fired = [e["data"] for _, e in of(sent, T.SCHEDULE_SLOTS) if e["data"]["status"] == "fired"]
    assert all(f["slotMs"] <= t0 + 1800_000 for f in fired), fired
    # and at 01:00 the 01:00 slot fires once, on time, and is counted once
    clock.t = T0 + 3600.1
    await sch.turn()
    fired = [e["data"] for _, e in of(sent, T.SCHEDULE_SLOTS) if e["data"]["status"] == "fired"]
    assert [(f["slotMs"] - t0, f["reason"]) for f in fired][-1] == (hour, "scheduled")
    assert len(of(sent, T.REQUESTS)) == (await store.state("b1")).counters["fired"]


class Gate:
    """A local HTTP target that answers 500 only once the test opens it."""

    def __init__(self) -> None:
        self.arrived, self.open = asyncio.Event(), asyncio.Event()

    async def _handle(self, reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        self.arrived.set()
        await self.open.wait()
        writer.write(b"HTTP/1.1 500 Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> "Gate":
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"
        return self

    async def __aexit__(self, *exc) -> None:
        self.open.set()
        self.server.close()


def probe_schedule(sid: str, url: str) -> dict:
    return {"id": sid, "sysCode": "ops", "createdMs": int(T0 * 1000) - 1, "spec": {
        "name": sid, "trigger": {"interval": 60, "anchor": "2026-01-01T00:00:00Z"},
        "action": {"probe": {"targets": [{"http": url, "timeout": 10}]}}}}


async def test_a_worker_that_lost_the_lease_mid_turn_fires_nothing_more(env):
    r, prefix, sent, http = env
    store = Store(r, prefix)
    async with Gate() as gate:
        await store.put(probe_schedule("a-probe", gate.url))
        await store.put(export_schedule("b-export", interval=60))
        turn = asyncio.create_task(scheduler(r, prefix, sent, http, Clock(T0 + 0.1)).turn())
        # given another worker holds the lease while w1's probe is in flight
        await asyncio.wait_for(gate.arrived.wait(), 5)
        await r.set(K.schedule_owner(prefix), "w2", px=15_000)
        gate.open.set()
        await asyncio.wait_for(turn, 10)
    # then w1 sent no alert for the probe, fired no later schedule and saved nothing
    assert of(sent, T.ALERTS_RAW) == [] and of(sent, T.REQUESTS) == []
    assert [e["data"]["scheduleId"] for _, e in of(sent, T.SCHEDULE_SLOTS)] == ["a-probe"]
    assert await store.state("a-probe") is None and await store.state("b-export") is None
    assert await r.get(K.schedule_owner(prefix)) == b"w2"


async def test_a_turn_renews_the_lease_before_each_schedule(env):
    r, prefix, sent, http = env
    store = Store(r, prefix)
    owner = K.schedule_owner(prefix)
    async with Gate() as first, Gate() as second:
        await store.put(probe_schedule("p1", first.url))
        await store.put(probe_schedule("p2", second.url))
        sch = Scheduler(Store(r, prefix), Projection(r, prefix), lambda recs: asyncio.sleep(0),
                        "w1", http, Clock(T0 + 0.1), lease_ms=2000)
        turn = asyncio.create_task(sch.turn())
        await asyncio.wait_for(first.arrived.wait(), 5)

        async def lease_below(ms):
            while await r.pttl(owner) >= ms:
                await asyncio.sleep(0.01)

        # given the first probe has used part of the lease
        await asyncio.wait_for(lease_below(1900), 5)
        first.open.set()
        # when the turn goes on to the second schedule
        await asyncio.wait_for(second.arrived.wait(), 5)
        # then the lease was renewed in full
        assert await r.pttl(owner) > 1900
        second.open.set()
        await asyncio.wait_for(turn, 10)
    assert (await store.state("p1")).counters["fired"] == 1
    assert (await store.state("p2")).counters["fired"] == 1
