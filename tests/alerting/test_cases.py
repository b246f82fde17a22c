"""Cases A1..A13 of docs/alerting.md ("The alerting cases") through the pure funnel.

A fake clock ticks the funnel every second; a scripted webhook answers each
message; the ledger invariant is checked after every tick (alert_harness).
Each case runs twice: live, and restarting the funnel from its JSON state on
every tick (the state must be plain data for changelog-backed tables).
"""
from __future__ import annotations

import pytest
from alert_harness import assets, case_config, ev, run

from alerting.delivery import render_alertmanager, render_body
from alerting.funnel import Funnel
from alerting.intake import ZERO_TIME, from_alertmanager
from alerting.silence import SilenceRefused


@pytest.fixture(params=[False, True], ids=["live", "restart"])
def restart(request):
    return request.param


def test_a1_resolve_does_not_wait(restart):
    # given DiskFull firing on h1 at 0 and resolved at 60
    events = [(0, ev("DiskFull", "h1", "critical")), (60, ev("DiskFull", "h1", "critical", "resolved"))]
    # when the funnel runs to t=200
    r = run(case_config(), events, 200, restart_every_tick=restart)
    # then exactly two messages: h1 firing at 30, h1 resolved by 90
    msgs = r.messages()
    assert [t for t, _ in msgs] == [30, 60]
    assert assets(msgs[0][1], status="firing", change="new") == ["h1"]
    assert assets(msgs[1][1], status="resolved", change="resolved") == ["h1"]
    assert r.outcomes() == {"delivered": 2}


def test_a2_fired_and_resolved_inside_first_window(restart):
    # given Ping on h2 firing at 0 and resolved at 10
    events = [(0, ev("Ping", "h2")), (10, ev("Ping", "h2", status="resolved"))]
    # when the funnel runs
    r = run(case_config(), events, 200, restart_every_tick=restart)
    # then one message at 30 lists h2 resolved, transient, fired for 10 s; no firing-only message
    msgs = r.messages()
    assert [t for t, _ in msgs] == [30]
    [view] = msgs[0][1].alerts()
    assert (view["asset"], view["status"], view["transient"], view["duration"]) == ("h2", "resolved", True, 10)
    assert not any(assets(m, status="firing") for _, m in msgs)


def test_a2_transient_suppression_sends_nothing_and_counts(restart):
    # given transient suppression switched on
    cfg = case_config(dedupe={"fingerprint_labels": ["rule", "asset"], "cooldown": 300,
                              "suppress_transient": True})
    events = [(0, ev("Ping", "h2")), (10, ev("Ping", "h2", status="resolved"))]
    # when the funnel runs
    r = run(cfg, events, 200, restart_every_tick=restart)
    # then no message, one transient counted, both raw alerts accounted for
    assert r.messages() == []
    assert r.funnel.counters()["transient_suppressed"] == 1
    assert sorted((e.outcome, e.reason) for e in r.ledger) == [("deduplicated", "transient")] * 2


def test_a3_partial_resolution_tells_only_the_news(restart):
    # given Lat firing on h1..h4 at 0 and h3 resolved at 100
    events = [(0, ev("Lat", f"h{i}")) for i in range(1, 5)] + [(100, ev("Lat", "h3", status="resolved"))]
    # when the funnel runs to 200
    r = run(case_config(), events, 200, restart_every_tick=restart)
    # then msg@30 with 4 firing, then by 130 a message whose news is only h3 resolved
    (t1, m1), (t2, m2) = r.messages()
    assert t1 == 30 and sorted(assets(m1, change="new")) == ["h1", "h2", "h3", "h4"]
    assert 100 <= t2 <= 130
    assert assets(m2) == ["h3"] and assets(m2, change="resolved") == ["h3"]
    assert assets(m2, change="new") == []
    assert m2.sections[0]["counts"]["still_firing"] == 3


def test_a4_repeat_interval_on_the_group_interval_grid(restart):
    # given R=120, group_wait = group_interval = 90, Mem on h5 re-sent every 10 s until 400
    cfg = case_config(timing={"group_wait": 90, "group_interval": 90, "repeat_interval": 120})
    events = [(t, ev("Mem", "h5", "critical")) for t in range(0, 401, 10)]
    # when the funnel runs to 460
    r = run(cfg, events, 460, restart_every_tick=restart)
    # then msg@90 and reminders at the first flushes (90 + k * 90) strictly
    # after 90 + 120 and 270 + 120: 270 and 450; nothing for the repeats themselves
    msgs = r.messages()
    assert [t for t, _ in msgs] == [90, 270, 450]
    assert [m.sections[0]["reminder"] for _, m in msgs] == [False, True, True]
    assert r.outcomes()["deduplicated"] >= 38


def test_a5_429_honours_retry_after(restart):
    # given a webhook that answers the first POST with 429 Retry-After: 20, then 200
    answers = iter([(429, 20.0)])
    # when Q fires on h9 at 0
    r = run(case_config(), [(0, ev("Q", "h9"))], 120, restart_every_tick=restart,
            webhook=lambda m, t: next(answers, None))
    # then the retry comes at t >= 50 with the same idempotency key, delivered once
    assert [s.at for s in r.attempts] == [30, 50]
    assert r.attempts[0].message.idempotency_key == r.attempts[1].message.idempotency_key
    assert [s.message.attempt for s in r.attempts] == [1, 2]
    assert len(r.messages()) == 1
    assert r.funnel.counters()["http_429"] == 1


def test_a6_receiver_down_ten_minutes(restart):
    # given a webhook answering 503 until t=600, then 200
    def webhook(m, t):
        return (503, None) if t < 600 else None
    events = [(t, ev("Err", f"h{i}")) for i, t in enumerate((0, 100, 200, 300), start=1)]
    # when the funnel runs to 800
    r = run(case_config(), events, 800, restart_every_tick=restart, webhook=webhook)
    # then at most 15 attempts before 600 (backoff capped at 60 s) ...
    assert len([s for s in r.attempts if s.at < 600]) <= 15
    gaps = [b.at - a.at for a, b in zip(r.attempts, r.attempts[1:])]
    assert max(gaps) <= 60
    # ... and after recovery one message with h1..h4; nothing dropped
    [(t, msg)] = r.messages()
    assert t < 700 and sorted(assets(msg, status="firing")) == ["h1", "h2", "h3", "h4"]
    assert r.funnel.counters()["pending"] == 0
    assert sum(r.outcomes().values()) == 4


def test_a7_storm_is_merged_never_dropped(restart):
    # given every asset its own group and 500 NodeDown alerts spread over 0..10 s
    cfg = case_config(grouping={"group_by": ["asset"], "batch_size": 50})
    events = [(i * 10 / 500, ev("NodeDown", f"n{i + 1:03d}", "critical")) for i in range(500)]
    # when the funnel runs to 300
    r = run(cfg, events, 150, restart_every_tick=restart)
    msgs = r.messages()
    times = [t for t, _ in msgs]
    # then 3 messages around t=30 (the burst), then one every 10 s
    assert all(30 <= t <= 32 for t in times[:3])
    assert all(b - a == 10 for a, b in zip(times[3:], times[4:]))
    assert times[3] == 40
    # and no message over 50 alerts; every alert exactly once; merges are counted
    assert max(m.alert_count for _, m in msgs) <= 50
    listed = [a for _, m in msgs for a in assets(m)]
    assert sorted(listed) == [f"n{i:03d}" for i in range(1, 501)]
    later = [m for t, m in msgs if t >= 40]
    assert later and all(m.merged_groups == m.merged_alerts == m.alert_count for m in later)
    out = r.outcomes()
    assert out["merged"] == sum(m.merged_alerts for _, m in msgs) and out["merged"] + out["delivered"] == 500


def test_a8_large_group_is_split_never_truncated(restart):
    # given 120 firing X alerts on h001..h120 between 0 and 5 s
    events = [(i * 5 / 120, ev("X", f"h{i + 1:03d}")) for i in range(120)]
    # when the funnel runs
    r = run(case_config(), events, 120, restart_every_tick=restart)
    # then three parts 50/50/20 of one group, numbered 1/3..3/3, 120 alerts in all
    sections = [s for _, m in r.messages() for s in m.sections]
    assert [len(s["alerts"]) for s in sections] == [50, 50, 20]
    assert [(s["part"], s["parts"]) for s in sections] == [(1, 3), (2, 3), (3, 3)]
    assert len({s["group_id"] for s in sections}) == 1
    assert len({a["asset"] for s in sections for a in s["alerts"]}) == 120
    for _, m in r.messages():  # nothing reported as truncated in either format
        assert render_alertmanager(m)["truncatedAlerts"] == 0
        assert b"truncat" not in render_body(m, "native")


def test_a9_broad_silence_refused_unless_allowed(restart):
    spec = {"matchers": ['env!~"prod.*"'], "starts_at": 0, "ends_at": 1000,
            "author": "ops", "comment": "everything but prod"}
    # given a silence whose only matcher matches alerts without env: refused
    with pytest.raises(SilenceRefused) as err:
        Funnel(case_config()).add_silence(spec, 0)
    assert err.value.field == "matchers"
    # when it is created with allow_broad and Disk on h14 (no env label) fires at 10
    ids = []
    r = run(case_config(), [(10, ev("Disk", "h14", "critical"))], 100, restart_every_tick=restart,
            setup=lambda f: ids.append(f.add_silence(dict(spec, allow_broad=True), 0).id))
    # then the alert is silenced and counted against that silence
    assert r.messages() == []
    assert r.funnel.counters()["silenced_by"] == {ids[0]: 1}
    assert [(e.outcome, e.silence_id) for e in r.ledger] == [("silenced", ids[0])]


def test_a10_end_of_maintenance_window(restart):
    # given a window [0, 600) for h16; Disk firing every 30 s from 100 to 900; Cpu 150..400
    events = [(t, ev("Disk", "h16", "critical")) for t in range(100, 901, 30)]
    events += [(150, ev("Cpu", "h16")), (400, ev("Cpu", "h16", status="resolved"))]
    ids = []
    setup = lambda f: ids.append(f.add_silence(  # noqa: E731
        {"matchers": ['asset="h16"'], "starts_at": 0, "ends_at": 600,
         "author": "ops", "comment": "maintenance"}, 0).id)
    # when the funnel runs to 960
    r = run(case_config(), events, 960, restart_every_tick=restart, setup=setup)
    msgs = r.messages()
    # then nothing before 600; Disk repeats and both Cpu events counted against the silence
    assert all(t >= 600 for t, _ in msgs)
    assert r.funnel.counters()["silenced_by"] == {ids[0]: 17 + 2}
    # and by 630 one message says Disk h16 has been firing since 100; Cpu never appears
    t, first = msgs[0]
    assert t <= 630 and assets(first, rule="Disk", status="firing") == ["h16"]
    assert first.alerts()[0]["starts_at"] == 100
    assert not any(a["rule"] == "Cpu" for _, m in msgs for a in m.alerts())


def test_a11_escalation_inside_cooldown(restart):
    # given Lat on h17: warning 0, critical 60, warning 120, resolved 400
    events = [(0, ev("Lat", "h17", "warning")), (60, ev("Lat", "h17", "critical")),
              (120, ev("Lat", "h17", "warning")), (400, ev("Lat", "h17", "warning", "resolved"))]
    # when the funnel runs to 500
    r = run(case_config(), events, 500, restart_every_tick=restart)
    msgs = r.messages()
    # then warning at 30, critical escalated from warning by 90, resolved by 430
    assert msgs[0][0] == 30 and msgs[0][1].alerts()[0]["severity"] == "warning"
    t, esc = msgs[1]
    assert t <= 90 and (esc.alerts()[0]["severity"], esc.alerts()[0]["change"],
                        esc.alerts()[0]["escalated_from"]) == ("critical", "escalated", "warning")
    # no page for the de-escalation (only the R=300 reminder, still critical)
    between = [(t, m) for t, m in msgs[2:] if t < 400]
    assert all(m.sections[0]["reminder"] and m.alerts()[0]["severity"] == "critical" for _, m in between)
    assert r.funnel.counters()["deescalations"] == 1
    t, res = msgs[-1]
    assert 400 <= t <= 430 and assets(res, status="resolved") == ["h17"]
    assert len({a["fingerprint"] for _, m in msgs for a in m.alerts()}) == 1


def test_a12_repeated_resolves_are_deduplicated(restart):
    # given Up on h18 firing at 0, resolved at 100, the resolve re-sent every 10 s until 400
    events = [(0, ev("Up", "h18", "critical"))]
    events += [(t, ev("Up", "h18", "critical", "resolved")) for t in range(100, 401, 10)]
    # when the funnel runs to 500
    r = run(case_config(), events, 500, restart_every_tick=restart)
    msgs = r.messages()
    # then exactly one resolved message by 130 and no firing message after it
    resolved = [t for t, m in msgs if assets(m, status="resolved")]
    assert len(resolved) == 1 and resolved[0] <= 130
    assert not any(assets(m, status="firing") for t, m in msgs if t >= resolved[0])
    assert r.funnel.counters()["dedupe_reasons"] == {"resolve_repeat": 30}


def test_a13_alertmanager_in_alertmanager_out():
    # given two Alertmanager alerts with labels, annotations, startsAt and no endsAt
    body = [{"labels": {"alertname": "HighLoad", "instance": f"web{i}:9100", "severity": "critical"},
             "annotations": {"summary": f"load on web{i}"}, "startsAt": "2024-05-01T10:00:00Z"}
            for i in (1, 2)]
    alerts = from_alertmanager(body, now=1_714_557_600.0)
    funnel = Funnel(case_config(receiver={"format": "alertmanager"}))
    # when they go through the funnel
    for a in alerts:
        assert funnel.ingest(a, 1_714_557_600.0) == []
    msgs = []
    for s in range(0, 40):
        msgs += funnel.tick(1_714_557_600.0 + s)
    # then one message in Alertmanager's webhook format, version 4, nothing truncated
    [msg] = msgs
    payload = render_alertmanager(msg)
    assert payload["version"] == "4" and payload["status"] == "firing"
    assert payload["truncatedAlerts"] == 0
    assert payload["groupLabels"] == {"alertname": "HighLoad"}  # group_by [rule] = [alertname]
    assert payload["commonLabels"] == {"alertname": "HighLoad", "severity": "critical"}
    assert len(payload["alerts"]) == 2
    for a in payload["alerts"]:
        assert len(a["fingerprint"]) == 16
        assert a["startsAt"] == "2024-05-01T10:00:00Z" and a["endsAt"] == ZERO_TIME
        assert a["status"] == "firing" and a["annotations"]["summary"].startswith("load on web")
