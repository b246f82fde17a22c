"""Messages of a receiver read from an ``alertmanager.yml``, shaped as
Alertmanager 0.25 sends them (``notify/<name>/<name>.go``; Teams: 0.26).

A receiver's Go-template fields are Alertmanager's defaults (``AmFile.defaults``)
under what the file sets; :func:`rendered` renders them against the
message's ``Data`` and one builder per notifier makes the body. Plait's
group id is the ``dedup_key`` / ``alias`` (Alertmanager's: a SHA-256).
"""
from __future__ import annotations

import logging
import re
from dataclasses import replace
from email.message import EmailMessage
from typing import Any, Iterator

from alerting.model import Message
from alerting.receivers.registry import receiver_type, receiver_types

log = logging.getLogger("plait.alerting")


def tmpl(name: str) -> str:
    """``{{ template "<name>" . }}``."""
    return '{{ template "%s" . }}' % name


def with_defaults(kind: str, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (an integration's Go-template fields) over the ``kind``'s
    defaults (its ``AmFile.defaults``, merged by ``AmFile.merge``)."""
    spec = next(t.am_file for t in receiver_types().values() if t.am_kind == kind)
    out = dict(spec.defaults) | given
    return spec.merge(out, given) if spec.merge else out


def render_fields(templates: Any, fields: Any, data: Any, source: str) -> Any:
    """``fields`` with every string rendered against ``data`` (Alertmanager's
    ``tmplText``); ``source`` names the field in errors.

    Raises:
        alerting.gotemplate.TemplateError: a field fails to render.
    """
    if isinstance(fields, str):
        return templates.render(fields, data, source)
    if isinstance(fields, dict):
        return {k: render_fields(templates, v, data, f"{source}.{k}") for k, v in fields.items()}
    if isinstance(fields, list):
        return [render_fields(templates, v, data, f"{source}.{i}") for i, v in enumerate(fields)]
    return fields


def rendered(message: Message, receiver: Any, templates: Any,
             external_url: str) -> tuple[dict[str, Any], Any]:
    """(the receiver's fields rendered against ``message``'s ``Data``, that
    ``Data``); a field failing at run time is logged and its default sent;
    the type's ``AmFile.literal`` fields are kept as written."""
    from alerting.gotemplate import TemplateError, alertmanager_data

    fields = dict(receiver.alertmanager_fields)
    name = fields.pop("receiver", message.receiver)
    data = alertmanager_data(message.sections, name, external_url)
    spec = receiver_type(receiver.type).am_file
    defaults = spec.defaults if spec else {}
    out = {}
    for field, value in fields.items():
        if spec and field in spec.literal:
            out[field] = value
            continue
        try:
            out[field] = _render_field(templates, field, value, data, f"receivers.{receiver.name}")
        except TemplateError as e:
            log.warning("%s; Alertmanager's default for %s is sent instead", e, field)
            out[field] = _render_field(templates, field, defaults.get(field, ""), data, "")
    return out, data


def _render_field(templates: Any, field: str, value: Any, data: Any, source: str) -> Any:
    """One field rendered; ``html`` as an email's (:func:`_html_escaped`)."""
    if field != "html":
        return render_fields(templates, value, data, f"{source}.{field}")
    return _HTML_COMMENT.sub("", templates.render(value, _html_escaped(data), f"{source}.html"))


#: Go's html/template ``htmlReplacementTable``
_HTML_ESCAPES = str.maketrans({"\0": "\ufffd", '"': "&#34;", "&": "&amp;", "'": "&#39;",
                               "+": "&#43;", "<": "&lt;", ">": "&gt;"})
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _html_escaped(value: Any) -> Any:
    """``value`` (a ``Data``) with every string HTML-escaped, so the default
    ``email.default.html`` renders as ``ExecuteHTMLString`` does (limits:
    docs/alerting.md, "Differences from Alertmanager")."""
    if isinstance(value, str):
        return value.translate(_HTML_ESCAPES)
    if isinstance(value, dict):
        return type(value)({_html_escaped(k): _html_escaped(v) for k, v in value.items()})
    if isinstance(value, list):
        return type(value)(_html_escaped(v) for v in value)
    return value


class Mail(EmailMessage):
    """An email with its SMTP ``envelope`` (sender, recipients) when that is not what its
    ``From`` / ``To`` headers say: Alertmanager's is its rendered ``from`` / ``to``, whatever
    the ``headers`` set (notify/email/email.go ``Notify``)."""

    envelope: tuple[str, list[str]] | None = None


def addresses(text: str, field: str) -> list[str]:
    """The addresses of a rendered address list (Go's ``mail.ParseAddressList``:
    ``Team <a@example.org>, b@example.org`` gives ``a@example.org``, ``b@example.org``).

    Raises:
        ValueError: ``parse 'to' addresses: ...``, an empty list or an address without ``@``.
    """
    from email.utils import getaddresses

    found = [a for _name, a in getaddresses([text])]
    if not found or not all(found):
        raise ValueError(f"parse '{field}' addresses: mail: no address in {text!r}")
    if not all("@" in a for a in found):
        raise ValueError(f"parse '{field}' addresses: mail: missing '@' or angle-addr in {text!r}")
    return found


def email(message: Message, receiver: Any, templates: Any, external_url: str) -> Any:
    """The MIME message ``notify/email`` sends (:class:`Mail`): the
    rendered headers (``To`` / ``From`` default the rendered ``to`` / ``from``; ``Message-Id``
    from the idempotency key unless set), ``Date``, ``text`` / ``html`` parts as rendered, and
    the envelope: one sender from ``from``, the recipients of ``to``.

    Raises:
        ValueError: ``from`` is not exactly one address or ``to`` not a list of them
            (Alertmanager fails the notification too).
    """
    from datetime import datetime, timezone
    from email.utils import format_datetime


    f, _data = rendered(message, receiver, templates, external_url)
    sender = addresses(f["from"], "from")
    if len(sender) != 1:
        raise ValueError(f"must be exactly one 'from' address (got: {len(sender)})")
    mail = Mail()
    mail.envelope = (sender[0], addresses(f["to"], "to"))
    headers = {"To": f["to"], "From": f["from"]} | f["headers"]
    for name, value in headers.items():
        mail[name] = value
    if "Message-Id" not in headers:
        mail["Message-Id"] = f"<{message.idempotency_key}@plait.alerting>"
    # RFC 5322 numeric zone: +0000 is UTC, -0000 "zone unknown" (Go's RFC1123Z writes +0000)
    mail["Date"] = format_datetime(datetime.fromtimestamp(message.created_at, timezone.utc))
    mail["MIME-Version"] = "1.0"  # once, at the top (RFC 2045 section 4)
    mail["Content-Type"] = "multipart/alternative"
    mail.set_payload([])
    for sub, field in (("plain", "text"), ("html", "html")):
        if receiver.alertmanager_fields.get(field):
            part = EmailMessage()
            part.set_payload(f[field], "utf-8")  # set_content would add a newline
            part.set_type(f"text/{sub}")
            del part["MIME-Version"]  # set by set_payload's charset: the top level has it
            mail.attach(part)
    return mail


def truncate(text: str, n: int) -> str:
    """Alertmanager's ``TruncateInRunes``: at most ``n`` characters, ``…`` last when cut."""
    if len(text) <= n:
        return text
    return text[:n] if n <= 3 else text[:n - 1] + "…"


def _present(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without the empty values Go's ``omitempty`` leaves out."""
    return {k: v for k, v in d.items() if v not in ("", None, [], {}, False)}


def per_group(message: Message) -> Iterator[tuple[str, Message, bool]]:
    """(group id, the message cut to its sections, all resolved) per group."""
    done: set[str] = set()
    for s in message.sections:
        gid = s["group_id"]
        if gid in done:
            continue
        done.add(gid)
        parts = [x for x in message.sections if x["group_id"] == gid]
        one = replace(message, sections=parts, alert_count=sum(len(x["alerts"]) for x in parts))
        firing = any(a["status"] == "firing" for x in parts for a in x["alerts"])
        still = sum(x["counts"].get("still_firing", 0) for x in parts)
        yield gid, one, not firing and still == 0


def slack(f: dict[str, Any]) -> dict[str, Any]:
    """Slack's body from rendered fields ``f`` (notify/slack/slack.go)."""
    att = _present({"title": truncate(f.get("title", ""), 1024),
                    "title_link": f.get("title_link"), "pretext": f.get("pretext"),
                    "image_url": f.get("image_url"), "thumb_url": f.get("thumb_url"),
                    "color": f.get("color")})
    att |= {"text": f.get("text", ""), "fallback": f.get("fallback", ""),
            "callback_id": f.get("callback_id", ""), "footer": f.get("footer", ""),
            "mrkdwn_in": f.get("mrkdwn_in") or ["fallback", "pretext", "text"]}
    short = bool(f.get("short_fields", False))
    if f.get("fields"):
        att["fields"] = [_present({"title": x.get("title"), "value": x.get("value")})
                         | {"short": bool(x.get("short", short))} for x in f["fields"]]
    if f.get("actions"):
        att["actions"] = [_present({k: x.get(k) for k in ("type", "text", "url", "style", "name",
                                                          "value")})
                          | ({"confirm": _present(dict(x["confirm"]))} if x.get("confirm") else {})
                          for x in f["actions"]]
    return _present({"channel": f.get("channel"), "username": f.get("username"),
                     "icon_emoji": f.get("icon_emoji"), "icon_url": f.get("icon_url"),
                     "link_names": bool(f.get("link_names"))}) | {"attachments": [att]}


def pagerduty(f: dict[str, Any], routing_key: str, dedup_key: str, resolved: bool) -> dict[str, Any]:
    """An Events API v2 event from rendered fields ``f`` (pagerduty.go ``notifyV2``)."""
    payload = {"summary": truncate(f.get("description", ""), 1024), "source": f.get("source", ""),
               "severity": f.get("severity") or "error"}
    payload |= _present({"class": f.get("class"), "component": f.get("component"),
                         "group": f.get("group"), "custom_details": f.get("details")})
    images = [{k: i.get(k, "") for k in ("src", "alt", "href")}
              for i in f.get("images") or [] if i.get("src")]
    links = [{"href": x.get("href", ""), "text": x.get("text", "")}
             for x in f.get("links") or [] if x.get("href")]
    return {"routing_key": routing_key, "dedup_key": dedup_key,
            "event_action": "resolve" if resolved else "trigger", "payload": payload,
            **_present({"client": f.get("client"), "client_url": f.get("client_url"),
                        "images": images, "links": links})}


def _split(text: str) -> list[str]:
    """Opsgenie's ``safeSplit``: ``text`` trimmed, cut at commas, empty parts dropped."""
    return [x for x in text.strip().split(",") if x]


def opsgenie(f: dict[str, Any], alias: str, common_labels: dict[str, str],
             resolved: bool) -> dict[str, Any]:
    """Opsgenie's create (or close) body from ``f`` (opsgenie.go ``createRequests``)."""
    if resolved:
        return {"source": f.get("source", "")}
    responders = []
    for r in f.get("responders") or []:
        r = {k: r.get(k, "") for k in ("id", "name", "username", "type")}
        if not any(r.values()):
            continue
        if r["type"] == "teams":
            responders += [{"name": t, "type": "team"} for t in _split(r["name"])]
        else:
            responders.append(_present({k: r[k] for k in ("id", "name", "username")})
                              | {"type": r["type"]})
    body = {"alias": alias, "message": truncate(f.get("message", ""), 130),
            "details": dict(common_labels) | dict(f.get("details") or {}),
            "source": f.get("source", "")}
    return body | _present({"description": f.get("description"), "responders": responders,
                            "tags": _split(f.get("tags", "")), "note": f.get("note"),
                            "priority": f.get("priority"), "entity": f.get("entity"),
                            "actions": _split(f.get("actions", ""))})


def teams(f: dict[str, Any], status: str) -> dict[str, Any]:
    """The MessageCard Alertmanager's ``notify/msteams`` posts (0.26)."""
    color = {"firing": "8C1A1A", "resolved": "2DC72D"}.get(status, "808080")
    return {"@context": "http://schema.org/extensions", "type": "MessageCard",
            "title": f.get("title", ""), "text": f.get("text", ""), "themeColor": color,
            **_present({"summary": f.get("summary")})}
