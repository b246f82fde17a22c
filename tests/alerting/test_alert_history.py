"""Every alert's story (alerting.history): the entries one batch's effects give,
and their Redis list bounded by a cap and a TTL (real Redis)."""
from __future__ import annotations

import asyncio
import uuid

import redis.asyncio as aioredis

from alerting import history
from alerting.model import LedgerEntry
from plait import keys as K
from tests.alerting.alert_harness import case_config, ev, run

REDIS_URL = "redis://127.0.0.1:6379/0"


def test_a_funnel_run_tells_each_alert_its_outcome_message_and_repeat():
    r = run(case_config(), [(0, ev("disk", "a")), (1, ev("disk", "b")), (2, ev("disk", "a"))],
            until=40)
    (t, msg), = r.messages()
    entries = history.batch_entries([e.to_dict() for e in r.ledger], [msg])
    by_fp: dict[str, list[dict]] = {}
    for fp, e in entries:
        by_fp.setdefault(fp, []).append(e)
    assert len(by_fp) == 2
    fp_a = next(a["fingerprint"] for a in msg.alerts() if a["asset"] == "a")
    story = by_fp[fp_a]
    outcomes = sorted((e["outcome"], e.get("reason", "")) for e in story if e["kind"] == "outcome")
    assert outcomes == [("deduplicated", "repeat"), ("delivered", "")]
    delivered = next(e for e in story if e.get("outcome") == "delivered")
    assert delivered["messageId"] == msg.id and delivered["time"].endswith("Z")
    sent = next(e for e in story if e["kind"] == "message")
    assert sent == {"kind": "message", "time": sent["time"], "messageId": msg.id,
                    "receiver": "oncall", "attempt": 1, "part": 1, "parts": 1, "status": "firing"}


def test_silenced_inhibited_and_rejected_entries():
    entries = history.batch_entries([
        LedgerEntry("r1", "silenced", 1700000000.0, "00000000000000aa", silence_id="s-1").to_dict(),
        LedgerEntry("r2", "inhibited", 1700000000.5, "00000000000000bb",
                    inhibited_by=["00000000000000cc"]).to_dict(),
        LedgerEntry("r3", "rejected", 1700000001.0, "", reason="labels.alertname: required").to_dict(),
    ], [])
    assert entries == [
        ("00000000000000aa", {"kind": "outcome", "time": "2023-11-14T22:13:20Z",
                              "outcome": "silenced", "rawId": "r1", "silenceId": "s-1"}),
        ("00000000000000bb", {"kind": "outcome", "time": "2023-11-14T22:13:20.500Z",
                              "outcome": "inhibited", "rawId": "r2",
                              "inhibitedBy": ["00000000000000cc"]}),
    ]


def test_an_attempt_names_receiver_status_and_each_alert_once():
    r = run(case_config(), [(0, ev("disk", "a")), (0, ev("disk", "b"))], until=31)
    (_t, msg), = r.messages()
    got = history.attempt_entries(msg, False, 503, "Service Unavailable", 0.25, 1700000000.0)
    assert len(got) == 2 and {fp for fp, _ in got} == {a["fingerprint"] for a in msg.alerts()}
    assert got[0][1] == {"kind": "attempt", "time": "2023-11-14T22:13:20Z", "messageId": msg.id,
                         "receiver": "oncall", "attempt": 1, "ok": False, "httpStatus": 503,
                         "elapsedSeconds": 0.25, "error": "Service Unavailable"}


def test_redis_list_is_capped_and_expires_with_the_retention():
    prefix = f"test-history-{uuid.uuid4().hex[:8]}"
    fp = "0123456789abcdef"

    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        try:
            for i in range(7):
                writes = history.redis_writes(prefix, [(fp, {"kind": "outcome", "n": i})])
                await history.write(r, writes, retention=120, cap=5)
            key = K.alert_history(prefix, fp)
            ttl = await r.ttl(key)
            return await history.read(r, prefix, fp), ttl
        finally:
            await r.delete(K.alert_history(prefix, fp))
            await r.aclose()

    story, ttl = asyncio.run(go())
    assert [e["n"] for e in story] == [2, 3, 4, 5, 6]
    assert 100 < ttl <= 120


def test_one_write_spanning_several_script_calls_keeps_every_list_in_order_and_capped():
    """More lists than one script call takes, and one list with more values than one RPUSH of
    the script pushes: every list gets its values in order, capped, with the retention."""
    prefix = f"test-history-{uuid.uuid4().hex[:8]}"
    n = history.KEYS_PER_CALL + 7
    entries = [(f"{i:016x}", {"kind": "outcome", "n": i}) for i in range(n)]
    entries += [(f"{0:016x}", {"kind": "outcome", "n": -k}) for k in range(1, 1501)]
    writes = history.redis_writes(prefix, entries)

    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        try:
            await history.write(r, writes, retention=120, cap=1200)
            first = await history.read(r, prefix, f"{0:016x}")
            last = await history.read(r, prefix, f"{n - 1:016x}")
            return first, last, await r.ttl(K.alert_history(prefix, f"{n - 1:016x}"))
        finally:
            await r.delete(*writes)
            await r.aclose()

    first, last, ttl = asyncio.run(go())
    assert [e["n"] for e in first] == [-k for k in range(301, 1501)]  # the last 1,200 of 1,501
    assert [e["n"] for e in last] == [n - 1]
    assert 100 < ttl <= 120


def test_received_entries_name_the_sender_and_join_continue_copies():
    from alerting.wire import parse_raw, raw_envelope, route_alerts

    config = case_config()
    _eid, value = raw_envelope([ev("disk", "a", generatorURL="http://prom/graph"), "junk"],
                               source="plait-api-v2", received_at=1700000000.0)
    raws = parse_raw(value, 0, 7, 1700000001.0)
    entries = [e for raw in raws for _r, cmd in route_alerts(config, raw)
               for e in history.received_entries(cmd, raw.source)]
    (fp, entry), = entries  # the unreadable "junk" has no fingerprint: no story
    assert entry == {"kind": "received", "time": "2023-11-14T22:13:20Z", "rawId": raws[0].raw_id,
                     "source": "plait-api-v2", "receiver": "oncall", "status": "firing",
                     "generatorURL": "http://prom/graph"}
    writes = history.redis_writes("P", [(f"{fp}~1", {"kind": "outcome"}), (fp, entry)])
    assert list(writes) == [K.alert_history("P", fp)] and len(writes[K.alert_history("P", fp)]) == 2


def test_the_worker_writes_stories_in_order_in_the_background_and_drops_past_the_backlog():
    from types import SimpleNamespace

    from alerting import agents
    from alerting.agents import AlertingService

    prefix = f"test-history-{uuid.uuid4().hex[:8]}"
    fp = "00000000000000ab"

    async def go():
        svc = object.__new__(AlertingService)
        svc.settings = SimpleNamespace(redis_prefix=prefix, alert_history_retention_seconds=60,
                                       alert_history_max_entries=1000)
        svc.redis, svc._tasks, svc._story_last, svc._story_pending = (
            aioredis.Redis.from_url(REDIS_URL), set(), None, 0)
        try:
            for i in range(5):  # returns at once; the writes keep their order
                svc._story([(fp, {"n": i})])
            assert svc._story_pending == 5
            svc._story([(fp, {"n": -1})] * (agents.STORY_BACKLOG - 4))  # past the bound: dropped
            assert svc._story_pending == 5
            await asyncio.gather(*svc._tasks)
            assert svc._story_pending == 0
            return [e["n"] for e in await history.read(svc.redis, prefix, fp)]
        finally:
            await svc.redis.delete(K.alert_history(prefix, fp))
            await svc.redis.aclose()

    assert asyncio.run(go()) == [0, 1, 2, 3, 4]


def test_the_funnel_tells_received_for_the_apis_commands_whose_decision_stands():
    from types import SimpleNamespace

    from alerting.agents import AlertingService
    from alerting.intake import normalize
    from alerting.routing import routing_version
    from alerting.wire import decided_commands

    config = case_config()
    svc = object.__new__(AlertingService)
    svc.config = config
    alert = normalize(ev("disk", "a"), 1700000000.0)
    base = {"v": 1, "kind": "alert", "received_at": 1700000000.0, "source": "plait-api"}
    ours = [c for _r, c in decided_commands(config, alert, dict(
        base, id="q:0", cfg=routing_version(config)))]
    stale = [c for _r, c in decided_commands(config, alert, dict(base, id="q:1", cfg="0" * 16))]
    router = [{k: v for k, v in c.items() if k != "source"} for c in ours]  # its own story
    event = SimpleNamespace(message=SimpleNamespace(partition=0, offset=0))
    items = [(event, {}, {"v": 1, "kind": "alerts", "items": ours + stale + router}),
             (event, {}, {"v": 1, "kind": "tick"})]
    entries = svc._received_from_api(items)
    assert [(e["rawId"], e["source"]) for _fp, e in entries] == [
        (c["id"], "plait-api") for c in ours]
