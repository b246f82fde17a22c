"""Receivers teams use, each with its documented payload (docs/alerting.md,
"Receivers").

:func:`build_requests` turns one funnel :class:`~alerting.model.Message` into
the HTTP requests its receiver's service expects (pure: no I/O):

- ``webhook``: one POST, Plait's native body or Alertmanager's v4 body
  (:mod:`alerting.delivery`), signed when a secret is set;
- ``slack``: one POST to an incoming webhook, Block Kit blocks
  (:mod:`alerting.receivers.slack`);
- ``teams``: one POST to a Teams workflow webhook, an Adaptive Card
  (:mod:`alerting.receivers.teams`);
- ``pagerduty``: one Events API v2 event per group, ``trigger`` while the
  group fires, ``resolve`` when it is all resolved, ``dedup_key`` = group id
  (:mod:`alerting.receivers.pagerduty`);
- ``opsgenie``: per group, create (``alias`` = group id) or close by alias
  (:mod:`alerting.receivers.opsgenie`);
- ``email``: no HTTP; :func:`alerting.receivers.email.build_email` builds the
  MIME message that :mod:`alerting.webhook` sends over SMTP.

``send_resolved: false`` drops resolved alerts; a message left with nothing
to say yields no request (the funnel counts it delivered).
"""
from __future__ import annotations

from typing import Any

from alerting.model import Message
from alerting.receivers.request import Request, dumps


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
    :class:`~alerting.config.ReceiverConfig` of an HTTP type); ``timestamp``
    (epoch seconds) signs webhook bodies. Empty: nothing to send. A
    receiver of an ``alertmanager.yml`` (its ``alertmanager_fields`` set)
    given its file's ``templates`` (:func:`alerting.amconfig.cached_template_set`)
    gets Alertmanager's body (:mod:`alerting.receivers.alertmanager`).

    Raises:
        ValueError: ``receiver.type`` is ``email`` or unknown.
    """
    if not receiver.send_resolved:
        message = without_resolved(message)
    if not message.sections or receiver.type == "none":  # no integration: nothing to send
        return []
    kind = receiver.type
    if templates is not None and receiver.alertmanager_fields and kind != "webhook":
        from alerting.receivers.alertmanager import requests as alertmanager_requests
        return alertmanager_requests(message, receiver, templates, external_url)
    if kind == "webhook":
        from alerting.delivery import render_body, request_headers
        body = render_body(message, receiver.format, external_url, receiver=receiver)
        headers = dict(receiver.headers) | request_headers(message, body, receiver.secret, timestamp)
        return [Request(receiver.url, body, headers)]
    if kind == "slack":
        from alerting.receivers.slack import payload
    elif kind == "teams":
        from alerting.receivers.teams import payload
    elif kind == "pagerduty":
        from alerting.receivers.pagerduty import requests
        return requests(message, receiver, external_url)
    elif kind == "opsgenie":
        from alerting.receivers.opsgenie import requests
        return requests(message, receiver, external_url)
    else:
        raise ValueError(f"receiver type {kind!r} is not sent over HTTP")
    headers = {"Content-Type": "application/json", **receiver.headers}
    return [Request(receiver.url, dumps(payload(message, receiver, external_url)), headers)]
