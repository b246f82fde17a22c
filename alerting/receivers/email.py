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
from alerting.receivers.registry import SECRET, ReceiverType, register
from alerting.templates import render

_URL = re.compile(r"(https?://[^\s<>\"]+)")


def build_email(message: Message, receiver: Any, external_url: str = "",
                templates: Any = None) -> EmailMessage:
    """The MIME message for ``message``; Alertmanager's given an ``alertmanager.yml``'s ``templates``."""
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
    """Blocking SMTP delivery of ``mail`` through ``receiver.email.smarthost``.

    Raises:
        OSError, smtplib.SMTPException: the server refused or is unreachable.
    """
    cfg = receiver.email
    host, port = cfg.smarthost.rsplit(":", 1)
    with smtplib.SMTP(host, int(port), timeout=timeout) as smtp:
        if cfg.require_tls:
            smtp.starttls()
        if cfg.auth_username:
            smtp.login(cfg.auth_username, cfg.auth_password)
        smtp.send_message(mail)


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
    if e.auth_username:
        cfg |= {"auth_username": e.auth_username, "auth_password": SECRET}
    return {"email_configs": [cfg]}


#: sent over SMTP by :mod:`alerting.webhook`
EMAIL = register(ReceiverType(name="email", requests=_not_http, am_requests=_not_http,
                              am_status=am_status, check=_check, am_kind="email_configs"))
