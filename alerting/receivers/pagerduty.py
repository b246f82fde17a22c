"""``pagerduty``: Events API v2 (PagerDuty docs, "Send an Alert Event"): per
group of the message one event, ``trigger`` while any alert fires,
``resolve`` once all are resolved; ``dedup_key`` = Plait group id, so the
incident follows the group."""
from __future__ import annotations

from typing import Any

from alerting.intake import format_time
from alerting.model import Message
from alerting.receivers import alertmanager
from alerting.receivers.alertmanager import per_group
from alerting.receivers.registry import AmFile, ReceiverType, needs, register, secret_status
from alerting.receivers.webhook import NO_TIMEOUT
from alerting.receivers.request import Request, dumps
from alerting.receivers.slack import links
from alerting.templates import render

SEVERITY = {"critical": "critical", "warning": "warning", "info": "info"}


def events(message: Message, receiver: Any, external_url: str = "") -> list[dict[str, Any]]:
    """One Events API v2 event per section group of ``message``."""
    out = []
    for gid, one, resolved in per_group(message):
        s = one.sections[0]
        firing = [a for x in one.sections for a in x["alerts"] if a["status"] == "firing"]
        event: dict[str, Any] = {"routing_key": receiver.routing_key, "dedup_key": gid[:255]}
        if resolved:
            event["event_action"] = "resolve"
            out.append(event)
            continue
        title, text, ctx = render(one, receiver, external_url)
        top = max(firing, key=lambda a: ["info", "warning", "critical"].index(a["severity"]),
                  default=None)
        event["event_action"] = "trigger"
        event["payload"] = {
            "summary": title[:1024],
            "source": (top["asset"] if top and top["asset"] else "plait")[:255],
            "severity": SEVERITY.get(top["severity"] if top else "warning", "warning"),
            "timestamp": format_time(min(a["starts_at"] for a in firing)) if firing
            else format_time(message.created_at),
            "component": ", ".join(sorted({a["asset"] for a in firing if a["asset"]}))[:255],
            "group": ", ".join(f"{k}={v}" for k, v in s["group_labels"].items())[:255],
            "class": ", ".join(sorted({a["rule"] for a in firing}))[:255],
            "custom_details": {"text": text, "firing": len(firing),
                               "groupLabels": dict(s["group_labels"])},
        }
        event["client"] = "Plait"
        if external_url:
            event["client_url"] = external_url
        ls = [{"href": url, "text": label} for label, url in links(ctx)]
        if ls:
            event["links"] = ls
        out.append(event)
    return out


def requests(message: Message, receiver: Any, external_url: str = "", timestamp: int = 0
             ) -> list[Request]:
    """One POST per event."""
    headers = {"Content-Type": "application/json", **receiver.headers}
    return [Request(receiver.url, dumps(e), headers) for e in events(message, receiver, external_url)]


def am_requests(message: Message, receiver: Any, templates: Any, external_url: str = "",
                timestamp: int = 0) -> list[Request]:
    """Alertmanager's Events API v2 event per group from the rendered fields."""
    headers = {"Content-Type": "application/json", **receiver.headers}
    out = []
    for gid, one, resolved in per_group(message):
        f, _data = alertmanager.rendered(one, receiver, templates, external_url)
        body = alertmanager.pagerduty(f, f["routing_key"], gid[:255], resolved)
        out.append(Request(receiver.url, dumps(body), headers))
    return out


DEFAULT_URL = "https://events.pagerduty.com/v2/enqueue"


def read_am(c: dict, key: str, ctx: Any) -> dict[str, Any]:
    """A ``pagerduty_configs`` entry (Events API v2: ``routing_key``, inline or the file's
    content, a template as Alertmanager's ``notifyV2`` renders it: ``tmpl(routingKey)``)."""
    routing_key = ctx.files.either(c, "routing_key", "routing_key_file", key)
    if not routing_key:
        raise ctx.fail(ctx.at(key, "routing_key"), "missing service or routing key in PagerDuty config")
    url = c.get("url") or ctx.glob.get("pagerduty_url") or DEFAULT_URL
    return {"type": "pagerduty", "routing_key": routing_key,
            "alertmanager_fields": {"routing_key": routing_key},
            "url": ctx.url(url, ctx.at(key, "url") if c.get("url") else "global.pagerduty_url")}


#: Alertmanager's ``DefaultPagerdutyConfig`` (config/notifiers.go, v0.25.0)
AM_DEFAULTS = {
    "description": '{{ template "pagerduty.default.description" .}}',
    "client": alertmanager.tmpl("pagerduty.default.client"),
    "client_url": alertmanager.tmpl("pagerduty.default.clientURL"),
    "details": {"firing": '{{ template "pagerduty.default.instances" .Alerts.Firing }}',
                "resolved": '{{ template "pagerduty.default.instances" .Alerts.Resolved }}',
                "num_firing": "{{ .Alerts.Firing | len }}",
                "num_resolved": "{{ .Alerts.Resolved | len }}"}}


def _merge(out: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``details`` merged per key; ``source`` defaults to ``client`` (UnmarshalYAML)."""
    out["details"] = AM_DEFAULTS["details"] | dict(given.get("details") or {})
    out.setdefault("source", out["client"])
    return out


AM_FIELDS = ("client", "client_url", "description", "details", "images", "links", "source",
             "severity", "class", "component", "group")
_V1 = "not supported: PagerDuty Events API v1; use routing_key (v2)"
PAGERDUTY = register(ReceiverType(
    name="pagerduty", requests=requests, am_requests=am_requests,
    am_status=lambda r: secret_status(r, "pagerduty_configs", "routing_key", "url", DEFAULT_URL),
    check=lambda r: needs(r, "routing_key", "Events API v2 integration key"),
    am_kind="pagerduty_configs", default_url=DEFAULT_URL,
    am_file=AmFile(("service_key", "service_key_file", "routing_key", "routing_key_file", "url",
                    *AM_FIELDS, "timeout"), True, AM_FIELDS, read_am,
                   {"timeout": NO_TIMEOUT, "service_key": _V1, "service_key_file": _V1},
                   defaults=AM_DEFAULTS, merge=_merge)))
