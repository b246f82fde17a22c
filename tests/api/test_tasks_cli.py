"""``plait tasks list|show|cancel|download`` as a user runs it (a subprocess)
against the real API served by uvicorn on a real Redis (open mode)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta

import pytest
import redis
import redis.asyncio as aioredis

from api.app import create_api
from ops.infra import free_port
from plait import keys as K
from plait.events import FileInfo, Lifecycle
from plait.projection import Projection
from plait.settings import Settings
from test_docs_offline import serving
from test_task_list import T0, iso

REDIS_URL = "redis://127.0.0.1:6379/0"
BODY = b"id\n1\n2\n"


@pytest.fixture
def api(tmp_path):
    """(API URL, its app) with 12 tasks of crm: t00..t10 CREATED, tok SUCCESS with a file."""
    port = free_port()
    prefix = f"plait-taskscli-{uuid.uuid4().hex[:10]}"
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, broker_url="127.0.0.1:1",
                        storage_url=f"file://{tmp_path}/store", api_url=f"http://127.0.0.1:{port}")
    app = create_api(settings)
    app.state.services.store.put_bytes("results/tok/f.csv", BODY)

    async def fill():
        r = aioredis.Redis.from_url(REDIS_URL)
        p = Projection(r, prefix)
        for i in range(11):
            await p.apply(Lifecycle(taskId=f"t{i:02d}", status="CREATED", sysCode="crm",
                                    userId="u1", bizType="orders", fileName="f", fileFormat="csv",
                                    at=iso(T0 + timedelta(minutes=i))))
        await p.apply(Lifecycle(taskId="tok", status="CREATED", sysCode="crm", userId="u1",
                                bizType="invoices", fileName="f", fileFormat="csv",
                                at=iso(T0 + timedelta(hours=1))))
        await p.apply(Lifecycle(taskId="tok", status="SUCCESS", at=iso(T0), file=FileInfo(
            key="results/tok/f.csv", fileName="f.csv", fileFormat="csv", bytes=len(BODY),
            sha256=hashlib.sha256(BODY).hexdigest(), rows=2)))
        await r.aclose()
    asyncio.run(fill())
    with serving(app, port) as url:
        yield url
    r = redis.Redis.from_url(REDIS_URL)
    for key in r.scan_iter(match=K.everything(prefix), count=1000):
        r.delete(key)


def tasks(api: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return subprocess.run([sys.executable, "-m", "ops.cli", "tasks", *args, "--api", api],
                          env={**env, "PLAIT_SYS_CODE": "crm"}, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_list_pages_and_filters(api):
    first = tasks(api, "list", "--limit", "5")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert [line.split()[0] for line in lines[:5]] == ["tok", "t10", "t09", "t08", "t07"]
    assert lines[0].split()[1] == "SUCCESS" and "downloads=0" in lines[0]
    cursor = lines[-1].rsplit(" ", 1)[1]
    assert lines[-1].startswith("# more: plait tasks list")
    second = json.loads(tasks(api, "list", "--limit", "5", "--cursor", cursor, "--json").stdout)
    assert [t["taskId"] for t in second["tasks"]] == ["t06", "t05", "t04", "t03", "t02"]
    only = json.loads(tasks(api, "list", "--status", "SUCCESS", "--biz-type", "invoices",
                            "--json").stdout)
    assert [t["taskId"] for t in only["tasks"]] == ["tok"] and only["nextCursor"] is None
    bad = tasks(api, "list", "--status", "DONE")
    assert bad.returncode == 1 and "status: unknown status DONE" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_show_download_and_cancel(api, tmp_path):
    out = tmp_path / "got.csv"
    done = tasks(api, "download", "tok", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == BODY and "sha256 ok" in done.stdout
    shown = json.loads(tasks(api, "show", "tok").stdout)
    assert shown["downloads"]["count"] == 1 and shown["downloads"]["lastAt"]
    refused = tasks(api, "cancel", "tok")
    assert refused.returncode == 1 and "HTTP 409" in refused.stderr
    not_yet = tasks(api, "download", "t00")
    assert not_yet.returncode == 1 and "is CREATED: no file" in not_yet.stderr
    missing = tasks(api, "show", "nope")
    assert missing.returncode == 1 and "HTTP 404" in missing.stderr
