"""Issue 9.5: the router decides receiver and fingerprint once and carries
them in the funnel command; route matchers are compiled at config load."""
from __future__ import annotations

import alerting.silence as silence
from alerting.config import parse_config
from alerting.funnel import Funnel
from alerting.routing import Decision, decide
from alerting.wire import RawAlert, route_alert

CONFIG = parse_config({
    "receivers": [{"name": "a", "url": "http://127.0.0.1:9/a"},
                  {"name": "db", "url": "http://127.0.0.1:9/db"}],
    "route": {"receiver": "a", "routes": [{"matchers": ['team="db"'], "receiver": "db"}]},
})


def test_route_matchers_are_not_parsed_per_alert(monkeypatch):
    calls = []
    real = silence.parse_matcher
    monkeypatch.setattr(silence, "parse_matcher", lambda m: calls.append(m) or real(m))
    for i in range(50):
        receiver, cmd = route_alert(CONFIG, RawAlert(f"e{i}:0", {
            "rule": "Disk", "asset": f"h{i}", "severity": "warning", "labels": {"team": "db"}}, 1.0))
        assert receiver == "db" and cmd["receiver"] == "db" and len(cmd["fp"]) == 16
    assert calls == []


def test_the_funnel_takes_the_carried_decision():
    _r, cmd = route_alert(CONFIG, RawAlert("e1:0", {"rule": "Disk", "asset": "h1",
                                                   "severity": "warning"}, 1.0))
    from alerting.model import Alert

    alert = Alert.from_dict(cmd["alert"])
    assert decide(CONFIG, alert) == [Decision("a", cmd["fp"], "0")]
    f = Funnel(CONFIG)
    # a decision the funnel would not have made itself is taken as given
    f.ingest(alert, 1.0, raw_id="e1:0", decision=Decision("db", "0123456789abcdef"))
    assert set(f.state["episodes"]) == {"0123456789abcdef"}
    assert [g["receiver"] for g in f.state["groups"].values()] == ["db"]
