"""Request signing: plait.signature (canonical string), producers.signing
(PlaitAuth) and api.auth.verify_request against a real Redis nonce store:
unsigned, badly signed, stale, replayed and tampered requests are refused."""
from __future__ import annotations

import hashlib
import hmac
import json
import time

import httpx
import pytest
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from security_helpers import SECRET, make_caller, make_registry

from api.auth import AuthError, verify_request, verify_starlette_request
from plait import keys as K
from plait.signature import canonical_query, canonical_request, sign_request
from producers.signing import PlaitAuth, signed_headers

NOW = 1_750_000_000
BODY = json.dumps({"sysCode": "crm", "userId": "alice"}).encode()


def _signed(method="POST", path="/export/tasks", query="", body=BODY, ts=NOW, nonce=None,
            secret=SECRET, app_key="crm-app"):
    nonce = nonce or f"nonce-{time.perf_counter_ns():x}"
    return signed_headers(app_key, secret, method, path, query, body, timestamp=ts, nonce=nonce)


async def _verify(redis_prefix, headers, method="POST", path="/export/tasks", query="",
                  body=BODY, now=NOW, skew=300):
    client, prefix = redis_prefix
    return await verify_request(method, path, query, body, headers, make_registry(), client,
                                prefix, now, skew)


# -- the canonical string ---------------------------------------------------------

def test_canonical_request_has_the_documented_six_lines():
    # given a request, when canonicalized, then the lines are as documented
    text = canonical_request("post", "/export/tasks", "b=2&a=1&a=0", b"{}", 123, "n" * 16)
    assert text.split("\n") == ["POST", "/export/tasks", "a=0&a=1&b=2",
                                hashlib.sha256(b"{}").hexdigest(), "123", "n" * 16]


def test_signature_is_rfc2104_hmac_sha256_hex():
    canonical = canonical_request("GET", "/x", "", b"", 1, "n" * 16)
    expected = hmac.new(b"key", canonical.encode(), hashlib.sha256).hexdigest()
    assert sign_request("key", "GET", "/x", "", b"", 1, "n" * 16) == expected


@pytest.mark.parametrize("a,b", [
    ("a=1&b=2", "b=2&a=1"),
    ("q=hello%20world", "q=hello+world"),
    ("name=%E6%8A%A5", [("name", "报")]),
    ("x=%7e", "x=~"),
    (b"k=v", {"k": "v"}),
])
def test_equivalent_queries_canonicalize_alike(a, b):
    assert canonical_query(a) == canonical_query(b)


def test_different_queries_canonicalize_differently():
    assert canonical_query("a=1&b=2") != canonical_query("a=1&b=3")
    assert canonical_query("a=1&a=1") != canonical_query("a=1")
    assert canonical_query("a=&b") == "a=&b="


# -- verify_request ----------------------------------------------------------------

async def test_a_correctly_signed_request_is_accepted(redis_prefix):
    # given a request signed by crm-app, when verified, then the caller is crm
    caller = await _verify(redis_prefix, _signed())
    assert caller.sysCode == "crm"


async def test_headers_are_case_insensitive(redis_prefix):
    headers = {k.lower(): v for k, v in _signed().items()}
    assert (await _verify(redis_prefix, headers)).appKey == "crm-app"


@pytest.mark.parametrize("missing", ["X-Plait-AppKey", "X-Plait-Timestamp", "X-Plait-Nonce",
                                     "X-Plait-Signature"])
async def test_unsigned_requests_are_401(redis_prefix, missing):
    # given a request without one signing header
    headers = _signed()
    del headers[missing]
    # when verified, then 401 naming the header
    with pytest.raises(AuthError) as err:
        await _verify(redis_prefix, headers)
    assert err.value.status == 401 and missing in err.value.message


async def test_no_headers_at_all_is_401(redis_prefix):
    with pytest.raises(AuthError, match="must be signed"):
        await _verify(redis_prefix, {})


@pytest.mark.parametrize("tamper", [
    {"method": "PUT"}, {"path": "/export/tasks/other"}, {"query": "userId=mallory"},
    {"body": BODY.replace(b"alice", b"mallory")},
])
async def test_tampered_requests_are_401(redis_prefix, tamper):
    # given a request signed for one thing and sent as another
    headers = _signed()
    # when verified, then bad signature
    with pytest.raises(AuthError, match="bad signature") as err:
        await _verify(redis_prefix, headers, **tamper)
    assert err.value.status == 401


async def test_wrong_secret_is_401_and_the_message_leaks_nothing(redis_prefix):
    # given a request signed with a wrong secret
    headers = _signed(secret="not-the-secret-" + "x" * 30)
    # when verified, then 401 and neither secret nor either signature is echoed
    with pytest.raises(AuthError) as err:
        await _verify(redis_prefix, headers)
    expected = sign_request(SECRET, "POST", "/export/tasks", "", BODY, NOW,
                            headers["X-Plait-Nonce"])
    text = str(err.value)
    assert "bad signature" in text
    for secret in (SECRET, expected, headers["X-Plait-Signature"], "not-the-secret"):
        assert secret not in text


async def test_unknown_app_key_is_401(redis_prefix):
    with pytest.raises(AuthError, match="unknown appKey") as err:
        await _verify(redis_prefix, _signed(app_key="ghost-app"))
    assert "ghost-app" not in str(err.value)


@pytest.mark.parametrize("offset", [301, -301, 10_000])
async def test_stale_or_future_timestamps_are_401(redis_prefix, offset):
    # given a correctly signed request whose timestamp is outside the 300 s skew
    headers = _signed(ts=NOW + offset)
    # when verified at NOW, then 401
    with pytest.raises(AuthError, match="more than 300 s away"):
        await _verify(redis_prefix, headers)


@pytest.mark.parametrize("offset", [300, -300, 0])
async def test_timestamps_within_skew_pass(redis_prefix, offset):
    assert await _verify(redis_prefix, _signed(ts=NOW + offset))


@pytest.mark.parametrize("field,value,match", [
    ("X-Plait-Timestamp", "1750000000.5", "whole seconds"),
    ("X-Plait-Timestamp", "-1", "whole seconds"),
    ("X-Plait-Nonce", "short", "16-128"),
    ("X-Plait-Nonce", "bad nonce with spaces!", "16-128"),
])
async def test_malformed_timestamp_or_nonce_is_401(redis_prefix, field, value, match):
    headers = _signed()
    headers[field] = value
    with pytest.raises(AuthError, match=match):
        await _verify(redis_prefix, headers)


async def test_replayed_request_is_401_and_the_nonce_lives_twice_the_skew(redis_prefix):
    # given a signed request that was accepted once
    client, prefix = redis_prefix
    headers = _signed()
    await _verify(redis_prefix, headers)
    # when the very same request is sent again (even a minute later, still in skew)
    with pytest.raises(AuthError, match="replayed") as err:
        await _verify(redis_prefix, headers, now=NOW + 60)
    # then 401, and the nonce key sits under the deployment prefix with TTL 2 x skew
    assert err.value.status == 401
    ttl = await client.ttl(K.nonce(prefix, "crm-app", headers["X-Plait-Nonce"]))
    assert 590 <= ttl <= 600


async def test_a_badly_signed_request_does_not_burn_the_nonce(redis_prefix):
    # given a forged request carrying a nonce the real caller will use next
    client, prefix = redis_prefix
    good = _signed()
    forged = {**good, "X-Plait-Signature": "0" * 64}
    with pytest.raises(AuthError, match="bad signature"):
        await _verify(redis_prefix, forged)
    # when the real request arrives, then it is accepted
    assert await client.exists(K.nonce(prefix, "crm-app", good["X-Plait-Nonce"])) == 0
    assert await _verify(redis_prefix, good)


async def test_nonces_are_per_app_key(redis_prefix):
    # given two callers using the same nonce, when both verify, then both pass
    client, prefix = redis_prefix
    erp = make_caller(sysCode="erp", appKey="erp-app", appSecret="e" * 40)
    registry = make_registry(make_caller(), erp)
    nonce = "shared-nonce-0123456789"
    for key, secret in (("crm-app", SECRET), ("erp-app", "e" * 40)):
        headers = _signed(app_key=key, secret=secret, nonce=nonce)
        caller = await verify_request("POST", "/export/tasks", "", BODY, headers, registry,
                                      client, prefix, NOW)
        assert caller.appKey == key


async def test_redis_down_fails_closed_with_503():
    # given a Redis client pointing at a closed port
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    dead = aioredis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5,
                          retry=Retry(NoBackoff(), 0))
    # when a correctly signed request is verified, then 503 (not accepted)
    with pytest.raises(AuthError) as err:
        await verify_request("POST", "/export/tasks", "", BODY, _signed(), make_registry(),
                             dead, "plait-sectest-dead", NOW)
    assert err.value.status == 503
    await dead.aclose()


# -- PlaitAuth against a FastAPI app using verify_starlette_request ---------------------

def _app(redis_prefix, clock):
    client, prefix = redis_prefix
    registry = make_registry()
    app = FastAPI()

    @app.exception_handler(AuthError)
    async def _auth_error(request, exc: AuthError):
        return JSONResponse({"code": exc.status, "message": exc.message, "data": None},
                            status_code=exc.status)

    async def caller(request: Request):
        return await verify_starlette_request(request, registry, client, prefix, clock())

    @app.post("/export/tasks")
    async def create(body: dict, who=Depends(caller)):
        return {"sysCode": who.sysCode, "echo": body}

    @app.get("/export/tasks/{task_id}")
    async def get(task_id: str, userId: str, who=Depends(caller)):
        return {"sysCode": who.sysCode, "taskId": task_id, "userId": userId}

    return app


async def test_plait_auth_signs_what_the_api_verifies(redis_prefix):
    # given an app that verifies with api.auth and a client that signs with PlaitAuth
    app = _app(redis_prefix, time.time)
    auth = PlaitAuth("crm-app", SECRET)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://plait", auth=auth) as http:
        # when a JSON body, a query with unicode and an odd path are sent
        r1 = await http.post("/export/tasks", json={"fileName": "销售报表", "n": 1})
        r2 = await http.get("/export/tasks/t 1", params={"userId": "王 五", "z": "1&2"})
        r3 = await http.get("/export/tasks/t1", params={"userId": "alice"})
    # then every one is accepted and the body still reaches the handler
    assert r1.status_code == 200, r1.text
    assert r1.json()["echo"] == {"fileName": "销售报表", "n": 1}
    assert r2.status_code == 200, r2.text
    assert r2.json()["userId"] == "王 五" and r2.json()["taskId"] == "t 1"
    assert r3.status_code == 200 and r3.json()["sysCode"] == "crm"


async def test_unsigned_and_replayed_http_requests_get_401(redis_prefix):
    app = _app(redis_prefix, time.time)
    recorded = {}

    class Recorder(PlaitAuth):
        def auth_flow(self, request):
            flow = super().auth_flow(request)
            signed = next(flow)
            recorded.update(signed.headers)
            yield signed

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://plait") as http:
        # given no auth, when posting, then 401 in the envelope
        unsigned = await http.post("/export/tasks", json={})
        # given one signed request, when it is replayed byte for byte, then 401
        first = await http.post("/export/tasks", json={"a": 1},
                                auth=Recorder("crm-app", SECRET))
        replay_headers = {k: v for k, v in recorded.items() if k.lower().startswith("x-plait")}
        replay = await http.post("/export/tasks", json={"a": 1}, headers=replay_headers)
    assert unsigned.status_code == 401 and unsigned.json()["code"] == 401
    assert first.status_code == 200
    assert replay.status_code == 401 and "replayed" in replay.json()["message"]


def test_plait_auth_keeps_the_secret_out_of_repr():
    assert SECRET not in repr(PlaitAuth("crm-app", SECRET))


def test_plait_auth_uses_the_injected_clock():
    # given a client whose clock says NOW
    request = httpx.Request("POST", "http://plait/export/tasks?b=1&a=2", content=b"{}")
    signed = next(PlaitAuth("crm-app", SECRET, clock=lambda: NOW + 0.9).auth_flow(request))
    # then the timestamp is NOW and the signature covers the sorted query and body
    assert signed.headers["X-Plait-Timestamp"] == str(NOW)
    assert signed.headers["X-Plait-Signature"] == sign_request(
        SECRET, "POST", "/export/tasks", "a=2&b=1", b"{}", NOW, signed.headers["X-Plait-Nonce"])
