"""``slack``: an incoming webhook body (Slack docs, "Sending messages using
incoming webhooks", Block Kit): ``{"text": <title>, "blocks": [header,
section..., context, actions]}`` within Slack's limits (header 150
characters, section 3000, button 75, 50 blocks); ``&<>`` escaped."""
from __future__ import annotations

from typing import Any

from alerting.model import Message
from alerting.receivers import alertmanager
from alerting.receivers.alertmanager import tmpl
from alerting.receivers.registry import AmFile, ReceiverType, json_request, needs, register, secret_status
from alerting.receivers.webhook import NO_TIMEOUT
from alerting.templates import render

HEADER_MAX, SECTION_MAX, BUTTON_MAX, MAX_BLOCKS = 150, 3000, 75, 50


def escape(text: str) -> str:
    """Slack's three control characters escaped (``&amp;`` ``&lt;`` ``&gt;``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _chunks(text: str, size: int) -> list[str]:
    out, cur = [], ""
    for line in text.splitlines(keepends=True):
        while len(line) > size:
            out.append(line[:size])
            line = line[size:]
        if len(cur) + len(line) > size:
            out.append(cur)
            cur = ""
        cur += line
    if cur.strip():
        out.append(cur)
    return out


def links(ctx: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, url) link buttons of a message: tasks, runbooks, one silence per group."""
    out: list[tuple[str, str]] = []
    seen = set()
    for a in ctx["alerts"]:
        for label, url in (("Open task", a["task_url"]), ("Runbook", a["runbook_url"])):
            if url and url not in seen:
                seen.add(url)
                out.append((label, url))
    for g in ctx["groups"]:
        if g["silence_url"] and g["silence_url"] not in seen:
            seen.add(g["silence_url"])
            out.append(("Silence this group", g["silence_url"]))
    return out


def payload(message: Message, receiver: Any, external_url: str = "") -> dict[str, Any]:
    """The JSON body for ``message`` (see the module doc)."""
    title, text, ctx = render(message, receiver, external_url)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:HEADER_MAX], "emoji": True}}]
    for chunk in _chunks(escape(text), SECTION_MAX)[:MAX_BLOCKS - 5]:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": chunk}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": escape(
        f"Plait alerting · receiver {message.receiver} · message {message.id} · {ctx['created_at']}")}]})
    buttons = [{"type": "button", "text": {"type": "plain_text", "text": label[:BUTTON_MAX]},
                "url": url, "action_id": f"link-{i}"}
               for i, (label, url) in enumerate(links(ctx)) if len(url) <= 3000][:25]
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    return {"text": title, "blocks": blocks[:MAX_BLOCKS]}


def am_requests(message: Message, receiver: Any, templates: Any, external_url: str = "",
                timestamp: int = 0) -> list:
    """Alertmanager's Slack body from the receiver's rendered fields."""
    f, _data = alertmanager.rendered(message, receiver, templates, external_url)
    return json_request(receiver, alertmanager.slack(f))


ACTION_KEYS = ("type", "text", "url", "style", "name", "value", "confirm")
CONFIRM_KEYS = ("text", "title", "ok_text", "dismiss_text")
FIELD_KEYS = ("title", "value", "short")


def _list(value: Any, key: str, ctx: Any) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ctx.fail(key, f"expected a list, got {type(value).__name__}")
    return value


def _entry(value: Any, key: str, ctx: Any, keys: tuple[str, ...], what: str) -> dict[str, Any]:
    """One ``actions`` / ``fields`` / ``confirm`` mapping with its strings as text (unknown keys
    and non-strings refused, strict yaml.v2's words). Alertmanager's loader takes a null
    action or field and its notifier then dereferences it; Plait refuses it."""
    if value is None:
        raise ctx.fail(key, f"expected a {what}, got null")
    value = ctx.mapping(value, key, keys, "config.plain")
    return {k: v if k in ("confirm", "short") else ctx.text(v, ctx.at(key, k))
            for k, v in value.items()}


def _action(value: Any, key: str, ctx: Any) -> dict[str, Any]:
    """An ``actions`` entry as ``SlackAction.UnmarshalYAML`` (config/notifiers.go) takes it:
    ``type``, ``text`` and ``url`` or ``name`` required, a ``confirm`` needs its ``text``; with
    a ``url`` the message-action fields ``name``, ``value`` and ``confirm`` are dropped."""
    a = _entry(value, key, ctx, ACTION_KEYS, "Slack action")
    if a.get("confirm") is not None:
        at = ctx.at(key, "confirm")
        a["confirm"] = _entry(a["confirm"], at, ctx, CONFIRM_KEYS, "Slack confirmation")
        if not a["confirm"].get("text"):
            raise ctx.fail(ctx.at(at, "text"), "missing text in Slack confirmation configuration")
    for name in ("type", "text"):
        if not a.get(name):
            raise ctx.fail(ctx.at(key, name), f"missing {name} in Slack action configuration")
    if a.get("url"):
        a = {k: v for k, v in a.items() if k not in ("name", "value", "confirm")}
    elif not a.get("name"):
        raise ctx.fail(key, "missing name or url in Slack action configuration")
    return {k: v for k, v in a.items() if v not in (None, "")}


def _field(value: Any, key: str, ctx: Any) -> dict[str, Any]:
    """A ``fields`` entry as ``SlackField.UnmarshalYAML`` takes it: ``title`` and ``value``
    required, ``short`` a bool."""
    f = _entry(value, key, ctx, FIELD_KEYS, "Slack field")
    for name in ("title", "value"):
        if not f.get(name):
            raise ctx.fail(ctx.at(key, name), f"missing {name} in Slack field configuration")
    if f.get("short") is not None:
        ctx.boolean(f["short"], ctx.at(key, "short"))
    return {k: v for k, v in f.items() if v is not None}


def read_am(c: dict, key: str, ctx: Any) -> dict[str, Any]:
    """A ``slack_configs`` entry (``api_url`` or ``global.slack_api_url``), its ``actions`` and
    ``fields`` checked and normalised as Alertmanager's loader does (:func:`_action`,
    :func:`_field`), its bools and ``mrkdwn_in`` typed."""
    url = ctx.own_or_global(c, "api_url", key, "slack_api_url", "Slack API URL")
    fields: dict[str, Any] = {}
    for name, one in (("actions", _action), ("fields", _field)):
        at = ctx.at(key, name)
        items = [one(v, ctx.at(at, str(i)), ctx) for i, v in enumerate(_list(c.get(name), at, ctx))]
        if items:
            fields[name] = items
    for name in ("short_fields", "link_names"):
        if c.get(name) is not None:
            ctx.boolean(c[name], ctx.at(key, name))
    at = ctx.at(key, "mrkdwn_in")
    for i, v in enumerate(_list(c.get("mrkdwn_in"), at, ctx)):
        ctx.text(v, ctx.at(at, str(i)))
    return {"type": "slack", "url": ctx.url(url, ctx.at(key, "api_url")),
            "alertmanager_fields": fields}


#: Alertmanager's ``DefaultSlackConfig`` (config/notifiers.go, v0.25.0)
AM_DEFAULTS = {
    "color": '{{ if eq .Status "firing" }}danger{{ else }}good{{ end }}',
    "username": tmpl("slack.default.username"), "title": tmpl("slack.default.title"),
    "title_link": tmpl("slack.default.titlelink"), "icon_emoji": tmpl("slack.default.iconemoji"),
    "icon_url": tmpl("slack.default.iconurl"), "pretext": tmpl("slack.default.pretext"),
    "text": tmpl("slack.default.text"), "fallback": tmpl("slack.default.fallback"),
    "callback_id": tmpl("slack.default.callbackid"), "footer": tmpl("slack.default.footer")}
AM_FIELDS = ("channel", "username", "color", "title", "title_link", "pretext", "text", "fields",
                 "short_fields", "footer", "fallback", "callback_id", "icon_emoji", "icon_url",
                 "image_url", "thumb_url", "link_names", "mrkdwn_in", "actions")
_WEBHOOK_ONLY = "not supported: Plait posts to an incoming webhook (api_url)"
SLACK = register(ReceiverType(
    name="slack", requests=lambda m, r, url="", ts=0: json_request(r, payload(m, r, url)),
    am_requests=am_requests, check=lambda r: needs(r, "url"), am_kind="slack_configs",
    am_status=lambda r: secret_status(r, "slack_configs", "api_url"),
    am_file=AmFile(("api_url", "api_url_file", *AM_FIELDS, "app_token", "app_token_file", "app_url",
                    "update_message", "message_text", "timeout"), False, AM_FIELDS, read_am,
                   {"timeout": NO_TIMEOUT} | dict.fromkeys(
                       ("app_token", "app_token_file", "app_url", "update_message", "message_text"),
                       _WEBHOOK_ONLY), defaults=AM_DEFAULTS,
                   # slack.go renders every string field but these names (and the bools)
                   literal=("mrkdwn_in",))))
