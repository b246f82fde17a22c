"""A probe schedule on the real broker with the alert funnel: a local server
that goes down and comes back gives one firing and one resolved TargetDown
at the webhook (asset = the target)."""
from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "alerting_e2e"))
from alert_e2e_support import AlertApi, Kafka, Receiver, native_alerts, wait_until, write_config  # noqa: E402

pytestmark = pytest.mark.integration


class Target:
    """An HTTP server on a fixed port that can be stopped and started again."""

    def __init__(self) -> None:
        self.port = 0
        self.server = None

    def up(self) -> None:
        class Ok(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Ok)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_probe_target_down_and_up_gives_one_firing_and_one_resolved_alert(make_stack, tmp_path):
    receiver = Receiver().start()
    target = Target()
    target.up()
    try:
        cfg = write_config(tmp_path / "alerting.yaml",
                           [{"name": "oncall", "url": receiver.url("/probe"), "format": "native"}],
                           grouping={"group_by": ["rule"], "batch_size": 50},
                           timing={"group_wait": "1s", "group_interval": "1s",
                                   "repeat_interval": "1h"})
        stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg),
                           PLAIT_SCHEDULE_TICK_SECONDS="0.2",
                           PLAIT_SCHEDULE_MIN_INTERVAL_SECONDS="1")
        api, kafka = AlertApi(stack), Kafka(stack)
        wait_until(lambda: api.counters()["partitions"] >= 4, 60, "the funnel worker to run")
        url = f"http://127.0.0.1:{target.port}/health"
        resp = httpx.post(f"{stack.api_url}/schedules", json={
            "name": "web", "sysCode": "ops", "trigger": {"interval": 1},
            "action": {"probe": {"targets": [{"http": url, "timeout": 1}]}}}, timeout=10)
        assert resp.status_code == 201, resp.text
        sid = resp.json()["data"]["id"]

        def probed(n):
            return lambda: httpx.get(f"{stack.api_url}/schedules/{sid}",
                                     timeout=10).json()["data"]["counters"]["fired"] >= n

        wait_until(probed(2), 30, "two probes while up")
        # when the target goes down for a few probes, then comes back
        target.down()
        fired = httpx.get(f"{stack.api_url}/schedules/{sid}").json()["data"]["counters"]["fired"]
        wait_until(probed(fired + 4), 30, "four probes while down")
        target.up()

        def states():
            seen = [a["status"] for h in receiver.accepted("/probe") for a in native_alerts(h)
                    if a.get("asset") == url]
            return seen if "resolved" in seen else None

        seen = wait_until(states, 60, "the resolved TargetDown at the webhook", every=0.25)
        # then the webhook got exactly one firing and one resolved TargetDown for the target
        assert seen == ["firing", "resolved"], seen
        sch = httpx.get(f"{stack.api_url}/schedules/{sid}").json()["data"]
        assert sch["counters"]["failed"] >= 4
        api.stop()
        kafka.close()
    finally:
        receiver.stop()
        target.down()
