"""The storm of ``bench_alert_e2e.py`` through the router and the funnel
runner in one process, no broker: CPU per alert and what the changelog
would carry. Prints one JSON object:

    {"bench": "alert_runner_storm", "alerts", "route_us_per_alert",
     "funnel_us_per_alert", "changelog_records", "changelog_bytes_per_alert",
     "changelog_bytes_per_alert_by_kind": {"ep", "grp", "gm", "rcv", "ob", "meta"},
     "command_bytes_per_alert", "ledger_bytes_per_alert", "messages", "pending", "balanced"}

The storm: ``--storm`` alerts over 2,000 assets x 10 rules (every identity
once, the rest repeats, shuffled), 50 alerts per ``alerts.raw`` event, the
10 rules routed to 4 receivers, group_by [rule, asset], group_wait 0. The
router takes 180 events at a time (about what one run of the worker holds,
``plait.agent.MAX_RUN_BYTES``), each receiver's commands are applied as one
batch, every message is acknowledged at once, and the funnel is ticked at
the end until nothing is pending. CPU seconds are this thread's
(``time.thread_time``); the broker's and Kafka clients' costs are not here
(``bench_alert_e2e.py`` measures those), and the figures are for comparing
two versions on one machine, not absolute.

With ``--steady SECONDS`` it runs instead the latency scenario of
``bench_alert_e2e.py`` on a simulated clock: ``--rate`` new alerts a second
(each its own group, one receiver, group_wait 0) in 5 ms batches, each
message acknowledged ``--ack-delay`` seconds after it left (meanwhile new
sections queue behind it), one line per simulated second:

    {"bench": "alert_runner_steady", "t", "us_per_alert", "outbox", "open_groups", "changelog_records"}

With ``--open N`` it opens N groups of one delivered alert each and prints
what one full pass of Python's cyclic garbage collector then takes (the
alerting worker freezes only what start-up made, ``streams.app.tune_gc``; a
full collection walks every open alert's objects):

    {"bench": "alert_runner_gc", "open_groups", "tracked_objects", "full_collect_ms"}

With ``--one-group N`` it fires N alerts into one group (``--groups G``: G
groups; group_by [rule]),
delivers them, then resolves them in the same order:

    {"bench": "alert_runner_one_group", "alerts", "firing_us_per_alert",
     "resolved_us_per_alert", "changelog_bytes_per_alert_by_kind", "episodes_left",
     "groups_left", "counters_balanced", "maxrss_mb"}

With ``--dumps`` the storm and ``--one-group`` also print ``dumps_per_alert`` and
``dumps_bytes_per_alert``: the values the store serialized (:func:`alerting.store._dumps`
calls, written or not) and their JSON bytes; counting costs CPU, so the CPU figures of such a
run are not comparable with one without it.

CPU time on a shared host is noisy; for comparing two versions, count
instructions instead: ``valgrind --tool=callgrind python
bench/bench_alert_runner.py --steady 2`` (the same total run after run).

Usage: ``python bench/bench_alert_runner.py [--storm 50000] [--steady 0]
[--rate 1000] [--ack-delay 0.2] [--open 0] [--one-group 0] [--groups 1] [--dumps]``
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import time

from alerting import store
from alerting.changelog import BatchedTable
from alerting.config import parse_config
from alerting.runner import FunnelRunner
from alerting.wire import (command, ledger_records, pack_alerts, parse_command, parse_raw, raw_envelope,
                           route_alerts)

RECEIVERS = ["r0", "r1", "r2", "r3"]
CONFIG = parse_config({
    "receivers": [{"name": n, "url": "http://127.0.0.1:9/hook",
                   "bucket": {"burst": 1000, "refill_interval": "10ms"}} for n in RECEIVERS],
    "route": {"receiver": RECEIVERS[0], "routes": [
        {"matchers": [f'rule="Storm{i}"'], "receiver": RECEIVERS[i % len(RECEIVERS)]} for i in range(10)]},
    "grouping": {"group_by": ["rule", "asset"], "batch_size": 1000},
    "timing": {"group_wait": 0, "group_interval": "1s", "repeat_interval": "1h"},
    "dedupe": {"cooldown": "1h"},
})
EVENTS_PER_RUN = 180
#: what the store serialized, when counted (``--dumps``): [calls, bytes]
DUMPS = [0, 0]


def count_dumps() -> None:
    """Count every :func:`alerting.store._dumps` call and its bytes in :data:`DUMPS`."""
    plain = store._dumps

    def counted(value):
        data = plain(value)
        DUMPS[0] += 1
        DUMPS[1] += len(data)
        return data

    store._dumps = counted


def dumps_figures(n: int, counting: bool) -> dict:
    """``dumps_per_alert`` and ``dumps_bytes_per_alert`` over ``n`` alerts (empty: not counted)."""
    if not counting:
        return {}
    return {"dumps_per_alert": round(DUMPS[0] / n, 2), "dumps_bytes_per_alert": round(DUMPS[1] / n)}


def by_kind(records: list, into: dict[str, int]) -> None:
    """Add each changelog record's key and value bytes to ``into`` by entity kind."""
    for _p, key, value in records:
        kind = key.decode().strip('"').split("|")[1]
        into[kind] = into.get(kind, 0) + len(key) + len(value or b"")


class _Store:
    """What ``BatchedTable`` reads as a Faust table: its local store."""

    def __init__(self) -> None:
        self.data: dict = {}


def routed(config, value: bytes, offset: int, now: float) -> list[tuple[str, dict, bytes]]:
    """What the router makes of one ``alerts.raw`` event value read at
    ``offset`` of partition 0: ``[(receiver, command, command bytes)]``."""
    out = []
    for i, raw in enumerate(parse_raw(value, 0, offset, now)):
        for receiver, cmd in route_alerts(config, raw):
            cmd["src"] = [0, offset, i]
            out.append((receiver, cmd, command(**cmd)))
    return out


def storm(n: int) -> list[bytes]:
    """The storm as ``alerts.raw`` event values, 50 alerts each."""
    rnd = random.Random(11)
    keys = [(r, a) for r in range(10) for a in range(2000)]
    order = (keys + [rnd.choice(keys) for _ in range(max(0, n - len(keys)))])[:n]
    rnd.shuffle(order)
    alerts = [{"rule": f"Storm{r}", "asset": f"s{a:04d}", "severity": "warning"} for r, a in order]
    return [raw_envelope(alerts[i:i + 50])[1] for i in range(0, n, 50)]


def steady(seconds: int, rate: float, ack_delay: float) -> None:
    """The latency scenario on a simulated clock (see the module docstring)."""
    config = parse_config({
        "receivers": [{"name": "r0", "url": "http://127.0.0.1:9/hook",
                       "bucket": {"burst": 1000, "refill_interval": "10ms"}}],
        "route": {"receiver": "r0"}, "grouping": {"group_by": ["rule", "asset"], "batch_size": 1000},
        "timing": {"group_wait": 0, "group_interval": "1s", "repeat_interval": "1h"},
        "dedupe": {"cooldown": "1h"}})
    table = BatchedTable(_Store())
    now = [1_000_000.0]
    runner = FunnelRunner(config, table, clock=lambda: now[0])
    offset, in_flight, records = 0, [], 0

    def apply(cmds: list[dict]) -> None:
        nonlocal offset, records
        fx = runner.apply_batch(0, [(offset + i, c) for i, c in enumerate(cmds)])
        offset += len(cmds)
        ledger_records(0, fx.ledger)
        in_flight.extend((now[0] + ack_delay, m.id) for m in fx.messages)
        records += len(table.drain())

    step, per, n = 0.005, max(1, round(rate * 0.005)), 0
    cpu0 = time.thread_time()
    for tick in range(1, int(seconds / step) + 1):
        now[0] = 1_000_000.0 + tick * step
        cmds = []
        for _ in range(per):
            _eid, value = raw_envelope([{"rule": "Lat", "asset": f"a{n:07d}", "severity": "warning"}])
            cmds += [(cmd, data) for _r, cmd, data in routed(config, value, n, now[0])]
            n += 1
        apply([parse_command(v) for v in pack_alerts(cmds)])
        while in_flight and in_flight[0][0] <= now[0]:
            apply([{"v": 1, "kind": "result", "message_id": in_flight.pop(0)[1], "ok": True}])
        if tick % round(1 / step) == 0:
            st = runner.state(0).funnel.state
            cpu = time.thread_time()
            print(json.dumps({"bench": "alert_runner_steady", "t": round(tick * step),
                              "us_per_alert": round((cpu - cpu0) / (per / step) * 1e6, 1),
                              "outbox": len(st["receivers"]["r0"]["outbox"]),
                              "open_groups": len(st["groups"]), "changelog_records": records}),
                  flush=True)
            cpu0, records = cpu, 0


def open_groups(n: int) -> FunnelRunner:
    """A runner whose partition 0 holds ``n`` open groups of one delivered
    alert each (alert i seen at 1,000,000 + i/1000 s)."""
    table = BatchedTable(_Store())
    runner = FunnelRunner(CONFIG, table, clock=lambda: 1_000_000.0)
    offset = 0
    for start in range(0, n, 500):
        cmds = []
        for i in range(start, min(n, start + 500)):
            _eid, value = raw_envelope([{"rule": "Storm0", "asset": f"g{i:07d}", "severity": "info"}])
            cmds += [(cmd, data) for _r, cmd, data in routed(CONFIG, value, i, 1_000_000.0 + i / 1000)]
        for value in pack_alerts(cmds):
            fx = runner.apply_batch(0, [(offset, parse_command(value))])
            offset += 1
            for m in fx.messages:
                runner.apply_batch(0, [(offset, {"v": 1, "kind": "result", "message_id": m.id, "ok": True})])
                offset += 1
        table.drain()
    return runner


def one_group(n: int, groups: int = 1, counting: bool = False) -> FunnelRunner:
    """``n`` alerts in ``groups`` groups (group_by [rule]) fired, delivered, then
    resolved in the order they fired, 500 per batch on a simulated clock;
    prints the funnel's CPU per alert for each half and the resident set."""
    config = parse_config({
        "receivers": [{"name": "r0", "url": "http://127.0.0.1:9/hook",
                       "bucket": {"burst": 1000, "refill_interval": "10ms"}}],
        "route": {"receiver": "r0"}, "grouping": {"group_by": ["rule"], "batch_size": 1000},
        "timing": {"group_wait": 0, "group_interval": "1s", "repeat_interval": "1h"},
        "dedupe": {"cooldown": "1h"}})
    table = BatchedTable(_Store())
    now = [1_000_000.0]
    runner = FunnelRunner(config, table, clock=lambda: now[0])
    offset, raw, out, kinds = 0, 0, {}, {}

    def apply(cmds: list[dict]) -> None:
        nonlocal offset
        fx = runner.apply_batch(0, [(offset + i, c) for i, c in enumerate(cmds)])
        offset += len(cmds)
        by_kind(table.drain(), kinds)
        if fx.messages:
            apply([{"v": 1, "kind": "result", "message_id": m.id, "ok": True} for m in fx.messages])

    for status in ("firing", "resolved"):
        cpu0 = time.thread_time()
        for start in range(0, n, 500):
            now[0] += 0.5
            cmds = []
            for i in range(start, min(n, start + 500)):
                _eid, value = raw_envelope([{"rule": f"One{i % groups}", "asset": f"a{i:07d}", "severity": "warning",
                                             "status": status}])
                cmds += [(cmd, data) for _r, cmd, data in routed(config, value, raw, now[0])]
                raw += 1
            apply([parse_command(v) for v in pack_alerts(cmds)])
            apply([{"v": 1, "kind": "tick"}])
        for _ in range(20):
            now[0] += 1.0
            apply([{"v": 1, "kind": "tick"}])
        out[f"{status}_us_per_alert"] = round((time.thread_time() - cpu0) / n * 1e6, 1)
    st = runner.state(0).funnel.state
    print(json.dumps({"bench": "alert_runner_one_group", "alerts": n, **out,
                      "changelog_bytes_per_alert_by_kind": {k: round(v / n) for k, v in sorted(kinds.items())},
                      **dumps_figures(n, counting),
                      "episodes_left": len(st["episodes"]), "groups_left": len(st["groups"]),
                      "counters_balanced": runner.counters(0)["balanced"],
                      "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}),
          flush=True)
    return runner


def full_collection(n: int) -> None:
    """Open ``n`` groups, then time one full garbage collection (see the
    module docstring)."""
    gc.collect()
    gc.freeze()  # what start-up made, as streams.app.tune_gc does
    runner = open_groups(n)
    t0 = time.perf_counter()
    gc.collect()
    print(json.dumps({"bench": "alert_runner_gc", "open_groups": len(runner.state(0).funnel.state["groups"]),
                      "tracked_objects": len(gc.get_objects()),
                      "full_collect_ms": round((time.perf_counter() - t0) * 1000, 1)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--storm", type=int, default=50_000)
    ap.add_argument("--steady", type=int, default=0,
                    help="simulated seconds of the steady-rate scenario instead of the storm")
    ap.add_argument("--rate", type=float, default=1000.0, help="new alerts per second (--steady)")
    ap.add_argument("--ack-delay", type=float, default=0.2,
                    help="seconds from a message leaving to its acknowledgement (--steady)")
    ap.add_argument("--open", type=int, default=0,
                    help="open this many groups and time a full garbage collection instead")
    ap.add_argument("--one-group", type=int, default=0,
                    help="fire then resolve this many alerts in one group instead")
    ap.add_argument("--groups", type=int, default=1, help="spread --one-group's alerts over this many groups")
    ap.add_argument("--dumps", action="store_true", help="count what the store serializes")
    args = ap.parse_args()
    if args.dumps:
        count_dumps()
    gc.set_threshold(50_000)  # the alerting worker's setting (streams.app.tune_gc)
    if args.open:
        full_collection(args.open)
        return
    if args.one_group:
        one_group(args.one_group, args.groups, args.dumps)
        return
    if args.steady:
        steady(args.steady, args.rate, args.ack_delay)
        return
    events = storm(args.storm)
    table = BatchedTable(_Store())
    runner = FunnelRunner(CONFIG, table)
    part = {name: i for i, name in enumerate(RECEIVERS)}
    offsets = dict.fromkeys(RECEIVERS, 0)
    cpu = {"route": 0.0, "funnel": 0.0}
    out = {"records": 0, "bytes": 0, "commands": 0, "ledger": 0, "messages": 0}
    kinds: dict[str, int] = {}

    def apply(receiver: str, cmds: list[dict]) -> None:
        batch = []
        for cmd in cmds:
            batch.append((offsets[receiver], cmd))
            offsets[receiver] += 1
        fx = runner.apply_batch(part[receiver], batch)
        out["ledger"] += sum(map(len, ledger_records(part[receiver], fx.ledger)))
        out["messages"] += len(fx.messages)
        if fx.messages:
            apply(receiver, [{"v": 1, "kind": "result", "message_id": m.id, "ok": True} for m in fx.messages])

    def drain() -> None:
        records = table.drain()
        out["records"] += len(records)
        out["bytes"] += sum(len(key) + len(value or b"") for _p, key, value in records)
        by_kind(records, kinds)

    for start in range(0, len(events), EVENTS_PER_RUN):
        t0 = time.thread_time()
        per: dict[str, list] = {}
        for k, value in enumerate(events[start:start + EVENTS_PER_RUN]):
            for receiver, cmd, data in routed(CONFIG, value, start + k, time.time()):
                per.setdefault(receiver, []).append((cmd, data))
        packed = {r: pack_alerts(c) for r, c in per.items()}
        t1 = time.thread_time()
        for receiver, values in packed.items():
            out["commands"] += sum(map(len, values))
            apply(receiver, [parse_command(v) for v in values])
        drain()
        cpu["route"] += t1 - t0
        cpu["funnel"] += time.thread_time() - t1
    for _ in range(100):  # the storm's tail: ticks until every alert is final
        if not any(runner.counters(part[r])["pending"] for r in RECEIVERS):
            break
        for receiver in RECEIVERS:
            apply(receiver, [{"v": 1, "kind": "tick"}])
        drain()
    counters = [runner.counters(part[r]) for r in RECEIVERS]
    n = args.storm
    print(json.dumps({
        "bench": "alert_runner_storm", "alerts": n,
        "route_us_per_alert": round(cpu["route"] / n * 1e6, 1),
        "funnel_us_per_alert": round(cpu["funnel"] / n * 1e6, 1),
        "changelog_records": out["records"], "changelog_bytes_per_alert": round(out["bytes"] / n),
        "changelog_bytes_per_alert_by_kind": {k: round(v / n) for k, v in sorted(kinds.items())},
        **dumps_figures(n, args.dumps),
        "command_bytes_per_alert": round(out["commands"] / n),
        "ledger_bytes_per_alert": round(out["ledger"] / n),
        "messages": out["messages"], "pending": sum(c["pending"] for c in counters),
        "balanced": all(c["balanced"] for c in counters),
    }), flush=True)


if __name__ == "__main__":
    main()
