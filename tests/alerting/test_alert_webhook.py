"""alerting.webhook against a real HTTP server on 127.0.0.1 (http.server in a
thread): signature, idempotency key across retries, Retry-After, timeouts,
connection errors."""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from alert_harness import case_config, ev

from alerting.delivery import verify_signature
from alerting.funnel import Funnel
from alerting.webhook import WebhookSender, parse_retry_after, report


class Hook:
    """A local webhook: answers from a script, records every request."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.requests.append((dict(self.headers), body))
                status, headers = hook.script.pop(0) if hook.script else (200, {})
                if status == "hang":
                    hook.release.wait(5)  # until the test ends (client times out first)
                    status = 200
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _funnel_with_message(url, fmt="native", timeout=10):
    cfg = case_config(receiver={"url": url, "format": fmt}, delivery={"timeout": timeout})
    f = Funnel(cfg)
    f.ingest(ev("DiskFull", "h1", "critical"), 0)
    [msg] = [m for t in range(0, 31) for m in f.tick(float(t))]
    return cfg, f, msg


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_signed_request_with_idempotency_key_is_delivered():
    with Hook([(200, {})]) as hook:
        # given a funnel with one message due for a receiver with a secret
        cfg, f, msg = _funnel_with_message(hook.url)
        sender = WebhookSender(cfg, clock=lambda: 1_700_000_000.0)
        # when it is sent
        result = await sender.send(msg)
        await sender.aclose()
        # then the receiver got a verifiable HMAC signature and the idempotency key
        headers, body = hook.requests[0]
        assert result.ok and result.status == 200
        assert headers["Idempotency-Key"] == msg.idempotency_key
        assert verify_signature("s3cret", body, int(headers["X-Plait-Timestamp"]),
                                headers["X-Plait-Signature"], now=1_700_000_000.0)
        assert not verify_signature("wrong", body, int(headers["X-Plait-Timestamp"]),
                                    headers["X-Plait-Signature"], now=1_700_000_000.0)
        assert json.loads(body)["groups"][0]["alerts"][0]["asset"] == "h1"
        assert [e.outcome for e in report(f, msg, result, 30.0)] == ["delivered"]


async def test_retry_keeps_idempotency_key_and_honours_retry_after():
    with Hook([(429, {"Retry-After": "20"}), (200, {})]) as hook:
        # given a receiver that first answers 429 Retry-After: 20
        cfg, f, msg = _funnel_with_message(hook.url)
        sender = WebhookSender(cfg)
        # when the first attempt is reported and the funnel ticks on
        first = await sender.send(msg)
        next_at = report(f, msg, first, 30.0)
        assert (first.status, first.retry_after, next_at) == (429, 20.0, 50.0)
        assert f.tick(49.0) == []
        [again] = f.tick(50.0)
        second = await sender.send(again)
        await sender.aclose()
        # then both requests carried the same key and the second was delivered
        keys = [h["Idempotency-Key"] for h, _ in hook.requests]
        assert keys == [msg.idempotency_key] * 2 and second.ok
        assert hook.requests[0][1] == hook.requests[1][1] and again.attempt == 2


async def test_alertmanager_format_on_the_wire():
    with Hook([(200, {})]) as hook:
        # given a receiver configured for Alertmanager's webhook payload
        cfg, _f, msg = _funnel_with_message(hook.url, fmt="alertmanager")
        sender = WebhookSender(cfg)
        # when the message is sent
        await sender.send(msg)
        await sender.aclose()
        # then the body is Alertmanager's version 4 with zero-time endsAt
        body = json.loads(hook.requests[0][1])
        assert body["version"] == "4" and body["truncatedAlerts"] == 0
        assert body["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"


async def test_connection_refused_is_not_delivered():
    # given nothing listens on the receiver's port
    cfg, f, msg = _funnel_with_message(f"http://127.0.0.1:{_free_port()}/hook")
    sender = WebhookSender(cfg)
    # when the message is sent
    result = await sender.send(msg)
    await sender.aclose()
    # then no status, the request surely did not land, and backoff starts at 1 s
    assert (result.ok, result.status, result.maybe_delivered) == (False, None, False)
    assert report(f, msg, result, 30.0) == 31.0
    assert f.counters()["network_errors"] == 1


async def test_a_message_of_a_receiver_the_configuration_lost_settles():
    # given a worker whose file no longer has the message's receiver (its groups still held)
    cfg, f, msg = _funnel_with_message(f"http://127.0.0.1:{_free_port()}/hook")
    lost = cfg.model_copy(update={"receivers": [r.model_copy(update={"name": "other"})
                                                for r in cfg.receivers]})
    sender = WebhookSender(lost)
    # when the message is sent, then there is nothing to send to: it settles
    result = await sender.send(msg)
    await sender.aclose()
    assert (result.ok, result.status) == (True, 204)


async def test_timeout_marks_maybe_delivered():
    with Hook([("hang", {})]) as hook:
        # given a receiver that does not answer within the 0.2 s timeout
        cfg, f, msg = _funnel_with_message(hook.url, timeout=0.2)
        sender = WebhookSender(cfg)
        # when the message is sent
        result = await sender.send(msg)
        await sender.aclose()
        # then the attempt may have been processed: the same message will be retried
        assert result.status is None and result.maybe_delivered
        report(f, msg, result, 30.0)
        [again] = f.tick(31.0)
        assert again.id == msg.id and again.idempotency_key == msg.idempotency_key


async def test_a_receivers_timeout_bounds_its_attempt_within_the_delivery_timeout():
    """A receiver's ``timeout`` (Alertmanager's webhook ``timeout``) ends an
    attempt before ``delivery.timeout`` would; it never extends it."""
    import time

    for receiver_timeout, delivery_timeout in ((0.2, 10), (30, 0.2)):
        with Hook([("hang", {})]) as hook:
            cfg = case_config(receiver={"url": hook.url, "timeout": receiver_timeout},
                              delivery={"timeout": delivery_timeout})
            f = Funnel(cfg)
            f.ingest(ev("DiskFull", "h1", "critical"), 0)
            [msg] = [m for t in range(0, 31) for m in f.tick(float(t))]
            sender = WebhookSender(cfg)
            t0 = time.monotonic()
            result = await sender.send(msg)
            await sender.aclose()
            assert result.status is None and result.maybe_delivered
            assert time.monotonic() - t0 < 2, (receiver_timeout, delivery_timeout)


@pytest.mark.parametrize("value, expected", [
    ("20", 20.0), (None, None), ("", None), ("soon", None),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0),
])
def test_parse_retry_after(value, expected):
    # given "now" one minute before the HTTP-date example of RFC 9110
    now = 1445412480.0 - 60
    # then delay-seconds and HTTP-dates both give seconds from now
    assert parse_retry_after(value, now) == expected
