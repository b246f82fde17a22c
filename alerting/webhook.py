"""The real webhook sender (httpx, async): one HTTP attempt per call.

The retry schedule is not here: the sender makes one attempt and returns a
:class:`SendResult`; :func:`report` hands it to the pure funnel, which
decides when the next attempt is due (:mod:`alerting.delivery`). Every
attempt has a bounded time (``delivery.timeout`` seconds), so a rebalance
never waits on a hung receiver (docs/kafka-rules.md #5).

Errors are classified for the idempotency rules:

- connect errors and pool timeouts: the request never left, not delivered;
- an HTTP answer: the receiver decided (2xx delivered, else not);
- read/write timeouts and broken connections after sending: the receiver may
  have acted, so ``maybe_delivered`` is True and the funnel retries the very
  same message (same idempotency key) instead of superseding it.
"""
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
    """What one attempt gave.

    Attributes:
        ok: 2xx answer.
        status: HTTP status, or None when no answer came.
        retry_after: the ``Retry-After`` header in seconds (None if absent/bad).
        maybe_delivered: the request may have been processed without an answer.
        error: exception text when no answer came.
        elapsed: seconds the attempt took.
    """

    ok: bool
    status: int | None
    retry_after: float | None = None
    maybe_delivered: bool = False
    error: str = ""
    elapsed: float = 0.0


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds from a ``Retry-After`` value: delay-seconds or an HTTP-date
    (RFC 9110, section 10.2.3) relative to ``now`` (epoch seconds); None
    when absent or unreadable; never negative."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²".isdigit(), float("²") raises
        # 309+ digits make inf, which a funnel command (orjson) carries as null
        return min(float(value), sys.float_info.max)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class WebhookSender:
    """Sends funnel messages to their receivers.

    Args:
        config: the alerting configuration (receivers, delivery timeout).
        client: an ``httpx.AsyncClient`` to reuse (tests); one is created
            otherwise and closed by :meth:`aclose`.
        clock: epoch-seconds clock for the signature timestamp.
    """

    def __init__(self, config: AlertingConfig, client: httpx.AsyncClient | None = None,
                 clock: Callable[[], float] = time.time, external_url: str = "") -> None:
        self.config = config
        #: console base URL for links / ``externalURL`` (else ``config.external_url``)
        self.external_url = external_url.rstrip("/")
        self.clock = clock
        self._own = client is None
        self.client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(config.delivery.timeout), follow_redirects=False,
            headers={"User-Agent": USER_AGENT})
        #: one client per distinct receiver TLS setting (``ReceiverConfig.tls``)
        self._tls_clients: dict[Any, httpx.AsyncClient] = {}

    def _client_for(self, rc: Any) -> httpx.AsyncClient:
        """The client for receiver ``rc``: the shared one, or one built for
        its TLS settings (CA file, client certificate, no verification),
        kept for later messages.

        Raises:
            OSError, ssl.SSLError: a certificate file cannot be read (the
                attempt fails and is retried).
        """
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
        """:meth:`_send` in a ``webhook.attempt`` span (the W3C ``traceparent``
        header goes with each request), its outcome and latency recorded per
        receiver in ``plait.metrics``. The span is a child of the message's
        ``traceparent`` (the decision of the alert that opened it; else of
        the current span) and links the message's ``links`` (alerts merged
        into it from other traces): docs/alerting.md, "Traces"."""
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
        """Deliver ``message`` to its receiver in the receiver's own format
        (:mod:`alerting.receivers`): webhook bodies with ``Idempotency-Key``
        and (when a secret is set) ``X-Plait-Timestamp`` /
        ``X-Plait-Signature`` headers; PagerDuty / Opsgenie one request per
        group (all must succeed; a retry resends all, which their
        de-duplication keys make harmless); email over SMTP.

        Never raises for network or HTTP problems; they are in the result.

        Raises:
            KeyError: the message names a receiver that is not configured.
        """
        rc = self.config.receiver(message.receiver)
        external_url = self.external_url or self.config.external_url
        t0 = time.monotonic()
        if rc.type == "email":
            return await self._send_email(message, rc, external_url, t0)
        requests = build_requests(message, rc, external_url, int(self.clock()),
                                  self._templates(rc))
        result = SendResult(True, 204)  # nothing to say (send_resolved: false): done
        for req in requests:  # several for PagerDuty / Opsgenie (one per group)
            result = await self._post(req, t0, self._client_for(rc))
            if not result.ok:
                return result
        return result

    def _templates(self, rc) -> object:
        """The Go templates of an ``alertmanager.yml`` receiver's file
        (loaded once per configuration); None for Plait's own receivers."""
        if not rc.alertmanager_fields:
            return None
        from alerting.amconfig import cached_template_set
        return cached_template_set(self.config)

    async def _post(self, req: Request, t0: float, client: httpx.AsyncClient | None = None
                    ) -> SendResult:
        try:
            from plait import tracing

            resp = await (client or self.client).request(req.method, req.url, content=req.body,
                                             headers=tracing.inject(dict(req.headers)),
                                             timeout=self.config.delivery.timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            return SendResult(False, None, error=f"{type(e).__name__}: {e}",
                              elapsed=time.monotonic() - t0)
        except httpx.TransportError as e:  # sent, no (whole) answer: the receiver may have acted
            return SendResult(False, None, maybe_delivered=True, error=f"{type(e).__name__}: {e}",
                              elapsed=time.monotonic() - t0)
        return SendResult(is_success(resp.status_code), resp.status_code,
                          retry_after=parse_retry_after(resp.headers.get("Retry-After"), self.clock()),
                          elapsed=time.monotonic() - t0)

    async def _send_email(self, message: Message, rc, external_url: str, t0: float) -> SendResult:
        """SMTP in a worker thread, bounded by ``delivery.timeout``; a
        refused recipient or message is a definite failure (status None,
        not maybe-delivered), a drop mid-DATA may have delivered."""
        from alerting.receivers import without_resolved
        from alerting.receivers.email import build_email, send

        if not rc.send_resolved:
            message = without_resolved(message)
            if not message.sections:
                return SendResult(True, 250)
        mail = build_email(message, rc, external_url, self._templates(rc))
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
    """Tell the funnel how the attempt went at ``now`` (seconds).

    Returns:
        the ledger entries made final on success; otherwise the epoch
        seconds of the next attempt (None if the message was already settled).
    """
    if result.ok:
        return funnel.delivered(message.id, now)
    return funnel.delivery_failed(message.id, now, status=result.status,
                                  retry_after=result.retry_after,
                                  maybe_delivered=result.maybe_delivered)
