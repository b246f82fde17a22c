"""Prometheus metrics (naming conventions: ``_total``, ``_seconds``, ``_bytes``; histograms for
durations). Redis/Kafka state is read at scrape time (:class:`StateCollector`); workers serve on
``PLAIT_METRICS_PORT`` (:func:`serve`), the API on ``/metrics``. :data:`NAMES` lists every name; the
Grafana dashboard and the Prometheus rules use only these (tests check it)."""
from __future__ import annotations

import errno
import time
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from plait.errors import ConfigError

FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SLOW = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 10800)

TASKS = Counter("plait_export_tasks_total", "Export tasks ended, by outcome "
                "(SUCCESS, FAILED, CANCELLED, TIMEOUT)", ["outcome"])
ROWS = Counter("plait_export_rows_total", "Rows written into finished export files")
BYTES = Counter("plait_export_bytes_total", "Bytes of finished export files")
TASK_SECONDS = Histogram("plait_export_task_duration_seconds",
                         "Created-to-ended time of export tasks, by outcome", ["outcome"],
                         buckets=SLOW)
QUEUE_WAIT = Histogram("plait_export_queue_wait_seconds",
                       "Time from created to running (admission and waiting for a slot)",
                       buckets=SLOW)
STAGE_SECONDS = Histogram("plait_stage_duration_seconds",
                          "Time one agent took for one event, by stage (span name)", ["stage"],
                          buckets=FAST + (60, 300, 1800))
STAGE_FAILURES = Counter("plait_stage_failures_total", "Handler failures by stage", ["stage"])
DATA_API_SECONDS = Histogram("plait_data_api_request_duration_seconds",
                             "Data-API page requests, by caller sysCode", ["sysCode"],
                             buckets=FAST)
DATA_API_ERRORS = Counter("plait_data_api_errors_total",
                          "Failed data-API page requests, by caller sysCode and kind "
                          "(timeout, transport, permanent, retryable)", ["sysCode", "kind"])
CONSUMER_LAG = Gauge("plait_kafka_consumer_lag", "Records not yet consumed by this worker, "
                     "by topic (sum over its assigned partitions)", ["topic"])
WORKER_INFLIGHT = Gauge("plait_worker_inflight_tasks", "Tasks this worker is handling now")
WEBHOOK_SECONDS = Histogram("plait_webhook_request_duration_seconds",
                            "Webhook delivery attempts, by receiver", ["receiver"], buckets=FAST)
WEBHOOK_ATTEMPTS = Counter("plait_webhook_attempts_total",
                           "Webhook delivery attempts by receiver and outcome (success, "
                           "http_4xx, http_5xx, network_error)", ["receiver", "outcome"])
ALERT_RECORDS_TOO_LARGE = Counter(
    "plait_alert_records_too_large_total",
    "Records of the alert path past plait.records.MAX_RECORD_BYTES, kept in export.dlq "
    "instead of sent, by topic", ["topic"])

#: Every metric name (histograms: base name), alerting.counters and plait.quotas included.
NAMES = frozenset({
    "plait_export_tasks_total", "plait_export_rows_total", "plait_export_bytes_total",
    "plait_export_task_duration_seconds", "plait_export_queue_wait_seconds",
    "plait_stage_duration_seconds", "plait_stage_failures_total",
    "plait_data_api_request_duration_seconds", "plait_data_api_errors_total",
    "plait_kafka_consumer_lag", "plait_worker_inflight_tasks",
    "plait_webhook_request_duration_seconds", "plait_webhook_attempts_total",
    "plait_export_inflight_tasks", "plait_export_slots_used", "plait_export_waiting_tasks",
    "plait_export_oldest_active_task_age_seconds", "plait_dlq_records",
    "plait_api_tasks_created_total",
    "plait_quota_rows_total", "plait_quota_refusals_total", "plait_quota_cut_tasks_total",
    "plait_alerts_received_total", "plait_alerts_outcome_total", "plait_alerts_pending",
    "plait_alert_records_too_large_total",
})


def _seconds_between(start: str | None, end: str | None) -> float | None:
    from plait.clock import parse_iso

    if not start or not end:
        return None
    try:
        return max(0.0, parse_iso(end) - parse_iso(start))
    except Exception:
        return None


def task_changed(before: str | None, state: dict[str, Any]) -> None:
    """Count a task state change (``state`` new, ``before`` the old status): queue wait on RUNNING;
    outcome, rows, bytes, duration at the end."""
    status = state.get("status")
    if status == before:
        return
    if status == "RUNNING":
        wait = _seconds_between(state.get("createdAt"), state.get("startedAt"))
        if wait is not None:
            QUEUE_WAIT.observe(wait)
    elif status in ("SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"):
        TASKS.labels(status).inc()
        took = _seconds_between(state.get("createdAt"), state.get("finishedAt"))
        if took is not None:
            TASK_SECONDS.labels(status).observe(took)
        if status == "SUCCESS":
            f = state.get("file") or {}
            ROWS.inc(f.get("rows") or state.get("exportedRows") or 0)
            BYTES.inc(f.get("bytes") or 0)


class StageTimer:
    """``with StageTimer(stage):`` observes ``plait_stage_duration_seconds{stage}`` (a failure
    counted when it raises)."""

    def __init__(self, stage: str) -> None:
        self.stage = stage

    def __enter__(self) -> "StageTimer":
        self.t0 = time.monotonic()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        STAGE_SECONDS.labels(self.stage).observe(time.monotonic() - self.t0)
        if exc_type is not None:
            STAGE_FAILURES.labels(self.stage).inc()


class StateCollector:
    """Gauges read at scrape time from Redis and Kafka, each within ``timeout`` s (a failed read
    leaves it out): in-flight tasks, oldest active age, slots used, waiting tasks, DLQ records."""

    def __init__(self, redis_url: str, prefix: str, broker_url: str, dlq_topic: str,
                 timeout: float = 1.0) -> None:
        self.redis_url, self.prefix = redis_url, prefix
        self.broker_url, self.dlq_topic, self.timeout = broker_url, dlq_topic, timeout
        self._dlq: tuple[float, int | None] = (0.0, None)

    def describe(self):
        return []

    def collect(self):
        import redis

        from plait import keys as K

        client = redis.Redis.from_url(self.redis_url, socket_timeout=self.timeout,
                                      socket_connect_timeout=self.timeout)
        try:
            inflight = client.zcard(K.active(self.prefix))
            oldest = client.zrange(K.active(self.prefix), 0, 0, withscores=True)
            slots = GaugeMetricFamily("plait_export_slots_used",
                                      "Slots held per limit scope", labels=["scope"])
            head = K.slots(self.prefix, "")
            for key in client.scan_iter(match=K.slots(self.prefix, "*"), count=500):
                name = key.decode() if isinstance(key, bytes) else key
                slots.add_metric([name[len(head):]], client.zcount(key, time.time(), "+inf"))
            waiting = 0
            for key in client.scan_iter(match=K.wait_queue(self.prefix, "*"), count=500):
                waiting += client.zcard(key)
        except redis.RedisError:
            return
        finally:
            client.close()
        yield GaugeMetricFamily("plait_export_inflight_tasks", "Export tasks not yet ended",
                                value=inflight)
        age = time.time() - oldest[0][1] / 1000 if oldest else 0.0
        yield GaugeMetricFamily("plait_export_oldest_active_task_age_seconds",
                                "Age of the oldest task not yet ended", value=max(0.0, age))
        yield slots
        yield GaugeMetricFamily("plait_export_waiting_tasks", "Tasks waiting for a slot",
                                value=waiting)
        dlq = self.dlq_size()
        if dlq is not None:
            yield GaugeMetricFamily("plait_dlq_records", "Records in the dead-letter topic",
                                    value=dlq)

    def dlq_size(self) -> int | None:
        """Records in the DLQ topic (cached 15 s); None when the broker does not answer."""
        at, size = self._dlq
        if time.monotonic() - at < 15:
            return size
        size = None
        try:
            from confluent_kafka import Consumer, TopicPartition

            c = Consumer({"bootstrap.servers": self.broker_url, "group.id": "plait-metrics",
                          "enable.auto.commit": False})
            try:
                meta = c.list_topics(self.dlq_topic, timeout=self.timeout)
                parts = meta.topics[self.dlq_topic].partitions if self.dlq_topic in meta.topics else {}
                size = 0
                for p in parts:
                    lo, hi = c.get_watermark_offsets(TopicPartition(self.dlq_topic, p),
                                                     timeout=self.timeout)
                    size += max(0, hi - lo)
            finally:
                c.close()
        except Exception:
            size = None
        self._dlq = (time.monotonic(), size)
        return size


def update_lag(app: Any, topic_names: dict[str, str]) -> None:
    """Set ``plait_kafka_consumer_lag{topic}`` of a Faust worker, best effort (Faust internals);
    ``topic_names``: full -> base name."""
    try:
        lag: dict[str, int] = {}
        consumer = app.consumer
        committed = getattr(consumer, "_committed_offset", {}) or {}
        for tp in consumer.assignment():
            hw = consumer.highwater(tp)
            if hw is None:
                continue
            done = committed.get(tp)
            base = topic_names.get(tp.topic, tp.topic)
            lag[base] = lag.get(base, 0) + max(0, hw - ((done + 1) if done is not None else 0))
        for base, n in lag.items():
            CONSUMER_LAG.labels(base).set(n)
    except Exception:
        return


def serve(port: int) -> None:
    """Serve this process's metrics on ``port`` (0: nothing). Raises ConfigError when the port is
    taken."""
    if port:
        from prometheus_client import start_http_server

        try:
            start_http_server(port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise ConfigError(port_in_use_text(port)) from None


def port_in_use_text(port: int) -> str:
    """The one line that reports ``PLAIT_METRICS_PORT`` taken."""
    return (f"PLAIT_METRICS_PORT={port}: the port is already in use (another worker or "
            "process serves it); give each worker its own port, or 0 for none")
