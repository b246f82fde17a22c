"""Unit tests of the API's read-your-writes overlay (``alerting.view.RecentAlerts``)
and of query-time inhibition (``alerting.view.inhibited_now``)."""
from __future__ import annotations

import pytest

from alerting.config import parse_config
from alerting.intake import format_time, from_alertmanager_alert
from alerting.view import RecentAlerts, inhibited_now

CFG = parse_config({
    "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook"}],
    "route": {"receiver": "oncall"},
    "inhibit_rules": [{"source_matchers": ['alertname="NodeDown"'],
                       "target_matchers": ['alertname="PodDown"'], "equal": ["node"]}]})


def am(now: float, **labels: str):
    return from_alertmanager_alert({"labels": labels}, now)


def test_the_overlay_is_bounded_by_count_and_age():
    recent = RecentAlerts(limit=50, age=10.0)
    for i in range(200):
        recent.add(am(1000.0, alertname="A", n=str(i)), CFG, 1000.0)
    assert len(recent) == 50
    listed = recent.merge([], 1005.0)
    assert sorted(int(v["labels"]["n"]) for v in listed) == list(range(150, 200))
    assert recent.merge([], 1011.0) == [] and len(recent) == 0


def test_a_published_view_as_new_wins_and_an_older_one_takes_the_new_receipt():
    recent = RecentAlerts()
    recent.add(am(2000.0, alertname="A"), CFG, 2000.0)
    (mine,) = recent.merge([], 2000.0)
    older = {**mine, "updatedAt": format_time(1990.0), "endsAt": format_time(2100.0),
             "startsAt": format_time(1900.0)}
    (merged,) = recent.merge([older], 2001.0)
    assert merged["startsAt"] == format_time(1900.0) and merged["updatedAt"] == mine["updatedAt"]
    assert merged["endsAt"] == mine["endsAt"] == format_time(2000.0 + CFG.timing.resolve_timeout)
    caught_up = {**mine, "annotations": {"from": "view"}}
    assert recent.merge([caught_up], 2001.0) == [caught_up] and len(recent) == 0


def test_a_resolve_hides_the_published_firing_view():
    recent = RecentAlerts()
    recent.add(am(3000.0, alertname="A"), CFG, 3000.0)
    (firing,) = recent.merge([], 3000.0)
    resolved = from_alertmanager_alert({"labels": {"alertname": "A"},
                                        "endsAt": format_time(3000.5)}, 3001.0)
    recent.add(resolved, CFG, 3001.0)
    assert recent.merge([firing], 3001.5) == []


@pytest.mark.parametrize("target_node, want", [("n1", ["src"]), ("n2", [])])
def test_inhibited_now_follows_the_rule(target_node, want):
    alerts = [("src", {"alertname": "NodeDown", "node": "n1"}),
              ("tgt", {"alertname": "PodDown", "node": target_node})]
    assert inhibited_now(alerts, CFG).get("tgt", []) == want
    assert "src" not in inhibited_now(alerts, CFG)
