"""The alert funnel end to end through the broker: Tansu, one worker, a local
webhook receiver. Prints one JSON object per line:

    {"bench": "alert_e2e_latency", "alerts", "rate_per_s", "p50_ms", "p99_ms", "max_ms", ...}
    {"bench": "alert_e2e_throughput", "alerts", "per_event", "seconds", "alerts_per_s", ...}

- latency: alerts with new fingerprints produced onto ``alerts.raw`` at a
  steady rate; each is its own group (group_by rule+asset, group_wait 0), so
  the figure is raw alert -> router -> funnel -> tick -> webhook POST
  (milliseconds, from the producer's clock to the receiver's, same host).
- throughput: ``--alerts`` raw alerts (mostly repeats of 500 fingerprints,
  as a storm looks) produced as fast as possible, ``--per-event`` alerts per
  Kafka event; alerts per second from the first produce until the ledger
  (``alerts.ledger``) holds an entry for every one.

Usage: ``python bench/bench_alert_e2e.py [--alerts 20000] [--per-event 1]
[--latency-alerts 500] [--rate 50]``
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from alerting.wire import raw_envelope
from ops.stack import Stack
from plait.topics import Topics


class Sink:
    """Webhook receiver recording, per alert, (send time, arrival time)."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.messages = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                now = time.time()
                with outer.lock:
                    outer.messages += 1
                    for g in body["groups"]:
                        for a in g["alerts"]:
                            sent = a["annotations"].get("sent_at")
                            if sent and a["change"] == "new":
                                outer.latencies.append((now - float(sent)) * 1000)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * len(s))) - 1))]


def wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise TimeoutError(f"timed out waiting for {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--alerts", type=int, default=20_000)
    ap.add_argument("--per-event", type=int, default=1)
    ap.add_argument("--latency-alerts", type=int, default=500)
    ap.add_argument("--rate", type=float, default=50.0)
    args = ap.parse_args()

    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    sink = Sink()
    tmp = Path(tempfile.mkdtemp(prefix="plait-bench-alerts-"))
    cfg = tmp / "alerting.yaml"
    cfg.write_text(yaml.safe_dump({
        "receivers": [{"name": "bench", "url": sink.url, "bucket": {"burst": 1000, "refill_interval": "10ms"}}],
        "route": {"receiver": "bench"},
        "grouping": {"group_by": ["rule", "asset"], "batch_size": 500},
        "timing": {"group_wait": 0, "group_interval": "1s", "repeat_interval": "1h"},
        "dedupe": {"cooldown": "1h"},
    }))
    rid = uuid.uuid4().hex[:8]
    stack = Stack(tmp / "stack", {"PLAIT_TOPIC_PREFIX": f"bench-{rid}.", "PLAIT_APP_ID": f"bench-{rid}",
                                  "PLAIT_REDIS_PREFIX": f"bench-{rid}", "PLAIT_ALERTING_CONFIG": str(cfg),
                                  "PLAIT_LOG_LEVEL": "WARNING"})
    stack.start(workers=1, api=False, demo_data_api=False)
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
                        seen.add(json.loads(m.value())["raw_id"])

        # warm-up: one alert through, so the worker has joined and recovered
        _eid, v = raw_envelope([{"rule": "Warmup", "asset": "w", "severity": "info"}])
        producer.produce(raw, value=v)
        producer.flush(10)
        wait(lambda: sink.messages >= 1, 90, "the worker to deliver a warm-up alert")

        # latency: steady rate, new fingerprints
        n, gap = args.latency_alerts, 1.0 / args.rate
        start = time.monotonic()
        for i in range(n):
            target = start + i * gap
            while time.monotonic() < target:
                time.sleep(min(0.002, max(0.0, target - time.monotonic())))
            _eid, v = raw_envelope([{"rule": "Lat", "asset": f"a{i:05d}", "severity": "warning",
                                     "annotations": {"sent_at": repr(time.time())}}])
            producer.produce(raw, value=v)
            producer.poll(0)
        producer.flush(10)
        wait(lambda: len(sink.latencies) >= n, 120, "every latency alert at the webhook")
        lat = sink.latencies[:n]
        print(json.dumps({"bench": "alert_e2e_latency", "alerts": n, "rate_per_s": args.rate,
                          "p50_ms": round(pct(lat, 0.5), 1), "p99_ms": round(pct(lat, 0.99), 1),
                          "max_ms": round(max(lat), 1), "mean_ms": round(statistics.mean(lat), 1),
                          "webhook_messages": sink.messages}), flush=True)

        # throughput: a storm, mostly repeats
        drain(1.0)
        rnd = random.Random(7)
        alerts = [{"rule": f"R{rnd.randrange(5)}", "asset": f"h{rnd.randrange(100):03d}",
                   "severity": rnd.choice(["warning", "warning", "critical"])} for _ in range(args.alerts)]
        ids: set[str] = set()
        t0 = time.monotonic()
        for i in range(0, len(alerts), args.per_event):
            chunk = alerts[i:i + args.per_event]
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
