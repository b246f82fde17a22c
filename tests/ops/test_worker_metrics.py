"""Issue 15 item 4: a worker serves its metrics on PLAIT_METRICS_PORT: task
outcomes, rows and bytes, stage durations, queue wait, data-API latency,
consumer lag per topic."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx
import pytest

from ops.infra import free_port

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from support import seq_spec, submit, wait_for, wait_task  # noqa: E402

pytestmark = pytest.mark.integration


def sample(text: str, name: str, labels: str = "") -> float | None:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_worker_metrics_answer_what_happened(make_stack):
    port = free_port()
    stack = make_stack(workers=1, PLAIT_METRICS_PORT=str(port))
    task = wait_task(stack.api_url, submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 250, 100)))
    assert task["status"] == "SUCCESS"
    url = f"http://127.0.0.1:{port}/metrics"

    def scraped():
        text = httpx.get(url, timeout=5).text
        return text if sample(text, "plait_export_tasks_total", '{outcome="SUCCESS"}') else None

    text = wait_for(scraped, 30, "the worker to count the task")
    assert sample(text, "plait_export_tasks_total", '{outcome="SUCCESS"}') == 1.0
    assert sample(text, "plait_export_rows_total") == 250.0
    assert sample(text, "plait_export_bytes_total") == task["file"]["bytes"]
    assert sample(text, "plait_export_queue_wait_seconds_count") == 1.0
    for stage in ("export.admission", "export.fetch_page", "export.write_shard", "export.finalize"):
        assert sample(text, "plait_stage_duration_seconds_count", f'{{stage="{stage}"}}') >= 1, stage
    assert sample(text, "plait_data_api_request_duration_seconds_count", '{sysCode="tests"}') == 3.0
    # consumer lag per topic is refreshed every 5 s
    def lag():
        text = httpx.get(url, timeout=5).text
        return text if "plait_kafka_consumer_lag{" in text else None

    text = wait_for(lag, 30, "the consumer lag gauges")
    assert re.search(r'^plait_kafka_consumer_lag\{topic="export\.fetch"\} \d', text, re.M), text[-2000:]
