"""Issue 15 item 4: the Grafana dashboard and the Prometheus rules use only
metrics Plait exports, and each exported metric has Prometheus units."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY, generate_latest

from plait import metrics, quotas  # noqa: F401  (quotas declares the plait_quota_* counters)

ROOT = Path(__file__).parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "plait.json"
RULES = ROOT / "deploy" / "prometheus" / "plait-rules.yml"
NAME = re.compile(r"\bplait_[a-z0-9_]+")


def base(name: str) -> str:
    """The metric family of a series name (histograms: ``_bucket/_sum/_count``)."""
    return re.sub(r"_(bucket|sum|count)$", "", name) if name not in metrics.NAMES else name


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def rule_exprs() -> list[str]:
    doc = yaml.safe_load(RULES.read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_every_expr_references_an_exported_metric(source):
    exprs = dashboard_exprs() if source == "dashboard" else rule_exprs()
    assert exprs
    for expr in exprs:
        names = NAME.findall(expr)
        assert names, f"{expr!r} uses no Plait metric"
        unknown = {n for n in names if base(n) not in metrics.NAMES}
        assert not unknown, f"{source}: {expr!r} uses {unknown}, not in plait.metrics.NAMES"


def test_the_dashboard_covers_the_questions_of_issue_15():
    used = {base(n) for e in dashboard_exprs() for n in NAME.findall(e)}
    for name in ("plait_export_tasks_total", "plait_export_rows_total", "plait_export_bytes_total",
                 "plait_stage_duration_seconds", "plait_export_queue_wait_seconds",
                 "plait_data_api_request_duration_seconds", "plait_data_api_errors_total",
                 "plait_kafka_consumer_lag", "plait_export_inflight_tasks",
                 "plait_export_slots_used", "plait_dlq_records",
                 "plait_webhook_request_duration_seconds", "plait_webhook_attempts_total"):
        assert name in used, f"no dashboard panel shows {name}"


class FakeRedis:
    """What ``StateCollector`` reads: the active set and the slot/wait sets."""

    def __init__(self, prefix: str) -> None:
        now_ms = time.time() * 1000
        self.z = {f"{prefix}:active": {"t1": now_ms - 90_000, "t2": now_ms},
                  f"{prefix}:slots:global": {"t1": time.time() + 60},
                  f"{prefix}:wait:tests": {"t3": 1.0}}

    def zcard(self, key):
        key = key.decode() if isinstance(key, bytes) else key
        return len(self.z.get(key, {}))

    def zrange(self, key, a, b, withscores=False):
        items = sorted(self.z.get(key, {}).items(), key=lambda kv: kv[1])[a:b + 1]
        return [(k.encode(), v) for k, v in items]

    def zcount(self, key, lo, hi):
        key = key.decode() if isinstance(key, bytes) else key
        return sum(1 for v in self.z.get(key, {}).values() if v >= lo)

    def scan_iter(self, match, count=None):
        rx = re.compile(re.escape(match).replace(r"\*", ".*") + "$")
        return [k.encode() for k in self.z if rx.match(k)]

    def close(self):
        pass


def test_every_name_is_exported_with_prometheus_units(monkeypatch):
    import redis

    monkeypatch.setattr(redis.Redis, "from_url", staticmethod(lambda *a, **k: FakeRedis("p")))
    collector = metrics.StateCollector("redis://x", "p", "127.0.0.1:1", "dlq")
    collector._dlq = (time.monotonic(), 2)  # cached broker answer
    metrics.TASKS.labels("SUCCESS").inc(0)
    metrics.WEBHOOK_ATTEMPTS.labels("r", "success").inc(0)
    metrics.DATA_API_ERRORS.labels("s", "timeout").inc(0)
    metrics.CONSUMER_LAG.labels("export.fetch").set(0)
    REGISTRY.register(collector)
    try:
        text = generate_latest().decode()
    finally:
        REGISTRY.unregister(collector)
    exported = {base(m) for m in re.findall(r"^# TYPE (\S+)", text, re.M)}
    exported |= {m.removesuffix("_total") + "_total" for m in exported if m + "_total" in text}
    alerting = {"plait_alerts_received_total", "plait_alerts_outcome_total", "plait_alerts_pending",
                "plait_api_tasks_created_total"}  # alerting.counters / api.tasks
    missing = {n for n in metrics.NAMES - alerting if n not in exported and n.removesuffix("_total") not in exported}
    assert not missing, f"declared but not exported: {missing}"
    assert 'plait_export_slots_used{scope="global"} 1.0' in text
    assert "plait_export_waiting_tasks 1.0" in text and "plait_dlq_records 2.0" in text
    assert re.search(r"plait_export_oldest_active_task_age_seconds (8\d|9\d)\.", text)
    for name in metrics.NAMES:  # units: counters end in _total, durations in _seconds
        assert not re.search(r"_(ms|millis|secs|kb|mb)(_|$)", name), name
        if re.search(r"_(duration|wait|age)(_|$)", name):
            assert name.endswith("_seconds"), name


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool absent (Debian `prometheus`)")
def test_rules_pass_promtool():
    out = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
