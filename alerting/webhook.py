"""The sender (httpx, async): one attempt per call within ``delivery.timeout``
(docs/kafka-rules.md #5); :func:`report` hands the :class:`SendResult` to the funnel. A connect
error never left; an answer is the receiver's decision; a timeout after sending may have delivered
(``maybe_delivered``: same message, same key)."""
from __future__ import annotations

import asyncio
import smtplib
import sys
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Callable

import httpx

from alerting.config import AlertingConfig
from alerting.delivery import is_success
from alerting.receivers import Request, build_requests
from alerting.funnel import Funnel
from alerting.model import LedgerEntry, Message

USER_AGENT = "plait-alerting/0.1"


@dataclass(frozen=True)
class SendResult:
    """One attempt: ``ok`` (2xx), ``status`` (None: no answer), ``retry_after`` seconds,
    ``maybe_delivered``, ``error``, ``elapsed`` s."""

    ok: bool
    status: int | None
    retry_after: float | None = None
    maybe_delivered: bool = False
    error: str = ""
    elapsed: float = 0.0


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds from a ``Retry-After`` (RFC 9110 10.2.3) at epoch ``now``; None when absent or
    unreadable; never negative or infinite."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²".isdigit(), float("²") raises
        return min(float(value), sys.float_info.max)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class WebhookSender:
    """Sends funnel messages to their receivers; ``client`` to reuse (else its own, closed by
    :meth:`aclose`); ``clock`` for signature timestamps."""

    def __init__(self, config: AlertingConfig, client: httpx.AsyncClient | None = None,
                 clock: Callable[[], float] = time.time, external_url: str = "") -> None:
        self.config = config
        self.external_url = external_url.rstrip("/")
        self.clock = clock
        self._own = client is None
        self.client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(config.delivery.timeout), follow_redirects=False,
            headers={"User-Agent": USER_AGENT})
        self._tls_clients: dict[Any, httpx.AsyncClient] = {}

    def _client_for(self, rc: Any) -> httpx.AsyncClient:
        """The shared client, or one per TLS setting of ``rc``. Raises OSError/ssl.SSLError for an
        unreadable certificate file."""
        tls = getattr(rc, "tls", None)
        if tls is None:
            return self.client
        key = (tls.ca_file, tls.cert_file, tls.key_file, tls.insecure_skip_verify)
        client = self._tls_clients.get(key)
        if client is None:
            import ssl

            if tls.insecure_skip_verify:
                ctx = ssl.create_default_context()
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            else:
                ctx = ssl.create_default_context(cafile=tls.ca_file or None)
            if tls.cert_file:
                ctx.load_cert_chain(tls.cert_file, tls.key_file)
            client = self._tls_clients[key] = httpx.AsyncClient(
                timeout=httpx.Timeout(self.config.delivery.timeout), follow_redirects=False,
                headers={"User-Agent": USER_AGENT}, verify=ctx)
        return client

    async def send(self, message: Message) -> SendResult:
        """:meth:`_send` in a ``webhook.attempt`` span (docs/alerting.md, "Traces"), outcome and
        latency in ``plait.metrics``."""
        from plait import metrics, tracing

        with tracing.span("webhook.attempt", message.traceparent, links=message.links,
                          **{"plait.receiver": message.receiver, "plait.message_id": message.id,
                             "plait.attempt": message.attempt}) as sp:
            result = await self._send(message)
            outcome = ("success" if result.ok else "network_error" if result.status is None
                       else f"http_{result.status // 100}xx")
            metrics.WEBHOOK_SECONDS.labels(message.receiver).observe(result.elapsed or 0.0)
            metrics.WEBHOOK_ATTEMPTS.labels(message.receiver, outcome).inc()
            if sp is not None:
                sp.set_attribute("plait.outcome", outcome)
            return result

    async def _send(self, message: Message) -> SendResult:
        """Deliver ``message`` (:func:`alerting.receivers.build_requests`, every request must
        succeed; email over SMTP); network and HTTP problems go in the result. A receiver the
        configuration lost (a worker started on a file without it, its groups still held) has
        nothing to send to: the message settles, as a reload's type ``none`` receiver
        (:func:`alerting.amconfig.keep_removed_receivers`) settles it."""
        try:
            rc = self.config.receiver(message.receiver)
        except KeyError:
            return SendResult(True, 204)
        external_url = self.external_url or self.config.external_url
        t0 = time.monotonic()
        if rc.type == "email":
            return await self._send_email(message, rc, external_url, t0)
        requests = build_requests(message, rc, external_url, int(self.clock()),
                                  self._templates(rc))
        result = SendResult(True, 204)
        timeout = min(rc.timeout or self.config.delivery.timeout, self.config.delivery.timeout)
        for req in requests:
            result = await self._post(req, t0, self._client_for(rc), timeout)
            if not result.ok:
                return result
        return result

    def _templates(self, rc) -> object:
        """The Go templates of an ``alertmanager.yml`` receiver; else None."""
        if not rc.alertmanager_fields:
            return None
        from alerting.amconfig import cached_template_set
        return cached_template_set(self.config)

    async def _post(self, req: Request, t0: float, client: httpx.AsyncClient | None = None,
                    timeout: float | None = None) -> SendResult:
        """One request within ``timeout`` seconds (None: ``delivery.timeout``)."""
        try:
            from plait import tracing

            resp = await (client or self.client).request(req.method, req.url, content=req.body,
                                             headers=tracing.inject(dict(req.headers)),
                                             timeout=timeout or self.config.delivery.timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            return SendResult(False, None, error=f"{type(e).__name__}: {e}",
                              elapsed=time.monotonic() - t0)
        except httpx.TransportError as e:
            return SendResult(False, None, maybe_delivered=True, error=f"{type(e).__name__}: {e}",
                              elapsed=time.monotonic() - t0)
        return SendResult(is_success(resp.status_code), resp.status_code,
                          retry_after=parse_retry_after(resp.headers.get("Retry-After"), self.clock()),
                          elapsed=time.monotonic() - t0)

    async def _send_email(self, message: Message, rc, external_url: str, t0: float) -> SendResult:
        """SMTP in a worker thread; a refusal is a definite failure, a drop mid-DATA may have
        delivered."""
        from alerting.receivers import without_resolved
        from alerting.receivers.email import build_email, send

        if not rc.send_resolved:
            message = without_resolved(message)
            if not message.sections:
                return SendResult(True, 250)
        try:  # an alertmanager.yml's from / to may render to no address: nothing to send
            mail = build_email(message, rc, external_url, self._templates(rc))
        except ValueError as e:
            return SendResult(False, None, error=f"email: {e}", elapsed=time.monotonic() - t0)
        try:
            await asyncio.to_thread(send, mail, rc, self.config.delivery.timeout)
        except smtplib.SMTPServerDisconnected as e:
            return SendResult(False, None, maybe_delivered=True, error=f"SMTP: {e}",
                              elapsed=time.monotonic() - t0)
        except (OSError, smtplib.SMTPException) as e:
            return SendResult(False, None, error=f"{type(e).__name__}: {e}",
                              elapsed=time.monotonic() - t0)
        return SendResult(True, 250, elapsed=time.monotonic() - t0)

    async def aclose(self) -> None:
        """Close the HTTP client if this sender created it, and the TLS ones."""
        if self._own:
            await self.client.aclose()
        for client in self._tls_clients.values():
            await client.aclose()


def report(funnel: Funnel, message: Message, result: SendResult,
           now: float) -> list[LedgerEntry] | float | None:
    """Tell the funnel how the attempt went at ``now``: the ledger entries made final on success,
    else the next attempt's epoch seconds (None: already settled)."""
    if result.ok:
        return funnel.delivered(message.id, now)
    return funnel.delivery_failed(message.id, now, status=result.status,
                                  retry_after=result.retry_after,
                                  maybe_delivered=result.maybe_delivered)
