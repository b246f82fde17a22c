"""``GET /export/tasks`` a page at a time (cursor, limit, status, bizType,
createdFrom/createdTo; an unknown parameter is a 422 naming it) and the
task's ``downloads`` (count, last time, by whom), on the real app and a real
Redis (open mode)."""
from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime, timedelta, timezone

import redis.asyncio as aioredis

from plait.events import FileInfo, Lifecycle
from plait.projection import Projection

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def iso(dt: datetime) -> str:
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_tasks(client, specs: list[tuple[str, datetime, str, str]]) -> None:
    """(taskId, createdAt, status, bizType) into the app's projection."""
    sv = client.app.state.services

    async def go():
        r = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
        p = Projection(r, sv.settings.redis_prefix)
        for task_id, at, status, biz in specs:
            await p.apply(Lifecycle(taskId=task_id, status="CREATED", at=iso(at), sysCode="crm",
                                    userId="u1", bizType=biz, fileName="f", fileFormat="csv"))
            if status != "CREATED":
                await p.apply(Lifecycle(taskId=task_id, status="RUNNING", at=iso(at)))
                await p.apply(Lifecycle(taskId=task_id, status=status, at=iso(at),
                                        errorMessage=None if status == "SUCCESS" else "x"))
        await r.aclose()
    asyncio.run(go())


def pages(client, query: str) -> list[list[str]]:
    out, cursor = [], None
    while True:
        url = f"/export/tasks?sysCode=crm&{query}" + (f"&cursor={cursor}" if cursor else "")
        resp = client.get(url)
        assert resp.status_code == 200, resp.text
        data = resp.json()["data"]
        out.append([t["taskId"] for t in data["tasks"]])
        cursor = data["nextCursor"]
        if cursor is None:
            return out


def fixture_tasks() -> list[tuple[str, datetime, str, str]]:
    # 25 tasks; t05..t09 share one createdAt (ties across a page boundary)
    specs = []
    for i in range(25):
        at = T0 + timedelta(minutes=5 if 5 <= i <= 9 else i)
        specs.append((f"t{i:02d}", at, ["SUCCESS", "FAILED", "CREATED"][i % 3],
                      "orders" if i % 2 else "invoices"))
    return specs


def newest_first(specs) -> list[str]:
    return [s[0] for s in sorted(specs, key=lambda s: (s[1], s[0]), reverse=True)]


def test_pages_cover_every_task_once_newest_first(client):
    specs = fixture_tasks()
    make_tasks(client, specs)
    got = pages(client, "limit=4")
    assert [len(p) for p in got] == [4, 4, 4, 4, 4, 4, 1]
    assert sum(got, []) == newest_first(specs)


def test_filters_status_biz_type_and_time_range(client):
    specs = fixture_tasks()
    make_tasks(client, specs)
    frm, to = T0 + timedelta(minutes=5), T0 + timedelta(minutes=20)
    query = (f"limit=3&status=SUCCESS,FAILED&bizType=orders"
             f"&createdFrom={iso(frm).replace('+', '%2B')}&createdTo={iso(to)}")
    want = newest_first([s for s in specs if s[2] in ("SUCCESS", "FAILED")
                         and s[3] == "orders" and frm <= s[1] <= to])
    assert want and sum(pages(client, query), []) == want


def test_unknown_or_bad_parameters_are_422_naming_them(client):
    for query, field in [("stauts=SUCCESS", "stauts"), ("status=DONE", "status"),
                         ("createdFrom=yesterday", "createdFrom"),
                         ("createdTo=2026-01-01T00:00:00", "createdTo"),
                         ("cursor=!!", "cursor"), ("limit=0", "limit")]:
        resp = client.get(f"/export/tasks?sysCode=crm&{query}")
        assert resp.status_code == 422, (query, resp.text)
        fields = [e["field"] for e in resp.json()["data"]["errors"]]
        assert field in fields, (query, fields)


def test_a_narrow_filter_reads_a_bounded_slice_and_gives_a_cursor(client):
    sv = client.app.state.services
    specs = fixture_tasks()
    make_tasks(client, specs)

    async def go():
        r = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
        p = Projection(r, sv.settings.redis_prefix)
        seen, after = [], None
        while True:
            tasks, after = await p.page("crm", None, 100, after, scan_max=7,
                                        keep=lambda t: t["taskId"] in ("t00", "t24"))
            seen.append([t["taskId"] for t in tasks])
            if after is None:
                await r.aclose()
                return seen
    seen = asyncio.run(go())
    assert seen == [["t24"], [], [], ["t00"]]


def test_a_task_shows_its_downloads(client):
    sv = client.app.state.services
    make_tasks(client, [("tdl", T0, "CREATED", "orders")])
    body = b"id\n1\n"
    key = "results/tdl/f.csv"
    sv.store.put_bytes(key, body)

    async def succeed():
        r = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
        await Projection(r, sv.settings.redis_prefix).apply(Lifecycle(
            taskId="tdl", status="SUCCESS", at=iso(T0), file=FileInfo(
                key=key, fileName="f.csv", fileFormat="csv", bytes=len(body),
                sha256=hashlib.sha256(body).hexdigest(), rows=1)))
        await r.aclose()
    asyncio.run(succeed())
    task = client.get("/export/tasks/tdl").json()["data"]
    assert task["downloads"] == {"count": 0, "lastAt": None, "lastBy": None}
    for _ in range(2):
        url = client.get("/export/tasks/tdl").json()["data"]["file"]["url"]
        got = client.get(url[url.index("/download/"):], headers={"user-agent": "curl/8"})
        assert got.status_code == 200 and got.content == body
    task = client.get("/export/tasks/tdl").json()["data"]
    d = task["downloads"]
    assert d["count"] == 2 and d["lastAt"].endswith("Z") and d["lastBy"]["userAgent"] == "curl/8"
    assert d["lastBy"]["clientIp"]
    listed = client.get("/export/tasks?sysCode=crm").json()["data"]["tasks"]
    assert listed[0]["downloads"]["count"] == 2


def test_a_task_carries_its_spec_and_runs_again_without_reuse(client):
    """``GET /export/tasks/{id}`` answers the accepted request as ``spec``;
    posting it again reuses the recent result unless ``reuse=false``."""
    sv = client.app.state.services
    emitted = []

    async def emit(topic, key, payload):  # no broker in these tests: record the request
        emitted.append(payload)
    sv.emit = emit
    spec = {"sysCode": "crm", "bizType": "orders", "bizDesc": "June", "userId": "u1",
            "dataConfig": {"dataApiUrl": "http://data.example/export",
                           "queryConditions": {"month": 6}},
            "documentConfig": {"fileName": "june", "fileFormat": "csv"}}
    resp = client.post("/export/tasks", json=spec)
    assert resp.status_code == 202, resp.text
    first = resp.json()["data"]["taskId"]
    got = client.get(f"/export/tasks/{first}").json()["data"]["spec"]
    assert got == emitted[0].spec.model_dump(mode="json", exclude_none=True)
    assert {k: got[k] for k in ("sysCode", "bizType", "bizDesc", "userId")} == \
        {k: spec[k] for k in ("sysCode", "bizType", "bizDesc", "userId")}
    assert got["dataConfig"]["queryConditions"] == {"month": 6}

    async def succeed():
        r = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
        p = Projection(r, sv.settings.redis_prefix)
        await p.apply(Lifecycle(taskId=first, status="RUNNING"))
        await p.apply(Lifecycle(taskId=first, status="SUCCESS"))
        await r.aclose()
    asyncio.run(succeed())
    reused = client.post("/export/tasks", json=got)
    assert reused.status_code == 200 and reused.json()["data"]["reused"] is True
    assert reused.json()["data"]["taskId"] == first
    again = client.post("/export/tasks?reuse=false", json=got)
    assert again.status_code == 202, again.text
    second = again.json()["data"]["taskId"]
    assert second != first
    assert client.get(f"/export/tasks/{second}").json()["data"]["spec"] == got
