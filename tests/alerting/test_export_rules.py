"""Export rules: slow tasks and DLQ growth (pure parts)."""
from __future__ import annotations

from alerting.rules import DlqWatch, lifecycle_alert, slow_task_alert
from plait.events import Lifecycle


def ev(status: str) -> Lifecycle:
    return Lifecycle(taskId="t9", status=status, sysCode="billing", bizType="invoices",
                     errorMessage="page 3: data API answered HTTP 400")


def test_failed_and_timeout_raise_alerts_on_the_export_kind():
    failed = lifecycle_alert(ev("FAILED"))
    assert (failed["rule"], failed["severity"], failed["asset"]) == \
        ("ExportFailed", "critical", "billing/invoices")
    assert "HTTP 400" in failed["annotations"]["description"]
    assert lifecycle_alert(ev("TIMEOUT"))["rule"] == "ExportTimeout"
    assert lifecycle_alert(ev("SUCCESS")) is None


def test_slow_task_fires_once_past_the_threshold_and_resolves_when_it_ends():
    assert slow_task_alert(ev("PROGRESS"), created_at=0, now=100, after=600, fired=False) is None
    firing = slow_task_alert(ev("PROGRESS"), created_at=0, now=601, after=600, fired=False)
    assert firing["status"] == "firing" and firing["asset"] == "billing/invoices/t9"
    assert slow_task_alert(ev("PROGRESS"), created_at=0, now=700, after=600, fired=True) is None
    resolved = slow_task_alert(ev("SUCCESS"), created_at=0, now=800, after=600, fired=True)
    assert resolved["status"] == "resolved"
    assert slow_task_alert(ev("SUCCESS"), created_at=0, now=800, after=600, fired=False) is None


def test_dlq_growth_fires_at_the_threshold_once_and_resolves_after_a_quiet_window():
    watch = DlqWatch(window=60, threshold=3)
    assert watch.observe(0) is None and watch.observe(10) is None
    firing = watch.observe(20)
    assert firing["status"] == "firing" and "3 dead letters" in firing["annotations"]["summary"]
    assert watch.observe(30) is None  # same episode
    assert watch.check(50) is None  # still inside the window
    assert watch.check(91)["status"] == "resolved"
    assert watch.check(95) is None


def test_dead_letters_spread_out_never_fire():
    watch = DlqWatch(window=60, threshold=3)
    assert all(watch.observe(t) is None for t in (0, 70, 140, 210))
