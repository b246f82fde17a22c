"""Webhook delivery, the pure part: retry schedule (capped exponential backoff; ``Retry-After``,
RFC 9110 10.2.3, only delays), ``Idempotency-Key`` (IETF draft), ``X-Plait-Signature:
sha256=<HMAC-SHA256(secret, "<timestamp>." + body)>`` with ``X-Plait-Timestamp``, and the
``native`` and ``alertmanager`` (webhook v4) bodies.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
from typing import Any

import orjson

from alerting.model import Message
from alerting.intake import format_time, go_time
from plait.signature import hmac_sha256_hex

RETRYABLE_STATUS = frozenset({408, 425, 429})
SIGNATURE_HEADER = "X-Plait-Signature"
TIMESTAMP_HEADER = "X-Plait-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"


def backoff_delay(failures: int, initial: float = 1.0, cap: float = 60.0) -> float:
    """Seconds to wait after the ``failures``-th failed attempt (1, 2, 4 ... cap)."""
    if failures <= 0:
        return 0.0
    return min(cap, initial * 2.0 ** min(failures - 1, 62))


def next_attempt_at(now: float, failures: int, retry_after: float | None = None, *,
                    initial: float = 1.0, cap: float = 60.0,
                    max_retry_after: float = 3600.0) -> float:
    """Epoch seconds of the next attempt; ``retry_after``: the answer's ``Retry-After`` seconds."""
    delay = backoff_delay(failures, initial, cap)
    if retry_after is not None and retry_after > 0:
        delay = max(delay, min(retry_after, max_retry_after))
    return now + delay


def is_success(status: int | None) -> bool:
    """True for a 2xx answer."""
    return status is not None and 200 <= status < 300


def is_retryable(status: int | None) -> bool:
    """True for no answer (connect error, timeout), 408, 425, 429, 5xx."""
    return status is None or status in RETRYABLE_STATUS or status >= 500


def idempotency_key(receiver: str, message_id: str, created_at: float) -> str:
    """32 hex digits derived from the message identity; equal for every retry."""
    return hashlib.sha256(f"{receiver}\x00{message_id}\x00{created_at!r}".encode()).hexdigest()[:32]


def signature(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-Plait-Signature`` value for ``body`` sent at ``timestamp`` (epoch seconds)."""
    return "sha256=" + hmac_sha256_hex(secret, f"{timestamp}.".encode() + body)


def verify_signature(secret: str, body: bytes, timestamp: int, header: str, now: float,
                     tolerance: float = 300.0) -> bool:
    """Receiver side: ``header`` signs ``body`` and ``timestamp`` is within ``tolerance`` s of ``now``."""
    if abs(now - timestamp) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, body, timestamp), header)


def am_alert_labels(view: dict[str, Any]) -> dict[str, str]:
    """An alert's labels in Alertmanager's body: an Alertmanager alert's own; a native alert's plus
    ``alertname``, ``severity`` and ``asset``."""
    labels = dict(view["labels"])
    if view["rule"]:
        labels.setdefault("alertname", view["rule"])
    if view.get("source") != "alertmanager":
        labels.setdefault("severity", view["severity"])
        if view["asset"]:
            labels.setdefault("asset", view["asset"])
    return labels


def common_labels(dicts: list[dict[str, str]]) -> dict[str, str]:
    """The pairs every dict of ``dicts`` holds."""
    if not dicts:
        return {}
    common = dict(dicts[0])
    for d in dicts[1:]:
        common = {k: v for k, v in common.items() if d.get(k) == v}
    return common


def labels_before(a: dict[str, str], b: dict[str, str]) -> bool:
    """prometheus/common ``LabelSet.Before``: fewer labels first, then by sorted names' values."""
    if len(a) != len(b):
        return len(a) < len(b)
    for name in sorted(a.keys() | b.keys()):
        if name not in a:
            return True
        if name not in b:
            return False
        if a[name] != b[name]:
            return a[name] < b[name]
    return False


def am_compare(a: dict[str, str], b: dict[str, str]) -> int:
    """Alertmanager's ``types.AlertSlice.Less`` on two alerts' labels: ``job``, then ``instance``
    (an alert with the label first), then ``LabelSet.Before``."""
    for key in ("job", "instance"):
        if key not in a and key not in b:
            continue
        if key not in a or key not in b:
            return 1 if key not in a else -1
        if a[key] != b[key]:
            return -1 if a[key] < b[key] else 1
    return -1 if labels_before(a, b) else 1 if labels_before(b, a) else 0


def am_order(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``views`` in the order Alertmanager lists a group's alerts (its dispatcher sorts them,
    ``sort.Stable`` of ``types.AlertSlice``, dispatch/dispatch.go)."""
    labels = [am_alert_labels(v) for v in views]
    order = sorted(range(len(views)),
                   key=functools.cmp_to_key(lambda i, j: am_compare(labels[i], labels[j])))
    return [views[i] for i in order]


def am_group_labels(labels: dict[str, str]) -> dict[str, str]:
    """Group labels with ``rule`` spelt ``alertname`` unless there is an ``alertname`` (then
    ``rule`` is a label of the alerts' own), a label the alerts lack left out (Alertmanager's
    ``getGroupLabels``, dispatch.go)."""
    rename = "alertname" not in labels
    return {("alertname" if k == "rule" and rename else k): v for k, v in labels.items()
            if v != ""}


def render_alertmanager(message: Message, external_url: str = "",
                        max_alerts: int = 0) -> dict[str, Any]:
    """Alertmanager's webhook body (docs, "webhook_config", ``version`` "4"); ``truncatedAlerts``:
    alerts left out by ``max_alerts``; merged sections share one body, their common group labels as
    ``groupLabels``."""
    alerts = []
    views = am_order(message.alerts())
    truncated = 0
    if max_alerts and len(views) > max_alerts:
        truncated = len(views) - max_alerts
        views = views[:max_alerts]
    for view in views:
        alerts.append({
            "status": view["status"], "labels": am_alert_labels(view),
            "annotations": dict(view["annotations"]),
            "startsAt": go_time(view["starts_at"]),
            "endsAt": go_time(view["ends_at"] if view["status"] == "resolved" else None),
            "generatorURL": view.get("generator_url", ""),
            "fingerprint": view["fingerprint"].partition("~")[0],
        })
    sections = message.sections
    return {
        "version": "4",
        "groupKey": "|".join(s["group_id"] for s in sections),
        "truncatedAlerts": truncated,
        "status": "firing" if any(a["status"] == "firing" for a in message.alerts()) else "resolved",
        "receiver": message.receiver,
        "groupLabels": am_group_labels(common_labels([s["group_labels"] for s in sections])),
        "commonLabels": common_labels([a["labels"] for a in alerts]),
        "commonAnnotations": common_labels([a["annotations"] for a in alerts]),
        "externalURL": external_url,
        "alerts": alerts,
    }


_DATA_MAPS = frozenset({"labels", "annotations", "group_labels"})


@functools.lru_cache(maxsize=1024)
def _camel(name: str) -> str:
    """``name`` in camelCase."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def camel_keys(value: Any) -> Any:
    """``value`` with every dict key in camelCase, except inside label / annotation maps."""
    if isinstance(value, dict):
        return {_camel(k): ((dict(v) if k in _DATA_MAPS and isinstance(v, dict) else camel_keys(v))
                            if isinstance(v, (dict, list)) else v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def render_native(message: Message, external_url: str = "", receiver: Any = None) -> dict[str, Any]:
    """Plait's own body (camelCase, RFC 3339 times; docs/alerting.md, "Receivers"): ``title``,
    ``text``, ``externalURL`` and :func:`_native`."""
    from alerting.templates import render
    title, text, _ctx = render(message, receiver if receiver is not None else _DEFAULT_RECEIVER,
                               external_url)
    return _native(message) | {"title": title, "text": text, "externalURL": external_url}


class _DefaultReceiver:
    """A receiver with default templates."""

    max_alerts = 0
    send_resolved = True

    class templates:  # noqa: N801 - mirrors ReceiverConfig.templates
        title = ""
        text = ""


_DEFAULT_RECEIVER = _DefaultReceiver()


def _native(message: Message) -> dict[str, Any]:
    """``version``, ``id``, ``receiver``, ``createdAt``, ``alertCount``, ``mergedGroups``,
    ``mergedAlerts``, ``groups[]`` (camelCase at once)."""
    return {
        "version": "plait.alert.v1", "id": message.id, "receiver": message.receiver,
        "createdAt": format_time(message.created_at), "alertCount": message.alert_count,
        "mergedGroups": message.merged_groups, "mergedAlerts": message.merged_alerts,
        "groups": [{
            "groupId": s["group_id"], "groupLabels": dict(s["group_labels"]),
            "part": s["part"], "parts": s["parts"], "merged": s["merged"], "reminder": s["reminder"],
            "counts": camel_keys(s["counts"]),
            "alerts": [_native_alert(a) for a in s["alerts"]],
        } for s in message.sections],
    }


def _native_alert(a: dict[str, Any]) -> dict[str, Any]:
    out = {_camel(k): ((dict(v) if k in _DATA_MAPS and isinstance(v, dict) else camel_keys(v))
                       if isinstance(v, (dict, list)) else v)
           for k, v in a.items() if k != "generator_url"}
    out["startsAt"] = format_time(a["starts_at"])
    out["endsAt"] = format_time(a["ends_at"]) if a["ends_at"] else None
    out["generatorURL"] = a.get("generator_url", "")
    return out


def render_body(message: Message, fmt: str, external_url: str = "", receiver: Any = None) -> bytes:
    """The request body for ``fmt`` ``native``/``alertmanager`` (:func:`sorted_json`). Raises
    ValueError for an unknown format."""
    if fmt == "alertmanager":
        payload = render_alertmanager(message, external_url,
                                      getattr(receiver, "max_alerts", 0) if receiver else 0)
    elif fmt == "native":
        payload = render_native(message, external_url, receiver)
    else:
        raise ValueError(f"unknown payload format {fmt!r}")
    return sorted_json(payload)


def sorted_json(payload: Any) -> bytes:
    """Compact, key-sorted UTF-8 JSON (deterministic: retries send the same bytes), by orjson; by
    the stdlib for what orjson refuses or writes as ``null`` (NaN, infinity)."""
    try:
        data = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        data = None
    if data is None or b"null" in data and _has_nonfinite(payload):
        return json.dumps(payload, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()
    return data


def _has_nonfinite(value: Any) -> bool:
    """Whether ``value`` holds a float NaN or infinity."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nonfinite(v) for v in value)
    return False


def request_headers(message: Message, body: bytes, secret: str, timestamp: int) -> dict[str, str]:
    """Headers of one attempt; timestamp and signature when ``secret`` is set."""
    headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: message.idempotency_key,
               "X-Plait-Message-Id": message.id, "X-Plait-Attempt": str(message.attempt)}
    if secret:
        headers[TIMESTAMP_HEADER] = str(timestamp)
        headers[SIGNATURE_HEADER] = signature(secret, body, timestamp)
    return headers
