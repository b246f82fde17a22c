"""On the real broker: the most permissive config the schema takes (a bucket
that never runs dry, batch_size 10,000, max_alerts 0, every alert its own
group) and a storm of large distinct alerts. Every alert reaches the
webhook, and no record on any topic the alert path writes passes
plait.records.MAX_RECORD_BYTES (docs/kafka-rules.md #17). Without the
bound, the message in flight (thousands of ~4 KB alerts in one receiver
value and one notification) made multi-megabyte records and the worker
looped on MessageSizeTooLargeError."""
from __future__ import annotations

import asyncio

import orjson
import pytest

from alert_e2e_support import Receiver, record_sizes, storm_stack, wait_until

from alerting.chunks import join_records
from plait.records import MAX_RECORD_BYTES

pytestmark = pytest.mark.integration

N = 3000


@pytest.mark.timeout(300)
def test_a_storm_under_the_most_permissive_config_delivers_every_alert_in_bounded_records(
        make_stack, tmp_path):
    # given one receiver with a bucket that never runs dry, the largest batch, every alert its group
    receiver = Receiver().start()
    stack, kafka, worker = storm_stack(make_stack, tmp_path, receiver,
                                       {"burst": 1_000_000, "refill_interval": "1s"},
                                       {"group_by": ["alertname", "instance"], "batch_size": 10_000},
                                       max_alerts=0)
    try:
        # when N distinct firing alerts of ~4 KB each arrive, 50 per raw event
        alerts = [{"labels": {"alertname": f"Storm{i % 10}", "instance": f"host-{i:06d}",
                              "severity": "warning"},
                   "annotations": {"description": f"disk {i} almost full; " + "details " * 500}}
                  for i in range(N)]
        for i in range(0, N, 50):
            kafka.send_alerts(alerts[i:i + 50])

        def delivered() -> set[str]:
            assert worker.poll() is None, "the worker died in the storm"
            return {a["fingerprint"] for h in receiver.accepted() for g in h.body["groups"]
                    for a in g["alerts"]}

        # then every alert reaches the webhook, each distinct alert counted once
        wait_until(lambda: len(delivered()) >= N, 180, f"{N} alerts at the webhook")
        assert len(delivered()) == N
        assert max(len(h.body["groups"]) for h in receiver.accepted()) > 500  # large messages
        # and no record the alert path wrote passes the bound, on any of its topics
        # (read once the worker stopped: its ticks never leave alerts.funnel idle)
        worker.terminate()
        worker.wait(30)
        env = stack.env
        prefix, app = env["PLAIT_TOPIC_PREFIX"], env["PLAIT_APP_ID"]
        sizes = asyncio.run(record_sizes(env["PLAIT_BROKER_URL"], lambda t: (
            t.startswith(prefix + "alerts.") or t == prefix + "export.dlq"
            or t.startswith(app + "-alerting"))))
        written = {t: (n, most) for t, (n, most, _v) in sizes.items() if n}
        assert any(t.endswith("-alerting-state-changelog") for t in written), written
        assert {prefix + "alerts.funnel", prefix + "alerts.ledger",
                prefix + "alerts.notifications"} <= set(written), written
        too_big = {t: most for t, (n, most) in written.items() if most > MAX_RECORD_BYTES}
        assert too_big == {}, written
        # and the notifications, joined back from their chunks, list every alert once
        values = sizes[prefix + "alerts.notifications"][2]
        listed = [a["fingerprint"] for v in join_records(values)
                  for s in orjson.loads(v)["sections"] for a in s["alerts"]]
        assert len(listed) == len(set(listed)) == N
        assert "MessageSizeTooLarge" not in (stack.data_dir / "logs" / "worker-0.log").read_text(
            errors="replace")
    finally:
        kafka.close()
        receiver.stop()
