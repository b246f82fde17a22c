"""Receivers: one module per type (:mod:`alerting.receivers.registry`;
docs/alerting.md, "Adding a receiver type")."""
from __future__ import annotations

from typing import Any

from alerting.model import Message
from alerting.receivers.registry import receiver_type
from alerting.receivers.request import Request, dumps

__all__ = ["Request", "build_requests", "dumps", "without_resolved"]


def without_resolved(message: Message) -> Message:
    """``message`` without resolved alerts nor the sections they leave empty."""
    from dataclasses import replace
    sections = []
    for s in message.sections:
        alerts = [a for a in s["alerts"] if a["status"] != "resolved"]
        if alerts:
            sections.append(dict(s, alerts=alerts))
    return replace(message, sections=sections, alert_count=sum(len(s["alerts"]) for s in sections))


def build_requests(message: Message, receiver: Any, external_url: str = "",
                   timestamp: int = 0, templates: Any = None) -> list[Request]:
    """The HTTP requests (pure) delivering ``message`` to ``receiver``; empty:
    nothing to send. With an ``alertmanager.yml``'s ``templates``: its bodies.

    Raises:
        ValueError: ``receiver.type`` is ``email`` or unknown.
    """
    if not receiver.send_resolved:
        message = without_resolved(message)
    kind = receiver_type(receiver.type)
    if not message.sections:
        return []
    if templates is not None and receiver.alertmanager_fields:
        return kind.am_requests(message, receiver, templates, external_url, timestamp)
    return kind.requests(message, receiver, external_url, timestamp)
