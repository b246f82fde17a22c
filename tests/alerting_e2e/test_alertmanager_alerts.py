"""``/api/v2/alerts`` as Alertmanager has it, through the real stack (Tansu
broker, worker, API): any non-empty label set is an alert (no ``alertname``
needed); an active alert's ``endsAt`` is its last receipt's ``endsAt``, else
its ``updatedAt`` + ``resolve_timeout``, compared with the real Alertmanager
binary (Debian ``prometheus-alertmanager``) on the same POSTs."""
from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
import yaml

from alert_e2e_support import Kafka, fast_timing, wait_until, write_config

pytestmark = pytest.mark.integration

ALERTMANAGER = shutil.which("alertmanager") or shutil.which("prometheus-alertmanager")
#: resolve_timeout of both: not Alertmanager's default, so a hard-coded 5m shows
RESOLVE_TIMEOUT = 120.0
FAST = fast_timing(resolve_timeout="2m")


@pytest.fixture
def plait(make_stack, tmp_path, receiver):
    """A stack whose funnel sends Alertmanager webhooks to ``/am`` (open API)."""
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "am", "url": receiver.url("/am"), "format": "alertmanager"}],
                       **FAST)
    stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
    wait_until(lambda: httpx.get(f"{stack.api_url}/alerts/counters", timeout=5)
               .json()["data"]["partitions"] >= 4, 90, "the funnel to run")
    return stack


def test_an_alert_without_alertname_reaches_the_webhook(plait, receiver):
    api = plait.api_url
    kafka = Kafka(plait)
    try:
        # when an alert whose only label is foo="bar" is posted
        resp = httpx.post(f"{api}/api/v2/alerts", json=[{"labels": {"foo": "bar"}}], timeout=10)
        assert resp.status_code == 200, resp.text
        # then the receiver gets it with its own labels (no alertname invented)
        def delivered():
            return [a for h in receiver.accepted("/am") for a in h.body["alerts"]]
        got = wait_until(delivered, 60, "the alert at the webhook")
        assert [(a["labels"], a["status"]) for a in got] == [({"foo": "bar"}, "firing")]
        # and GET /api/v2/alerts lists it so
        listed = wait_until(lambda: httpx.get(f"{api}/api/v2/alerts", timeout=10).json(), 30,
                            "the alert listed")
        assert [a["labels"] for a in listed] == [{"foo": "bar"}]
        # and the ledger says it was delivered
        fp = listed[0]["fingerprint"]
        wait_until(lambda: any(e["fingerprint"] == fp and e["outcome"] == "delivered"
                               for e in kafka.read_ledger()), 30, "its ledger entry")
        # while an empty label set is still refused, naming labels
        bad = httpx.post(f"{api}/api/v2/alerts", json=[{"labels": {}}], timeout=10)
        assert bad.status_code == 400 and bad.json().startswith("1 of 1 alerts refused")
        assert "[0].labels: is required" in bad.json()
    finally:
        kafka.close()


def _ts(text: str) -> float:
    """Epoch seconds of an RFC 3339 time (Go's nanoseconds cut to micro)."""
    text = re.sub(r"(\.\d{6})\d+", r"\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


def _post_and_read(base: str, headers: dict | None = None) -> dict[str, dict]:
    """POST the alerts of the endsAt check to ``base`` (Plait or Alertmanager):
    ``Quiet`` without endsAt; ``Moving`` with endsAt 3 s ahead, then again
    (within the dedupe cooldown) with endsAt 10 min ahead. Waits until the
    first endsAt is past; returns alertname -> ``{updatedAt, endsAt,
    second}`` (epoch seconds; ``second``: the second POST's endsAt)."""
    now = time.time()
    second = round(now + 600, 3)
    posts = [[{"labels": {"alertname": "Quiet", "job": "t"}},
              {"labels": {"alertname": "Moving", "job": "t"}, "endsAt": _rfc3339(now + 3)}],
             [{"labels": {"alertname": "Moving", "job": "t"}, "endsAt": _rfc3339(second)}]]
    for body in posts:
        resp = httpx.post(f"{base}/api/v2/alerts", json=body, headers=headers, timeout=10)
        assert resp.status_code == 200, resp.text

    def listed():
        if time.time() < now + 4:  # the first endsAt of Moving is past
            return None
        got = {a["labels"]["alertname"]: a
               for a in httpx.get(f"{base}/api/v2/alerts", timeout=10).json()}
        return got if {"Quiet", "Moving"} <= set(got) else None

    got = wait_until(listed, 60, f"both alerts listed by {base}")
    return {name: {"updatedAt": _ts(a["updatedAt"]), "endsAt": _ts(a["endsAt"]),
                   "state": a["status"]["state"], "second": second} for name, a in got.items()}


def _check_ends_at(got: dict[str, dict], now: float) -> None:
    quiet, moving = got["Quiet"], got["Moving"]
    # posted without endsAt: it ends resolve_timeout after its last receipt
    assert quiet["endsAt"] - quiet["updatedAt"] == pytest.approx(RESOLVE_TIMEOUT, abs=0.01)
    # posted with endsAt: the latest receipt's, not a past one of an earlier receipt
    assert moving["endsAt"] == pytest.approx(moving["second"], abs=0.01)
    assert moving["endsAt"] > now and quiet["endsAt"] > now
    assert {quiet["state"], moving["state"]} == {"active"}


def test_an_active_alerts_ends_at_follows_its_last_receipt(plait):
    got = _post_and_read(plait.api_url)
    _check_ends_at(got, time.time())


@pytest.fixture
def alertmanager(tmp_path: Path):
    """The real Alertmanager on a free loopback port (resolve_timeout 2m, one
    receiver that sends nothing); its base URL."""
    if ALERTMANAGER is None:
        pytest.skip("the alertmanager binary is absent (Debian package prometheus-alertmanager)")
    cfg = tmp_path / "am.yml"
    cfg.write_text(yaml.safe_dump({"global": {"resolve_timeout": "2m"},
                                   "route": {"receiver": "none"},
                                   "receivers": [{"name": "none"}]}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([ALERTMANAGER, f"--config.file={cfg}",
                             f"--storage.path={tmp_path / 'am-data'}",
                             f"--web.listen-address=127.0.0.1:{port}",
                             "--cluster.listen-address="],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "am.log", "wb"))
    base = f"http://127.0.0.1:{port}"

    def ready():
        try:
            return httpx.get(f"{base}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None and pytest.fail(
                (tmp_path / "am.log").read_text()[-2000:])
    try:
        wait_until(ready, 30, "alertmanager ready")
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_real_alertmanager_shows_the_same_ends_at(alertmanager):
    """The same POSTs to Alertmanager give the shape the Plait test asserts."""
    _check_ends_at(_post_and_read(alertmanager), time.time())
