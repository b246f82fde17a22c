"""An alertmanager.yml as it is, end to end on the real broker (Tansu): the
stack started with ``PLAIT_ALERTMANAGER_CONFIG`` (``examples/alertmanager.yml``,
its webhooks pointed at a local receiver), an alert posted to
``/api/v2/alerts`` reaches the webhook in Alertmanager's webhook format at
``group_wait``; the inhibit rule mutes a warning under its critical alert; a
changed file is put in use by ``POST /-/reload`` and SIGHUP, a broken one is
refused and the one in use stays."""
from __future__ import annotations

import signal
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
import yaml

from alert_e2e_support import AlertApi, Kafka, Receiver, wait_until

from alerting.wire import funnel_partition

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alertmanager.yml"
GROUP_WAIT = 3.0


def am_file(path: Path, receiver: Receiver, ops_path: str = "/ops") -> Path:
    """The example file with its webhooks on ``receiver`` (ops on ``ops_path``)
    and quick timers."""
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data["route"].update(group_wait=f"{GROUP_WAIT:g}s", group_interval="2s")
    data["route"]["routes"][0]["group_wait"] = f"{GROUP_WAIT:g}s"
    paths = {"ops-webhook": [ops_path], "pager-webhook": ["/pager", "/pager-audit"],
             "frontend-webhook": ["/frontend"]}
    for r in data["receivers"]:
        for c, p in zip(r.get("webhook_configs", []), paths.get(r["name"], [])):
            c["url"] = receiver.url(p)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


def test_an_alertmanager_yml_runs_as_alertmanager(make_stack, receiver, tmp_path):
    cfg = am_file(tmp_path / "alertmanager.yml", receiver)
    # on 8 partitions the pager's state and the ops receiver's are on two (7 and 3), so the
    # inhibit rule's source and target are too
    stack = make_stack(workers=1, PLAIT_ALERTMANAGER_CONFIG=str(cfg), PLAIT_PARTITIONS="8")
    api, kafka = AlertApi(stack), Kafka(stack)
    try:
        assert funnel_partition("pager-webhook", 8) != funnel_partition("ops-webhook", 8)
        wait_until(lambda: api.counters()["partitions"] >= 8, 60, "the funnel worker to run")
        # when a critical alert, a warning of the same alert and cluster and one of another
        # cluster are posted
        posted = time.time()
        body = [{"labels": {"alertname": "DiskFull", "cluster": cluster, "service": "api",
                            "severity": sev, "instance": "h1:9100"},
                 "annotations": {"summary": "disk full"}, "startsAt": _now()}
                for sev, cluster in (("critical", "eu1"), ("warning", "eu1"), ("warning", "us1"))]
        resp = api.post("/api/v2/alerts", body)
        assert resp.status_code == 200, resp.text
        # then the critical one reaches the pager route only (its match with continue is a
        # match, so the root is not), the us1 warning the root's ops webhook, both in
        # Alertmanager's webhook format at group_wait; the eu1 warning is inhibited
        pager = wait_until(lambda: receiver.accepted("/pager"), 30, "the pager message")[0]
        audit = wait_until(lambda: receiver.accepted("/pager-audit"), 30, "the pager's 2nd webhook")[0]
        ops = wait_until(lambda: receiver.accepted("/ops"), 30, "the ops message")[0]
        for hit, sev, cluster in ((pager, "critical", "eu1"), (audit, "critical", "eu1"),
                                  (ops, "warning", "us1")):
            assert GROUP_WAIT - 0.5 <= hit.at - posted <= GROUP_WAIT + 5, hit.at - posted
            msg = hit.body
            assert msg["version"] == "4" and msg["status"] == "firing"
            assert [(a["labels"]["severity"], a["labels"]["cluster"]) for a in msg["alerts"]] == [
                (sev, cluster)]
            assert msg["groupLabels"] == {"alertname": "DiskFull", "cluster": cluster, "service": "api"}
            assert msg["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
            assert len(msg["alerts"][0]["fingerprint"]) == 16
        assert pager.headers["authorization"] == "Bearer change-me-pager-token"
        assert pager.body["receiver"] == "pager-webhook" and ops.body["receiver"] == "ops-webhook"
        # counted, not on alerts.ledger: the ledger is one of Plait's extras, off here
        wait_until(lambda: api.counters()["inhibited"] == 1, 30, "the inhibited warning counted")
        shown = {(a["labels"]["severity"], a["labels"]["cluster"]): a for a in
                 httpx.get(f"{stack.api_url}/api/v2/alerts", timeout=10).json()}
        assert shown[("warning", "eu1")]["status"]["inhibitedBy"] == [
            shown[("critical", "eu1")]["fingerprint"]]
        # and so through alerts.raw, where the router decides
        kafka.send_alerts([dict(a, labels=dict(a["labels"], cluster="ap1")) for a in body[:2]])
        wait_until(lambda: api.counters()["inhibited"] == 2, 30, "the ap1 warning inhibited")
        wait_until(lambda: [h for h in receiver.accepted("/pager")
                            if h.body["alerts"][0]["labels"]["cluster"] == "ap1"], 30,
                   "the ap1 critical alert paged")
        assert kafka.read_ledger() == []
        assert all(a["labels"]["cluster"] == "us1" for h in receiver.accepted("/ops")
                   for a in h.body["alerts"])

        # when the file changes (ops on another path) and is reloaded by POST /-/reload alone,
        # as a config-reloader sidecar does
        am_file(cfg, receiver, ops_path="/ops-v2")
        reloaded = httpx.post(f"{stack.api_url}/-/reload", timeout=30)
        # then it answers once the worker has it in use too, and a new alert goes to the new path
        assert reloaded.status_code == 200, reloaded.text
        assert reloaded.headers["x-plait-workers-reloaded"] == "1/1"
        api.post("/api/v2/alerts", [{"labels": {"alertname": "Latency", "cluster": "eu1",
                                                "service": "web", "severity": "info"},
                                     "startsAt": _now()}])
        moved = wait_until(lambda: receiver.accepted("/ops-v2"), 30, "the message on the new path")
        assert moved[0].body["alerts"][0]["labels"]["alertname"] == "Latency"

        # when the file is broken, the reload is refused and the one in use stays
        cfg.write_text("route: {receiver: nobody}\nreceivers: [{name: ops-webhook}]\n")
        bad = httpx.post(f"{stack.api_url}/-/reload", timeout=30)
        assert bad.status_code == 400 and 'undefined receiver "nobody"' in bad.text
        for proc in stack.workers().values():
            proc.send_signal(signal.SIGHUP)
        api.post("/api/v2/alerts", [{"labels": {"alertname": "Errors", "cluster": "eu1",
                                                "service": "web", "severity": "info"},
                                     "startsAt": _now()}])
        kept = wait_until(lambda: [h for h in receiver.accepted("/ops-v2")
                                   if h.body["alerts"][0]["labels"]["alertname"] == "Errors"],
                          30, "the message under the configuration kept")
        assert kept and all(p.poll() is None for p in stack.workers().values())
        # the API's Alertmanager view reads the file's receivers
        names = [r["name"] for r in httpx.get(f"{stack.api_url}/api/v2/receivers", timeout=10).json()]
        assert names == ["ops-webhook", "pager-webhook", "pager-webhook.1", "frontend-webhook",
                         "dba-mail", "blackhole"]
        ui = httpx.get(f"{stack.api_url}/ui/receivers", timeout=10).json()["receivers"]
        assert [r["name"] for r in ui] == names  # the configuration in use, not the broken file

        # and the API re-reads the file on SIGHUP too; the workers' funnels take a tree
        # without any of the receivers they hold groups for
        cfg.write_text("route: {receiver: only, group_wait: 1s}\nreceivers: [{name: only, "
                       f"webhook_configs: [{{url: '{receiver.url('/only')}'}}]}}]\n")
        for proc in [stack.procs["api"], *stack.workers().values()]:
            proc.send_signal(signal.SIGHUP)
        wait_until(lambda: [r["name"] for r in httpx.get(f"{stack.api_url}/api/v2/receivers",
                                                         timeout=10).json()] == ["only"],
                   30, "the API's receivers after SIGHUP")
        api.post("/api/v2/alerts", [{"labels": {"alertname": "Last", "severity": "critical"},
                                     "startsAt": _now()}])
        wait_until(lambda: receiver.accepted("/only"), 30, "the message under the new tree")
        assert all(p.poll() is None for p in [stack.procs["api"], *stack.workers().values()])
    finally:
        api.stop()
        kafka.close()
