"""``teams``: a Teams Workflows webhook (Microsoft Learn, "Create incoming
webhooks with Workflows for Microsoft Teams"): a message whose one
attachment is an Adaptive Card 1.4 (a bold title ``TextBlock``, one per
paragraph, ``Action.OpenUrl`` links)."""
from __future__ import annotations

from typing import Any

from alerting.model import Message
from alerting.receivers import alertmanager
from alerting.receivers.registry import AmFile, ReceiverType, json_request, needs, register
from alerting.receivers.slack import links
from alerting.receivers.webhook import am_status as webhook_status
from alerting.templates import render

CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"


def payload(message: Message, receiver: Any, external_url: str = "") -> dict[str, Any]:
    """The JSON body for ``message`` (see the module doc)."""
    title, text, ctx = render(message, receiver, external_url)
    color = "Attention" if ctx["status"] == "firing" else "Good"
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": title, "weight": "Bolder",
                                   "size": "Large", "wrap": True, "color": color}]
    for para in [p for p in text.split("\n\n") if p.strip()]:
        body.append({"type": "TextBlock", "text": para.strip(), "wrap": True})
    card: dict[str, Any] = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": "1.4",
                            "body": body, "msteams": {"width": "Full"}}
    actions = [{"type": "Action.OpenUrl", "title": label, "url": url} for label, url in links(ctx)]
    if actions:
        card["actions"] = actions[:6]
    return {"type": "message",
            "attachments": [{"contentType": CONTENT_TYPE, "contentUrl": None, "content": card}]}


def am_requests(message: Message, receiver: Any, templates: Any, external_url: str = "",
                timestamp: int = 0) -> list:
    """Alertmanager 0.26's MessageCard from the receiver's rendered fields."""
    f, data = alertmanager.rendered(message, receiver, templates, external_url)
    return json_request(receiver, alertmanager.teams(f, data["Status"]))


def read_am(c: dict, key: str, ctx: Any) -> dict[str, Any]:
    """An ``msteams_configs`` entry (Alertmanager 0.26+)."""
    if c.get("webhook_url") and c.get("webhook_url_file"):
        raise ctx.fail(ctx.at(key, "webhook_url_file"),
                       "at most one of webhook_url & webhook_url_file must be configured")
    url = ctx.files.either(c, "webhook_url", "webhook_url_file", key)
    if not url:
        raise ctx.fail(ctx.at(key, "webhook_url"), "no msteams webhook URL or URLFile provided")
    return {"type": "teams", "url": ctx.url(url, ctx.at(key, "webhook_url"))}


#: Alertmanager 0.26's ``msteams.default.text`` with the
#: ``__text_alert_list_markdown`` it calls (template/default.tmpl, v0.26.0)
_TEAMS_TEXT = (
    '{{ define "__text_alert_list_markdown" }}{{ range . }}\nLabels:\n'
    "{{ range .Labels.SortedPairs }}  - {{ .Name }} = {{ .Value }}\n{{ end }}\nAnnotations:\n"
    "{{ range .Annotations.SortedPairs }}  - {{ .Name }} = {{ .Value }}\n{{ end }}\n"
    "Source: {{ .GeneratorURL }}\n{{ end }}\n{{ end }}"
    "\n{{ if gt (len .Alerts.Firing) 0 }}\n# Alerts Firing:\n"
    '{{ template "__text_alert_list_markdown" .Alerts.Firing }}\n{{ end }}\n'
    "{{ if gt (len .Alerts.Resolved) 0 }}\n# Alerts Resolved:\n"
    '{{ template "__text_alert_list_markdown" .Alerts.Resolved }}\n{{ end }}\n')

#: a webhook in ``/api/v2/status``: Alertmanager 0.25 has no msteams_configs
TEAMS = register(ReceiverType(
    name="teams", requests=lambda m, r, url="", ts=0: json_request(r, payload(m, r, url)),
    am_requests=am_requests, check=lambda r: needs(r, "url"), am_kind="msteams_configs",
    am_status=webhook_status,
    am_file=AmFile(("webhook_url", "webhook_url_file", "title", "summary", "text"), True,
                   ("title", "summary", "text"), read_am,
                   defaults={"title": '{{ template "__subject" . }}', "text": _TEAMS_TEXT})))
