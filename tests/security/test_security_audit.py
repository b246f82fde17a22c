"""plait.audit: the Audit event and redaction of secrets from events and logs."""
from __future__ import annotations

import json

import structlog
from security_helpers import SECRET

from plait.audit import Audit, redact, redact_processor
from plait.events import decode, encode


def test_redact_drops_secret_keys_at_any_depth_and_keeps_identifiers():
    # given a request record full of secrets
    record = {
        "appKey": "crm-app", "appSecret": SECRET, "userId": "alice", "nonce": "n" * 16,
        "headers": {"X-Plait-Signature": "ab" * 32, "Authorization": "Bearer x",
                    "x-plait-data-token": "v1.t.1.ff", "Cookie": "s=1", "Accept": "*/*"},
        "items": [{"password": "pw", "rows": 3}, {"access_token": "tk"}],
        "signing_secret": "x", "sig": "deadbeef", "rows": 10,
    }
    # when redacted
    clean = redact(record)
    # then every secret key is gone and the rest is kept
    assert clean == {"appKey": "crm-app", "userId": "alice", "nonce": "n" * 16,
                     "headers": {"Accept": "*/*"}, "items": [{"rows": 3}, {}], "rows": 10}
    assert record["appSecret"] == SECRET  # the input is not modified


def test_redact_scrubs_credentials_inside_urls():
    link = "http://api/download/t/x.csv?expires=1&name=x.csv&sig=abcdef0123"
    assert redact({"url": link})["url"] == (
        "http://api/download/t/x.csv?expires=1&name=x.csv&sig=%5Bredacted%5D")
    assert "pw" not in redact("https://user:pw@host.example/x")
    assert redact("https://host.example/x?token=abc&page=2") == (
        "https://host.example/x?token=%5Bredacted%5D&page=2")
    assert redact("not a url ?sig=1") == "not a url ?sig=1"


def test_audit_event_round_trips_and_never_carries_secrets():
    # given an audit event whose details were built carelessly from a request
    event = Audit(action="task.downloaded", sysCode="crm", appKey="crm-app", userId="alice",
                  taskId="t1", rows=336_776, bytes=12_345, clientIp="10.1.2.3",
                  fileName="报表.xlsx",
                  details={"appSecret": SECRET, "query": {"sig": "beef", "expires": 9},
                           "url": f"http://api/download/k?sig={SECRET}"})
    # when encoded as an event and decoded again
    raw = encode(event, subject="crm")
    _, back = decode(raw)
    # then it is the same Audit, and the secret appears nowhere in the bytes
    assert isinstance(back, Audit) and back.rows == 336_776 and back.fileName == "报表.xlsx"
    assert back.details["query"] == {"expires": 9}
    assert SECRET.encode() not in raw and b"beef" not in raw
    assert json.loads(raw)["type"] == "plait.audit.Audit.v1"


def test_refusals_are_auditable():
    event = Audit(action="auth.refused", outcome="refused", appKey="crm-app",
                  clientIp="203.0.113.9", reason="nonce already used: replayed request refused")
    assert event.sysCode is None and event.at.endswith("Z")


def test_structlog_processor_redacts_log_records(capsys):
    # given structlog configured with the redactor before the renderer
    structlog.configure(processors=[redact_processor, structlog.processors.JSONRenderer()],
                        logger_factory=structlog.PrintLoggerFactory())
    try:
        # when a careless log line carries a secret and a signed link
        structlog.get_logger().info("download", appSecret=SECRET, appKey="crm-app",
                                    link="http://api/d?sig=f00d&name=a")
    finally:
        structlog.reset_defaults()
    # then the output has neither
    out = capsys.readouterr().out
    assert SECRET not in out and "f00d" not in out and "crm-app" in out
