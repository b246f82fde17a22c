"""Completion webhooks: signed, retried with backoff, one idempotency key per
task and status, refused outside the caller's allowed prefixes."""
from __future__ import annotations

import json

import httpx
import pytest

from alerting.delivery import verify_signature
from plait.callers import Caller, NotAllowed, check_spec
from plait.spec import ExportSpec
from streams.notify import body_of, deliver

SPEC = {"sysCode": "crm", "bizType": "orders", "userId": "u1",
        "dataConfig": {"dataApiUrl": "https://data.crm.example.com/export/rows"}}


async def test_deliver_retries_with_the_same_key_and_a_valid_signature():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503 if len(seen) < 3 else 200)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        body = body_of({"taskId": "t1", "status": "SUCCESS", "finishedAt": "2026-01-01T00:00:00Z",
                        "file": {"fileName": "a.csv", "rows": 3, "bytes": 9, "key": "k"}},
                       "https://plait/download/x")
        status = await deliver(client, "https://hooks.example/done", body, "t1:SUCCESS",
                               "s3cret", wait_max=0.01)
    assert status == 200 and len(seen) == 3
    assert {r.headers["Idempotency-Key"] for r in seen} == {"t1:SUCCESS"}
    last = seen[-1]
    assert verify_signature("s3cret", last.content, int(last.headers["X-Plait-Timestamp"]),
                            last.headers["X-Plait-Signature"], now=float(last.headers["X-Plait-Timestamp"]))
    doc = json.loads(last.content)
    assert doc["status"] == "SUCCESS" and doc["file"]["url"] == "https://plait/download/x"
    assert "key" not in doc["file"]


async def test_a_4xx_is_final_and_not_retried():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(400)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        assert await deliver(client, "https://h/", b"{}", "t:FAILED", "s", wait_max=0.01) == 400
    assert len(seen) == 1


@pytest.mark.parametrize("status", [408, 425, 429, 502])
async def test_the_alert_webhooks_retryable_answers_are_retried(status):
    answers = [status, 204]

    async with httpx.AsyncClient(transport=httpx.MockTransport(
            lambda request: httpx.Response(answers.pop(0)))) as client:
        assert await deliver(client, "https://h/", b"{}", "t:FAILED", "s", wait_max=0.01) == 204
    assert answers == []


def test_notify_url_must_be_under_the_callers_prefixes():
    caller = Caller(sysCode="crm", appKey="crm-app", appSecret="x" * 32, bizTypes={"orders"},
                    dataApiPrefixes=("https://data.crm.example.com/export/",),
                    notifyUrlPrefixes=("https://hooks.crm.example.com/plait/",),
                    fileFormats={"xlsx"}, maxRows=1000)
    ok = ExportSpec.model_validate({**SPEC, "jobConfig": {
        "notifyUrl": "https://hooks.crm.example.com/plait/weekly"}})
    check_spec(caller, ok)
    bad = ExportSpec.model_validate({**SPEC, "jobConfig": {"notifyUrl": "https://evil.example/"}})
    with pytest.raises(NotAllowed) as err:
        check_spec(caller, bad)
    assert err.value.field == "jobConfig.notifyUrl"


def test_notify_url_is_not_in_the_fingerprint_and_must_be_http():
    a = ExportSpec.model_validate(SPEC)
    b = ExportSpec.model_validate({**SPEC, "jobConfig": {"notifyUrl": "https://h.example/x"}})
    assert a.fingerprint() == b.fingerprint()
    with pytest.raises(ValueError, match="notifyUrl"):
        ExportSpec.model_validate({**SPEC, "jobConfig": {"notifyUrl": "ftp://h/x"}})
