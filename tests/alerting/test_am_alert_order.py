"""A group's alerts in the order Alertmanager lists them (dispatch/dispatch.go sorts them:
``types.AlertSlice.Less``, by ``job``, then ``instance``, then the label set), in the webhook
body and so in every template's ``.Alerts``. One push of a group of alerts, given out of that
order, played on the real Alertmanager and on Plait's funnel: the bodies list them alike."""
from __future__ import annotations

import pytest
from am_scenarios import A, Scenario
from test_am_acceptance import play
from test_am_untold_groups import ALERTMANAGER, _AM, _alertmanager_run

ALERTS = [A("alertname", "Disk", "zone", "b", active=(0,)),
          A("alertname", "Disk", "instance", "h2", active=(0,)),
          A("alertname", "Disk", "job", "z", "instance", "h1", active=(0,)),
          A("alertname", "Disk", "job", "a", "instance", "h9", active=(0,)),
          A("alertname", "Disk", "zone", "a", "x", "1", active=(0,)),
          A("alertname", "Disk", "job", "a", "instance", "h3", active=(0,))]
ORDER = Scenario("AlertOrder", _AM, pushes=[(0, ALERTS)], wants={0: [(0.9, 1.8, ALERTS)]})


def labels_in_order(collected: dict) -> list[dict[str, str]]:
    [(_at, alerts)] = collected[0]
    return [a["labels"] for a in alerts]


@pytest.mark.skipif(ALERTMANAGER is None, reason="the Alertmanager binary is absent")
def test_plait_lists_a_groups_alerts_in_alertmanagers_order(tmp_path):
    (tmp_path / "am").mkdir()
    theirs = labels_in_order(_alertmanager_run(ORDER, tmp_path / "am")[0])
    ours = labels_in_order(play(ORDER, tmp_path))
    assert ours == theirs
    assert [(a.get("job"), a.get("instance")) for a in ours][:4] == [
        ("a", "h3"), ("a", "h9"), ("z", "h1"), (None, "h2")]
