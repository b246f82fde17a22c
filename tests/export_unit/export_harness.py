"""Helpers of the export handler unit tests: a scripted data API (for
``httpx.MockTransport``), a hand-moved clock, spec/request factories, and
projecting a task RUNNING."""
from __future__ import annotations

import json
from typing import Any

import httpx
from plait.clock import utcnow_iso
from plait.events import ExportRequested, Lifecycle
from plait.spec import ExportSpec
from streams.context import Context

DATA_API = "http://data.test/rows"


class DataApi:
    """A scripted data API: ``pages[seq]`` -> (rows, finished); records requests."""

    def __init__(self) -> None:
        self.pages: dict[int, tuple[list[dict[str, Any]], bool]] = {}
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        seq = body["runtimeContext"].get("page", 0)
        rows, finished = self.pages[seq]
        data = {"status": "finish" if finished else "continue", "rows": rows,
                "runtimeContext": {"page": seq + 1}, "total": 1000}
        return httpx.Response(200, json={"code": 200, "data": data})


class Clock:
    """A clock tests move by hand (epoch seconds)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def spec(sys_code: str = "s", user: str = "u", timeout: float = 300, max_rows: int | None = None,
         fmt: str = "csv") -> ExportSpec:
    job: dict[str, Any] = {"timeout": timeout}
    if max_rows is not None:
        job["maxRows"] = max_rows
    return ExportSpec.model_validate({
        "sysCode": sys_code, "bizType": "b", "userId": user,
        "dataConfig": {"dataApiUrl": DATA_API, "pageSize": 100},
        "documentConfig": {"fileName": "out", "fileFormat": fmt},
        "jobConfig": job})


def request(task_id: str, s: ExportSpec | None = None) -> ExportRequested:
    s = s or spec()
    return ExportRequested(taskId=task_id, spec=s, fingerprint=s.fingerprint(),
                           requestedAt=utcnow_iso())


async def running(ctx: Context, task_id: str, s: ExportSpec | None = None,
                  worker: str = "w-other", created: str | None = None) -> None:
    """Project a task as CREATED then RUNNING (as the lifecycle agent would)."""
    s = s or spec()
    await ctx.projection.apply(Lifecycle(taskId=task_id, status="CREATED", sysCode=s.sysCode,
                                         bizType=s.bizType, userId=s.userId,
                                         timeout=s.jobConfig.timeout,
                                         at=created or utcnow_iso()))
    await ctx.projection.apply(Lifecycle(taskId=task_id, status="RUNNING", workerId=worker))
