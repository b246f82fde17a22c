"""``webhook``: one POST of Plait's native body or Alertmanager's v4 body
(``format``; :mod:`alerting.delivery`), signed when a secret is set;
Alertmanager's ``webhook_configs``."""
from __future__ import annotations

from typing import Any

from alerting.model import Message
from alerting.receivers.registry import ReceiverType, needs, redacted_url, register
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


WEBHOOK = register(ReceiverType(
    name="webhook", requests=requests,
    am_requests=lambda m, r, templates, url, ts: requests(m, r, url, ts),
    am_status=am_status, check=lambda r: needs(r, "url"), am_kind="webhook_configs"))
