"""No record of the alert path passes plait.records.MAX_RECORD_BYTES
(docs/kafka-rules.md #17): a message in flight of thousands of large alerts
is stored in pieces that a kill -9 at any record cannot mix up, webhook
messages go to alerts.notifications in chunks given back exactly, ledger
and command records are cut within the bound, and a record that still does
not fit goes to export.dlq, counted and alerted, while the worker goes on."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson
import pytest

from alerting import chunks, oversize
from alerting.agents import AlertingService
from alerting.changelog import BatchedTable
from alerting.config import parse_config
from alerting.runner import FunnelRunner
from alerting.store import PartitionState
from alerting.wire import (RawAlert, ledger_entries, ledger_records, pack_alerts, parse_command,
                           raw_envelope, parse_raw, route_alert)
from plait import metrics
from plait.records import MAX_RECORD_BYTES

#: the most permissive config the schema takes: every alert its own group,
#: a bucket that never runs dry, the largest batch, no max_alerts
CFG = parse_config({
    "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/r", "max_alerts": 0,
                   "bucket": {"burst": 1_000_000, "refill_interval": 1}}],
    "route": {"receiver": "oncall"},
    "grouping": {"group_by": ["alertname", "instance"], "batch_size": 10_000},
    "timing": {"group_wait": 0, "group_interval": 1, "repeat_interval": 3600},
})


class FaustTable:
    """What BatchedTable needs of a Faust table: its local store."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}


def _alerts(first: int, n: int, now: float) -> list[tuple[int, dict]]:
    out = []
    for i in range(first, first + n):
        body = {"labels": {"alertname": "DiskFull", "instance": f"host-{i:06d}"},
                "annotations": {"description": f"disk {i} almost full " + "x" * 2000}}
        out.append((i, route_alert(CFG, RawAlert(f"e{i}:0", body, now))[1]))
    return out


def _replay(store: dict, records: list) -> dict:
    """``store`` after the changelog ``records`` (as Faust recovery applies them)."""
    out = dict(store)
    for _p, key, value in records:
        if value is None:
            out.pop(orjson.loads(key), None)
        else:
            out[orjson.loads(key)] = value
    return out


def test_a_message_in_flight_of_thousands_of_large_alerts_survives_a_kill_at_any_record():
    # given the permissive config and 800 alerts of ~2 KB each in one message (~1.7 MB)
    clock = SimpleNamespace(now=1_000.0)
    table = BatchedTable(FaustTable())
    runner = FunnelRunner(CFG, table, clock=lambda: clock.now)
    fx = runner.apply_batch(0, _alerts(0, 800, clock.now))
    first = fx.messages[0]
    assert first.alert_count == 800
    records = table.drain()
    # then every changelog record is within the bound, the message stored in pieces
    assert max(len(k) + len(v or b"") for _p, k, v in records) <= MAX_RECORD_BYTES
    assert sum(chunks.is_head(v) for _p, _k, v in records if v) >= 1
    durable = dict(table.store)
    # and a worker loading the table has the message in flight exactly
    loaded = PartitionState(0, dict(durable), CFG).funnel.state["receivers"]["oncall"]["inflight"]
    assert loaded == runner.state(0).funnel.state["receivers"]["oncall"]["inflight"]

    # when the first is delivered and 800 more alerts make the next message in one save
    clock.now += 2
    cmds = [(800, {"kind": "result", "message_id": first.id, "ok": True, "status": 200})]
    cmds += [(801 + i, c) for i, (_o, c) in enumerate(_alerts(800, 800, clock.now))]
    second = runner.apply_batch(0, cmds).messages[0]
    assert second.id != first.id and second.alert_count == 800
    records = table.drain()
    assert max(len(k) + len(v or b"") for _p, k, v in records) <= MAX_RECORD_BYTES
    live = {None: None, first.id: loaded,
            second.id: runner.state(0).funnel.state["receivers"]["oncall"]["inflight"]}
    # then a kill -9 after any prefix of those records leaves a table that loads, holding
    # the old message or the new one, each exactly (never pieces of both)
    # (cut before and after each record of the message: pieces, the head, deletes, meta)
    marks = [i for i, (_p, k, _v) in enumerate(records) if b"|ck|" in k or b"|inf|" in k or b"|rcv|" in k or b"meta" in k]
    assert len(marks) >= 16
    for cut in sorted({0, len(records)} | set(marks) | {i + 1 for i in marks}):
        store = _replay(durable, records[:cut])
        inflight = PartitionState(0, store, CFG).funnel.state["receivers"]["oncall"]["inflight"]
        got = None if inflight is None else inflight["id"]
        assert inflight == live[got], cut
    # and once all are durable, nothing of the old message is left
    store = _replay(durable, records)
    assert sorted(k for k in store if k.startswith(("0|ck|", "0|inf|"))) == sorted(
        k for k in table.store if k.startswith(("0|ck|", "0|inf|")))
    assert not any(first.id in k for k in store)
    # and the message is written once, not again by a later save while it stays in flight
    clock.now += 0.5
    runner.apply_batch(0, [(1601, {"kind": "tick"})])
    assert not any(b"|inf|" in k or b"|ck|" in k for _p, k, _v in table.drain())
    assert PartitionState(0, store, CFG).funnel.state["receivers"]["oncall"]["inflight"] == live[second.id]


def test_pieces_no_head_names_are_deleted_on_load():
    # given a table with a piece of a value whose head never became durable
    table = BatchedTable(FaustTable())
    runner = FunnelRunner(CFG, table, clock=lambda: 1_000.0)
    runner.apply_batch(0, _alerts(0, 400, 1_000.0))
    table.drain()
    head = orjson.loads(table.store["0|inf|oncall|oncall-1"])
    assert chunks.HEAD in head
    table.store["0|ck|deadbeef|0|inf|oncall|oncall-1"] = b"stray"
    # and the sections of a next message whose receiver header never became durable
    table.store["0|inf|oncall|oncall-2"] = b"[]"
    # when the partition is loaded, both are deleted (tombstones for the changelog)
    PartitionState(0, table, CFG)
    assert "0|ck|deadbeef|0|inf|oncall|oncall-1" not in table.store
    assert "0|inf|oncall|oncall-2" not in table.store
    assert {(0, b'"0|ck|deadbeef|0|inf|oncall|oncall-1"', None),
            (0, b'"0|inf|oncall|oncall-2"', None)} <= set(table.drain())


def test_a_corrupt_piece_is_refused_not_read_as_the_value():
    table = {}
    runner = FunnelRunner(CFG, table, clock=lambda: 1_000.0)
    runner.apply_batch(0, _alerts(0, 400, 1_000.0))
    piece = next(k for k in table if k.startswith("0|ck|"))
    table[piece] = table[piece][:-1] + b"!"
    with pytest.raises(ValueError, match="crc"):
        PartitionState(0, table, CFG)


@pytest.mark.parametrize("size", [10, MAX_RECORD_BYTES - 6, MAX_RECORD_BYTES * 5 + 17])
def test_a_notification_is_cut_into_records_and_given_back_exactly(size):
    value = orjson.dumps({"id": "oncall-1", "text": "é\"\\" * (size // 6)})
    records = chunks.split_record(value, "oncall-1", b"oncall")
    assert all(len(r) + len(b"oncall") <= MAX_RECORD_BYTES for r in records)
    assert (len(records) == 1) == (len(value) + 6 <= MAX_RECORD_BYTES)
    # read back in order among other records, a cut-short copy before it
    stream = [b'{"id":"other"}'] + records[:1] + records + [b'{"id":"after"}']
    if len(records) == 1:
        stream = [b'{"id":"other"}'] + records + [b'{"id":"after"}']
    assert list(chunks.join_records(stream)) == [b'{"id":"other"}', value, b'{"id":"after"}']


def test_ledger_and_command_records_stay_within_the_bound():
    # given ledger entries of 2-200 KB (a long inhibited_by) and alert commands of 10 B-200 KB
    entries = [{"raw_id": f"r{i}", "outcome": "inhibited", "time": 1.0,
                "inhibited_by": [f"{j:016x}" for j in range(i * 1000)]} for i in range(1, 20)]
    recs = ledger_records(7, entries)
    assert all(len(r) + 1 <= MAX_RECORD_BYTES for r in recs)
    got = [e for r in recs for e in ledger_entries(r)]
    assert [e["raw_id"] for e in got] == [e["raw_id"] for e in entries]
    assert all(e.get("inhibited_by_count", len(e["inhibited_by"])) == int(e["raw_id"][1:]) * 1000
               for e in got)
    items = [({}, b'{"a":"' + b"x" * n + b'"}') for n in (150_000, 150_000, 200_000, 10)]
    packed = pack_alerts(items, b"oncall")
    assert all(len(p) + 6 <= MAX_RECORD_BYTES for p in packed) and len(packed) == 3


def _service(sent: list, kept: list, raised: list) -> AlertingService:
    svc = object.__new__(AlertingService)
    svc.config = CFG

    async def send(key, value, **kw):
        sent.append((key, value))

    async def keep(letter, key):
        kept.append((letter, key))

    async def raise_(alerts, key, event_id=None):
        raised.extend(alerts)
    svc.funnel = SimpleNamespace(send=send)
    svc.rt = SimpleNamespace(keep=keep)
    svc._raise_many = raise_
    return svc


def _event(offset: int, value: bytes) -> SimpleNamespace:
    return SimpleNamespace(value=value, key=None, message=SimpleNamespace(
        partition=0, offset=offset, topic="alerts.raw", headers=None))


def test_an_alert_too_large_for_a_record_goes_to_the_dlq_counted_and_alerted_and_the_router_goes_on():
    sent, kept, raised = [], [], []
    svc = _service(sent, kept, raised)
    counter = metrics.ALERT_RECORDS_TOO_LARGE.labels(topic="alerts.funnel")
    before = counter._value.get()
    huge = {"labels": {"alertname": "Big", "instance": "h1",
                       **{f"l{i}": "v" * 8000 for i in range(100)}}}
    small = [{"labels": {"alertname": "Small", "instance": f"h{i}"}} for i in range(3)]
    # when one raw event carries a small alert, the ~800 KB one, and two small ones
    _eid, value = raw_envelope([small[0], huge, small[1], small[2]])
    raws = parse_raw(value, 0, 0, 1_000.0)
    asyncio.run(svc.route_batch([(_event(0, value), {}, raws)]))
    # then nothing sent passes the bound; the large one is kept in export.dlq, counted, alerted
    assert sent and all(len(k) + len(v) <= MAX_RECORD_BYTES for k, v in sent)
    assert counter._value.get() == before + 1
    assert len(kept) == 1 and kept[0][0].errorClass == "RecordTooLarge"
    assert kept[0][0].topic == "alerts.funnel" and "most 262144" in kept[0][0].error
    assert [a["rule"] for a in raised] == ["AlertRecordTooLarge"] and raised[0]["asset"] == "alerts.funnel"
    # and its place in the receiver's order holds a command the funnel ledgers rejected
    items = [it for _k, v in sent for it in parse_command(v)["items"]]
    assert [it["src"][2] for it in items] == [0, 1, 2, 3]
    runner = FunnelRunner(CFG, {}, clock=lambda: 1_000.0)
    fx = runner.apply_batch(0, [(0, parse_command(v)) for _k, v in sent])
    assert [e["outcome"] for e in fx.ledger] == ["rejected"] and "kept in export.dlq" in fx.ledger[0]["reason"]
    # and the router goes on with the next event
    sent.clear()
    _eid, value = raw_envelope(small)
    asyncio.run(svc.route_batch([(_event(1, value), {}, parse_raw(value, 0, 1, 1_000.0))]))
    assert len([it for _k, v in sent for it in parse_command(v)["items"]]) == 3 and len(kept) == 1


def test_a_record_the_funnel_cannot_send_is_dead_lettered_and_the_batch_still_goes_out(monkeypatch):
    # given a bound smaller than the batch's ledger record (as a bug or a new field could make it)
    monkeypatch.setattr(oversize, "MAX_RECORD_BYTES", 300)
    sent, kept, raised = [], [], []
    svc = _service(sent, kept, raised)
    acked = []

    class Topic:
        def __init__(self, name):
            self.name = name

        async def send(self, key, value, **kw):
            acked.append(self.name)
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(None)
            return fut
    svc.ledger, svc.notifications = Topic("ledger"), Topic("notifications")
    svc.state_table = BatchedTable(FaustTable())
    svc.app = SimpleNamespace(producer=SimpleNamespace(send=None), conf=SimpleNamespace(id="app"))
    spawned = []
    svc._spawn = lambda coro: (spawned.append(coro.cr_code.co_name), coro.close())
    svc._wakeups = {}
    runner = FunnelRunner(CFG, svc.state_table, clock=lambda: 1_000.0)
    fx = runner.apply_batch(0, _alerts(0, 1, 1_000.0)[:1])
    fx.ledger = [{"raw_id": f"r{i}", "outcome": "delivered", "time": 1.0} for i in range(20)]
    counter = metrics.ALERT_RECORDS_TOO_LARGE.labels(topic="alerts.ledger")
    before = counter._value.get()

    monkeypatch.setattr("alerting.agents.send_records", _no_records)
    # when the funnel sends the batch's records
    asyncio.run(svc._effects_all([(0, fx)]))
    # then the ledger record went to export.dlq (counted, alerted), nothing crashed, and the
    # message's POST still leaves
    assert counter._value.get() == before + 1
    assert [d.topic for d, _k in kept].count("alerts.ledger") == 1
    assert "AlertRecordTooLarge" in {a["rule"] for a in raised}
    assert "ledger" not in acked and spawned.count("_deliver") == 1  # (and the next tick)


async def _no_records(producer, topic, records):
    return []
