"""Plait in HA the way Alertmanager users run it: the real Prometheus sends
every alert to every Alertmanager it knows, here two Plait API replicas of
one stack (same broker, same Redis). Each alert is notified once per group
flush and its resolve once (Alertmanager's cluster deduplication scenario,
``test/with_api_v2/acceptance/cluster_test.go``), and the real amtool sees
the same silences on either replica. Loopback only, free ports, every
process killed at the end, every wait with a deadline."""
from __future__ import annotations

import json
import shutil
import signal

import httpx
import pytest
import yaml

from alert_e2e_support import Receiver, funnel_stack, run_amtool, start_prometheus, wait_until, \
    write_config

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("prometheus") is None or shutil.which("amtool") is None,
                                 reason="the prometheus or amtool binary is absent (apt-get "
                                        "install prometheus prometheus-alertmanager)")]

TIMING = {"grouping": {"group_by": ["alertname"]},
          "timing": {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"},
          "delivery": {"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "2s"}}
RULE = {"alert": "AlwaysFiring", "expr": "vector(1)", "labels": {"severity": "page"},
        "annotations": {"summary": "always firing"}}


@pytest.fixture(scope="module")
def receiver():
    """The module's webhook receiver (its stack's one receiver)."""
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def replicas(make_module_stack, tmp_path_factory, receiver):
    """A stack with two API replicas whose funnel sends Alertmanager webhooks
    to ``receiver`` at ``/am``, shared by the module's tests: the
    silences test leaves only an expired silence behind and the
    notifications test makes no silence."""
    cfg = write_config(tmp_path_factory.mktemp("ha") / "alerting.yaml",
                       [{"name": "am", "url": receiver.url("/am"), "format": "alertmanager"}],
                       **TIMING)
    stack = funnel_stack(make_module_stack, cfg, api_replicas=2)
    assert len(stack.api_urls) == 2
    return stack


def notifications(receiver: Receiver, status: str) -> list[dict]:
    """The webhook messages (one per group flush) of ``status`` for the rule."""
    return [h.body for h in receiver.accepted("/am") if h.body.get("status") == status
            and h.body.get("groupLabels", {}).get("alertname") == RULE["alert"]]


def listed(url: str) -> list[str]:
    return [a["labels"]["alertname"] for a in httpx.get(f"{url}/api/v2/alerts", timeout=10).json()]


def sent_to(proc) -> dict[str, float]:
    """Prometheus's own count of alerts sent, per Alertmanager URL (its
    ``prometheus_notifications_sent_total``)."""
    listen = next(a for a in proc.args if a.startswith("--web.listen-address="))
    text = httpx.get(f"http://{listen.split('=', 1)[1]}/metrics", timeout=5).text
    return {line.split('alertmanager="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("prometheus_notifications_sent_total{")}


def resent_to_both(proc, times: int) -> None:
    """Wait until Prometheus sent ``times`` more batches to each of its Alertmanagers."""
    before = sent_to(proc)
    wait_until(lambda: len(before) == 2 and all(
        n >= before[url] + times for url, n in sent_to(proc).items()), 30,
        f"Prometheus to resend {times} times to both replicas", every=0.2)


def test_prometheus_sending_to_two_replicas_notifies_once(replicas, receiver, tmp_path):
    # given Prometheus evaluating an always-firing rule every second and
    # sending it (every 2 s) to both replicas
    directory = tmp_path / "prometheus"
    proc = start_prometheus(directory, [u.removeprefix("http://") for u in replicas.api_urls],
                            [RULE])
    try:
        # then the alert is notified firing once
        wait_until(lambda: notifications(receiver, "firing"), 60, "the firing notification",
                   every=0.2)
        # and both replicas list it
        for url in replicas.api_urls:
            wait_until(lambda: RULE["alert"] in listed(url), 20, f"{url} listing the alert")
        # while Prometheus resends it to both replicas 3 more times (a group interval each)
        sent_before = len(receiver.accepted("/am"))
        resent_to_both(proc, 3)
        assert len(notifications(receiver, "firing")) == 1, notifications(receiver, "firing")
        assert len(receiver.accepted("/am")) == sent_before
        firing = notifications(receiver, "firing")[0]
        assert [a["labels"]["alertname"] for a in firing["alerts"]] == [RULE["alert"]]

        # when the rule stops firing (Prometheus reloads it with an empty result)
        (directory / "rules.yml").write_text(yaml.safe_dump({"groups": [{
            "name": "rules", "interval": "1s", "rules": [{**RULE, "expr": "vector(1) == 0"}]}]}))
        proc.send_signal(signal.SIGHUP)
        # then the resolve is notified once
        wait_until(lambda: notifications(receiver, "resolved"), 60, "the resolved notification",
                   every=0.2)
        resent_to_both(proc, 2)  # Prometheus resends the resolved alert to both replicas
        assert len(notifications(receiver, "resolved")) == 1, notifications(receiver, "resolved")
        assert len(notifications(receiver, "firing")) == 1
    finally:
        proc.kill()
        proc.wait(10)
        assert proc.returncode is not None, (directory / "prometheus.log").read_text()


def test_amtool_sees_the_same_silences_on_both_replicas(replicas, tmp_path):
    first, second = replicas.api_urls
    # when amtool adds a silence on replica 1
    sid = run_amtool(first, tmp_path, "silence", "add", "alertname=AlwaysFiring",
                     "--comment=maintenance", "--author=ops", "--duration=1h").stdout.strip()
    assert len(sid) == 36, sid
    # then amtool on replica 2 lists it, active
    on_second = json.loads(run_amtool(second, tmp_path, "silence", "query", "-o", "json").stdout)
    assert [(s["id"], s["status"]["state"], s["createdBy"]) for s in on_second] == [
        (sid, "active", "ops")]
    # when amtool expires it on replica 2
    run_amtool(second, tmp_path, "silence", "expire", sid)
    # then replica 1 shows it expired, not active
    assert run_amtool(first, tmp_path, "silence", "query", "-q").stdout.split() == []
    assert run_amtool(first, tmp_path, "silence", "query", "--expired", "-q").stdout.split() == [sid]
