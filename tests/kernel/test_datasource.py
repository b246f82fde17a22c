"""Classifying data-API answers: retryable, permanent, contract breaks."""
from __future__ import annotations

import json

import httpx
import pytest

from plait.errors import PermanentError, RetryableError
from streams.datasource import parse_answer, retry_after_seconds


def answer(status: int = 200, body=None, headers=None):
    raw = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
    return parse_answer(4, status, httpx.Headers(headers or {}), raw)


def test_good_page():
    page = answer(body={"code": 200, "data": {"status": "continue", "rows": [{"a": 1}],
                                              "runtimeContext": {"lastId": 1}, "total": 10}})
    assert page.rows == [{"a": 1}] and page.next_context == {"lastId": 1}
    assert not page.finished and page.total == 10


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_429_and_5xx_are_retryable(status):
    with pytest.raises(RetryableError, match=f"page 4: data API answered HTTP {status}"):
        answer(status, headers={"Retry-After": "7"})


def test_retry_after_is_honoured_and_capped():
    with pytest.raises(RetryableError) as info:
        answer(429, headers={"Retry-After": "7"})
    assert info.value.retry_after == 7
    assert retry_after_seconds("100000") == 60
    assert retry_after_seconds(None) is None


@pytest.mark.parametrize("status, body, words", [
    (400, {"message": "bad query"}, "page 4: data API answered HTTP 400"),
    (302, {}, "HTTP 302"),
    (200, b"<html>", "not a JSON object"),
    (200, {"code": 500, "message": "db down"}, "code 500: db down"),
    (200, {"code": 200, "data": {"status": "maybe"}}, "data.status"),
    (200, {"code": 200, "data": {"status": "finish", "rows": [1, 2]}}, "data.rows"),
    (200, {"hello": "world"}, "has no 'code'"),
])
def test_permanent_failures_name_the_page_and_cause(status, body, words):
    with pytest.raises(PermanentError, match=words):
        answer(status, body)


async def test_a_cursor_that_never_moves_fails_instead_of_looping():
    from plait.spec import ExportSpec
    from streams.datasource import fetch_page

    def handler(request):
        return httpx.Response(200, json={"code": 200, "data": {
            "status": "continue", "rows": [], "runtimeContext": {"pageSize": 10, "lastId": 5}}})

    spec = ExportSpec.model_validate({"sysCode": "s", "bizType": "b", "userId": "u",
                                      "dataConfig": {"dataApiUrl": "http://api.test/d",
                                                     "pageSize": 10}})
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(PermanentError, match="never finish"):
            await fetch_page(client, spec, {"pageSize": 10, "lastId": 5}, 3, 1, 0)


def test_next_cursor_reads_the_envelope_apart_from_the_rows():
    """``Answer.next_cursor``: the next page's cursor before the page is
    decoded, only for ``continue`` with a new cursor, and the page decoded
    afterwards is the same (its envelope reused)."""
    from streams.datasource import Answer

    def body(status, ctx):
        return json.dumps({"code": 200, "data": {"status": status, "runtimeContext": ctx,
                                                "rows": [{"id": 1}]}},
                          separators=(",", ":")).encode()
    a = Answer(0, {"lastId": None}, {"pageSize": 2, "lastId": None}, body("continue", {"lastId": 1}))
    assert a.next_cursor() == {"lastId": 1}
    page = a.page()
    assert (page.next_context, page.rows, page.finished) == ({"lastId": 1}, [{"id": 1}], False)
    assert Answer(0, {}, {}, body("finish", {"lastId": 1})).next_cursor() is None
    assert Answer(0, {"lastId": 1}, {}, body("continue", {"lastId": 1})).next_cursor() is None
    assert Answer(0, {}, {}, b'{"code":500,"data":{"status":"continue","rows":[]}}').next_cursor() is None
    assert Answer(0, {}, {}, b'{"code":200,\n"data":{"rows":[]}}').next_cursor() is None


async def test_a_cursor_number_a_double_cannot_spell_is_sent_back_as_its_double():
    """The exact decode keeps ``1E2`` or ``0.10000000000000001`` a Decimal
    (F11); in a runtime context that could not be written back (the next
    request, the checkpoint, the FetchPage event: "Decimal is not JSON
    serializable", the task failed as an internal error). The cursor goes back
    as the doubles those literals denote, from the envelope and the decoded
    page alike."""
    from plait.spec import ExportSpec
    from streams.datasource import Answer, fetch_page, parse_body

    body = (b'{"code":200,"data":{"status":"continue",'
            b'"runtimeContext":{"page":1,"x":1E2,"y":[0.10000000000000001],"z":{"w":2.50}},'
            b'"rows":[{"id":1}]}}')
    want = {"page": 1, "x": 100.0, "y": [0.1], "z": {"w": 2.5}}
    assert parse_body(0, body).next_context == want
    assert Answer(0, {"page": 0}, {"page": 0}, body).next_cursor() == want
    sent = []

    def handler(request):
        sent.append(json.loads(request.content)["runtimeContext"])
        return httpx.Response(200, content=body.replace(b'"continue"', b'"finish"'))

    spec = ExportSpec.model_validate({"sysCode": "s", "bizType": "b", "userId": "u",
                                      "dataConfig": {"dataApiUrl": "http://api.test/d",
                                                     "pageSize": 10}})
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        page = await fetch_page(client, spec, want, 1, 1, 0)
    assert sent == [{"pageSize": 10} | want] and page.finished


@pytest.mark.parametrize("number", [b"1E400", b"-1E400", b"NaN"])
def test_a_cursor_number_no_json_can_hold_fails_the_page_naming_the_field(number):
    """``1E400`` (beyond a double) or ``NaN`` in the runtime context could not
    be sent back as JSON (the next request failed to build: an internal error): the page fails naming
    ``data.runtimeContext``; the envelope gives no next cursor. The last
    page's cursor is never sent back: that page is kept, without it."""
    from streams.datasource import Answer, parse_body

    body = (b'{"code":200,"data":{"status":"continue","runtimeContext":{"page":1,"x":'
            + number + b'},"rows":[{"id":1}]}}')
    with pytest.raises(PermanentError, match=r"page 0: data\.runtimeContext must hold only "
                                             r"finite numbers"):
        parse_body(0, body)
    assert Answer(0, {"page": 0}, {"page": 0}, body).next_cursor() is None
    last = parse_body(0, body.replace(b'"continue"', b'"finish"'))  # never sent back: kept
    assert last.finished and last.rows == [{"id": 1}] and last.next_context == {}
