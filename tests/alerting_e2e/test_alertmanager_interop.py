"""Plait as a drop-in Alertmanager for the REAL binaries (issue 11): a
Prometheus 2.42 server (Debian package ``prometheus``) pointed at Plait as its
Alertmanager, and amtool 0.25 (package ``prometheus-alertmanager``) talking
to ``/api/v2``, both with a bearer token. ``.ci/run`` installs the packages;
without the binaries these tests skip, saying so.

Everything runs on loopback with free ports and temp dirs; every process is
killed at the end; every wait has a deadline."""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from alert_e2e_support import (Receiver, funnel_stack, run_amtool, start_prometheus, wait_until,
                               write_config)

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus")
AMTOOL = shutil.which("amtool")
TOKEN = "interop-am-token-" + "k" * 32
#: The funnel identity this test needs (issue 11 item 1, branch ``funnel``).
FAST = {"grouping": {"group_by": ["alertname"], "batch_size": 50},
        "timing": {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"},
        "delivery": {"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "2s"}}


class Metrics:
    """A tiny ``/metrics`` endpoint on 127.0.0.1: ``pod_down{pod=...}`` gauges."""

    def __init__(self, values: dict[str, int]) -> None:
        self.values = dict(values)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                body = "# TYPE pod_down gauge\n" + "".join(
                    f'pod_down{{pod="{pod}"}} {v}\n' for pod, v in sorted(outer.values.items()))
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1]


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def plait(make_stack, tmp_path, receiver):
    """A stack whose funnel sends Alertmanager webhooks to ``receiver`` and
    whose ``/api/v2`` wants ``Bearer TOKEN``; waits until the funnel runs."""
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "am", "url": receiver.url("/am"), "format": "alertmanager"},
                        {"name": "disks", "url": receiver.url("/disks"), "format": "alertmanager"}],
                       [{"matchers": ['rule="DiskFull"'], "receiver": "disks"}], **FAST)
    return funnel_stack(make_stack, cfg, PLAIT_ALERTMANAGER_TOKEN=TOKEN)


def am_get(stack, path: str, **params) -> httpx.Response:
    return httpx.get(f"{stack.api_url}{path}", params=params, timeout=10,
                     headers={"Authorization": f"Bearer {TOKEN}"})


def webhook_alerts(receiver: Receiver) -> list[dict]:
    """Every alert of every Alertmanager-format message the receiver took."""
    return [a for h in receiver.accepted("/am") for a in h.body.get("alerts", [])]


def by_status(receiver: Receiver, status: str) -> set[str]:
    return {a["labels"].get("pod") for a in webhook_alerts(receiver) if a["status"] == status}


# -- Prometheus ----------------------------------------------------------------------------

@pytest.fixture
def prometheus(tmp_path):
    """``start(alertmanager_url, metrics) -> Popen``: Prometheus on loopback
    scraping ``metrics`` every second, rule ``PodDown`` (``pod_down == 1``),
    sending to Plait with the bearer token; killed at teardown."""
    procs: list[subprocess.Popen] = []

    def start(api_url: str, metrics: Metrics) -> subprocess.Popen:
        proc = start_prometheus(
            tmp_path / "prometheus", [api_url.removeprefix("http://")],
            [{"alert": "PodDown", "expr": "pod_down == 1", "labels": {"severity": "critical"},
              "annotations": {"summary": "pod {{ $labels.pod }} is down"}}],
            [{"job_name": "pods", "static_configs": [{"targets": [metrics.target]}]}], TOKEN)
        procs.append(proc)
        return proc

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


@pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is absent "
                    "(apt-get install prometheus; .ci/run installs it)")
def test_prometheus_rule_with_two_series_delivers_both_then_resolves_them(
        plait, receiver, prometheus, tmp_path):
    # given Prometheus scraping two series that differ only in 'pod', with a
    # rule firing on both, and Plait as its Alertmanager
    metrics = Metrics({"api-1": 1, "api-2": 1})
    try:
        proc = prometheus(plait.api_url, metrics)
        # then both pods reach the webhook as separate firing alerts
        try:
            wait_until(lambda: by_status(receiver, "firing") >= {"api-1", "api-2"}, 60,
                       "both pods firing at the webhook", every=0.25)
        except AssertionError:
            assert proc.poll() is None, (tmp_path / "prometheus" / "prometheus.log").read_text()
            raise
        firing = [a for a in webhook_alerts(receiver) if a["status"] == "firing"]
        assert len({a["fingerprint"] for a in firing}) >= 2
        assert all(a["labels"]["alertname"] == "PodDown" for a in firing)
        # and GET /api/v2/alerts lists both, active
        def listed_pods():
            got = am_get(plait, "/api/v2/alerts").json()
            return {a["labels"]["pod"]: a for a in got} if len(got) >= 2 else None

        listed = wait_until(listed_pods, 20, "both alerts listed by GET /api/v2/alerts")
        assert set(listed) == {"api-1", "api-2"}
        assert all(a["status"]["state"] == "active" for a in listed.values())
        # when the rule stops firing
        metrics.values = {"api-1": 0, "api-2": 0}
        # then both are resolved at the webhook, and no longer listed
        wait_until(lambda: by_status(receiver, "resolved") >= {"api-1", "api-2"}, 60,
                   "both pods resolved at the webhook", every=0.25)
        wait_until(lambda: am_get(plait, "/api/v2/alerts").json() == [], 20,
                   "GET /api/v2/alerts to be empty")
    finally:
        metrics.stop()


# -- amtool ------------------------------------------------------------------------------

def amtool(stack, tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run_amtool(stack.api_url, tmp_path, *args, token=TOKEN, check=check)


@pytest.mark.skipif(AMTOOL is None, reason="the amtool binary is absent "
                    "(apt-get install prometheus-alertmanager; .ci/run installs it)")
def test_amtool_silences_and_alert_queries(plait, receiver, tmp_path):
    # given two firing alerts posted the way Prometheus posts them
    ends = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    alerts = [{"labels": {"alertname": "PodDown", "pod": pod, "instance": f"{pod}:9100",
                          "severity": "critical"}, "endsAt": ends,
               "annotations": {"summary": f"{pod} down"}} for pod in ("api-1", "api-2")]
    resp = httpx.post(f"{plait.api_url}/api/v2/alerts", json=alerts, timeout=10,
                      headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200, resp.text
    wait_until(lambda: len(am_get(plait, "/api/v2/alerts").json()) == 2, 30,
               "both alerts listed")

    # amtool alert query with a filter
    out = json.loads(amtool(plait, tmp_path, "alert", "query", "alertname=PodDown", "pod=api-2",
                            "-o", "json").stdout)
    assert [a["labels"]["pod"] for a in out] == ["api-2"]
    assert out[0]["status"]["state"] == "active" and len(out[0]["fingerprint"]) == 16

    # amtool silence add
    added = amtool(plait, tmp_path, "silence", "add", "alertname=PodDown", "pod=api-2",
                   "--comment=x", "--author=ops", "--duration=1h")
    sid = added.stdout.strip()
    assert len(sid) == 36, added.stdout
    # amtool silence query (and the native route lists the same silence)
    listed = json.loads(amtool(plait, tmp_path, "silence", "query", "-o", "json").stdout)
    assert [s["id"] for s in listed] == [sid]
    assert listed[0]["status"]["state"] == "active" and listed[0]["createdBy"] == "ops"
    assert {(m["name"], m["value"]) for m in listed[0]["matchers"]} == {
        ("alertname", "PodDown"), ("pod", "api-2")}
    assert amtool(plait, tmp_path, "silence", "query", "-q", "pod=api-2").stdout.split() == [sid]
    native = httpx.get(f"{plait.api_url}/silences", timeout=10).json()["data"]["silences"]
    assert [s["id"] for s in native] == [sid]
    # the silenced alert: shown with --silenced, hidden from the default (active) query
    out = json.loads(amtool(plait, tmp_path, "alert", "query", "--silenced", "alertname=PodDown",
                            "-o", "json").stdout)
    states = {a["labels"]["pod"]: a["status"] for a in out}
    assert states["api-2"]["state"] == "suppressed" and states["api-2"]["silencedBy"] == [sid]
    out = json.loads(amtool(plait, tmp_path, "alert", "query", "alertname=PodDown",
                            "-o", "json").stdout)
    assert [a["labels"]["pod"] for a in out] == ["api-1"]

    # amtool silence expire
    amtool(plait, tmp_path, "silence", "expire", sid)
    assert amtool(plait, tmp_path, "silence", "query", "-q").stdout.split() == []
    assert amtool(plait, tmp_path, "silence", "query", "--expired", "-q").stdout.split() == [sid]
    out = json.loads(amtool(plait, tmp_path, "alert", "query", "alertname=PodDown",
                            "-o", "json").stdout)
    assert sorted(a["labels"]["pod"] for a in out) == ["api-1", "api-2"]
    # amtool reads the config back as Alertmanager's: the routing tree, and which receiver
    # an alert would reach (Plait's `rule` matcher is spelt alertname)
    tree = amtool(plait, tmp_path, "config", "routes").stdout
    assert "receiver: am" in tree and '{alertname="DiskFull"}  receiver: disks' in tree, tree
    for labels, want in (("alertname=DiskFull", "disks"), ("alertname=PodDown", "am")):
        assert amtool(plait, tmp_path, "config", "routes", "test", labels).stdout.split() == [want]
    # an unknown silence is an error amtool reports, not a crash
    bad = amtool(plait, tmp_path, "silence", "expire", "7d0d0c36-7a1d-4d8e-9a53-2f1d3c1b0a00",
                 check=False)
    assert bad.returncode != 0
    # and without the token amtool is refused
    open_http = tmp_path / "no-token.yml"
    open_http.write_text("{}\n")
    refused = subprocess.run([AMTOOL, f"--alertmanager.url={plait.api_url}",
                              f"--http.config.file={open_http}", "silence", "query"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
