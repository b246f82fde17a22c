"""Every alert's story on the real broker (Tansu): a storm with a silence, an
inhibition, a repeat, merges and a failed first attempt; each alert's history
(``GET /api/v2/alerts/{fingerprint}/history``) tells the outcome the ledger
(``alerts.ledger``) gives it, the delivered ones name the receiver, time and
HTTP status; ``plait alerts why`` / ``plait silences`` run as subprocesses
against the same API."""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from alert_e2e_support import AlertApi, Kafka, Receiver, native_alerts, wait_until, write_config

from alerting.dedupe import labelset_fingerprint

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _rfc3339(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def am_alert(name: str, instance: str, severity: str = "warning") -> dict:
    return {"labels": {"alertname": name, "instance": instance, "severity": severity},
            "annotations": {"summary": f"{name} on {instance}"}}


def plait(api_url: str, *args: str) -> subprocess.CompletedProcess:
    """``plait ARGS --api api_url`` as a subprocess (this worktree first on the path)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PLAIT_API_URL=api_url)
    return subprocess.run([sys.executable, "-m", "ops.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def history(api: AlertApi, fp: str) -> list[dict]:
    resp = httpx.get(f"{api.url}/api/v2/alerts/{fp}/history", timeout=10)
    return resp.json()["entries"] if resp.status_code == 200 else []


def outcomes_told(api: AlertApi, fp: str) -> dict[str, dict]:
    """raw id -> the outcome entry of the alert's story."""
    return {e["rawId"]: e for e in history(api, fp) if e["kind"] == "outcome"}


@pytest.mark.timeout(120)
def test_every_alerts_story_matches_its_ledger_outcome(make_stack, tmp_path):
    # given one receiver (its first request answered 503), one token per 3 s so later
    # groups wait and are merged, and an inhibit rule (critical mutes warning, same instance)
    receiver = Receiver()
    answers = itertools.chain([503], itertools.repeat(200))
    receiver.answer = lambda path: next(answers)
    receiver.start()
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "oncall", "url": receiver.url("/r"), "format": "alertmanager",
                         "bucket": {"burst": 1, "refill_interval": "3s"}}],
                       grouping={"group_by": ["alertname"], "batch_size": 50},
                       timing={"group_wait": 0, "group_interval": "1s", "repeat_interval": "1h"},
                       delivery={"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "1s"},
                       inhibit_rules=[{"source_matchers": ['severity="critical"'],
                                       "target_matchers": ['severity="warning"'],
                                       "equal": ["alertname", "instance"]}])
    stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
    api, kafka = AlertApi(stack), Kafka(stack)
    try:
        wait_until(lambda: api.counters()["partitions"] >= 4, 60, "the funnel worker to run")
        # and a silence of alertname Maint, made with the CLI
        ends = "10m"
        made = plait(api.url, "silences", "add", 'alertname="Maint"', "--duration", ends,
                     "--comment", "maintenance", "--created-by", "ops")
        assert made.returncode == 0, made.stderr
        sid = made.stdout.strip()
        listed = plait(api.url, "silences", "list", "--json")
        assert listed.returncode == 0 and sid in [s["id"] for s in json.loads(listed.stdout)["silences"]]
        # when the source fires, then its target, a silenced alert, a repeat and 4 groups
        started = _rfc3339(datetime.now(timezone.utc) - timedelta(minutes=1))
        post = lambda alerts: api.post("/api/v2/alerts", [dict(a, startsAt=started) for a in alerts])
        assert post([am_alert("NodeDown", "n1", "critical")]).status_code == 200
        source_fp = labelset_fingerprint(am_alert("NodeDown", "n1", "critical")["labels"])
        wait_until(lambda: outcomes_told(api, source_fp), 30, "the source alert's outcome")
        storm = ([am_alert("NodeDown", "n1", "warning"), am_alert("Maint", "n3")]
                 + [am_alert(f"Group{g}", f"n{10 + i}") for g in range(4) for i in range(3)])
        assert post(storm).status_code == 200
        assert post([am_alert("Group0", "n10")]).status_code == 200  # a repeat
        # then every fingerprint's story tells the outcome of each of its raw alerts
        ledger: dict[str, dict[str, dict]] = defaultdict(dict)

        def all_told() -> bool:
            for e in kafka.read_ledger(0.3)[-1000:]:
                ledger[e["fingerprint"]][e["raw_id"]] = e
            done = sum(len(v) for v in ledger.values())
            return done >= 16 and all(set(outcomes_told(api, fp)) == set(raws)
                                      for fp, raws in ledger.items())

        wait_until(all_told, 45, "every ledger outcome told by the alert's story")
        kinds = defaultdict(int)
        for fp, raws in ledger.items():
            story = history(api, fp)
            told = outcomes_told(api, fp)
            for rid, e in raws.items():
                t = told[rid]
                kinds[e["outcome"]] += 1
                assert t["outcome"] == e["outcome"], (fp, t, e)
                assert t.get("messageId") == e["message_id"]
                assert t.get("silenceId") == e["silence_id"]
                assert t.get("inhibitedBy") == e["inhibited_by"]
                assert (t.get("reason") or "") == e["reason"]
                # and where it came from: the route it was posted to, when
                got = [r for r in story if r["kind"] == "received" and r["rawId"] == rid]
                assert len(got) == 1 and got[0]["source"] == "plait-api-v2", (rid, story)
                assert got[0]["receiver"] == "oncall" and got[0]["time"] <= t["time"]
                if e["outcome"] in ("delivered", "merged"):
                    # the message that carried it, and its accepted attempt
                    oks = [a for a in story if a["kind"] == "attempt" and a["ok"]
                           and a["messageId"] == e["message_id"]]
                    assert oks and oks[0]["receiver"] == "oncall" and oks[0]["httpStatus"] == 200
                    assert oks[0]["time"].endswith("Z")
        assert kinds["silenced"] == 1 and kinds["inhibited"] == 1 and kinds["deduplicated"] == 1
        assert kinds["merged"] >= 1, dict(kinds)
        # and the 503 attempt is in the source alert's story, before its retry's 200
        src = [(a["httpStatus"], a["attempt"]) for a in history(api, source_fp) if a["kind"] == "attempt"]
        assert src[:2] == [(503, 1), (200, 2)], src
        # and `plait alerts why` tells it by labels, and as JSON by fingerprint
        why = plait(api.url, "alerts", "why", "alertname=NodeDown,instance=n1,severity=warning")
        assert why.returncode == 0, why.stderr
        assert f"inhibited by {source_fp}" in why.stdout, why.stdout
        why = plait(api.url, "alerts", "why", source_fp, "--json")
        assert [e["httpStatus"] for e in json.loads(why.stdout)["entries"]
                if e["kind"] == "attempt"][:2] == [503, 200]
        muted = plait(api.url, "alerts", "why", "alertname=Maint,instance=n3,severity=warning")
        assert f"silenced by silence {sid}" in muted.stdout, muted.stdout
        # and an unknown or malformed fingerprint is a clear error, not a 500
        assert httpx.get(f"{api.url}/alerts/0000000000000000/history", timeout=10).status_code == 404
        bad = httpx.get(f"{api.url}/alerts/XYZ/history", timeout=10)
        assert bad.status_code == 422 and "fingerprint" in bad.json()["message"]
        # and `plait alerts list` shows the firing alerts; `silences expire` ends the silence
        listed = plait(api.url, "alerts", "list")
        assert listed.returncode == 0 and source_fp in listed.stdout, listed.stdout
        gone = plait(api.url, "silences", "expire", sid)
        assert gone.returncode == 0 and gone.stdout.split() == [sid, "expired"], gone.stdout
    finally:
        api.stop()
        kafka.close()
        receiver.stop()


@pytest.mark.timeout(120)
def test_a_native_alert_is_named_alike_in_its_message_the_list_and_its_story(make_stack, tmp_path):
    # given a native-format receiver and a native alert posted to POST /alerts, with labels
    receiver = Receiver().start()
    cfg = write_config(tmp_path / "alerting.yaml", [{"name": "oncall", "url": receiver.url("/r")}],
                       timing={"group_wait": 0, "group_interval": "1s", "repeat_interval": "1h"})
    stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
    api = AlertApi(stack)
    try:
        wait_until(lambda: api.counters()["partitions"] >= 4, 60, "the funnel worker to run")
        alert = {"rule": "DiskFull", "asset": "db-1", "severity": "critical",
                 "labels": {"team": "dba"}, "annotations": {"summary": "disk 97% full"}}
        assert api.post("/alerts", [alert]).status_code == 202
        # when it is delivered and listed
        wait_until(lambda: receiver.accepted("/r"), 30, "the alert's message")
        told = native_alerts(receiver.accepted("/r")[0])
        assert [(a["rule"], a["asset"]) for a in told] == [("DiskFull", "db-1")]

        def listed() -> list[dict]:
            return [a for a in httpx.get(f"{api.url}/api/v2/alerts", timeout=10).json()
                    if a["labels"].get("alertname") == "DiskFull"]

        wait_until(listed, 30, "the alert in GET /api/v2/alerts")
        shown = listed()[0]
        # then the list, `plait alerts list` and its message name it alike
        fp = shown["fingerprint"]
        assert fp == told[0]["fingerprint"]
        out = plait(api.url, "alerts", "list")
        assert out.returncode == 0 and out.stdout.split()[0] == fp, out.stdout
        # and that name finds its story (the console's History button, `plait alerts why`)
        wait_until(lambda: outcomes_told(api, fp), 30, "the alert's outcome")
        story = history(api, fp)
        assert [e["outcome"] for e in story if e["kind"] == "outcome"] == ["delivered"]
        assert any(e["kind"] == "attempt" and e["ok"] for e in story), story
        why = plait(api.url, "alerts", "why", fp)
        assert why.returncode == 0 and f"alert {fp}" in why.stdout, why.stderr
        assert "delivered in message" in why.stdout, why.stdout
        # and the name the list gave it before (its shown labels' Alertmanager fingerprint)
        # still finds the same story while it fires, also given as those labels
        old = labelset_fingerprint(shown["labels"])
        assert old != fp
        got = httpx.get(f"{api.url}/alerts/{old}/history", timeout=10)
        assert got.status_code == 200, got.text
        assert got.json()["data"]["fingerprint"] == fp
        assert got.json()["data"]["entries"][:len(story)] == story
        labels = ",".join(f"{k}={v}" for k, v in shown["labels"].items())
        why = plait(api.url, "alerts", "why", labels, "--json")
        assert why.returncode == 0 and json.loads(why.stdout)["fingerprint"] == fp, why.stderr
    finally:
        api.stop()
        receiver.stop()
