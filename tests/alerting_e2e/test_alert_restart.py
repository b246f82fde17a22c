"""A worker killed with pending funnel state: the next worker recovers the
state from the changelog table, re-sends nothing already delivered and loses
nothing pending."""
from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from alert_e2e_support import AlertApi, Kafka, Receiver, native_alerts, wait_until, write_config

pytestmark = pytest.mark.integration


def test_restart_resends_nothing_delivered_and_loses_nothing_pending(make_stack, tmp_path):
    # given a funnel whose groups wait 6 s before their first message
    receiver = Receiver().start()
    cfg = write_config(tmp_path / "alerting.yaml", [{"name": "oncall", "url": receiver.url("/r")}],
                       grouping={"group_by": ["rule"], "batch_size": 50},
                       timing={"group_wait": "6s", "group_interval": "3s", "repeat_interval": "1h"},
                       delivery={"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "2s"})
    stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
    api, kafka = AlertApi(stack), Kafka(stack)
    try:
        wait_until(lambda: api.counters()["partitions"] >= 4, 60, "the funnel worker to run")
        # and a first group delivered
        first = api.post("/alerts", [{"rule": "Before", "asset": f"h{i}", "severity": "critical"}
                                     for i in range(3)]).json()["data"]["ids"]
        wait_until(lambda: set(first) <= {e["raw_id"] for e in kafka.read_ledger()}, 40,
                   "the first group delivered")
        # and a second group pending (ingested, its group_wait not over)
        later = api.post("/alerts", [{"rule": "After", "asset": f"h{i}", "severity": "warning"}
                                     for i in range(4)]).json()["data"]["ids"]
        wait_until(lambda: api.counters()["pending"] == 4, 5, "4 pending alerts", 0.05)
        # when the worker is killed (SIGKILL) before the second group is due
        stack.kill("worker-0", signal.SIGKILL)
        killed_at = time.time()
        assert not any(a["rule"] == "After" for h in receiver.hits for a in native_alerts(h))
        stack.spawn_worker("worker-1")
        # then the new worker takes over every funnel partition: it starts, waits out the
        # killed member's session in the group's rebalance, recovers the table (slow under load)
        wait_until(lambda: api.partitions_ticked_since(killed_at) == {0, 1, 2, 3}, 120,
                   "the restarted worker to run the funnel of every partition", 0.5)
        # and delivers the pending group, whose group_wait is over, on its next ticks
        wait_until(lambda: set(later) <= {e["raw_id"] for e in kafka.read_ledger()
                                          if e["outcome"] == "delivered"}, 30,
                   "the pending group delivered after the restart")
        # and nothing was sent twice: each alert in one accepted message, each key once
        ok = receiver.accepted("/r")
        listed = Counter((a["rule"], a["asset"]) for h in ok for a in native_alerts(h))
        assert len(listed) == 7 and set(listed.values()) == {1}, listed
        assert set(Counter(h.key for h in ok).values()) == {1}
        by_id = kafka.ledger_by_id()
        assert all(len(by_id[r]) == 1 for r in first + later), by_id
        # and the counters were recovered, not restarted
        c = wait_until(lambda: (lambda c: c if c["pending"] == 0 else None)(api.counters()), 10,
                       "counters to settle")
        assert c["received"] == 7 and c["delivered"] == 7 and c["balanced"]
    finally:
        api.stop()
        kafka.close()
        receiver.stop()
