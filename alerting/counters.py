"""Funnel counters across partitions, and their Prometheus view. Each partition publishes a
consistent snapshot to the Redis hash ``plait.keys.alert_counters``; as each balances, so does
their sum (``received = delivered + ... + pending``)."""
from __future__ import annotations

import json
from bisect import bisect_left
from typing import Any, Iterable

OUTCOMES = ("delivered", "deduplicated", "silenced", "inhibited", "merged", "rejected", "pending")
#: Counters exported as ``plait_alert_<name>_total``.
EVENT_COUNTERS = ("messages_delivered", "messages_superseded", "attempts", "attempts_failed",
                  "attempts_lost", "http_429", "http_5xx", "client_errors", "network_errors",
                  "deescalations", "transient_suppressed", "rate_limited_ticks",
                  "invalid_unicode")


#: Upper bounds (ms) of the ``decision_ms`` buckets: ``receivedAt`` of a raw alert to the funnel's
#: decision. 40 sits below the p99 < 50 ms target, so a p99 in the 40 bucket is under 50 ms.
DECISION_BUCKETS_MS = (5, 10, 25, 40, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
_BUCKET_LABELS = tuple(str(b) for b in DECISION_BUCKETS_MS) + ("inf",)


def observe_decision(counters: dict[str, Any], seconds: float) -> None:
    """Count a decision of ``seconds`` in ``counters["decision_ms"]`` (label: upper bound in ms,
    ``"inf"`` past the last); fixed buckets."""
    i = bisect_left(DECISION_BUCKETS_MS, seconds * 1000.0)
    label = _BUCKET_LABELS[i]
    hist = counters.setdefault("decision_ms", {})
    hist[label] = hist.get(label, 0) + 1


def decision_quantile(hist: dict[str, int], q: float) -> float | None:
    """Upper bound (ms) of the bucket holding quantile ``q`` (0..1) of a ``decision_ms`` histogram
    (``inf`` past the last bucket); None when empty."""
    total = sum(hist.values())
    if not total:
        return None
    seen = 0
    for label in [str(b) for b in DECISION_BUCKETS_MS] + ["inf"]:
        seen += hist.get(label, 0)
        if seen >= q * total:
            return float(label)
    return float("inf")


def merge(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum per-partition counter snapshots (numbers add, nested maps add per key); ``balanced`` is
    recomputed and ``partitions`` counts the snapshots."""
    total: dict[str, Any] = {"received": 0, **dict.fromkeys(OUTCOMES, 0),
                             "silenced_by": {}, "dedupe_reasons": {}}
    n = 0
    for snap in snapshots:
        n += 1
        for k, v in snap.items():
            if k in ("balanced", "updated_at"):
                continue
            if isinstance(v, dict):
                bucket = total.setdefault(k, {})
                for kk, vv in v.items():
                    bucket[kk] = bucket.get(kk, 0) + vv
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                total[k] = total.get(k, 0) + v
    total["balanced"] = total["received"] == sum(total[k] for k in OUTCOMES)
    total["partitions"] = n
    return total


def decode_hash(raw: dict[Any, Any]) -> list[dict[str, Any]]:
    """The snapshots of a Redis hash (``HGETALL``), unreadable ones skipped."""
    out = []
    for v in raw.values():
        try:
            out.append(json.loads(v))
        except (TypeError, ValueError):
            continue
    return out


class CountersCollector:
    """A ``prometheus_client`` collector of the summed counters per scrape (``HGETALL`` within
    ``timeout`` s): ``plait_alerts_received_total``, ``plait_alerts_outcome_total{outcome}``,
    ``plait_alerts_pending``, ``plait_alert_<event>_total``, ``plait_alerts_silenced_by_total``,
    ``plait_alerts_inhibited_by_rule_total``."""

    def __init__(self, redis_url: str, key: str, timeout: float = 0.5) -> None:
        self.redis_url = redis_url
        self.key = key
        self.timeout = timeout

    def read(self) -> dict[str, Any]:
        """The summed counters, or an empty total when Redis does not answer."""
        import redis

        try:
            client = redis.Redis.from_url(self.redis_url, socket_timeout=self.timeout,
                                          socket_connect_timeout=self.timeout)
            try:
                return merge(decode_hash(client.hgetall(self.key)))
            finally:
                client.close()
        except Exception:
            return merge([])

    def collect(self):
        """Yield the metric families (prometheus_client collector protocol)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        c = self.read()
        yield CounterMetricFamily("plait_alerts_received", "Raw alerts received by the funnel",
                                  value=c["received"])
        fam = CounterMetricFamily("plait_alerts_outcome", "Raw alerts by final outcome",
                                  labels=["outcome"])
        for k in OUTCOMES[:-1]:
            fam.add_metric([k], c[k])
        yield fam
        yield GaugeMetricFamily("plait_alerts_pending", "Raw alerts not final yet", value=c["pending"])
        for k in EVENT_COUNTERS:
            yield CounterMetricFamily(f"plait_alert_{k}", f"Alert funnel counter {k}",
                                      value=c.get(k, 0))
        fam = CounterMetricFamily("plait_alerts_silenced_by", "Raw alerts silenced, per silence",
                                  labels=["silence"])
        for sid, v in sorted(c.get("silenced_by", {}).items()):
            fam.add_metric([sid], v)
        yield fam
        fam = CounterMetricFamily("plait_alerts_inhibited_by_rule",
                                  "Raw alerts inhibited, per inhibit rule (index in inhibit_rules)",
                                  labels=["rule"])
        for rule, v in sorted(c.get("inhibited_by_rule", {}).items()):
            fam.add_metric([rule], v)
        yield fam
