"""``email`` over SMTP: ``multipart/alternative`` (RFC 2046) with the title as
``Subject``, the text and a minimal HTML rendering; ``Message-ID`` from the
idempotency key. :func:`send` (STARTTLS, AUTH) runs in the sender's thread."""
from __future__ import annotations

import html
import re
import smtplib
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from alerting.model import Message
from alerting.receivers.registry import SECRET, AmFile, ReceiverType, register
from alerting.templates import render

_URL = re.compile(r"(https?://[^\s<>\"]+)")


def build_email(message: Message, receiver: Any, external_url: str = "",
                templates: Any = None) -> EmailMessage:
    """The MIME message for ``message``; Alertmanager's given an ``alertmanager.yml``'s ``templates``
    (:func:`alerting.receivers.alertmanager.email`, which raises ValueError for a ``from`` / ``to``
    rendering to no address)."""
    if templates is not None and receiver.alertmanager_fields:
        from alerting.receivers.alertmanager import email
        return email(message, receiver, templates, external_url)
    title, text, _ctx = render(message, receiver, external_url)
    cfg = receiver.email
    mail = EmailMessage()
    mail["Subject"] = title
    mail["From"] = cfg.from_
    mail["To"] = ", ".join(cfg.to)
    mail["Date"] = formatdate(message.created_at, usegmt=True)
    mail["Message-ID"] = f"<{message.idempotency_key}@plait.alerting>"
    mail["X-Plait-Message-Id"] = message.id
    mail.set_content(text)
    body = _URL.sub(lambda m: f'<a href="{m.group(1)}">{m.group(1)}</a>', html.escape(text, quote=False))
    mail.add_alternative(f"<html><body><h3>{html.escape(title)}</h3><pre style=\"font-family:"
                         f"monospace\">{body}</pre></body></html>", subtype="html")
    return mail


def send(mail: EmailMessage, receiver: Any, timeout: float) -> None:
    """Blocking SMTP delivery of ``mail`` through ``receiver.email.smarthost``, to its
    ``envelope`` (:class:`alerting.receivers.alertmanager.Mail`) or else its headers' addresses, introduced as
    ``EHLO <receiver.email.hello>``.

    Raises:
        OSError, smtplib.SMTPException: the server refused or is unreachable.
    """
    cfg = receiver.email
    host, port = cfg.smarthost.rsplit(":", 1)
    with smtplib.SMTP(host, int(port), local_hostname=cfg.hello or None, timeout=timeout) as smtp:
        if cfg.require_tls:
            smtp.starttls()
        if cfg.auth_username:
            smtp.login(cfg.auth_username, cfg.auth_password)
        smtp.send_message(mail, *(getattr(mail, "envelope", None) or ()))


def _not_http(*_args: Any) -> list:
    raise ValueError("receiver type 'email' is not sent over HTTP")


def _check(receiver: Any) -> None:
    if receiver.email is None:
        raise ValueError("email: required for type email (to, from, smarthost)")


def am_status(receiver: Any) -> dict[str, Any]:
    """``email_configs``; the password as ``<secret>``."""
    e = receiver.email
    cfg = {"to": ", ".join(e.to), "from": e.from_, "smarthost": e.smarthost,
           "require_tls": e.require_tls, "send_resolved": receiver.send_resolved}
    if e.hello:
        cfg["hello"] = e.hello
    if e.auth_username:
        cfg |= {"auth_username": e.auth_username, "auth_password": SECRET}
    return {"email_configs": [cfg]}


def _smarthost(value: Any, key: str, ctx: Any) -> str:
    text = ctx.text(value, key)
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ctx.fail(key, f"address {text}: missing port in address")
    if not port:
        raise ctx.fail(key, f'address "{text}": port cannot be empty')
    if not port.isdigit():
        raise ctx.fail(key, f'address "{text}": port must be a number')
    return f"{host.strip('[]')}:{port}"


_LOGIN = "not supported: Plait logs in with auth_username/auth_password"
_REFUSED = {"auth_secret": _LOGIN, "auth_secret_file": _LOGIN, "auth_identity": _LOGIN,
            "tls_config": "not supported: STARTTLS (require_tls) with the system CAs",
            "force_implicit_tls": "not supported: STARTTLS (require_tls) only",
            "threading": "not supported"}


#: Alertmanager's ``DefaultEmailConfig`` (config/notifiers.go, v0.25.0)
AM_DEFAULTS = {"headers": {"Subject": '{{ template "email.default.subject" . }}'},
               "html": '{{ template "email.default.html" . }}'}


def _merge(out: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``headers`` keep the default ``Subject`` unless the file sets one (any case)."""
    headers = dict(given.get("headers") or {})
    out["headers"] = {**({} if any(h.lower() == "subject" for h in headers)
                         else AM_DEFAULTS["headers"]), **headers}
    return out


def read_am(c: dict, key: str, ctx: Any) -> dict[str, Any]:
    """An ``email_configs`` entry over the ``global.smtp_*`` defaults."""
    g, files, at = ctx.glob, ctx.files, ctx.at
    to = ctx.text(c.get("to"), at(key, "to"))
    if not to:
        raise ctx.fail(at(key, "to"), "missing to address in email config")
    smarthost = c.get("smarthost") or g.get("smtp_smarthost")
    if not smarthost:
        raise ctx.fail(at(key, "smarthost"), "no global SMTP smarthost set")
    sender = ctx.text(c.get("from") or g.get("smtp_from"), at(key, "from"))
    if not sender:
        raise ctx.fail(at(key, "from"), "no global SMTP from set")
    for name in ("smtp_auth_secret", "smtp_auth_secret_file", "smtp_auth_identity"):
        if g.get(name):
            raise ctx.fail(f"global.{name}", _REFUSED[name.removeprefix("smtp_")])
    password = files.either(c, "auth_password", "auth_password_file", key)
    if not password and not c.get("auth_password_file"):
        password = files.either(g, "smtp_auth_password", "smtp_auth_password_file", "global")
    require_tls = c.get("require_tls", g.get("smtp_require_tls", True))
    # the EHLO name: own, else global.smtp_hello (default "localhost", config.go
    # DefaultGlobalConfig); empty, Go's net/smtp says "localhost" too (email.go Notify)
    hello = ctx.text(c.get("hello") or g.get("smtp_hello"),
                     at(key, "hello") if c.get("hello") else "global.smtp_hello") or "localhost"
    # Alertmanager renders ``to`` and ``from`` (the envelope and the default To / From headers,
    # notify/email/email.go ``Notify``): kept as written, with the template fields
    return {"type": "email", "alertmanager_fields": {"to": to, "from": sender}, "email": {
        "to": to, "from": sender,
        "smarthost": _smarthost(smarthost, at(key, "smarthost") if c.get("smarthost")
                                else "global.smtp_smarthost", ctx),
        "auth_username": ctx.text(c.get("auth_username") or g.get("smtp_auth_username"),
                                  at(key, "auth_username")),
        "auth_password": password, "hello": hello,
        "require_tls": ctx.boolean(require_tls, at(key, "require_tls"))}}


#: sent over SMTP by :mod:`alerting.webhook`
EMAIL = register(ReceiverType(
    name="email", requests=_not_http, am_requests=_not_http, am_status=am_status, check=_check,
    am_kind="email_configs",
    am_file=AmFile(("to", "from", "hello", "smarthost", "auth_username", "auth_password",
                    "auth_password_file", "auth_secret", "auth_secret_file", "auth_identity",
                    "headers", "html", "text", "require_tls", "tls_config", "force_implicit_tls",
                    "threading"), False, ("headers", "html", "text"), read_am, _REFUSED,
                   http=False, defaults=AM_DEFAULTS, merge=_merge)))
