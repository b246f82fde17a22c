"""Receivers teams use (issue 16, item 3): each receiver's request checked by
a local server the way the real service documents it (JSON schemas below,
written from the services' API references), plus email through a local
aiosmtpd SMTP server. Messages come from the pure funnel; the real
:class:`alerting.webhook.WebhookSender` sends them over HTTP / SMTP."""
from __future__ import annotations

import json
import threading
from email import message_from_bytes
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import jsonschema
import pytest
from alert_harness import ev

from alerting.config import ConfigError, parse_config
from alerting.funnel import Funnel
from alerting.webhook import WebhookSender

T0 = 1_796_007_600.0  # 2026-11-30T03:00:00Z
URL = "https://plait.example.com"
ROUTING_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"  # 32 characters, as PagerDuty issues them
GENIE_KEY = "eb243592-faa2-4ba2-a551q-1afdf565c889"

# --------------------------------------------------------------- schemas
# Slack Block Kit (api.slack.com/reference/block-kit): header text plain_text
# <= 150; section text <= 3000; <= 50 blocks; actions <= 25 elements; button
# text plain_text <= 75, url <= 3000, action_id <= 255 and unique.
_PLAIN = {"type": "object", "required": ["type", "text"],
          "properties": {"type": {"const": "plain_text"}, "text": {"type": "string", "minLength": 1}}}
SLACK = {
    "type": "object", "required": ["text", "blocks"],
    "properties": {
        "text": {"type": "string", "minLength": 1},
        "blocks": {"type": "array", "minItems": 1, "maxItems": 50, "items": {"oneOf": [
            {"type": "object", "required": ["type", "text"], "additionalProperties": False,
             "properties": {"type": {"const": "header"}, "block_id": {"type": "string"},
                            "text": {**_PLAIN, "properties": {**_PLAIN["properties"],
                                                              "text": {"type": "string", "maxLength": 150},
                                                              "emoji": {"type": "boolean"}}}}},
            {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"const": "section"},
                            "text": {"type": "object", "required": ["type", "text"],
                                     "properties": {"type": {"enum": ["mrkdwn", "plain_text"]},
                                                    "text": {"type": "string", "minLength": 1,
                                                             "maxLength": 3000}}}}},
            {"type": "object", "required": ["type", "elements"],
             "properties": {"type": {"const": "context"},
                            "elements": {"type": "array", "minItems": 1, "maxItems": 10}}},
            {"type": "object", "required": ["type", "elements"],
             "properties": {"type": {"const": "actions"},
                            "elements": {"type": "array", "minItems": 1, "maxItems": 25, "items": {
                                "type": "object", "required": ["type", "text", "action_id"],
                                "properties": {"type": {"const": "button"},
                                               "text": {**_PLAIN, "properties": {
                                                   "type": {"const": "plain_text"},
                                                   "text": {"type": "string", "maxLength": 75}}},
                                               "url": {"type": "string", "maxLength": 3000,
                                                       "pattern": "^https?://"},
                                               "action_id": {"type": "string", "maxLength": 255}}}}}},
        ]}},
    },
}
# Teams Workflows webhook ("Send webhook alerts to a channel"): a message with
# one Adaptive Card attachment (adaptivecards.io schema, version <= 1.5).
TEAMS = {
    "type": "object", "required": ["type", "attachments"],
    "properties": {
        "type": {"const": "message"},
        "attachments": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["contentType", "content"],
            "properties": {
                "contentType": {"const": "application/vnd.microsoft.card.adaptive"},
                "content": {"type": "object", "required": ["type", "version", "body"],
                            "properties": {
                                "type": {"const": "AdaptiveCard"},
                                "$schema": {"const": "http://adaptivecards.io/schemas/adaptive-card.json"},
                                "version": {"enum": ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"]},
                                "body": {"type": "array", "minItems": 1, "items": {
                                    "type": "object", "required": ["type", "text"],
                                    "properties": {"type": {"const": "TextBlock"},
                                                   "text": {"type": "string", "minLength": 1},
                                                   "wrap": {"type": "boolean"}}}},
                                "actions": {"type": "array", "items": {
                                    "type": "object", "required": ["type", "title", "url"],
                                    "properties": {"type": {"const": "Action.OpenUrl"},
                                                   "url": {"type": "string", "pattern": "^https?://"}}}},
                            }},
            }}},
    },
}
# PagerDuty Events API v2 (developer.pagerduty.com, "Send an Alert Event").
PAGERDUTY = {
    "type": "object", "required": ["routing_key", "event_action"],
    "properties": {
        "routing_key": {"type": "string", "minLength": 32, "maxLength": 32},
        "event_action": {"enum": ["trigger", "acknowledge", "resolve"]},
        "dedup_key": {"type": "string", "maxLength": 255},
        "payload": {"type": "object", "required": ["summary", "source", "severity"],
                    "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": 1024},
                                   "source": {"type": "string", "minLength": 1},
                                   "severity": {"enum": ["critical", "error", "warning", "info"]},
                                   "timestamp": {"type": "string", "format": "date-time"},
                                   "component": {"type": "string"}, "group": {"type": "string"},
                                   "class": {"type": "string"},
                                   "custom_details": {"type": "object"}}},
        "links": {"type": "array", "items": {"type": "object", "required": ["href"],
                                             "properties": {"href": {"type": "string"},
                                                            "text": {"type": "string"}}}},
        "client": {"type": "string"}, "client_url": {"type": "string"},
    },
    "if": {"properties": {"event_action": {"const": "trigger"}}},
    "then": {"required": ["payload"]},
    "else": {"required": ["dedup_key"]},
}
# Opsgenie Alert API v2 (docs.opsgenie.com, "Alert API").
OPSGENIE_CREATE = {
    "type": "object", "required": ["message"],
    "properties": {"message": {"type": "string", "minLength": 1, "maxLength": 130},
                   "alias": {"type": "string", "maxLength": 512},
                   "description": {"type": "string", "maxLength": 15000},
                   "priority": {"enum": ["P1", "P2", "P3", "P4", "P5"]},
                   "tags": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 50}},
                   "details": {"type": "object", "additionalProperties": {"type": "string"}},
                   "entity": {"type": "string", "maxLength": 512},
                   "source": {"type": "string", "maxLength": 100}},
}
OPSGENIE_CLOSE = {"type": "object", "properties": {"source": {"type": "string", "maxLength": 100},
                                                  "user": {"type": "string", "maxLength": 100},
                                                  "note": {"type": "string", "maxLength": 25000}}}


# ---------------------------------------------------------- local services
class Service(BaseHTTPRequestHandler):
    """Answers like the real services: 200 "ok" (Slack), 202 (Teams,
    PagerDuty, Opsgenie), 200 (webhook); 400 with the schema error when a
    request breaks the documented format."""

    seen: list  # (path, headers, json body)

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path = urlparse(self.path)
        try:
            doc = json.loads(body)
            if self.headers.get("Content-Type") != "application/json":
                raise ValueError("Content-Type must be application/json")
            if path.path == "/slack":
                jsonschema.validate(doc, SLACK)
                ids = [e["action_id"] for b in doc["blocks"] if b["type"] == "actions" for e in b["elements"]]
                assert len(ids) == len(set(ids)), "action_id must be unique"
                status, answer = 200, b"ok"
            elif path.path == "/teams":
                jsonschema.validate(doc, TEAMS)
                status, answer = 202, b""
            elif path.path == "/v2/enqueue":
                jsonschema.validate(doc, PAGERDUTY, format_checker=jsonschema.FormatChecker())
                status, answer = 202, json.dumps({"status": "success", "message": "Event processed",
                                                  "dedup_key": doc.get("dedup_key")}).encode()
            elif path.path.startswith("/v2/alerts"):
                if self.headers.get("Authorization") != f"GenieKey {GENIE_KEY}":
                    raise ValueError("Authorization must be GenieKey <apiKey>")
                if path.path == "/v2/alerts":
                    jsonschema.validate(doc, OPSGENIE_CREATE)
                else:
                    assert path.path.endswith("/close"), path.path
                    assert parse_qs(path.query) == {"identifierType": ["alias"]}
                    jsonschema.validate(doc, OPSGENIE_CLOSE)
                status, answer = 202, b'{"result":"Request will be processed","took":0.1,"requestId":"x"}'
            else:
                status, answer = 200, b""
        except Exception as e:  # noqa: BLE001 - the service's 400
            self.server.errors.append(f"{path.path}: {e}")
            status, answer = 400, str(e).encode()
        self.server.seen.append((path.path + (f"?{path.query}" if path.query else ""),
                                 dict(self.headers), json.loads(body or b"null")))
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def service():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    srv.seen, srv.errors = [], []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def config(receiver: dict, **extra):
    data = {"receivers": [dict({"name": "team"}, **receiver)], "route": {"receiver": "team"},
            "grouping": {"group_by": ["rule"]}, "external_url": URL,
            "timing": {"group_wait": 30, "group_interval": 30, "repeat_interval": 3600,
                       "resolve_timeout": 86400}}
    data.update(extra)
    return parse_config(data)


ALERTS = [ev("ExportFailed", "BILL/daily", "critical", labels={"taskId": "01a22cee"},
             annotations={"summary": "export of daily for BILL failed (task 01a22cee)",
                          "description": "data API answered HTTP 500",
                          "runbook_url": "https://runbooks.example.com/ExportFailed"}),
          ev("ExportFailed", "CRM/contacts", "critical", labels={"taskId": "77b0"})]


async def deliver_episode(cfg):
    """Fire the two alerts, then resolve both: returns (firing, resolved)
    results of the real sender, and the messages ((None, None) for a
    resolved message the funnel does not make)."""
    f = Funnel(cfg)
    sender = WebhookSender(cfg, clock=lambda: T0)
    out = []
    try:
        for a in ALERTS:
            f.ingest(a, T0)
        [m1] = f.tick(T0 + 30)
        r1 = await sender.send(m1)
        f.delivered(m1.id, T0 + 30)
        for a in ALERTS:
            f.ingest(dict(a, status="resolved"), T0 + 100)
        m2 = f.tick(T0 + 120)  # the next group_interval tick
        out = [(m1, r1), (m2[0], await sender.send(m2[0])) if m2 else (None, None)]
    finally:
        await sender.aclose()
    return out


def _port(srv):
    return f"http://127.0.0.1:{srv.server_address[1]}"


async def test_slack_incoming_webhook_blocks(service):
    cfg = config({"type": "slack", "url": _port(service) + "/slack"})
    (m1, r1), (m2, r2) = await deliver_episode(cfg)
    assert service.errors == [] and r1.ok and r2.ok
    (_, _, firing), (_, _, resolved) = service.seen
    assert firing["text"] == "[FIRING:2] ExportFailed on 2 assets (+2 new)"
    assert firing["blocks"][0] == {"type": "header", "text": {"type": "plain_text", "emoji": True,
                                                              "text": firing["text"]}}
    buttons = [(e["text"]["text"], e["url"]) for b in firing["blocks"] if b["type"] == "actions"
               for e in b["elements"]]
    assert ("Open task", f"{URL}/ui/tasks/01a22cee") in buttons
    assert ("Open task", f"{URL}/ui/tasks/77b0") in buttons
    assert ("Runbook", "https://runbooks.example.com/ExportFailed") in buttons
    assert buttons[-1][0] == "Silence this group"
    assert buttons[-1][1].startswith(f"{URL}/ui/silences/new?matchers=")
    assert resolved["text"].startswith("[RESOLVED] ExportFailed")


async def test_teams_workflow_adaptive_card(service):
    cfg = config({"type": "teams", "url": _port(service) + "/teams"})
    (_, r1), (_, r2) = await deliver_episode(cfg)
    assert service.errors == [] and r1.ok and r2.ok and r1.status == 202
    card = service.seen[0][2]["attachments"][0]["content"]
    assert card["body"][0]["text"].startswith("[FIRING:2]")
    assert {a["title"] for a in card["actions"]} >= {"Open task", "Runbook", "Silence this group"}


async def test_pagerduty_trigger_then_resolve_with_the_group_as_dedup_key(service):
    cfg = config({"type": "pagerduty", "url": _port(service) + "/v2/enqueue",
                  "routing_key": ROUTING_KEY})
    (m1, r1), (m2, r2) = await deliver_episode(cfg)
    assert service.errors == [] and r1.ok and r2.ok
    (_, _, trigger), (_, _, resolve) = service.seen
    gid = m1.sections[0]["group_id"]
    assert (trigger["event_action"], trigger["dedup_key"]) == ("trigger", gid)
    assert trigger["payload"]["severity"] == "critical"
    assert trigger["payload"]["summary"].startswith("[FIRING:2] ExportFailed")
    assert {"href": f"{URL}/ui/tasks/01a22cee", "text": "Open task"} in trigger["links"]
    assert resolve == {"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": gid}


async def test_opsgenie_create_then_close_by_alias(service):
    cfg = config({"type": "opsgenie", "url": _port(service) + "/v2/alerts", "api_key": GENIE_KEY})
    (m1, r1), (m2, r2) = await deliver_episode(cfg)
    assert service.errors == [] and r1.ok and r2.ok
    (p1, _, create), (p2, _, close) = service.seen
    gid = m1.sections[0]["group_id"]
    assert p1 == "/v2/alerts" and create["alias"] == gid and create["priority"] == "P1"
    assert create["message"].startswith("[FIRING:2] ExportFailed")
    assert p2 == f"/v2/alerts/{gid}/close?identifierType=alias" and close["source"] == "Plait"


async def test_webhook_native_and_alertmanager_bodies(service):
    cfg = config({"type": "webhook", "url": _port(service) + "/hook", "format": "native"})
    await deliver_episode(cfg)
    native = service.seen[0][2]
    assert native["title"].startswith("[FIRING:2]") and "task: " in native["text"]
    assert native["externalURL"] == URL and native["version"] == "plait.alert.v1"
    service.seen.clear()
    cfg = config({"type": "webhook", "url": _port(service) + "/hook", "format": "alertmanager"},
                 grouping={"group_by": ["alertname"]})
    await deliver_episode(cfg)
    am = service.seen[0][2]
    assert am["version"] == "4" and am["externalURL"] == URL
    assert am["groupLabels"] == {"alertname": "ExportFailed"} and am["truncatedAlerts"] == 0
    assert service.seen[1][2]["status"] == "resolved"
    # a group_by label the alerts lack is left out of groupLabels, as Alertmanager leaves it out
    service.seen.clear()
    cfg = config({"type": "webhook", "url": _port(service) + "/hook", "format": "alertmanager"},
                 grouping={"group_by": ["alertname", "cluster"]})
    (m1, _r1), _ = await deliver_episode(cfg)
    assert service.seen[0][2]["groupLabels"] == {"alertname": "ExportFailed"}
    assert m1.sections[0]["group_labels"] == {"alertname": "ExportFailed", "cluster": ""}


async def test_send_resolved_false_and_max_alerts(service):
    cfg = config({"type": "webhook", "url": _port(service) + "/hook", "format": "alertmanager",
                  "send_resolved": False, "max_alerts": 1})
    (m1, r1), (m2, r2) = await deliver_episode(cfg)
    # the firing message lists one alert and says one was truncated; the
    # resolve makes no message at all (Alertmanager's DedupStage)
    assert len(service.seen) == 1 and m2 is None
    am = service.seen[0][2]
    assert len(am["alerts"]) == 1 and am["truncatedAlerts"] == 1


async def test_email_over_smtp():
    from aiosmtpd.controller import Controller

    class Inbox:
        def __init__(self):
            self.mails = []

        async def handle_DATA(self, server, session, envelope):  # noqa: N802
            self.mails.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
            self.ehlo = session.host_name
            return "250 Message accepted for delivery"

    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inbox = Inbox()
    ctl = Controller(inbox, hostname="127.0.0.1", port=port)
    ctl.start()
    try:
        cfg = config({"type": "email", "email": {"to": "oncall@example.com, dba@example.com",
                                                 "from": "plait@example.com",
                                                 "smarthost": f"127.0.0.1:{port}",
                                                 "hello": "plait.example.com"}})
        (m1, r1), (m2, r2) = await deliver_episode(cfg)
    finally:
        ctl.stop()
    assert r1.ok and r2.ok and len(inbox.mails) == 2
    sender, rcpts, raw = inbox.mails[0]
    assert sender == "plait@example.com" and rcpts == ["oncall@example.com", "dba@example.com"]
    assert inbox.ehlo == "plait.example.com"
    mail = message_from_bytes(raw, policy=email_policy)
    assert mail["Subject"] == "[FIRING:2] ExportFailed on 2 assets (+2 new)"
    assert mail.get_content_type() == "multipart/alternative"
    plain = mail.get_body(("plain",)).get_content()
    assert f"task: {URL}/ui/tasks/01a22cee" in plain
    assert f'href="{URL}/ui/tasks/01a22cee"' in mail.get_body(("html",)).get_content()
    assert message_from_bytes(inbox.mails[1][2], policy=email_policy)["Subject"].startswith("[RESOLVED]")


def test_receiver_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="routing_key: required for type pagerduty"):
        config({"type": "pagerduty"})
    with pytest.raises(ConfigError, match="api_key: required for type opsgenie"):
        config({"type": "opsgenie"})
    with pytest.raises(ConfigError, match="email: required for type email"):
        config({"type": "email"})
    with pytest.raises(ConfigError, match="url: required for type slack"):
        config({"type": "slack"})
    assert config({"type": "pagerduty", "routing_key": ROUTING_KEY}).receivers[0].url == \
        "https://events.pagerduty.com/v2/enqueue"
