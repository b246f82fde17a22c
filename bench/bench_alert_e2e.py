"""The alert funnel end to end through the broker: Tansu, one worker, a local
webhook receiver. Prints one JSON object per line:

    {"bench": "alert_e2e_latency", "alerts", "rate_per_s", "sent_per_s", "p50_ms",
     "p99_ms", "max_ms", "decision_p99_ms_at_most", "worker_cpu_s", ...}
    {"bench": "alert_e2e_broker_floor", "hops": 2, "records", "rate_per_s", "sent_per_s",
     "p50_ms", "p99_ms", ...}
    {"bench": "alert_e2e_throughput", "alerts", "per_event", "seconds", "alerts_per_s", ...}

- latency: alerts with new fingerprints produced onto ``alerts.raw`` at a
  steady rate (``sent_per_s``: the rate the sends kept, first to last);
  each is its own group (group_by rule+asset, group_wait 0), so the figure
  is raw alert -> router -> funnel -> tick -> webhook POST (milliseconds,
  from the producer's clock to the receiver's, same host).
- broker floor: right after, the same number of records at the same rate
  through two bare aiokafka hops of the same broker (the hops an alert takes
  before its decision), fetching as the alerting worker does: the part of
  the decision latency no funnel work can remove on this machine.
- throughput: ``--alerts`` raw alerts (mostly repeats of 500 fingerprints,
  as a storm looks) produced as fast as possible, ``--per-event`` alerts per
  Kafka event; alerts per second from the first produce until the ledger
  (``alerts.ledger``) holds an entry for every one.

- storm: ``--storm`` alerts over 2,000 assets x 10 rules, Kafka in -> ledger
  out, with the outcomes, webhook POSTs, the workers' CPU seconds and RSS;
  Alertmanager on the same storm first when its binary is present, and then
  the ratios against it from the same run (``posts_per_alertmanager_post``,
  ``rate_per_alertmanager_rate``: our rate over Alertmanager's from first
  POST to last webhook), which hold across machines where rates do not.
- scaling: ``--workers 2 --partitions 8 --receivers 8`` runs the same storm
  on two worker processes, the 10 rules routed to 8 receivers (named to land
  on distinct ``alerts.funnel`` partitions); compare ``alerts_per_s`` with
  ``--workers 1`` and the same flags.

- ``--distinct --permissive``: a storm of distinct alerts under the most
  permissive config the schema takes (burst 1,000,000, batch_size 10,000,
  max_alerts 0, group_by [alertname, instance]), whose messages list
  thousands of alerts; ``distinct_alerts_at_webhook`` counts them.

Usage: ``python bench/bench_alert_e2e.py [--alerts 20000] [--per-event 1]
[--latency-alerts 500] [--rate 50] [--storm 50000] [--distinct] [--permissive]
[--workers 1] [--partitions 0] [--receivers 1] [--fetch-wait-ms 0]``
"""
from __future__ import annotations

import argparse
import os
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from _alertbench import Sink, alertmanager, alertmanager_binary, wait

from alerting.wire import ledger_entries, raw_envelope
from ops.stack import ALERTING_FETCH_WAIT_MS, Stack
from plait.topics import Topics


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * len(s))) - 1))]


def alertmanager_storm(n: int, per_post: int = 64) -> dict | None:
    """The same storm (2,000 assets x 10 rules) POSTed to a real Alertmanager
    (``alertmanager`` or Debian's ``prometheus-alertmanager``), group_by
    [alertname, instance], group_wait 0, webhook to a local sink: ingest
    rate and webhook POSTs once they stop growing. None when absent."""
    import httpx

    if alertmanager_binary() is None:
        return None
    sink = Sink()
    config = {
        "route": {"receiver": "hook", "group_by": ["alertname", "instance"],
                  "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": sink.url}]}]}
    try:
        with alertmanager(config) as (base, _proc):
            rnd = random.Random(11)
            keys = [(r, a) for r in range(10) for a in range(2000)]
            order = (keys + [rnd.choice(keys) for _ in range(max(0, n - len(keys)))])[:n]
            rnd.shuffle(order)
            alerts = [{"labels": {"alertname": f"Storm{r}", "instance": f"s{a:04d}",
                                  "severity": "warning"}} for r, a in order]
            t0 = time.monotonic()
            with httpx.Client(timeout=30) as c:
                for i in range(0, len(alerts), per_post):
                    c.post(f"{base}/api/v2/alerts", json=alerts[i:i + per_post]).raise_for_status()
            ingest = time.monotonic() - t0
            last, still = -1, time.monotonic()
            while time.monotonic() - still < 5 and time.monotonic() - t0 < 180:
                time.sleep(0.5)
                if sink.messages != last:
                    last, still = sink.messages, time.monotonic()
    finally:
        sink.stop()
    return {"bench": "alertmanager_storm", "alerts": n, "ingest_seconds": round(ingest, 2),
            "ingest_alerts_per_s": round(n / ingest, 1), "webhook_posts": sink.messages,
            "settled_seconds": round(still - t0, 2),
            # first POST to the last webhook (0.5 s polls): the storm handled whole
            "settled_alerts_per_s": round(n / max(still - t0, ingest), 1)}


def spread(partitions: int) -> list[int]:
    """The ``alerts.funnel`` partitions in the order receivers are placed on
    them, so that the first 2k receivers split evenly between two workers
    however Faust's assignor splits the partitions between them, round robin
    (even / odd partitions) or in ranges (lower / upper half): for 8,
    ``[0, 5, 2, 7, 1, 4, 3, 6]``. (Placed in partition order, 4 receivers
    sat on partitions 1, 2, 3 and 6, so one worker held three receivers'
    groups.)"""
    half = partitions // 2
    low, high = range(half), range(half, partitions)
    out: list[int] = []
    for a, b in (([p for p in low if p % 2 == 0], [p for p in high if p % 2 == 1]),
                 ([p for p in low if p % 2 == 1], [p for p in high if p % 2 == 0])):
        for i in range(max(len(a), len(b))):
            out += a[i:i + 1] + b[i:i + 1]
    return out + [p for p in range(partitions) if p not in out]


def receiver_names(n: int, partitions: int) -> list[str]:
    """``n`` receiver names (``bench`` alone for one) whose ``alerts.funnel``
    partitions (murmur2 of the name, as the router keys) follow
    :func:`spread`, round after round."""
    if n <= 1:
        return ["bench"]
    from aiokafka.partitioner import murmur2

    wanted = spread(partitions)
    names, k = [], 0
    while len(names) < n:
        target = wanted[len(names) % partitions]
        while (murmur2(f"bench{k}".encode()) & 0x7FFFFFFF) % partitions != target:
            k += 1
        names.append(f"bench{k}")
        k += 1
    return names


def broker_floor(bootstrap: str, prefix: str, n: int, rate: float, partitions: int,
                 fetch_wait_ms: int, prefetch_backoff_ms: int) -> dict:
    """What the broker alone costs the latency figure: ``n`` records at
    ``rate`` per second through the two hops an alert takes before its
    decision (``alerts.raw`` -> router -> ``alerts.funnel`` -> funnel), with
    bare aiokafka clients fetching as the alerting worker does
    (``fetch_wait_ms``, ``prefetch_backoff_ms``; docs/kafka-rules.md #11, #15)
    and a relay that forwards what it gets without waiting for acks (a lower
    bound), on two topics of ``partitions`` partitions. Milliseconds from the
    first send to the last consumer, same host; the worker's own share of the
    decision latency is what the latency line adds to this (docs/alerting.md,
    "Latency and the broker floor")."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from plait.kafka_admin import create_topics
    from streams.app import tune_fetch_wait

    tune_fetch_wait(fetch_wait_ms, prefetch_backoff_ms)  # the worker's Fetcher, in this process
    first, second = f"{prefix}floor.a", f"{prefix}floor.b"
    create_topics(bootstrap, [first, second], partitions)

    sent_s = [0.0]

    async def run() -> list[float]:
        def consumer(topic: str) -> AIOKafkaConsumer:
            return AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{topic}-g",
                                    fetch_max_wait_ms=fetch_wait_ms, auto_offset_reset="earliest",
                                    enable_auto_commit=False, max_poll_records=1000)

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4")
        relay_in, last = consumer(first), consumer(second)
        for client in (producer, relay_in, last):
            await client.start()
        lat: list[float] = []

        async def relay() -> None:
            while True:
                batch = await relay_in.getmany(timeout_ms=100, max_records=1000)
                for records in batch.values():
                    for m in records:  # not waiting for acks: the most a relay can do
                        await producer.send(second, key=m.key, value=m.value)

        async def measure() -> None:
            while len(lat) < n:
                batch = await last.getmany(timeout_ms=100, max_records=1000)
                now = time.time()
                lat.extend((now - float(m.value)) * 1000 for records in batch.values() for m in records)

        tasks = [asyncio.create_task(relay()), asyncio.create_task(measure())]
        try:
            # warm-up: one record through both hops (group joins, offset resets)
            await producer.send(first, value=repr(time.time()).encode())
            deadline = time.monotonic() + 60
            while not lat:
                if time.monotonic() > deadline:
                    raise TimeoutError("the floor's warm-up record never crossed both hops")
                await asyncio.sleep(0.01)
            lat.clear()
            start = time.monotonic()
            for i in range(n):
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await producer.send(first, key=str(i).encode(), value=repr(time.time()).encode())
            sent_s[0] = time.monotonic() - start
            await asyncio.wait_for(tasks[1], 60)
        finally:
            tasks[0].cancel()
            for client in (relay_in, last, producer):
                await client.stop()
        return lat

    lat = asyncio.run(run())
    return {"bench": "alert_e2e_broker_floor", "hops": 2, "records": n, "rate_per_s": rate,
            "sent_per_s": round((n - 1) / sent_s[0], 1) if sent_s[0] > 0 else None,
            "fetch_wait_ms": fetch_wait_ms, "p50_ms": round(pct(lat, 0.5), 1),
            "p99_ms": round(pct(lat, 0.99), 1), "max_ms": round(max(lat), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--alerts", type=int, default=20_000)
    ap.add_argument("--per-event", type=int, default=1)
    ap.add_argument("--latency-alerts", type=int, default=500)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--storm", type=int, default=50_000,
                    help="alerts of the storm over 2,000 assets x 10 rules (0: skip)")
    ap.add_argument("--storm-per-event", type=int, default=50)
    ap.add_argument("--distinct", action="store_true",
                    help="the storm's alerts are all distinct (rule i mod 10, asset i), none repeated")
    ap.add_argument("--permissive", action="store_true",
                    help="the most permissive config the schema takes: bucket burst 1,000,000, "
                         "batch_size 10,000, max_alerts 0, group_by [alertname, instance] (the "
                         "storm's alerts carry an instance label); every alert is its own group")
    ap.add_argument("--scale", default="100,1000,10000,50000",
                    help="open-group counts at which the cost per alert is measured ('' skips)")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--alertmanager", action=argparse.BooleanOptionalAction, default=True,
                    help="also run Alertmanager on the same storm when its binary is present")
    ap.add_argument("--fetch-wait-ms", type=int, default=0,
                    help="the workers' PLAIT_FETCH_MAX_WAIT_MS (0: the stack's default for alerting "
                         "workers, 10 ms); on Tansu an idle hop waits it out (docs/kafka-rules.md #11)")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (scaling)")
    ap.add_argument("--partitions", type=int, default=0,
                    help="partitions of every topic (0: the settings' default)")
    ap.add_argument("--receivers", type=int, default=1,
                    help="receivers the storm's 10 rules are routed to (rule i -> receiver i mod n), "
                         "named to land on distinct alerts.funnel partitions where possible")
    args = ap.parse_args()

    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    am = None
    if args.storm and args.alertmanager:
        am = alertmanager_storm(args.storm)
        print(json.dumps(am or {"bench": "alertmanager_storm", "skipped": "no alertmanager binary"}),
              flush=True)

    sink = Sink()
    tmp = Path(tempfile.mkdtemp(prefix="plait-bench-alerts-"))
    cfg = tmp / "alerting.yaml"
    names = receiver_names(args.receivers, args.partitions or 4)
    burst, batch = (1_000_000, 10_000) if args.permissive else (1000, 1000)
    cfg.write_text(yaml.safe_dump({
        "receivers": [{"name": n, "url": sink.url, "max_alerts": 0,
                       "bucket": {"burst": burst, "refill_interval": "10ms"}} for n in names],
        "route": {"receiver": names[0], "routes": [
            {"matchers": [f'rule="Storm{i}"'], "receiver": names[i % len(names)]} for i in range(10)]
            if len(names) > 1 else []},
        "grouping": {"group_by": ["alertname", "instance"] if args.permissive else ["rule", "asset"],
                     "batch_size": batch},
        "timing": {"group_wait": 0, "group_interval": "1s", "repeat_interval": "1h"},
        "dedupe": {"cooldown": "1h"},
    }))
    rid = uuid.uuid4().hex[:8]
    env = {"PLAIT_TOPIC_PREFIX": f"bench-{rid}.", "PLAIT_APP_ID": f"bench-{rid}",
           "PLAIT_REDIS_PREFIX": f"bench-{rid}", "PLAIT_ALERTING_CONFIG": str(cfg),
           "PLAIT_LOG_LEVEL": "WARNING"}
    if args.partitions:
        env["PLAIT_PARTITIONS"] = str(args.partitions)
    if args.fetch_wait_ms:
        env["PLAIT_FETCH_MAX_WAIT_MS"] = str(args.fetch_wait_ms)
    stack = Stack(tmp / "stack", env, ephemeral_prefix=True)
    # alerting-only workers, as production runs the funnel (`plait worker --role alerting`)
    stack.start(workers=args.workers, api=False, demo_data_api=False, role="alerting")
    try:
        topics = Topics(f"bench-{rid}.")
        bootstrap = stack.env["PLAIT_BROKER_URL"]
        producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                             "linger.ms": 1, "compression.type": "lz4"})
        raw = topics.name("alerts.raw")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{rid}",
                             "enable.auto.commit": False})
        ledger = topics.name("alerts.ledger")
        parts = consumer.list_topics(ledger, timeout=10).topics[ledger].partitions
        consumer.assign([TopicPartition(ledger, p, OFFSET_BEGINNING) for p in parts])
        seen: set[str] = set()

        def drain(budget: float = 0.2) -> None:
            end = time.monotonic() + budget
            while time.monotonic() < end:
                for m in consumer.consume(1000, 0.05):
                    if not m.error():
                        seen.update(e["raw_id"] for e in ledger_entries(m.value()))

        def cpu_s(pids=None) -> float:
            """CPU seconds (user + system) the workers (or ``pids``) used so
            far: a figure that load from other processes on the machine
            disturbs less than wall time."""
            tick = os.sysconf("SC_CLK_TCK")
            total = 0.0
            for pid in pids if pids is not None else [p.pid for p in stack.workers().values()]:
                try:
                    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
                    total += (int(fields[11]) + int(fields[12])) / tick
                except OSError:
                    pass
            return total

        def others_cpu_s() -> dict[str, float]:
            """CPU seconds the broker and this bench process (producer, ledger
            reader) used so far: they share the workers' cores."""
            return {"broker": cpu_s([stack.broker.proc.pid]), "bench": cpu_s([os.getpid()])}

        def decisions() -> dict[str, int]:
            """The funnel's raw-in -> decision histogram (``decision_ms``),
            summed over the partitions' counters in Redis."""
            import redis

            from alerting.counters import decode_hash, merge
            from plait.keys import alert_counters

            client = redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"])
            try:
                return merge(decode_hash(client.hgetall(alert_counters(f"bench-{rid}")))).get(
                    "decision_ms", {})
            finally:
                client.close()

        # warm-up: one alert through, so the worker has joined and recovered
        _eid, v = raw_envelope([{"rule": "Warmup", "asset": "w", "severity": "info"}])
        producer.produce(raw, value=v)
        producer.flush(10)
        wait(lambda: sink.messages >= 1, 90, "the worker to deliver a warm-up alert")

        # latency: steady rate, new fingerprints
        n, gap = args.latency_alerts, 1.0 / args.rate
        cpu0, dec0 = cpu_s(), decisions()
        start = time.monotonic()
        for i in range(n):
            target = start + i * gap
            while time.monotonic() < target:
                time.sleep(min(0.002, max(0.0, target - time.monotonic())))
            _eid, v = raw_envelope([{"rule": "Lat", "asset": f"a{i:05d}", "severity": "warning",
                                     "annotations": {"sent_at": repr(time.time())}}])
            producer.produce(raw, value=v)
            producer.poll(0)
        sent_s = time.monotonic() - start
        producer.flush(10)
        wait(lambda: len(sink.latencies) >= n, 120, "every latency alert at the webhook")
        lat = sink.latencies[:n]
        from alerting.counters import decision_quantile

        def dec_delta() -> dict[str, int]:
            now = decisions()
            return {k: v - dec0.get(k, 0) for k, v in now.items()}

        try:  # counters are published on the next tick (about a second)
            wait(lambda: sum(dec_delta().values()) >= n, 30, "the decision histogram")
        except TimeoutError:
            pass
        dec = dec_delta()
        print(json.dumps({"bench": "alert_e2e_latency", "alerts": n, "rate_per_s": args.rate,
                          # the rate the sends kept (alerts over first to last send)
                          "sent_per_s": round((n - 1) / sent_s, 1) if sent_s > 0 else None,
                          "decision_p50_ms_at_most": decision_quantile(dec, 0.5),
                          "decision_p99_ms_at_most": decision_quantile(dec, 0.99),
                          "decisions": sum(dec.values()),
                          "p50_ms": round(pct(lat, 0.5), 1), "p99_ms": round(pct(lat, 0.99), 1),
                          "max_ms": round(max(lat), 1), "mean_ms": round(statistics.mean(lat), 1),
                          "webhook_messages": sink.messages,
                          "worker_cpu_s": round(cpu_s() - cpu0, 2)}), flush=True)
        # the same rate through two bare hops of the same broker, the workers idle
        from plait.settings import Settings

        defaults = Settings()
        print(json.dumps(broker_floor(
            bootstrap, f"bench-{rid}.", n, args.rate, args.partitions or defaults.partitions,
            args.fetch_wait_ms or ALERTING_FETCH_WAIT_MS, defaults.fetch_prefetch_backoff_ms)),
            flush=True)

        def produce_events(alerts: list, per_event: int) -> set[str]:
            ids: set[str] = set()
            for i in range(0, len(alerts), per_event):
                chunk = alerts[i:i + per_event]
                eid, v = raw_envelope(chunk)
                ids.update(f"{eid}:{j}" for j in range(len(chunk)))
                while True:
                    try:
                        producer.produce(raw, value=v)
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
            producer.flush(30)
            return ids

        outcomes: dict[str, str] = {}

        def drain_outcomes(budget: float = 0.2) -> None:
            end = time.monotonic() + budget
            while time.monotonic() < end:
                for m in consumer.consume(5000, 0.05):
                    if not m.error():
                        for e in ledger_entries(m.value()):
                            seen.add(e["raw_id"])
                            outcomes[e["raw_id"]] = e["outcome"]

        def rss_mb() -> float:
            total = 0.0
            for p in stack.workers().values():
                try:
                    for line in open(f"/proc/{p.pid}/status"):
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) / 1024
                except OSError:
                    pass
            return round(total, 1)

        if args.storm:
            # the issue-11 storm: 2,000 assets x 10 rules, every identity at
            # least once, the rest repeats (as a storm looks), Kafka in -> ledger out
            drain_outcomes(1.0)
            rnd = random.Random(11)
            keys = [(r, a) for r in range(10) for a in range(2000)]
            order = keys + [rnd.choice(keys) for _ in range(max(0, args.storm - len(keys)))]
            if args.distinct:  # every alert its own identity
                order = [(i % 10, i) for i in range(args.storm)]
            order = order[:args.storm]
            rnd.shuffle(order)
            storm = [{"rule": f"Storm{r}", "asset": f"s{a:04d}", "severity": "warning",
                      **({"labels": {"instance": f"s{a:04d}"}} if args.permissive else {})}
                     for r, a in order]
            fps0 = len(sink.fingerprints)
            msgs0, rss0, cpu0, others0 = sink.messages, rss_mb(), cpu_s(), others_cpu_s()
            t0 = time.monotonic()
            sids = produce_events(storm, args.storm_per_event)
            produced = time.monotonic() - t0
            deadline = time.monotonic() + 600
            while not sids <= seen and time.monotonic() < deadline:
                drain_outcomes(0.2)
            secs = time.monotonic() - t0
            done = len(sids & seen)
            by = {}
            for i in sids:
                if i in outcomes:
                    by[outcomes[i]] = by.get(outcomes[i], 0) + 1
            pending = len(sids) - done
            print(json.dumps({"bench": "alert_e2e_storm", "alerts": len(sids), "ledgered": done,
                              "identities": len(set(order)), "per_event": args.storm_per_event,
                              "produce_seconds": round(produced, 2), "seconds": round(secs, 2),
                              "alerts_per_s": round(done / secs, 1), "outcomes": by,
                              "pending": pending,
                              "balanced": len(sids) == sum(by.values()) + pending,
                              "webhook_posts": sink.messages - msgs0,
                              "distinct_alerts_at_webhook": len(sink.fingerprints) - fps0,
                              # each POST of the storm: seconds after the first produce, alerts
                              "posts": [[round(at - t0, 1), n] for at, n in sink.posts[msgs0:]],
                              "permissive": args.permissive,
                              "workers": args.workers, "receivers": len(names),
                              "partitions": args.partitions or None,
                              "posts_per_alertmanager_post": round(
                                  (sink.messages - msgs0) / am["webhook_posts"], 5)
                              if am and am.get("webhook_posts") else None,
                              # the same storm on Alertmanager, same machine, same run
                              # (its rate is bounded by this process's POSTs, like ours by its produce)
                              "rate_per_alertmanager_rate": round(done / secs / am["settled_alerts_per_s"], 3)
                              if am and am.get("settled_alerts_per_s") else None,
                              "worker_cpu_s": round(cpu_s() - cpu0, 2),
                              "others_cpu_s": {k: round(v - others0[k], 2)
                                               for k, v in others_cpu_s().items()},
                              "worker_rss_mb_before": rss0, "worker_rss_mb_after": rss_mb()}),
                  flush=True)

        if args.scale:
            # cost per alert as open groups grow: open N groups (new identities,
            # each its own group), then time 2,000 repeats (deduplicated at once)
            opened = 0
            for target in [int(x) for x in args.scale.split(",") if x]:
                fresh = [{"rule": "Scale", "asset": f"g{i:06d}", "severity": "info"}
                         for i in range(opened, target)]
                if fresh:
                    fids = produce_events(fresh, 100)
                    deadline = time.monotonic() + 600
                    while not fids <= seen and time.monotonic() < deadline:
                        drain_outcomes(0.2)
                    opened = target
                rep = [{"rule": "Scale", "asset": f"g{random.randrange(opened):06d}",
                        "severity": "info"} for _ in range(2000)]
                t0, c0 = time.monotonic(), cpu_s()
                rids = produce_events(rep, 50)
                deadline = time.monotonic() + 300
                while not rids <= seen and time.monotonic() < deadline:
                    drain_outcomes(0.05)
                secs = time.monotonic() - t0
                # wall time of 2,000 alerts is mostly the pipeline's fixed
                # latency (broker hops, 50 ms reads); the workers' CPU seconds
                # are the cost (the 1 s ticks and publishes included)
                print(json.dumps({"bench": "alert_e2e_cost_per_alert", "open_groups": opened,
                                  "alerts": len(rids), "seconds": round(secs, 3),
                                  "us_per_alert": round(secs / len(rids) * 1e6, 1),
                                  "worker_cpu_us_per_alert": round((cpu_s() - c0) / len(rids) * 1e6, 1),
                                  "worker_rss_mb": rss_mb()}), flush=True)

        if args.skip_throughput:
            consumer.close()
            return
        # throughput: a storm, mostly repeats
        drain(1.0)
        rnd = random.Random(7)
        alerts = [{"rule": f"R{rnd.randrange(5)}", "asset": f"h{rnd.randrange(100):03d}",
                   "severity": rnd.choice(["warning", "warning", "critical"])} for _ in range(args.alerts)]
        t0 = time.monotonic()
        ids = produce_events(alerts, args.per_event)
        produced = time.monotonic() - t0
        deadline = time.monotonic() + 600
        while not ids <= seen and time.monotonic() < deadline:
            drain(0.2)
        secs = time.monotonic() - t0
        done = len(ids & seen)
        print(json.dumps({"bench": "alert_e2e_throughput", "alerts": len(ids), "ledgered": done,
                          "per_event": args.per_event, "produce_seconds": round(produced, 2),
                          "seconds": round(secs, 2), "alerts_per_s": round(done / secs, 1),
                          "webhook_messages": sink.messages}), flush=True)
        consumer.close()
    finally:
        stack.stop()
        sink.server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
