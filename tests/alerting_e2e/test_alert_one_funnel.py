"""Workers of any role decide each alert once: the alert funnel always runs in
the ``<app id>-alerting`` consumer group (one changelog), whether a worker runs
``--role alerting`` or the default ``--role all``, on the real broker (Tansu)."""
from __future__ import annotations

import signal
import time
import pytest

from alert_e2e_support import (AlertApi, Receiver, fast_timing, native_alerts, wait_until,
                               write_config)

pytestmark = pytest.mark.integration

TIMING = fast_timing()


def funnel_stack(make_stack, tmp_path, receiver, roles: list[str]):
    """A stack whose workers have ``roles`` (names ``worker-<i>``), all ready,
    the funnel grouping by rule and sending native messages to ``/r``."""
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "oncall", "url": receiver.url("/r"), "format": "native"}],
                       grouping={"group_by": ["rule"], "batch_size": 50}, **TIMING)
    stack = make_stack(workers=0, PLAIT_ALERTING_CONFIG=str(cfg))
    for i, role in enumerate(roles):
        stack.spawn_worker(f"worker-{i}", role)
    stack.wait_workers_ready(120)
    api = AlertApi(stack)
    wait_until(lambda: api.counters()["partitions"] >= 4, 60, "the funnel to run")
    return stack, api


def sent(receiver: Receiver) -> dict[tuple, set[str]]:
    """(rule, asset, status) -> the Idempotency-Keys of the accepted messages
    listing it. One key each: every alert state was decided once (a message
    in flight when its worker died is sent again with the same key, an
    at-least-once retry the receiver recognises; a second decision of the
    same alert has a key of its own)."""
    out: dict[tuple, set[str]] = {}
    for h in receiver.accepted("/r"):
        for a in native_alerts(h):
            out.setdefault((a["rule"], a["asset"], a["status"]), set()).add(h.key)
    return out


def fire(api: AlertApi, rules: list[str], status: str = "firing") -> None:
    """POST two alerts (assets h0, h1) per rule."""
    for rule in rules:
        resp = api.post("/alerts", [{"rule": rule, "asset": f"h{i}", "severity": "critical",
                                     "status": status} for i in range(2)])
        assert resp.status_code in (200, 202), resp.text


def settle(api: AlertApi, receiver: Receiver, want: set) -> dict[tuple, set[str]]:
    """Wait until every (rule, asset, status) in ``want`` was sent, then until
    a later marker alert was too (a second funnel decides at the same time
    as the first, so its copies are in by then); returns what was sent."""
    wait_until(lambda: want <= set(sent(receiver)), 60, f"{len(want)} alert states at the webhook")
    marker = f"Marker{time.monotonic_ns()}"
    fire(api, [marker])
    wait_until(lambda: (marker, "h0", "firing") in sent(receiver), 60, "the marker at the webhook")
    return sent(receiver)


def test_a_plain_worker_beside_an_alerting_worker_sends_every_message_once(
        make_stack, tmp_path, receiver):
    # given a `plait worker` (role all) beside a `plait worker --role alerting`
    stack, api = funnel_stack(make_stack, tmp_path, receiver, ["all", "alerting"])
    try:
        # when alerts of six groups fire
        rules = [f"Rule{i}" for i in range(6)]
        fire(api, rules)
        got = settle(api, receiver, {(r, f"h{i}", "firing") for r in rules for i in range(2)})
        # then each alert was decided once: one message (one key) lists it
        assert {k: keys for k, keys in got.items() if len(keys) != 1} == {}
        assert len(got) == 14  # and nothing else came (12 alerts, the marker's 2)
    finally:
        api.stop()


def test_a_killed_alerting_worker_replaced_by_a_plain_worker_repeats_nothing(
        make_stack, tmp_path, receiver):
    # given alerts fired and delivered by a `plait worker --role alerting` (every
    # webhook result applied, so no message is in flight)
    stack, api = funnel_stack(make_stack, tmp_path, receiver, ["alerting"])
    try:
        rules = ["Disk", "Load"]
        fire(api, rules)
        firing = {(r, f"h{i}", "firing") for r in rules for i in range(2)}
        wait_until(lambda: firing <= set(sent(receiver)) and api.counters()["messagesDelivered"]
                   >= len(receiver.accepted("/r")), 60, "the first messages delivered")
        # when it is killed (SIGKILL) and a plain `plait worker` (role all) takes over
        stack.kill("worker-0", signal.SIGKILL)
        killed_at = time.time()
        stack.spawn_worker("worker-1", "all")
        wait_until(lambda: api.partitions_ticked_since(killed_at) == {0, 1, 2, 3}, 120,
                   "the new worker to run the funnel of every partition", 0.5)
        # (and decided whatever it would decide of the alerts it found: a
        # marker fired now is delivered, a group_wait later)
        settle(api, receiver, firing)
        # and the alerts resolve
        fire(api, rules, "resolved")
        resolved = {(r, f"h{i}", "resolved") for r in rules for i in range(2)}
        got = settle(api, receiver, firing | resolved)
        # then each alert fired once and resolved once: the new worker recovered
        # the funnel's state (no early reminder, no second resolve)
        assert {k: keys for k, keys in got.items() if len(keys) != 1} == {}
        assert len(got) == 12  # the 8 states, the markers' 4
    finally:
        api.stop()
