"""A group that never told anything firing says nothing of its resolves, as Alertmanager.

Alertmanager's DedupStage (notify/dedup_stage.go ``needsUpdate``): with no notification log
entry for the group, it notifies only when something fires; after a notification that listed
nothing firing, only when something fires again. So an alert that fired and resolved before its
group's first flush, and a target inhibited all its life alone in its group, are never told
(UNTOLD); a group whose firing set is the one it told says nothing before repeat_interval
(NOT_NEWS: ``IsFiringSubset``). Each scenario is played on the real Alertmanager (Debian's binary, its webhook on a local
server) and on Plait's funnel (the acceptance harness's fake clock); both must meet the same
expectations, which the daemon's run shows are Alertmanager's."""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from am_scenarios import A, Scenario, check, config_text, push_body
from test_am_acceptance import play

from alerting.intake import format_time
from stack_env import wait_for

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")

_AM = """
route:
  receiver: "default"
  group_by: [alertname]
  group_wait:      1s
  group_interval:  1s
  repeat_interval: 1h

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
    send_resolved: true

inhibit_rules:
- source_match:
    alertname: JobDown
  target_match:
    alertname: InstanceDown
  equal: [zone]
"""


def _z(name: str, *active: float) -> dict:
    return A("alertname", name, "zone", "aa", active=active)


#: Flap fires and resolves before its group's first flush; InstanceDown is inhibited by JobDown
#: until both resolve at 2.5 (each its own group); Up fires throughout.
UNTOLD = Scenario(
    "UntoldGroups", _AM,
    pushes=[(0, [_z("Up", 0), _z("JobDown", 0), _z("InstanceDown", 0), _z("Flap", 0)]),
            (0.3, [_z("Flap", 0, 0.3)]),
            (2.5, [_z("JobDown", 0, 2.5), _z("InstanceDown", 0, 2.5)])],
    wants={0: [(0.9, 1.8, [_z("Up", 0)]), (0.9, 1.8, [_z("JobDown", 0)]),
               (2.9, 4.3, [_z("JobDown", 0, 2.5)])]})

#: Nothing new for a told group: Flap, told firing at 1, resolves at 1.3 and fires again at 1.6
#: (a new ``startsAt``) before the flush at 2; InstanceDown in zone bb joins the told
#: InstanceDown group at 1.4 inhibited (JobDown in bb fires from 1.2). The firing set each of
#: those groups would tell is the one it told, so before repeat_interval nothing is sent
#: (DedupStage ``needsUpdate``: ``IsFiringSubset``), and only JobDown's own group speaks.
NOT_NEWS = Scenario(
    "NothingNewForAToldGroup", _AM,
    pushes=[(0, [_z("Flap", 0), A("alertname", "InstanceDown", "zone", "aa", active=(0,))]),
            (1.2, [A("alertname", "JobDown", "zone", "bb", active=(1.2,))]),
            (1.3, [_z("Flap", 0, 1.3)]),
            (1.4, [A("alertname", "InstanceDown", "zone", "bb", active=(1.4,))]),
            (1.6, [_z("Flap", 1.6)])],
    wants={0: [(0.9, 1.25, [_z("Flap", 0)]),
               (0.9, 1.25, [A("alertname", "InstanceDown", "zone", "aa", active=(0,))]),
               (2.1, 3.0, [A("alertname", "JobDown", "zone", "bb", active=(1.2,))]),
               (3.0, 4.5, [])]})


#: A receiver without send_resolved: Flap and Steady are told firing at 1; Flap resolves at 1.3
#: (not told) and fires again at 2.6 with a new ``startsAt``. The notification log still lists
#: Flap firing, so the firing set is the one told and nothing is sent before repeat_interval
#: (DedupStage ``needsUpdate``: ``IsFiringSubset``; the resolve alone moved nothing).
QUIET_FLAP = Scenario(
    "FlapWithoutSendResolved", _AM.replace("send_resolved: true", "send_resolved: false"),
    pushes=[(0, [_z("Flap", 0), A("alertname", "Flap", "zone", "bb", active=(0,))]),
            (1.3, [_z("Flap", 0, 1.3)]),
            (2.6, [_z("Flap", 2.6)])],
    wants={0: [(0.9, 1.25, [_z("Flap", 0), A("alertname", "Flap", "zone", "bb", active=(0,))]),
               (1.25, 4.5, [])]})


#: The same, the rest of the group muted meanwhile: InstanceDown in zones aa, bb, cc told at 1;
#: aa resolves at 1.3; a silence mutes bb and cc from 2.2; bb resolves at 2.4 (silenced); aa
#: fires again at 3.5. A flush whose alerts are all muted stops before DedupStage, so the
#: notification log keeps aa as told, and its refire is no news either.
QUIET_FLAP_MUTED = Scenario(
    "FlapWithoutSendResolvedRestMuted",
    _AM.replace("send_resolved: true", "send_resolved: false"),
    pushes=[(0, [A("alertname", "InstanceDown", "zone", z, active=(0,)) for z in ("aa", "bb", "cc")]),
            (1.3, [A("alertname", "InstanceDown", "zone", "aa", active=(0, 1.3))]),
            (2.4, [A("alertname", "InstanceDown", "zone", "bb", active=(0, 2.4))]),
            (3.5, [A("alertname", "InstanceDown", "zone", "aa", active=(3.5,))])],
    silences=[(2.1, "set", "bc", {"matchers": ['zone=~"bb|cc"'], "start": 2.2, "end": 100,
                                  "am": [{"name": "zone", "value": "bb|cc", "isRegex": True,
                                          "isEqual": True}]})],
    wants={0: [(0.9, 1.25, [A("alertname", "InstanceDown", "zone", z, active=(0,))
                            for z in ("aa", "bb", "cc")]),
               (1.25, 5.5, [])]})


class _Collect(BaseHTTPRequestHandler):
    got: list[tuple[float, list[dict]]] = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Collect.got.append((time.time(), body["alerts"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def _alertmanager_run(sc: Scenario, tmp_path) -> tuple[dict[int, list], float]:
    """What the real daemon's webhook got for ``sc`` (arrival times from its ``t0``), and t0."""
    from ops.infra import free_port

    _Collect.got = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    path = tmp_path / "alertmanager.yml"
    path.write_text(config_text(sc, [f"http://127.0.0.1:{server.server_port}/0"]))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={path}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=open(tmp_path / "am.log", "wb"), stderr=subprocess.STDOUT)
    try:
        def ready() -> bool:
            try:
                return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return proc.poll() is not None
        wait_for(ready, 30, "Alertmanager ready")
        assert proc.poll() is None, (tmp_path / "am.log").read_text()
        t0 = time.time()
        steps = sorted([(at, "push", alerts) for at, alerts in sc.pushes]
                       + [(at, "set", spec) for at, op, _n, spec in sc.silences if op == "set"],
                       key=lambda step: step[0])
        for at, op, what in steps:  # the schedule: wait for each step's own time
            time.sleep(max(0.0, t0 + at - time.time()))
            if op == "push":
                resp = httpx.post(f"{url}/api/v2/alerts", json=push_body(what, t0), timeout=10)
            else:
                resp = httpx.post(f"{url}/api/v2/silences", timeout=10, json={
                    "matchers": what["am"], "createdBy": "t", "comment": "t",
                    "startsAt": format_time(t0 + what["start"]),
                    "endsAt": format_time(t0 + what["end"])})
            assert resp.status_code == 200, resp.text
        time.sleep(max(0.0, t0 + sc.end() + 1.0 - time.time()))  # anything late shows too
    finally:
        proc.kill()
        proc.wait(10)
        server.shutdown()
    return {0: [(at - t0, alerts) for at, alerts in _Collect.got]}, t0


@pytest.mark.skipif(ALERTMANAGER is None, reason="the Alertmanager binary is absent")
@pytest.mark.parametrize("sc", [UNTOLD, NOT_NEWS, QUIET_FLAP, QUIET_FLAP_MUTED], ids=lambda s: s.name)
def test_alertmanager_keeps_quiet_where_a_group_has_no_news(sc, tmp_path):
    got, t0 = _alertmanager_run(sc, tmp_path)
    assert check(sc, got, t0) == []


@pytest.mark.parametrize("kind", ["webhook", "pagerduty", "opsgenie"])
@pytest.mark.parametrize("sc", [UNTOLD, NOT_NEWS, QUIET_FLAP, QUIET_FLAP_MUTED], ids=lambda s: s.name)
def test_plait_keeps_quiet_where_a_group_has_no_news(sc, kind, tmp_path):
    # the daemon's expectations; a PagerDuty or Opsgenie receiver is told nothing the webhook
    # is not: no resolve of a dedup key never triggered, no close of an alias never created
    assert check(sc, play(sc, tmp_path, kind=kind), 0.0) == []
