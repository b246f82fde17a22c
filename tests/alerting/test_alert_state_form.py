"""The alert as funnel state keeps it (``Alert.to_state``): fields at their
default are left out, since every open alert holds it in memory twice
(episode, group member) and every change writes it to the changelog;
``Alert.from_dict`` reads it back to the same alert, and reads the full
form (``to_dict``, state written before) as well."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from alerting.config import parse_config
from alerting.model import Alert, Severity, Status
from alerting.runner import FunnelRunner
from alerting.wire import RawAlert, command, parse_command, route_alert

texts = st.text(max_size=8)
alerts = st.builds(
    Alert, rule=texts, asset=texts, severity=st.sampled_from(list(Severity)),
    status=st.sampled_from(list(Status)),
    labels=st.dictionaries(texts, texts, max_size=3), annotations=st.dictionaries(texts, texts, max_size=2),
    time=st.floats(0, 4e9), starts_at=st.none() | st.floats(0, 4e9), ends_at=st.none() | st.floats(0, 4e9),
    generator_url=st.sampled_from(["", "http://prom:9090/graph"]),
    source=st.sampled_from(["native", "alertmanager"]), invalid_unicode=st.integers(0, 3))


@given(alerts)
def test_the_state_form_reads_back_to_the_same_alert(alert):
    state = json.loads(json.dumps(alert.to_state()))
    assert Alert.from_dict(state) == alert
    assert vars(Alert.from_dict(state)) == vars(alert)  # every field set, defaults included
    assert Alert.from_dict(json.loads(json.dumps(alert.to_dict()))) == alert
    assert set(state) <= set(alert.to_dict())


def test_a_stored_episode_and_member_leave_default_fields_out():
    cfg = parse_config({"receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook"}],
                        "route": {"receiver": "oncall"}, "timing": {"group_wait": 30}})
    table: dict = {}
    runner = FunnelRunner(cfg, table, lambda: 1000.0)
    # given a plain native alert (no labels, annotations, times or link of its own)
    _r, cmd = route_alert(cfg, RawAlert("e1:0", {"rule": "DiskFull", "asset": "h1",
                                                 "severity": "warning"}, 1000.0))
    cmd["src"] = [0, 0, 0]
    # when the funnel takes it
    runner.apply(0, 0, parse_command(command(**cmd)))
    # then its episode and group member store the alert without the fields at their default
    stored = [json.loads(v)["alert"] for k, v in table.items() if "|ep|" in k or "|gm|" in k]
    assert len(stored) == 2
    for a in stored:
        assert a == {"rule": "DiskFull", "asset": "h1", "severity": "warning", "status": "firing",
                     "time": 1000.0}


def test_a_router_command_carries_the_alert_in_its_state_form():
    cfg = parse_config({"receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook"}],
                        "route": {"receiver": "oncall"}})
    # given a plain native alert and one with labels and a link, as the router routes them
    for payload in ({"rule": "DiskFull", "asset": "h1", "severity": "warning"},
                    {"labels": {"alertname": "Up", "instance": "h2"}, "generatorURL": "http://p/g"}):
        _receiver, cmd = route_alert(cfg, RawAlert("e1:0", payload, 1000.0))
        # then the command's alert is the state form: what the funnel reads back is the alert
        alert = Alert.from_dict(cmd["alert"])
        assert cmd["alert"] == alert.to_state() != alert.to_dict()
