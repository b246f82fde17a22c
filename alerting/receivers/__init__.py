"""Receivers: one module per receiver type, each registering its payload,
Alertmanager status shape and config check (:mod:`alerting.receivers.registry`;
docs/alerting.md, "Adding a receiver type").

:func:`build_requests` turns one funnel :class:`~alerting.model.Message` into
the HTTP requests its receiver's service expects (pure: no I/O).
``send_resolved: false`` drops resolved alerts; a message left with nothing
to say yields no request (the funnel counts it delivered).
"""
from __future__ import annotations

from typing import Any

from alerting.model import Message
from alerting.receivers.registry import receiver_type
from alerting.receivers.request import Request, dumps

__all__ = ["Request", "build_requests", "dumps", "without_resolved"]


def without_resolved(message: Message) -> Message:
    """``message`` with resolved alerts left out (``send_resolved: false``);
    sections left empty are dropped."""
    from dataclasses import replace
    sections = []
    for s in message.sections:
        alerts = [a for a in s["alerts"] if a["status"] != "resolved"]
        if alerts:
            sections.append(dict(s, alerts=alerts))
    return replace(message, sections=sections, alert_count=sum(len(s["alerts"]) for s in sections))


def build_requests(message: Message, receiver: Any, external_url: str = "",
                   timestamp: int = 0, templates: Any = None) -> list[Request]:
    """The HTTP requests that deliver ``message`` to ``receiver`` (a
    :class:`~alerting.config.ReceiverConfig`); ``timestamp`` (epoch seconds)
    signs webhook bodies. Empty: nothing to send. A receiver of an
    ``alertmanager.yml`` given its file's ``templates``
    (:func:`alerting.amconfig.cached_template_set`) gets Alertmanager's body.

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
