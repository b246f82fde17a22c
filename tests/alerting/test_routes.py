"""Per-route rules Alertmanager users expect (issue 16, item 4): ``continue``
(one alert to several receivers), nested routes with their own group_by and
timings, mute / active time intervals. (``send_resolved`` and ``max_alerts``:
tests/alerting/test_receivers.py.)"""
from __future__ import annotations

import pytest
from alert_harness import ev, run

from alerting.config import ConfigError, parse_config
from alerting.routing import route_by_id, route_by_key, routes_for

T0 = 1_796_007_600.0  # 2026-11-30T03:00:00Z, a Monday


def cfg(routes, **extra):
    data = {"receivers": [{"name": n, "url": f"http://127.0.0.1:9/{n}"} for n in ("oncall", "dba", "audit")],
            "route": {"receiver": "oncall", "routes": routes},
            "grouping": {"group_by": ["rule"]},
            "timing": {"group_wait": 30, "group_interval": 30, "repeat_interval": 3600,
                       "resolve_timeout": 86400}}
    data.update(extra)
    return parse_config(data)


def by_receiver(r, reminders=False):
    out = {}
    for t, m in r.messages():
        if not reminders and all(s["reminder"] for s in m.sections):
            continue
        out.setdefault(m.receiver, []).append((t, m))
    return out


def test_routes_for_walks_the_tree_like_alertmanager():
    c = cfg([{"matchers": ['team="db"'], "receiver": "dba", "continue": True,
              "routes": [{"matchers": ['severity="critical"'], "group_wait": 5}]},
             {"matchers": ['team=~".+"'], "receiver": "audit"},
             {"matchers": ['team="db"'], "receiver": "oncall"}])
    got = routes_for(c, {"team": "db", "severity": "critical"})
    # nested critical route under dba (inherits receiver, own group_wait), then audit
    # (continue on the db route); the third sibling is never reached (audit has no continue)
    assert [(r.id, r.receiver, r.group_wait) for r in got] == [("0.0.0", "dba", 5), ("0.1", "audit", 30)]
    assert [r.receiver for r in routes_for(c, {"team": "db", "severity": "warning"})] == ["dba", "audit"]
    assert [r.id for r in routes_for(c, {"severity": "critical"})] == ["0"]  # the root catches the rest


def test_each_config_walks_its_own_tree():
    """The tree is built once per config object (alerting.routing._tree):
    configs alike but for one matcher or receiver never share a tree, and
    ``=`` matchers (dict lookups) agree with the others, absent label = ""."""
    a = cfg([{"matchers": ['team="db"'], "receiver": "dba"}])
    b = cfg([{"matchers": ['team="db"'], "receiver": "audit"}])
    c = cfg([{"matchers": ['team=""', 'env!~"prod"'], "receiver": "audit"}])
    for _ in range(2):  # the second walk takes the built trees
        assert [r.receiver for r in routes_for(a, {"team": "db"})] == ["dba"]
        assert [r.receiver for r in routes_for(b, {"team": "db"})] == ["audit"]
        assert [r.receiver for r in routes_for(c, {"env": "dev"})] == ["audit"]
        assert [r.receiver for r in routes_for(c, {"env": "prod"})] == ["oncall"]
        assert [r.receiver for r in routes_for(c, {"team": "db"})] == ["oncall"]
    assert route_by_id(a, "0.0").receiver == "dba"
    assert route_by_id(a, "0.1") is None and route_by_id(a, "0.-1") is None  # ids are positions
    for i in range(100):  # more configs than the trees kept: each still its own
        other = cfg([{"matchers": [f'n="{i}"'], "receiver": "dba"}])
        assert routes_for(other, {"n": str(i)})[0].receiver == "dba"
    assert [r.receiver for r in routes_for(a, {"team": "db"})] == ["dba"]


def test_continue_sends_one_alert_to_several_receivers():
    c = cfg([{"matchers": ['team="db"'], "receiver": "dba", "continue": True},
             {"matchers": ['severity="critical"'], "receiver": "audit"}])
    r = run(c, [(0, ev("DiskFull", "db1", "critical", labels={"team": "db"}))], 100)
    got = by_receiver(r)
    assert sorted(got) == ["audit", "dba"]
    assert [a["asset"] for _, m in got["dba"] for a in m.alerts()] == ["db1"]
    assert [a["asset"] for _, m in got["audit"] for a in m.alerts()] == ["db1"]
    # each copy is its own ledger unit: received 2, delivered 2, balanced
    c2 = r.funnel.counters()
    assert (c2["received"], c2["delivered"], c2["balanced"]) == (2, 2, True)
    # and the resolve reaches both too
    events = [(0, ev("DiskFull", "db1", "critical", labels={"team": "db"})),
              (50, ev("DiskFull", "db1", "critical", "resolved", labels={"team": "db"}))]
    got = by_receiver(run(c, events, 200))
    assert all([a["status"] for a in got[n][-1][1].alerts()] == ["resolved"] for n in ("dba", "audit"))


def test_nested_route_has_its_own_group_by_and_timings():
    c = cfg([{"matchers": ['team="db"'], "receiver": "dba", "group_by": ["asset"],
              "group_wait": 5, "group_interval": 10}])
    events = [(0, ev("DiskFull", "db1", labels={"team": "db"})), (0, ev("DiskFull", "db2", labels={"team": "db"})),
              (0, ev("DiskFull", "web1"))]
    got = by_receiver(run(c, events, 60))
    # dba: one group per asset (two sections of one message), after 5 s;
    # oncall: grouped by rule after 30 s
    [(t, m)] = got["dba"]
    assert t == 5 and sorted((s["group_labels"]["asset"], len(s["alerts"])) for s in m.sections) == \
        [("db1", 1), ("db2", 1)]
    assert [(t, [a["asset"] for a in m.alerts()]) for t, m in got["oncall"]] == [(30, ["web1"])]


def test_group_by_all_labels_groups_each_label_set_apart_as_alertmanager():
    from alerting.delivery import am_group_labels

    # given group_by ['...'] (Alertmanager: every label is a group label) on a nested route
    c = cfg([{"matchers": ['team="db"'], "receiver": "dba", "group_by": ["..."], "group_wait": 5}])
    pod = {"alertname": "PodDown", "team": "db", "instance": "i1"}
    events = [(0, {"labels": dict(pod, pod="api-1")}), (0, {"labels": dict(pod, pod="api-2")}),
              (0, {"labels": dict(pod, pod="api-2")})]
    [(t, m)] = by_receiver(run(c, events, 10))["dba"]
    # then one group per label set, labelled with the whole set
    assert t == 5 and sorted(am_group_labels(s["group_labels"])["pod"] for s in m.sections) == [
        "api-1", "api-2"]
    assert all(s["group_labels"] == dict(pod, pod=s["group_labels"]["pod"]) for s in m.sections)
    # and `...` stands alone, as Alertmanager's loader requires
    with pytest.raises(ConfigError, match=r"route\.routes\.0\.group_by: cannot have wildcard"):
        cfg([{"matchers": ['a="b"'], "group_by": ["...", "pod"]}])
    with pytest.raises(ConfigError, match=r"grouping\.group_by: cannot have wildcard"):
        cfg([], grouping={"group_by": ["rule", "..."]})
    with pytest.raises(ConfigError, match=r"grouping\.group_by: duplicated label 'rule'"):
        cfg([], grouping={"group_by": ["rule", "asset", "rule"]})
    assert cfg([], grouping={"group_by": ["...", "..."]}).grouping.group_by == ["..."]


def test_an_alertmanager_alert_without_severity_has_none_for_routes_and_groups():
    # Alertmanager: an absent label is "" to a matcher and no group label; Plait used to
    # give such an alert its default severity there too
    c = cfg([{"matchers": ['severity="warning"'], "receiver": "dba"}],
            grouping={"group_by": ["alertname", "severity"]})
    events = [(0, {"labels": {"alertname": "Lat", "instance": "i1"}}),
              (0, {"labels": {"alertname": "Lat", "instance": "i2", "severity": "warning"}})]
    got = by_receiver(run(c, events, 40))
    [(_t, dba)], [(_t2, oncall)] = got["dba"], got["oncall"]
    assert [a["labels"]["instance"] for a in dba.alerts()] == ["i2"]
    assert [a["labels"]["instance"] for a in oncall.alerts()] == ["i1"]
    assert oncall.sections[0]["group_labels"] == {"alertname": "Lat", "severity": ""}


def _clocked(c, events, until, start=T0):
    """run() with epoch times: events and ticks offset by ``start``."""
    from alert_harness import Run
    from alerting.funnel import Funnel
    r = Run(Funnel(c))
    pending = sorted(events, key=lambda e: e[0])
    i = 0
    for s in range(0, until + 1, 10):
        while i < len(pending) and pending[i][0] <= s:
            r.at(start + pending[i][0], pending[i][1])
            i += 1
        r.tick(start + s)
    return r


NIGHT = {"name": "night", "time_intervals": [{"times": [{"start_time": "00:00", "end_time": "06:00"}]}]}
OFFICE = {"name": "office", "time_intervals": [{"weekdays": ["monday:friday"],
                                                "times": [{"start_time": "09:00", "end_time": "17:00"}],
                                                "location": "Europe/Paris"}]}


def test_mute_time_interval_holds_notifications_until_it_ends():
    c = cfg([{"matchers": ['severity="warning"'], "receiver": "dba", "mute_time_intervals": ["night"]}],
            time_intervals=[NIGHT])
    # a warning at 03:00 (muted at night) and a critical (root route, not muted)
    r = _clocked(c, [(0, ev("SlowQuery", "db1")), (0, ev("DiskFull", "db1", "critical"))], 4 * 3600)
    got = by_receiver(r)
    assert [t - T0 for t, _ in got["oncall"]] == [30]
    assert [t - T0 for t, _ in got["dba"]] == [3 * 3600]  # 06:00, when the night ends


def test_active_time_interval_sends_only_inside_it():
    c = cfg([{"matchers": ['severity="warning"'], "receiver": "dba", "active_time_intervals": ["office"]}],
            time_intervals=[OFFICE])
    # 03:00 UTC Monday = 04:00 in Paris: held until 09:00 Paris = 08:00 UTC
    r = _clocked(c, [(0, ev("SlowQuery", "db1"))], 6 * 3600)
    assert [t - T0 for t, _ in by_receiver(r)["dba"]] == [5 * 3600]


def test_route_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"route\.routes\.0\.mute_time_intervals\.0: unknown time interval 'night'"):
        cfg([{"matchers": ['a="b"'], "mute_time_intervals": ["night"]}])
    with pytest.raises(ConfigError, match=r"route\.routes\.0\.routes\.0\.receiver: unknown receiver 'nobody'"):
        cfg([{"matchers": ['a="b"'], "routes": [{"matchers": ['c="d"'], "receiver": "nobody"}]}])
    with pytest.raises(ConfigError, match="unknown weekday 'funday'"):
        cfg([], time_intervals=[{"name": "x", "time_intervals": [{"weekdays": ["funday"]}]}])
    with pytest.raises(ConfigError, match="bad month 'smarch'"):
        cfg([], time_intervals=[{"name": "x", "time_intervals": [{"months": ["smarch"]}]}])
    with pytest.raises(ConfigError, match="bad day of month '-1'"):
        cfg([], time_intervals=[{"name": "x", "time_intervals": [{"days_of_month": ["-1"]}]}])
    with pytest.raises(ConfigError, match="expected HH:MM"):
        cfg([], time_intervals=[{"name": "x", "time_intervals": [{"times": [{"start_time": "9", "end_time": "17:00"}]}]}])


def test_interval_fields_weekday_month_and_day():
    from alerting.routing import interval_matches
    c = cfg([], time_intervals=[{"name": "x", "time_intervals": [
        {"weekdays": ["saturday", "monday:tuesday"], "months": ["november:december"], "days_of_month": ["28:31"]}]}])
    [iv] = c.time_intervals[0].time_intervals
    assert interval_matches(iv, T0)              # Monday 30 November
    assert not interval_matches(iv, T0 + 2 * 86400)  # Wednesday 2 December
    assert not interval_matches(iv, T0 - 3 * 86400)  # Friday 27 November


def test_a_routes_key_is_its_matchers_and_receiver_not_its_place():
    base = [{"matchers": ['team="db"'], "receiver": "dba"},
            {"matchers": ['team=~".+"', 'env="prod"'], "receiver": "audit"}]
    moved = [{"matchers": ['team="x"'], "receiver": "oncall"},
             {"matchers": ['env="prod"', 'team=~".+"'], "receiver": "audit"}, base[0]]
    a, b = cfg(base), cfg(moved)
    key = {r.receiver: r.key for r in (route_by_id(a, "0.0"), route_by_id(a, "0.1"))}
    assert route_by_key(b, key["dba"]).id == "0.2" and route_by_key(b, key["audit"]).id == "0.1"
    assert route_by_id(b, "0.0").key not in key.values()
    twins = cfg([base[0], base[0]])  # alike but for their place: keys apart
    assert route_by_id(twins, "0.0").key != route_by_id(twins, "0.1").key
