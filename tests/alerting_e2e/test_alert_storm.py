"""Issue 11.6 on the real broker: a storm of distinct firing alerts (each its
own group, tokens scarce) never takes the worker down (a 4,000-alert storm
made a 2.5-2.9 MB changelog record: MessageSizeTooLargeError, worker gone),
every alert is ledgered and the ledger balances. 20,000 alerts: five times the
storm that first broke it."""
from __future__ import annotations

from collections import Counter

import pytest

from alert_e2e_support import Receiver, storm_stack, wait_until

from alerting.wire import ledger_entries

pytestmark = pytest.mark.integration


@pytest.mark.timeout(600)
def test_a_storm_of_distinct_alerts_leaves_the_worker_alive_and_every_alert_ledgered(
        make_stack, tmp_path, n=20000):
    # given one receiver with scarce tokens, every alert its own group
    receiver = Receiver().start()
    stack, kafka, worker = storm_stack(make_stack, tmp_path, receiver,
                                       {"burst": 3, "refill_interval": "1s"},
                                       {"group_by": ["rule", "asset"], "batch_size": 2000})
    try:
        # when n distinct firing alerts arrive, 500 per raw event
        ids: list[str] = []
        alerts = [{"rule": f"Storm{i % 10}", "asset": f"host-{i:06d}", "severity": "warning",
                   "annotations": {"summary": "disk almost full on this host " * 3}}
                  for i in range(n)]
        for i in range(0, n, 500):
            ids += kafka.send_alerts(alerts[i:i + 500])
        wanted = set(ids)
        outcomes: dict[str, str] = {}

        def ledgered() -> bool:
            for m in kafka.consumer.consume(5000, 0.2):
                if not m.error():
                    for e in ledger_entries(m.value()):
                        outcomes[e["raw_id"]] = e["outcome"]
            assert worker.poll() is None, "the worker died in the storm"
            return wanted <= set(outcomes)

        kafka._assign("alerts.ledger")
        # then the worker stays alive and ledgers every alert ...
        wait_until(ledgered, 480, f"{n} ledger entries")
        assert worker.poll() is None
        by = Counter(outcomes[i] for i in wanted)
        # ... delivered (each alert once: distinct identities), balanced
        assert by == {"delivered": n} or sum(by.values()) == n, by
        assert sum(by.values()) == n and by["delivered"] + by["merged"] == n, by
        delivered = {a["fingerprint"] for h in receiver.accepted() for g in h.body["groups"]
                     for a in g["alerts"]}
        assert len(delivered) == n
        worker_log = (stack.data_dir / "logs" / "worker-0.log").read_text(errors="replace")
        assert "MessageSizeTooLarge" not in worker_log
    finally:
        kafka.close()
        receiver.stop()
