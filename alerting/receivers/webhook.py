"""``webhook``: one POST of Plait's native body or Alertmanager's v4 body
(``format``; :mod:`alerting.delivery`), signed when a secret is set;
Alertmanager's ``webhook_configs``."""
from __future__ import annotations

from typing import Any

from alerting.model import Message
from alerting.receivers.registry import AmFile, ReceiverType, needs, redacted_url, register
from alerting.receivers.request import Request


def requests(message: Message, receiver: Any, external_url: str = "",
             timestamp: int = 0) -> list[Request]:
    """The one signed POST (``timestamp``: epoch seconds of the signature)."""
    from alerting.delivery import render_body, request_headers
    body = render_body(message, receiver.format, external_url, receiver=receiver)
    headers = dict(receiver.headers) | request_headers(message, body, receiver.secret, timestamp)
    return [Request(receiver.url, body, headers)]


def am_status(receiver: Any) -> dict[str, Any]:
    """``webhook_configs``: the URL host only, ``max_alerts`` when set."""
    cfg = {"url": redacted_url(receiver.url), "send_resolved": receiver.send_resolved}
    if receiver.max_alerts:
        cfg["max_alerts"] = receiver.max_alerts
    return {"webhook_configs": [cfg]}


def read_am(c: dict, key: str, ctx: Any) -> dict[str, Any]:
    """A ``webhook_configs`` entry: Alertmanager's webhook body (v4)."""
    if c.get("url") and c.get("url_file"):
        raise ctx.fail(ctx.at(key, "url_file"), "at most one of url & url_file must be configured")
    if not c.get("url") and not c.get("url_file"):
        raise ctx.fail(ctx.at(key, "url"), "missing URL in webhook config")
    url = ctx.files.either(c, "url", "url_file", key)
    max_alerts = c.get("max_alerts") or 0
    if isinstance(max_alerts, float) and max_alerts.is_integer():  # yaml.v2 takes 5.0 for uint64
        max_alerts = int(max_alerts)
    if not isinstance(max_alerts, int) or isinstance(max_alerts, bool) or max_alerts < 0:
        raise ctx.fail(ctx.at(key, "max_alerts"), f"expected a whole number >= 0, got {max_alerts!r}")
    out = {"type": "webhook", "max_alerts": max_alerts,
           "url": ctx.url(url, ctx.at(key, "url_file" if c.get("url_file") else "url"))}
    # Alertmanager's webhook ``timeout`` (0 or absent: none of its own; Plait's attempt is still
    # bounded by plait.delivery.timeout)
    timeout = ctx.duration(c.get("timeout") or "0", ctx.at(key, "timeout"))
    return out | ({"timeout": timeout} if timeout else {})


#: the refusal of a ``timeout`` in the integrations other than webhook
NO_TIMEOUT = "not supported: every attempt is bounded by plait.delivery.timeout"

WEBHOOK = register(ReceiverType(
    name="webhook", requests=requests,
    am_requests=lambda m, r, templates, url, ts: requests(m, r, url, ts),
    am_status=am_status, check=lambda r: needs(r, "url"), am_kind="webhook_configs",
    am_file=AmFile(("url", "url_file", "max_alerts", "timeout"), True, (), read_am)))
