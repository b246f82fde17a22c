"""Export lifecycle rules end to end: a failing export reaches the on-call
webhook as an ExportFailed alert, and a slow one as ExportSlow."""
from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from alert_e2e_support import Receiver, native_alerts, wait_until, write_config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "pipeline"))
from support import seq_spec, submit, wait_task  # noqa: E402

pytestmark = pytest.mark.integration


def test_failed_and_slow_exports_page_the_receiver(make_stack, tmp_path):
    # given a funnel with a fast group_wait and a 1 s slow-task threshold
    receiver = Receiver().start()
    try:
        config = write_config(
            tmp_path / "alerting.yaml",
            [{"name": "oncall", "url": receiver.url("/hook"), "format": "native"}],
            timing={"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
            rules={"slow_task_after": "1s"})
        stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(config))
        # when one export fails with HTTP 400 and another runs slowly
        failing = submit(stack.api_url, seq_spec(
            stack.demo_data_api, "csv", 300, 100, query="?fail_status=400&fail_times=9&run=rf"))
        slow = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 600, 100,
                                              query="?delay_ms=500"))
        assert wait_task(stack.api_url, failing)["status"] == "FAILED"
        assert wait_task(stack.api_url, slow)["status"] == "SUCCESS"

        # then the webhook gets ExportFailed naming the task and the cause, and ExportSlow
        def seen():
            alerts = [a for hit in receiver.accepted() for a in native_alerts(hit)]
            pairs = {(a["rule"], a["labels"].get("taskId")) for a in alerts}
            wanted = {("ExportFailed", failing), ("ExportSlow", slow)}
            return alerts if wanted <= pairs else None

        alerts = wait_until(seen, 60, "ExportFailed and ExportSlow at the webhook")
        failed = next(a for a in alerts if a["rule"] == "ExportFailed")
        assert failed["severity"] == "critical" and failed["asset"] == "tests/seq"
        # (counters are published to Redis after the tick that sent the message:
        # wait for them rather than race the POST)
        wait_until(lambda: httpx.get(f"{stack.api_url}/alerts/counters").json()["data"]["received"] >= 2,
                   10, "the alert counters to count both alerts")
    finally:
        receiver.stop()


def test_failed_export_resolves_when_the_next_run_succeeds(make_stack, tmp_path):
    # given a funnel with fast timers, no slow-task rule, and the console's URL set
    receiver = Receiver().start()
    try:
        config = write_config(
            tmp_path / "alerting.yaml",
            [{"name": "oncall", "url": receiver.url("/hook"), "format": "native"}],
            timing={"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
            rules={"slow_task_after": None})
        stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(config),
                           PLAIT_EXTERNAL_URL="https://plait.example.com")
        # when an export fails ...
        failing = submit(stack.api_url, seq_spec(
            stack.demo_data_api, "csv", 300, 100, query="?fail_status=400&fail_times=9&run=rr"))
        assert wait_task(stack.api_url, failing)["status"] == "FAILED"

        def messages(status):
            return [h for h in receiver.accepted()
                    if any(a["rule"] == "ExportFailed" and a["status"] == status for a in native_alerts(h))]

        [fired] = wait_until(lambda: messages("firing") or None, 60, "ExportFailed firing")
        # ... then the next run of the same sysCode/bizType succeeds
        ok = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 300, 100))
        assert wait_task(stack.api_url, ok)["status"] == "SUCCESS"
        # then exactly one firing and one resolved message, both about the failed task
        [resolved] = wait_until(lambda: messages("resolved") or None, 60, "ExportFailed resolved")
        assert len(messages("firing")) == 1
        [a] = [a for a in native_alerts(resolved) if a["rule"] == "ExportFailed"]
        assert a["labels"]["taskId"] == failing and a["labels"]["resolvedBy"] == ok
        assert fired.body["title"].startswith("[FIRING:1] ExportFailed")
        assert f"https://plait.example.com/ui/tasks/{failing}" in fired.body["text"]
        assert resolved.body["title"].startswith("[RESOLVED] ExportFailed")
    finally:
        receiver.stop()
