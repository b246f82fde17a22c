"""Resolution without a human (issue 16, item 1; docs/alerting.md,
"Resolution without a human"): an alert not re-sent within resolve_timeout
resolves, a Prometheus-form alert at its endsAt, Plait's export rules when
the condition clears. All through the pure funnel with a fake clock."""
from __future__ import annotations

import pytest
from alert_harness import assets, case_config, ev, run

from alerting.intake import format_time
from alerting.rules import DlqWatch, lifecycle_alert, recovery_alerts
from plait.events import Lifecycle


def cfg(**timing):
    return case_config(timing={"resolve_timeout": 300, **timing})


@pytest.fixture(params=[False, True], ids=["live", "restart"])
def restart(request):
    return request.param


def test_alert_never_resent_resolves_after_resolve_timeout(restart):
    # given DiskFull on h1 sent once at 0, resolve_timeout 5 m
    r = run(cfg(), [(0, ev("DiskFull", "h1", "critical"))], 400, restart_every_tick=restart)
    # then a firing message at 30, and a resolved one once 300 s passed (next group_interval tick)
    (t1, m1), (t2, m2) = r.messages()
    assert t1 == 30 and assets(m1, status="firing") == ["h1"]
    assert 300 <= t2 <= 330 and assets(m2, status="resolved", change="resolved") == ["h1"]
    [view] = m2.alerts()
    assert view["ends_at"] == 300 and view["duration"] == 300
    # and nothing is left open; the synthetic resolve adds no raw alert to the ledger
    c = r.funnel.counters()
    assert r.funnel.state["episodes"] == {} and c["received"] == 1 and c["balanced"]
    assert c["auto_resolved"] == 1


def test_alert_resent_in_time_stays_firing(restart):
    # given DiskFull re-sent every 120 s (inside the 300 s resolve_timeout)
    events = [(t, ev("DiskFull", "h1", "critical")) for t in range(0, 700, 120)]
    r = run(cfg(), events, 700, restart_every_tick=restart)
    # then no resolved message at all
    assert not any(assets(m, status="resolved") for _, m in r.messages())
    # and once the re-sends stop (last at 600) it resolves 300 s later
    r2 = run(cfg(), events, 1000)
    resolved = [(t, m) for t, m in r2.messages() if assets(m, status="resolved")]
    assert len(resolved) == 1 and 900 <= resolved[0][0] <= 930


def test_prometheus_form_alert_resolves_at_its_ends_at():
    # given a Prometheus-form alert whose endsAt is 90 (not re-sent)
    alert = {"labels": {"alertname": "PodDown", "pod": "api-1"}, "startsAt": format_time(0),
             "endsAt": format_time(90)}
    r = run(cfg(), [(0, alert)], 200)
    # then it resolves at 90 (its endsAt), not after resolve_timeout
    (_, m1), (t2, m2) = r.messages()
    [view] = m2.alerts()
    assert view["status"] == "resolved" and view["ends_at"] == 90 and t2 <= 120


def test_silenced_alert_that_expires_ends_quietly():
    # given a silence over h1 and h1 sent once
    def setup(f):
        f.add_silence({"matchers": ['asset="h1"'], "createdBy": "me", "comment": "maint",
                       "startsAt": format_time(0), "endsAt": format_time(10_000)}, 0)
    r = run(cfg(), [(0, ev("DiskFull", "h1"))], 400, setup=setup)
    # then nothing is sent and the episode is gone after resolve_timeout
    assert r.messages() == [] and r.funnel.state["episodes"] == {}
    assert r.funnel.counters()["balanced"]


def _lc(status: str, task: str, at: float) -> Lifecycle:
    return Lifecycle(taskId=task, status=status, sysCode="BILL", bizType="daily",
                     errorMessage="data API answered HTTP 500" if status == "FAILED" else None,
                     at=format_time(at))


def _rules(event: Lifecycle, resolve_after: float = 86400.0) -> list[dict]:
    alert = lifecycle_alert(event, resolve_after)
    return [alert] if alert is not None else recovery_alerts(event)


def test_failed_export_then_success_is_one_firing_and_one_resolved_message(restart):
    # given task t1 of BILL/daily FAILED at 0 and the next run t2 SUCCESS at 200
    events = [(0, a) for a in _rules(_lc("FAILED", "t1", 0))]
    events += [(200, a) for a in _rules(_lc("SUCCESS", "t2", 200))]
    r = run(case_config(), events, 1000, restart_every_tick=restart)
    # then exactly two messages: ExportFailed firing, then resolved
    (t1, m1), (t2, m2) = r.messages()
    assert [(a["rule"], a["asset"], a["status"]) for a in m1.alerts()] == \
        [("ExportFailed", "BILL/daily", "firing")]
    assert [(a["rule"], a["status"]) for a in m2.alerts()] == [("ExportFailed", "resolved")]
    assert t1 == 30 and 200 <= t2 <= 230
    # the ExportTimeout resolve that came along had nothing open: deduplicated, not sent
    assert r.outcomes() == {"delivered": 2, "deduplicated": 1}


def test_failed_export_resolves_after_its_own_timeout():
    # given a FAILED export at 0 with failed_resolve_after 600 and no later success
    events = [(0, a) for a in _rules(_lc("FAILED", "t1", 0), resolve_after=600)]
    r = run(case_config(), events, 800)
    # then (after the firing message and its reminder at 330) it resolves at
    # 600, its endsAt, although resolve_timeout is a day here
    (_, m1), (_, reminder), (t2, m2) = r.messages()
    assert reminder.sections[0]["reminder"]
    [view] = m2.alerts()
    assert view["status"] == "resolved" and view["ends_at"] == 600 and 600 <= t2 <= 630


def test_success_without_failure_on_record_raises_nothing():
    # the agent sends recovery alerts only when a failure is on record; the
    # pure rule gives them for every SUCCESS and nothing for other statuses
    assert [a["rule"] for a in recovery_alerts(_lc("SUCCESS", "t2", 0))] == ["ExportFailed", "ExportTimeout"]
    assert recovery_alerts(_lc("RUNNING", "t2", 0)) == []
    assert lifecycle_alert(_lc("FAILED", "t1", 0), 60)["endsAt"] == format_time(60)


def test_dlq_growth_resolves_when_the_dlq_stops_growing():
    watch = DlqWatch(window=60, threshold=3)
    fired = [watch.observe(t) for t in (0, 1, 2)]
    assert fired[-1]["status"] == "firing"
    # still growing at 50: no change; stops: resolved once a window passed without one
    assert watch.observe(50) is None and watch.check(100) is None
    assert watch.check(111)["status"] == "resolved"


def test_state_from_before_expiry_is_backfilled_on_load():
    from alerting.funnel import Funnel
    f = Funnel(cfg())
    f.ingest(ev("DiskFull", "h1"), 0)
    state = f.state
    state.pop("next_expiry")
    for ep in state["episodes"].values():
        ep.pop("expires_at")
    g = Funnel(cfg(), state)
    g.tick(30)
    assert g.state["episodes"] and all(ep["expires_at"] == 300 for ep in g.state["episodes"].values())
    g.tick(301)
    assert all(ep["status"] == "resolved" for ep in g.state["episodes"].values())
