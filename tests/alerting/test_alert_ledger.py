"""The ledger: every raw alert ends in exactly one outcome, the balance holds
after every tick, nothing gets stuck; plus the funnel's delivery edges
(duplicate acks, lost answers, supersede rules, routing, 4xx)."""
from __future__ import annotations

import json
import random

import pytest
from alert_harness import Run, case_config, ev, run

from alerting.funnel import Funnel
from alerting.stages import dispatch


def _storm(seed: int):
    """Random raw alerts over 0..1200 s: 6 rules x 12 assets, random
    severities and statuses, 3% garbage."""
    rng = random.Random(seed)
    events = []
    for _ in range(1500):
        t = round(rng.uniform(0, 1200), 2)
        if rng.random() < 0.03:
            events.append((t, rng.choice([{"rule": "R"}, "junk", {"labels": {"instance": "x"}}, None])))
            continue
        events.append((t, ev(f"R{rng.randrange(6)}", f"h{rng.randrange(12)}",
                             rng.choice(["info", "warning", "critical"]),
                             "resolved" if rng.random() < 0.3 else "firing")))
    return events


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_storm_keeps_the_balance_and_drains(seed):
    # given random alerts, a silence, and a webhook that fails one attempt in three
    rng = random.Random(seed)

    def webhook(m, t):
        if t > 1500:
            return None  # healthy after the storm, so everything can drain
        return rng.choice([None, None, (503, None), (429, 7.0), (None, None, True), (None, None)])

    def setup(f):
        f.add_silence({"matchers": ['asset=~"h1|h2"'], "starts_at": 200, "ends_at": 700,
                       "author": "ops", "comment": "maintenance"}, 0)
    cfg = case_config(grouping={"group_by": ["rule"], "batch_size": 7})
    # when the funnel runs well past the storm (invariant checked after every tick)
    r = run(cfg, _storm(seed), 2400, webhook=webhook, setup=setup)
    c = r.funnel.counters()
    # then every raw alert has exactly one final outcome and nothing is pending
    assert c["received"] == 1500 and c["balanced"] and c["pending"] == 0
    assert len(r.ledger) == 1500 and len({e.raw_id for e in r.ledger}) == 1500
    assert c["rejected"] > 0 and c["silenced"] > 0 and c["deduplicated"] > 0 and c["delivered"] > 0
    # and no message ever listed more than the batch size
    assert max(s.message.alert_count for s in r.attempts) <= 7


def test_rejected_alert_is_counted_with_the_field():
    f = Funnel(case_config())
    [entry] = f.ingest({"rule": "R", "asset": "h1", "severity": "sev9"}, 0)
    assert (entry.outcome, entry.raw_id) == ("rejected", "r1") and entry.reason.startswith("severity")
    assert f.counters()["rejected"] == 1 and f.counters()["balanced"]


def test_state_is_json_and_resumes_mid_flight():
    # given a message in flight whose first attempt failed
    f = Funnel(case_config())
    f.ingest(ev("Disk", "h1"), 0)
    [m] = [m for t in range(31) for m in f.tick(float(t))]
    f.delivery_failed(m.id, 30, status=503)
    # when the state goes through JSON and a new funnel resumes from it
    g = Funnel(f.config, json.loads(json.dumps(f.state, allow_nan=False)))
    # then the retry is the same message and its delivery settles the ledger
    [again] = g.tick(31)
    assert (again.id, again.idempotency_key, again.attempt) == (m.id, m.idempotency_key, 2)
    assert [e.outcome for e in g.delivered(again.id, 31)] == ["delivered"]


def test_duplicate_ack_and_unknown_ids_are_harmless():
    f = Funnel(case_config())
    f.ingest(ev("Disk", "h1"), 0)
    [m] = [m for t in range(31) for m in f.tick(float(t))]
    assert len(f.delivered(m.id, 30)) == 1
    assert f.delivered(m.id, 30) == [] and f.delivery_failed(m.id, 31, status=500) is None
    assert f.counters()["delivered"] == 1


def test_lost_answer_resends_same_message_after_three_timeouts():
    # given a message sent at 30 whose answer never comes back (worker crash)
    f = Funnel(case_config())
    f.ingest(ev("Disk", "h1"), 0)
    [m] = [m for t in range(31) for m in f.tick(float(t))]
    # when ticking on, then it is re-sent with the same key after 3 x timeout (30 s)
    assert [m2 for t in range(31, 60) for m2 in f.tick(float(t))] == []
    [again] = f.tick(60)
    assert again.idempotency_key == m.idempotency_key and f.counters()["attempts_lost"] == 1


def test_ambiguous_failure_is_never_superseded():
    # given a message whose attempt timed out (maybe delivered) and news for the group
    r = Run(Funnel(case_config()), webhook=lambda m, t: (None, None, True) if t < 200 else None)
    r.at(0, ev("Err", "h1"))
    for t in range(0, 100):
        r.tick(float(t))
    r.at(100, ev("Err", "h2"))
    for t in range(100, 300):
        r.tick(float(t))
    # then every attempt before recovery carried the first message only, same key
    early = [s.message for s in r.attempts if s.at < 200]
    assert len({m.idempotency_key for m in early}) == 1
    # and h2 followed in its own message afterwards
    assert [sorted(a["asset"] for a in m.alerts()) for _, m in r.messages()] == [["h1"], ["h1", "h2"]]


def test_client_error_waits_the_cap_and_is_counted():
    f = Funnel(case_config())
    f.ingest(ev("Disk", "h1"), 0)
    [m] = [m for t in range(31) for m in f.tick(float(t))]
    assert f.delivery_failed(m.id, 30, status=400) == 90
    assert f.counters()["client_errors"] == 1 and f.counters()["pending"] == 1


def _poison(refuse, first=None):
    """A webhook answering 400 to a message listing rule ``Poison`` while ``refuse(t)``, and
    ``first`` (when given) to Poison's first attempt."""
    seen = []

    def answer(m, t):
        if not any(a["rule"] == "Poison" for a in m.alerts()):
            return None
        seen.append(t)
        if first is not None and len(seen) == 1:
            return first
        return (400, None) if refuse(t) else None
    return answer


def _one_group_run(webhook, restart=False, merge_groups=False, until=300, batch_size=50,
                   timing=None, bucket=None, events=None) -> Run:
    """A run (group_wait and group_interval 30 s unless ``timing``, no bucket limit unless
    ``bucket``), each second from 0 to ``until``; ``events`` ``[(t, alert)]``, by default
    Poison/h1 at 0, Good/h1 at 10, Poison/h2 at 45."""
    cfg = case_config(grouping={"group_by": ["rule"], "batch_size": batch_size,
                                "merge_groups": merge_groups},
                      receiver={"bucket": bucket or {"burst": 1000, "refill_interval": 1}},
                      **({"timing": timing} if timing else {}))
    r = Run(Funnel(cfg), restart_every_tick=restart, webhook=webhook)
    events = events or [(0, ev("Poison", "h1")), (10, ev("Good", "h1")), (45, ev("Poison", "h2"))]
    for t in range(until + 1):
        for at, alert in events:
            if t == at:
                r.at(t, alert)
        r.tick(float(t))
    return r


def _attempts(r: Run) -> list[tuple]:
    return [(s.at, s.message.alerts()[0]["rule"], sorted(a["asset"] for a in s.message.alerts()),
             s.answer) for s in r.attempts]


@pytest.fixture
def one_lane(monkeypatch):
    """Every group of a receiver through one lane: groups wait behind each other."""
    monkeypatch.setattr(dispatch, "LANES", 1)


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted-each-tick"])
def test_a_group_the_receiver_refuses_holds_no_other_group(restart, one_lane):
    # given one group per message (Alertmanager's way), and a receiver refusing (400) every
    # message with Poison until 100 s
    r = _one_group_run(_poison(lambda t: t < 100), restart)
    # then Good goes at its group_wait (40 s), not after Poison's backoff cap (60 s); Poison is
    # told again at each of its group's flushes, its news of 45 s joining it, as Alertmanager
    # retries a failed flush at the group's next
    assert _attempts(r) == [(30.0, "Poison", ["h1"], (400, None)), (40.0, "Good", ["h1"], None),
                            (60.0, "Poison", ["h1", "h2"], (400, None)),
                            (90.0, "Poison", ["h1", "h2"], (400, None)),
                            (120.0, "Poison", ["h1", "h2"], None)]
    assert r.funnel.counters()["pending"] == 0 and r.funnel.counters()["client_errors"] == 3
    assert r.outcomes() == {"delivered": 3}


def test_a_refusal_after_a_timeout_ends_the_message_too(one_lane):
    # given Poison's first attempt timing out (the receiver may have acted), then refused
    r = _one_group_run(_poison(lambda t: t < 100, first=(None, None, True)))
    # then the refusal ends it: Good goes at its group_wait
    assert (40.0, "Good", ["h1"], None) in _attempts(r)
    assert r.funnel.counters()["pending"] == 0


def test_a_split_group_refused_goes_back_whole(one_lane):
    # given Poison's two alerts in two numbered parts (batch_size 1), refused until 100 s
    r = _one_group_run(_poison(lambda t: t < 100), batch_size=1,
                       events=[(0, ev("Poison", "h1")), (0, ev("Poison", "h2")),
                               (10, ev("Good", "h1"))])
    # then Good goes at its group_wait, and both parts are told once the receiver takes them
    assert (40.0, "Good", ["h1"], None) in _attempts(r)
    assert r.funnel.counters()["pending"] == 0 and r.outcomes() == {"delivered": 3}


def test_a_refused_reminder_is_told_again_at_the_next_flush(one_lane):
    # given a reminder (repeat_interval 300 s) refused once
    r = _one_group_run(_poison(lambda t: 300 < t < 380), until=450,
                       events=[(0, ev("Poison", "h1"))])
    times = [a[0] for a in _attempts(r)]
    # then it is tried again one group_interval later, not a repeat_interval later
    assert times[:3] == [30.0, 360.0, 390.0] and _attempts(r)[1][3] == (400, None)


def test_a_refused_group_is_tried_once_a_flush_when_tokens_are_short(one_lane):
    # given a bucket of 3 tokens, one back every 2 s, and groups due every 10 s
    events = [(0, ev("Poison", "h1"))] + [(0, ev(f"R{i}", "h1")) for i in range(6)]
    r = _one_group_run(_poison(lambda t: t < 100), bucket={"burst": 3, "refill_interval": 2},
                       timing={"group_wait": 10, "group_interval": 10, "repeat_interval": 300,
                               "resolve_timeout": 86400}, events=events, until=150)
    tries = [a[0] for a in _attempts(r) if a[1] == "Poison"]
    # then Poison is refused at most once per group_interval (no pull-forward of a refused one)
    assert all(b - a >= 10 for a, b in zip(tries, tries[1:])), tries
    assert r.funnel.counters()["pending"] == 0


def test_merged_groups_refused_wait_the_cap_and_go_with_the_rest():
    # given groups sharing messages (merge_groups: true): a refusal is the whole message's
    r = _one_group_run(_poison(lambda t: t < 100), merge_groups=True)
    # then it waits the cap, and news queued meanwhile goes with it (supersede)
    assert _attempts(r)[:2] == [(30.0, "Poison", ["h1"], (400, None)),
                                (90.0, "Poison", ["h1", "h1", "h2"], (400, None))]
    assert r.funnel.counters()["pending"] == 0


def test_routes_send_matching_alerts_to_their_receiver():
    cfg = case_config()
    data = cfg.model_dump()
    data["receivers"].append(dict(data["receivers"][0], name="dba"))
    data["route"]["routes"] = [{"matchers": ['team="db"'], "receiver": "dba"}]
    f = Funnel(type(cfg).model_validate(data))
    f.ingest(ev("Slow", "db1", labels={"team": "db"}), 0)
    f.ingest(ev("Slow", "web1"), 0)
    msgs = [m for t in range(31) for m in f.tick(float(t))]
    assert sorted((m.receiver, m.alerts()[0]["asset"]) for m in msgs) == [("dba", "db1"), ("oncall", "web1")]


def _in_flight_lane(f: Funnel, message_id: str) -> str:
    return next(n for n, rs in f.state["receivers"].items()
                if rs["inflight"] is not None and rs["inflight"]["id"] == message_id)


def test_a_reload_that_changes_the_lanes_keeps_a_groups_messages_in_order():
    # given one group per message and an unlimited bucket (16 lanes), a group whose first
    # message is in flight in a lane other than the receiver's own, its news queued behind it
    def cfg(merge):
        return case_config(grouping={"group_by": ["rule"], "batch_size": 50,
                                     "merge_groups": merge},
                           receiver={"bucket": {"burst": 1_000_000, "refill_interval": 1}},
                           delivery={"timeout": 100})  # no answer for 100 s is no loss
    for i in range(100):
        f = Funnel(cfg(False))
        f.ingest(ev(f"X{i}", "h1"), 0)
        [first] = f.tick(30.0)
        if "#" in _in_flight_lane(f, first.id):
            rule = f"X{i}"
            break
    f.ingest(ev(rule, "h2"), 40)
    assert f.tick(60.0) == []  # queued behind its message in flight
    # when a reload makes messages merge groups (one lane), and the group has news again
    f = Funnel(cfg(True), json.loads(json.dumps(f.state)))
    f.ingest(ev(rule, "h1", status="resolved"), 70)
    # then nothing of it leaves while its first message flies, and then one message tells both
    assert f.tick(90.0) == []
    f.delivered(first.id, 95.0)
    [update] = f.tick(96.0)
    assert sorted((a["asset"], a["status"]) for a in update.alerts()) == [
        ("h1", "resolved"), ("h2", "firing")]
    f.delivered(update.id, 96.0)
    assert f.counters()["pending"] == 0 and f.counters()["balanced"]


def test_a_receiver_whose_tokens_are_scarce_keeps_one_lane():
    # given one group per message and a bucket of 3 tokens: lanes would share them unevenly
    f = Funnel(case_config(grouping={"group_by": ["rule"], "batch_size": 50,
                                     "merge_groups": False}))
    for i in range(20):
        f.ingest(ev(f"R{i}", "h1"), 0)
    msgs = f.tick(30.0)
    # then every group waits in the receiver's own outbox, one message at a time
    assert list(f.state["receivers"]) == ["oncall"] and len(msgs) == 1


def test_a_funnel_started_on_a_file_without_a_held_receiver_settles_its_groups():
    # given queued groups for receiver "s", and a worker started on a file without "s"
    def cfg(with_s):
        data = case_config(grouping={"group_by": ["rule"], "batch_size": 50,
                                     "merge_groups": False}).model_dump()
        if with_s:
            data["receivers"].append(dict(data["receivers"][0], name="s"))
            data["route"]["routes"] = [{"receiver": "s", "matchers": ['asset="x"']}]
        return type(case_config()).model_validate(data)
    f = Funnel(cfg(True))
    for i in range(4):
        f.ingest(ev(f"G{i}", "x"), 0)
    assert len(f.tick(30.0)) == 1
    f = Funnel(cfg(False), json.loads(json.dumps(f.state)))
    # then its ticks do not fail, and every group settles as with a receiver of type none
    for t in range(31, 200):
        for m in f.tick(float(t)):
            f.delivered(m.id, float(t))
    assert f.counters()["pending"] == 0 and f.counters()["balanced"]
