"""Receivers of an ``alertmanager.yml`` send what the real Alertmanager 0.25 sends.

One Alertmanager daemon (Debian's) reads an ``alertmanager.yml`` with a
Slack receiver (a custom template file: ``define``, ``range``, ``toUpper``,
``join``; ``fields`` and ``actions``), a PagerDuty receiver, an Opsgenie
receiver, a webhook (their URLs on a local HTTP server) and an email receiver (a
local aiosmtpd server); the same alerts are posted to it and the bodies it sends
are captured. Plait loads the same file and builds its messages for the same
alerts: the JSON bodies must be equal but for Plait's own ``dedup_key`` /
``alias`` (Alertmanager's hash its group key), and the email's ``Subject``
and text part must be equal. Ground truth is the daemon's output, never
strings written here. Teams (no notifier in 0.25): Plait's MessageCard
against the default templates rendered by amtool-checked ``gotemplate``.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from alerting.amconfig import cached_template_set, load_alertmanager_config
from alerting.intake import format_time, go_time
from alerting.delivery import render_alertmanager
from alerting.model import Message
from alerting.receivers import build_requests
from alerting.receivers.email import build_email
from stack_env import wait_for
from test_gotemplate import _Inbox, _ready, fingerprint  # the daemon harness's parts

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
pytestmark = pytest.mark.skipif(ALERTMANAGER is None, reason="the Alertmanager binary is absent "
                                "(apt-get install prometheus-alertmanager; .ci/run installs it)")
EXTERNAL = "http://am.example:9093"
CUSTOM = """{{ define "custom.title" }}{{ .Status | toUpper }} {{ .GroupLabels.SortedPairs.Values | join "/" }}{{ end }}
{{ define "custom.text" }}{{ range .Alerts }}* {{ .Labels.instance }}: {{ .Annotations.summary }}
{{ end }}{{ .CommonLabels.Names | join ", " }}{{ end }}
"""
ALERTS = [
    {"labels": {"alertname": "DiskFull", "instance": "db1:9100", "severity": "critical",
                "team": "x"},
     "annotations": {"summary": "Disk 95% full", "runbook": "http://rb/disk"},
     "startsAt": "2024-03-05T10:11:12.5Z", "endsAt": "2099-01-01T00:00:00Z",
     "generatorURL": "http://prom:9090/graph?g0.expr=x"},
    {"labels": {"alertname": "DiskFull", "instance": "db2:9100", "severity": "critical",
                "team": "x"},
     "annotations": {"summary": 'Disk <97%> & "more"', "runbook": "http://rb/disk"},
     "startsAt": "2024-03-05T10:12:00Z", "endsAt": "2099-01-01T00:00:00Z",
     "generatorURL": "http://prom:9090/graph?g0.expr=y"},
]
ENDED = "2024-03-05T11:00:00.25Z"


def _recent(alerts: list[dict] = ALERTS) -> list[dict]:
    """``alerts`` started a moment ago. Alertmanager flushes a new group at once
    when an alert's ``startsAt`` + group_wait is already past (dispatch.go
    ``insert``), which may fall between the two alerts of one POST; started
    now, both are in the group when group_wait ends."""
    now = time.time()  # well inside group_wait (2 s) of the POST, even on a loaded machine;
    # microseconds: the webhook body echoes every digit
    return [a | {"startsAt": go_time(round(now, 3) - 0.5 + 0.25 * i + 0.000123)}
            for i, a in enumerate(alerts)]


class _Capture(BaseHTTPRequestHandler):
    seen: list[tuple[str, dict]] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, json.loads(body)))
        self.send_response(202)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def _config(tmp_path: Path, http: str, smtp_port: int) -> Path:
    (tmp_path / "custom.tmpl").write_text(CUSTOM)
    cfg = {
        "global": {"smtp_require_tls": False},
        "route": {"receiver": "chat", "group_by": ["alertname"], "group_wait": "2s",
                  "group_interval": "1s", "repeat_interval": "1h",
                  "routes": [{"receiver": r, "continue": True}
                             for r in ("chat", "pager", "genie", "mail", "hook")]},
        "receivers": [
            {"name": "chat", "slack_configs": [{
                "api_url": f"{http}/slack", "channel": "#ops",
                "title": '{{ template "custom.title" . }}', "text": '{{ template "custom.text" . }}',
                "fields": [{"title": "Team", "value": "{{ .CommonLabels.team }}"},
                           {"title": "Sev", "value": "{{ .CommonLabels.severity }}", "short": True}],
                "actions": [{"type": "button", "text": "Runbook",
                             "url": "{{ (index .Alerts 0).Annotations.runbook }}"}]}]},
            {"name": "pager", "pagerduty_configs": [{
                "routing_key": "0123456789abcdef0123456789abcdef", "url": f"{http}/pd",
                "severity": "{{ .CommonLabels.severity }}", "class": "disk",
                "group": "{{ .CommonLabels.team }}"}]},
            {"name": "genie", "opsgenie_configs": [{
                "api_key": "k", "api_url": f"{http}/og/", "tags": "{{ .CommonLabels.team }}, disk",
                "priority": "P2", "note": "{{ .Alerts | len }} alerts",
                "details": {"runbook": "{{ .CommonAnnotations.runbook }}"}}]},
            {"name": "mail", "email_configs": [{
                "to": "oncall@example.com", "from": "am@example.com",
                "smarthost": f"127.0.0.1:{smtp_port}", "require_tls": False,
                "text": '{{ template "custom.text" . }}'}]},
            {"name": "hook", "webhook_configs": [{"url": f"{http}/hook"}]},
        ],
        "templates": [str(tmp_path / "*.tmpl")],
    }
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@contextlib.contextmanager
def _alertmanager(config: Path, tmp_path: Path):
    """The real Alertmanager on ``config`` (external URL :data:`EXTERNAL`), ready: its URL.
    Killed on exit."""
    from ops.infra import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
         f"--web.external-url={EXTERNAL}"],
        stdout=open(tmp_path / "am.log", "wb"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _ready(url) or proc.poll() is not None, 30, "Alertmanager ready")
        assert proc.poll() is None, (tmp_path / "am.log").read_text()
        yield url
    finally:
        proc.kill()
        proc.wait(10)


def _alertmanager_sends(tmp_path: Path
                        ) -> tuple[Path, dict[str, dict], _Inbox, Any, list[dict], str]:
    """(the config file, captured JSON body per path, the inbox, a function
    stopping the HTTP and SMTP servers, the alerts posted, their ``endsAt``
    when resolved) of the real daemon."""
    from aiosmtpd.controller import Controller
    from ops.infra import free_port

    _Capture.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    inbox, smtp_port = _Inbox(), free_port()
    ctl = Controller(inbox, hostname="127.0.0.1", port=smtp_port)
    ctl.start()
    path = _config(tmp_path, f"http://127.0.0.1:{server.server_port}", smtp_port)
    with _alertmanager(path, tmp_path) as url:
        alerts = _recent()
        resp = httpx.post(f"{url}/api/v2/alerts", json=alerts, timeout=10)
        assert resp.status_code == 200, resp.text
        wait_for(lambda: len(_Capture.seen) >= 4 and inbox.mails, 30, "Alertmanager's requests")
        # the same alerts ended: PagerDuty's resolve and Opsgenie's close follow
        ended = format_time(time.time())
        resp = httpx.post(f"{url}/api/v2/alerts", json=[a | {"endsAt": ended} for a in alerts],
                          timeout=10)
        assert resp.status_code == 200, resp.text
        wait_for(lambda: any("/close" in p for p, _b in _Capture.seen)
                 and sum(p == "/pd" for p, _b in _Capture.seen) >= 2, 30, "the resolved ones")
    sent: dict[str, dict] = {}
    for p, b in _Capture.seen:  # the first of each; a resolve / close under its own key
        p = p.split("?")[0].rsplit("/", 2)[0] + "/close" if "/close" in p else p
        sent.setdefault(f"{p}:{b.get('event_action', '')}", b)
    return path, sent, inbox, lambda: (ctl.stop(), server.shutdown()), alerts, ended


def _message(receiver: str, resolved: bool = False, posted: list[dict] = ALERTS,
             ended: str = ENDED) -> Message:
    """Plait's message of ``posted`` (Alertmanager alerts) to ``receiver``,
    firing or (``resolved``) ended at ``ended``."""
    from datetime import datetime

    def when(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    alerts = [{"fingerprint": fingerprint(a["labels"]), "rule": "DiskFull", "asset": "",
               "severity": "critical", "status": "resolved" if resolved else "firing",
               "change": "new", "escalated_from": None,
               "labels": dict(a["labels"]), "annotations": dict(a["annotations"]),
               "starts_at": when(a["startsAt"]), "ends_at": when(ended) if resolved else None,
               "duration": None,
               "transient": False, "generator_url": a["generatorURL"], "source": "alertmanager"}
              for a in posted]
    sections = [{"group_id": "g-disk", "group_labels": {"rule": "DiskFull"}, "part": 1, "parts": 1,
                 "merged": False, "reminder": False,
                 "counts": {"new": 2, "escalated": 0, "resolved": 0, "still_firing": 0},
                 "alerts": alerts}]
    return Message("m1", receiver, "idem", 1, 1_709_633_600.0, sections, alert_count=2)


def _plait(config, receiver: str, resolved: bool = False, posted: list[dict] = ALERTS,
           ended: str = ENDED) -> list:
    rc = config.receiver(receiver)
    return build_requests(_message(receiver, resolved, posted, ended), rc, EXTERNAL, 0,
                          cached_template_set(config))


def test_slack_pagerduty_opsgenie_and_email_match_alertmanager_025(tmp_path):
    path, sent, inbox, stop, posted, ended = _alertmanager_sends(tmp_path)
    try:
        _compare(load_alertmanager_config(path), sent, inbox, posted, ended)
    finally:
        stop()


def _compare(config, sent: dict[str, dict], inbox: _Inbox, posted: list[dict], ended: str
             ) -> None:
    mail = inbox.mails[0]

    def plait(receiver: str, resolved: bool = False) -> list:
        return _plait(config, receiver, resolved, posted, ended)

    def message(receiver: str) -> Message:
        return _message(receiver, False, posted, ended)

    # the webhook body: every field but the group key (docs/alerting.md), times to the microsecond
    hook = render_alertmanager(message("hook"), EXTERNAL)
    assert [a["startsAt"] for a in hook["alerts"]] == [a["startsAt"] for a in posted]
    assert {k: v for k, v in hook.items() if k != "groupKey"} == {
        k: v for k, v in sent["/hook:"].items() if k != "groupKey"}

    [slack] = plait("chat")
    assert slack.url.endswith("/slack")
    assert json.loads(slack.body) == sent["/slack:"]
    # the custom template file rendered (toUpper, join, range): the daemon agrees above
    assert sent["/slack:"]["attachments"][0]["title"] == "FIRING DiskFull"

    [pd] = plait("pager")
    got = json.loads(pd.body)
    assert got["dedup_key"] == "g-disk"  # Plait's group id; Alertmanager's hashes its group key
    assert got | {"dedup_key": sent["/pd:trigger"]["dedup_key"]} == sent["/pd:trigger"]
    [pd] = plait("pager", resolved=True)
    got = json.loads(pd.body)
    assert got | {"dedup_key": sent["/pd:resolve"]["dedup_key"]} == sent["/pd:resolve"]

    [og] = plait("genie")
    got = json.loads(og.body)
    assert og.url.endswith("/og/v2/alerts") and og.headers["Authorization"] == "GenieKey k"
    assert got | {"alias": sent["/og/v2/alerts:"]["alias"]} == sent["/og/v2/alerts:"]
    [og] = plait("genie", resolved=True)
    assert og.url.endswith("/og/v2/alerts/g-disk/close?identifierType=alias")
    assert json.loads(og.body) == sent["/og/v2/alerts/close:"]

    am_mail = message_from_bytes(mail, policy=policy.default)
    rc = config.receiver("mail")
    plait_mail = build_email(message("mail"), rc, EXTERNAL, cached_template_set(config))
    for header in ("Subject", "To", "From"):
        assert plait_mail[header] == am_mail[header], header
    # MIME-Version once, at the top (RFC 2045); the Date in UTC as +0000, not -0000 (RFC 5322)
    assert ([p.get_all("MIME-Version") for p in plait_mail.walk()]
            == [p.get_all("MIME-Version") for p in am_mail.walk()] == [["1.0"], None, None])
    assert plait_mail["Date"][-5:] == am_mail["Date"][-5:] == "+0000"
    assert ([p.get_content_type() for p in plait_mail.walk()]
            == [p.get_content_type() for p in am_mail.walk()]
            == ["multipart/alternative", "text/plain", "text/html"])
    for part in ("plain", "html"):  # SMTP carries lines ending CRLF: the one difference allowed
        want = am_mail.get_body((part,)).get_content().replace("\r\n", "\n")
        assert plait_mail.get_body((part,)).get_content() == want, part

    # and Plait's sender posts those bodies to the same servers
    import asyncio

    from alerting.webhook import WebhookSender

    async def send_all() -> list:
        sender = WebhookSender(config, external_url=EXTERNAL)
        try:
            return [await sender.send(message(r)) for r in ("chat", "pager", "genie", "mail")]
        finally:
            await sender.aclose()

    _Capture.seen = []
    assert all(r.ok for r in asyncio.run(send_all()))
    assert [(p, b) for p, b in _Capture.seen] == [
        ("/slack", sent["/slack:"]), ("/pd", json.loads(plait("pager")[0].body)),
        ("/og/v2/alerts", json.loads(plait("genie")[0].body))]
    wait_for(lambda: len(inbox.mails) == 2, 10, "Plait's email")
    assert message_from_bytes(inbox.mails[1], policy=policy.default)["Subject"] == am_mail["Subject"]


def test_plait_receivers_keep_their_own_layout(tmp_path):
    """A receiver of Plait's own YAML (no ``alertmanager_fields``) keeps
    Plait's Block Kit body even when templates are at hand."""
    from alerting.config import ReceiverConfig
    from alerting.gotemplate import load_templates

    rc = ReceiverConfig(name="chat", type="slack", url="http://127.0.0.1:9/slack")
    [req] = build_requests(_message("chat"), rc, EXTERNAL, 0, load_templates([]))
    assert "blocks" in json.loads(req.body) and "attachments" not in json.loads(req.body)


def test_teams_card_is_alertmanager_026s_message_card(tmp_path):
    """0.25 has no Teams notifier: the body is 0.26's MessageCard with its
    default title (``__subject``) and text, rendered by the Go-template renderer."""
    from alerting.gotemplate import alertmanager_data

    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "t", "group_by": ["alertname"]},
        "receivers": [{"name": "t", "msteams_configs": [{"webhook_url": "http://127.0.0.1:9/t"}]}]}))
    config = load_alertmanager_config(path)
    [req] = _plait(config, "t")
    body = json.loads(req.body)
    ts = cached_template_set(config)
    data = alertmanager_data(_message("t").sections, "t", EXTERNAL)
    assert body == {"@context": "http://schema.org/extensions", "type": "MessageCard",
                    "title": ts.render('{{ template "__subject" . }}', data),
                    "text": body["text"], "themeColor": "8C1A1A"}
    assert body["title"] == "[FIRING:2] DiskFull (critical x)"
    assert "# Alerts Firing:" in body["text"] and "  - instance = db2:9100" in body["text"]


def test_second_integration_renders_the_files_receiver_name(tmp_path):
    """One receiver with two integrations is two Plait receivers (``team``,
    ``team.1``); both render Alertmanager's ``.Receiver``: ``team``."""
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "team", "group_by": ["alertname"]},
        "receivers": [{"name": "team",
                       "slack_configs": [{"api_url": "http://127.0.0.1:9/s"}],
                       "pagerduty_configs": [{"routing_key": "k", "url": "http://127.0.0.1:9/p"}]}]}))
    config = load_alertmanager_config(path)
    [slack] = _plait(config, "team")
    [pd] = _plait(config, "team.1")
    want = f"{EXTERNAL}/#/alerts?receiver=team"
    assert json.loads(slack.body)["attachments"][0]["title_link"] == want
    assert json.loads(pd.body)["client_url"] == want


def test_a_field_failing_at_run_time_sends_alertmanagers_default(tmp_path, caplog):
    """``{{ index .Alerts 5 }}`` passes the load check and fails on a message
    of two alerts: the title is Alertmanager's default, the rest as written."""
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "chat", "group_by": ["alertname"]},
        "receivers": [{"name": "chat", "slack_configs": [{
            "api_url": "http://127.0.0.1:9/s", "title": "{{ (index .Alerts 5).Status }}",
            "text": "{{ .Alerts | len }} alerts"}]}]}))
    config = load_alertmanager_config(path)
    [req] = _plait(config, "chat")
    att = json.loads(req.body)["attachments"][0]
    assert (att["title"], att["text"]) == ("[FIRING:2] DiskFull (critical x)", "2 alerts")
    assert "receivers.chat.title" in caplog.text


# ------------------------------------------------- configuration fields Alertmanager renders

#: ALERTS of team ``storage``, with a description holding HTML
STORAGE = [a | {"labels": a["labels"] | {"team": "storage"},
                "annotations": a["annotations"] | {"description": "<b>disk</b> & more"}}
           for a in ALERTS]


class _Requests(BaseHTTPRequestHandler):
    """Every POST: (path, headers, JSON body)."""

    seen: list[tuple[str, dict[str, str], dict]] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, dict(self.headers), json.loads(body)))
        self.send_response(202)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


class _Envelopes:
    """Every mail: (EHLO name, MAIL FROM, RCPT TOs, the parsed message)."""

    def __init__(self) -> None:
        self.mails: list[tuple[str, str, list[str], Any]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        self.mails.append((session.host_name, envelope.mail_from, list(envelope.rcpt_tos),
                           message_from_bytes(envelope.content, policy=policy.default)))
        return "250 OK"


def _templated_config(tmp_path: Path, http: str, smtp_port: int) -> Path:
    """Receivers whose secrets, addresses and Slack fields are templates
    (notify/<integration>/<integration>.go renders them, or not)."""
    (tmp_path / "routing_key").write_text("{{ .CommonLabels.team }}-from-a-file\n")
    cfg = {
        "global": {"smtp_require_tls": False,
                   "smtp_from": "Alertmanager <am-{{ .CommonLabels.team }}@example.com>"},
        "route": {"receiver": "pager", "group_by": ["alertname"], "group_wait": "2s",
                  "group_interval": "1s", "repeat_interval": "1h",
                  "routes": [{"receiver": r, "continue": True}
                             for r in ("pager", "pagerfile", "genie", "chat", "mail", "ehlo")]},
        "receivers": [
            {"name": "pager", "pagerduty_configs": [{
                "routing_key": "{{ .CommonLabels.team }}-0123456789abcdef", "url": f"{http}/pd"}]},
            {"name": "pagerfile", "pagerduty_configs": [{
                "routing_key_file": str(tmp_path / "routing_key"), "url": f"{http}/pdfile"}]},
            {"name": "genie", "opsgenie_configs": [{
                "api_key": "key-{{ .CommonLabels.team | toUpper }}", "api_url": f"{http}/og/"}]},
            {"name": "chat", "slack_configs": [{
                "api_url": f"{http}/slack", "mrkdwn_in": ["text", '{{ "pretext" }}'],
                "short_fields": True,
                "fields": [{"title": "Team", "value": "{{ .CommonLabels.team }}"},
                           {"title": "Long", "value": "x", "short": False}],
                # a link button keeps no message-action fields (SlackAction.UnmarshalYAML)
                "actions": [{"type": "button", "text": "Runbook", "style": "primary",
                             "url": "{{ (index .Alerts 0).Annotations.runbook }}",
                             "name": "ignored", "value": "ignored", "confirm": {"text": "x"}},
                            {"type": "button", "text": "Ack {{ .CommonLabels.team }}",
                             "name": "ack", "value": "{{ .Status }}",
                             "confirm": {"text": "Sure?", "ok_text": "{{ .Receiver }}"}}]}]},
            {"name": "mail", "email_configs": [{
                "to": "Team {{ .CommonLabels.team | title }} "
                      "<{{ .CommonLabels.team }}-oncall@example.org>, boss@example.org",
                "headers": {"Cc": "{{ .CommonLabels.team }}-cc@example.org"},
                "smarthost": f"127.0.0.1:{smtp_port}", "require_tls": False}]},
            {"name": "ehlo", "email_configs": [{
                "to": "ehlo@example.org", "hello": "am.example.org",
                "html": "<p>{{ .CommonAnnotations.description | safeHtml }}</p>",
                "smarthost": f"127.0.0.1:{smtp_port}", "require_tls": False}]},
        ],
    }
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_templated_keys_addresses_and_literal_fields_match_alertmanager_025(tmp_path):
    """Alertmanager 0.25 renders PagerDuty's ``routing_key`` (inline or a
    file's), Opsgenie's ``api_key`` and email's ``to`` / ``from`` (its
    envelope, ``RCPT TO`` only ``to``'s addresses, and the default headers),
    sends Slack's ``mrkdwn_in`` as written, drops a link button's ``name``,
    ``value`` and ``confirm``, and says ``EHLO <hello>``: the
    daemon and Plait's sender, to the same local servers, send the same."""
    import asyncio

    from aiosmtpd.controller import Controller

    from alerting.webhook import WebhookSender
    from ops.infra import free_port

    _Requests.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Requests)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    inbox, smtp_port = _Envelopes(), free_port()
    ctl = Controller(inbox, hostname="127.0.0.1", port=smtp_port)
    ctl.start()
    try:
        path = _templated_config(tmp_path, f"http://127.0.0.1:{server.server_port}", smtp_port)
        with _alertmanager(path, tmp_path) as url:
            posted = _recent(STORAGE)
            resp = httpx.post(f"{url}/api/v2/alerts", json=posted, timeout=10)
            assert resp.status_code == 200, resp.text
            wait_for(lambda: len({p for p, _h, _b in _Requests.seen}) >= 4
                     and len(inbox.mails) >= 2, 30, "Alertmanager's requests")
        am = {p: (h, b) for p, h, b in reversed(_Requests.seen)}  # the first of each
        am_mails = {m[2][0]: m for m in reversed(inbox.mails)}  # by first recipient

        config = load_alertmanager_config(path)
        _Requests.seen, inbox.mails = [], []

        async def send_all() -> list:
            sender = WebhookSender(config, external_url=EXTERNAL)
            try:
                return [await sender.send(_message(r, posted=posted))
                        for r in ("pager", "pagerfile", "genie", "chat", "mail", "ehlo")]
            finally:
                await sender.aclose()

        results = asyncio.run(send_all())
        assert all(r.ok for r in results), results
        wait_for(lambda: len(inbox.mails) == 2, 10, "Plait's emails")
    finally:
        ctl.stop()
        server.shutdown()
    plait = {p: (h, b) for p, h, b in _Requests.seen}

    assert am["/pd"][1]["routing_key"] == "storage-0123456789abcdef"  # the daemon rendered it
    assert am["/pdfile"][1]["routing_key"] == "storage-from-a-file"
    for path_ in ("/pd", "/pdfile"):
        got = plait[path_][1]
        assert got | {"dedup_key": am[path_][1]["dedup_key"]} == am[path_][1], path_
    assert am["/og/v2/alerts"][0]["Authorization"] == "GenieKey key-STORAGE"
    assert plait["/og/v2/alerts"][0]["Authorization"] == am["/og/v2/alerts"][0]["Authorization"]
    assert (plait["/og/v2/alerts"][1] | {"alias": am["/og/v2/alerts"][1]["alias"]}
            == am["/og/v2/alerts"][1])
    assert am["/slack"][1]["attachments"][0]["mrkdwn_in"] == ["text", '{{ "pretext" }}']
    assert [sorted(a) for a in am["/slack"][1]["attachments"][0]["actions"]] == [
        ["style", "text", "type", "url"], ["confirm", "name", "text", "type", "value"]]
    assert plait["/slack"][1] == am["/slack"][1]

    mails = {m[2][0]: m for m in inbox.mails}
    ehlo, mail_from, rcpts, mail = mails["storage-oncall@example.org"]
    am_ehlo, am_from, am_rcpts, am_message = am_mails["storage-oncall@example.org"]
    assert (am_from, am_rcpts) == ("am-storage@example.com",
                                   ["storage-oncall@example.org", "boss@example.org"])
    assert (mail_from, rcpts) == (am_from, am_rcpts)  # the Cc header is no recipient
    for header in ("To", "From", "Cc", "Subject"):
        assert mail[header] == am_message[header], header
    assert am_message["To"] == ("Team Storage <storage-oncall@example.org>, boss@example.org")
    # EHLO: the receiver's hello, else global.smtp_hello, default "localhost" (config.go)
    assert (ehlo, am_ehlo) == ("localhost", "localhost")
    assert am_mails["ehlo@example.org"][0] == "am.example.org"
    assert mails["ehlo@example.org"][0] == "am.example.org"
    # safeHtml: Alertmanager passes the value's HTML through; Plait escaped the data before
    # rendering, so it prints it escaped (docs/alerting.md, "Templates and record size")
    html = [m[3].get_body(("html",)).get_content().strip()
            for m in (am_mails["ehlo@example.org"], mails["ehlo@example.org"])]
    assert html == ["<p><b>disk</b> & more</p>", "<p>&lt;b&gt;disk&lt;/b&gt; &amp; more</p>"]
