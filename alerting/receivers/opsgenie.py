"""``opsgenie``: Alert API v2 (Opsgenie docs, "Alert API"; header
``Authorization: GenieKey <api_key>``): per group of the message, create
(``alias`` = Plait group id; limits: message 130, alias 512, description
15000) while any alert fires, else close ``<url>/<alias>/close?identifierType=alias``."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from alerting.model import Message
from alerting.receivers import alertmanager
from alerting.receivers.alertmanager import per_group
from alerting.receivers.registry import AmFile, ReceiverType, needs, register, secret_status
from alerting.receivers.request import Request, dumps
from alerting.templates import render

PRIORITY = {"critical": "P1", "warning": "P3", "info": "P5"}


def requests(message: Message, receiver: Any, external_url: str = "", timestamp: int = 0
             ) -> list[Request]:
    """Create / close requests for ``message`` (see the module doc)."""
    headers = {"Content-Type": "application/json", "Authorization": f"GenieKey {receiver.api_key}",
               **receiver.headers}
    base = receiver.url.rstrip("/")
    out = []
    for gid, one, resolved in per_group(message):
        s = one.sections[0]
        firing = [a for x in one.sections for a in x["alerts"] if a["status"] == "firing"]
        title, text, ctx = render(one, receiver, external_url)
        if resolved:
            body = {"source": "Plait", "note": title[:25000]}
            out.append(Request(f"{base}/{quote(gid, safe='')}/close?identifierType=alias",
                               dumps(body), headers))
            continue
        top = max((a["severity"] for a in firing), key=["info", "warning", "critical"].index,
                  default="warning")
        details = {k: v for k, v in s["group_labels"].items()}
        details["firing"] = str(len(firing))
        tasks = [a["task_url"] for a in ctx["firing"] if a["task_url"]]
        if tasks:
            details["task"] = tasks[0]
        body = {"message": title[:130], "alias": gid[:512], "description": text[:15000],
                "priority": PRIORITY[top], "source": "Plait",
                "entity": ", ".join(sorted({a["asset"] for a in firing if a["asset"]}))[:512],
                "tags": sorted({a["rule"] for a in firing})[:20], "details": details}
        out.append(Request(base, dumps(body), headers))
    return out


def am_requests(message: Message, receiver: Any, templates: Any, external_url: str = "",
                timestamp: int = 0) -> list[Request]:
    """Alertmanager's create / close request per group from the rendered fields."""
    out = []
    for gid, one, resolved in per_group(message):
        f, data = alertmanager.rendered(one, receiver, templates, external_url)
        url = (f"{receiver.url}/{quote(gid[:512], safe='')}/close?identifierType=alias"
               if resolved else receiver.url)
        body = alertmanager.opsgenie(f, gid[:512], data["CommonLabels"], resolved)
        headers = {"Content-Type": "application/json", **receiver.headers,
                   "Authorization": f"GenieKey {f['api_key']}"}
        out.append(Request(url, dumps(body), headers))
    return out


DEFAULT_URL = "https://api.opsgenie.com/v2/alerts"


#: Alertmanager's ``opsgenieValidTypesRe`` (config/notifiers.go): a responder's type, untemplated
RESPONDER_TYPES = ("team", "teams", "user", "escalation", "schedule")


def _check_responders(value: Any, key: str, ctx: Any) -> None:
    """``responders`` as Alertmanager's ``OpsGenieConfig.UnmarshalYAML`` checks them: each names an
    ``id``, ``username`` or ``name``; a type with ``{{`` parses as a template, one without is one
    of :data:`RESPONDER_TYPES` (any case). Raises ConfigError naming ``responders.<i>``."""
    if value is None:
        return
    if not isinstance(value, list):
        raise ctx.fail(key, f"expected a list, got {type(value).__name__}")
    for i, r in enumerate(value):
        at = ctx.at(key, str(i))
        if not isinstance(r, dict):
            raise ctx.fail(at, f"expected a mapping, got {type(r).__name__}")
        if not any(ctx.text(r.get(k), ctx.at(at, k)) for k in ("id", "username", "name")):
            raise ctx.fail(at, "has to have at least one of id, username or name specified")
        kind = ctx.text(r.get("type"), ctx.at(at, "type"))
        if "{{" in kind:
            from alerting import gotemplate

            try:
                gotemplate.parse(kind, ctx.at(at, "type"))
            except gotemplate.TemplateError as e:
                raise ctx.fail(ctx.at(at, "type"), f"is not a valid template: {e}") from None
        elif kind.lower() not in RESPONDER_TYPES:
            raise ctx.fail(ctx.at(at, "type"), f"{kind!r} does not match valid options "
                                               f"^({'|'.join(RESPONDER_TYPES)})$")


def read_am(c: dict, key: str, ctx: Any) -> dict[str, Any]:
    """An ``opsgenie_configs`` entry (``api_key`` or the global one, inline or a file's content,
    a template as Alertmanager's ``createRequests`` renders it: ``tmpl(apiKey)``)."""
    _check_responders(c.get("responders"), ctx.at(key, "responders"), ctx)
    api_key = ctx.own_or_global(c, "api_key", key, "opsgenie_api_key", "OpsGenie API Key")
    base = c.get("api_url") or ctx.glob.get("opsgenie_api_url") or "https://api.opsgenie.com/"
    base = ctx.url(base, ctx.at(key, "api_url") if c.get("api_url") else "global.opsgenie_api_url")
    return {"type": "opsgenie", "api_key": api_key, "alertmanager_fields": {"api_key": api_key},
            "url": base.rstrip("/") + "/v2/alerts"}


#: Alertmanager's ``DefaultOpsGenieConfig`` (config/notifiers.go, v0.25.0)
AM_DEFAULTS = {"message": alertmanager.tmpl("opsgenie.default.message"),
               "description": alertmanager.tmpl("opsgenie.default.description"),
               "source": alertmanager.tmpl("opsgenie.default.source")}
AM_FIELDS = ("message", "description", "source", "details", "entity", "responders", "actions",
             "tags", "note", "priority")
OPSGENIE = register(ReceiverType(
    name="opsgenie", requests=requests, am_requests=am_requests,
    am_status=lambda r: secret_status(r, "opsgenie_configs", "api_key", "api_url", DEFAULT_URL),
    check=lambda r: needs(r, "api_key", "GenieKey"), am_kind="opsgenie_configs",
    default_url=DEFAULT_URL,
    am_file=AmFile(("api_key", "api_key_file", "api_url", *AM_FIELDS, "update_alerts"), True,
                   AM_FIELDS, read_am,
                   {"update_alerts": "not supported: Plait creates and closes Opsgenie alerts"},
                   defaults=AM_DEFAULTS)))
