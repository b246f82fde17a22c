"""Issue 15 item 3: one export is one trace. The export agents run on the real
agent runtime (``plait.agent`` + ``streams.runtime``) over a fake Faust app
that carries Kafka record headers between topics, with the in-memory worker
context; spans are read back from the SDK's in-memory exporter."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from export_harness import spec as make_spec
from plait import topics as T
from plait import tracing
from plait.clock import new_task_id, utcnow_iso
from plait.events import ExportRequested, Lifecycle, encode
from streams.app import routes
from streams.runtime import Runtime

EXPORTER = InMemorySpanExporter()
tracing.use_exporter(EXPORTER)


@dataclass
class Msg:
    topic: str
    partition: int
    offset: int
    headers: list


@dataclass
class Event:
    key: bytes
    value: bytes
    message: Msg


class Topic:
    def __init__(self, name: str, app: "App") -> None:
        self.name, self.app = name, app

    async def send(self, key: bytes, value: bytes, partition: int | None = None,
                   headers: dict | None = None):
        self.app.headers.append((headers or {}).get(tracing.TRACEPARENT, b"").decode())
        self.app.sent.append(Event(key, value, Msg(self.name, 0, 0, [])))
        self.app.queue.append(Event(key, value, Msg(self.name, 0, len(self.app.queue),
                                                    list((headers or {}).items()))))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


class App:
    """Just what ``AgentRuntime`` calls on a Faust app; sent records queue up."""

    def __init__(self) -> None:
        self.queue: list[Event] = []
        self.headers: list[str] = []
        self.sent: list[Event] = []

    def topic(self, name: str, **kw) -> Topic:
        return Topic(name, self)

    def agent(self, topic, name: str, concurrency: int):
        return lambda fn: fn


async def run_export(make_ctx):
    """One 3-page export through the agents; returns (final state, stages the
    projection saw in order, the app, traceparent headers the data API got)."""
    EXPORTER.clear()
    seen_headers: list[str] = []

    def data_api(request: httpx.Request) -> httpx.Response:
        seen_headers.append(request.headers.get("traceparent", ""))
        page = json.loads(request.content)["runtimeContext"].get("page", 0)
        rows = [{"id": page * 10 + i, "name": f"r{i}"} for i in range(10)]
        data = {"status": "finish" if page == 2 else "continue", "rows": rows,
                "runtimeContext": {"page": page + 1}, "total": 30}
        return httpx.Response(200, json={"code": 200, "data": data})

    ctx = make_ctx()
    ctx.http = httpx.AsyncClient(transport=httpx.MockTransport(data_api))
    app = App()
    rt = Runtime(app, ctx, routes(ctx.settings))
    agents = {ctx.topics.name(r.topic): rt.agent(r) for r in routes(ctx.settings)}

    stages: list[str] = []
    apply = ctx.projection.apply

    async def recording_apply(event):
        new = await apply(event)
        if new is not None and new.get("stage") and (not stages or stages[-1] != new["stage"]):
            stages.append(new["stage"])
        return new

    ctx.projection.apply = recording_apply
    task_id, spec = new_task_id(), make_spec()
    with tracing.span("export.request", **{"plait.task_id": task_id}):  # what the API does
        tp = tracing.current_traceparent()
        await ctx.projection.apply(Lifecycle(taskId=task_id, status="CREATED", at=utcnow_iso(),
                                             sysCode=spec.sysCode, userId=spec.userId,
                                             bizType=spec.bizType))
        req = ExportRequested(taskId=task_id, spec=spec, fingerprint=spec.fingerprint(),
                              requestedAt=utcnow_iso())
        await app.topic(ctx.topics.name(T.REQUESTS)).send(
            task_id.encode(), encode(req, task_id, "api", tp),
            headers={tracing.TRACEPARENT: tp.encode()})

    for _ in range(500):  # pump records to their agents until the task ends
        if app.queue:
            ev = app.queue.pop(0)
            await rt.rt.process(agents[ev.message.topic], ev)
        else:
            await asyncio.sleep(0.01)
        state = await ctx.projection.get(task_id)
        if state and state["status"] in ("SUCCESS", "FAILED") and not rt.hooks._jobs:
            break
    await ctx.http.aclose()
    assert state["status"] == "SUCCESS", state
    return state, stages, app, seen_headers


async def test_progress_goes_through_fetching_writing_uploading(make_ctx):
    """The page's bar must not sit at 100% while the file is written: the
    projection (and so its SSE channel) sees each stage in order, and the
    stage reports are on export.lifecycle too (a rebuild reads the same)."""
    state, stages, app, _ = await run_export(make_ctx)
    assert stages == ["fetching", "writing", "uploading"]
    from plait.events import decode

    sent = [decode(ev.value)[1] for ev in app.sent if ev.message.topic.endswith(T.LIFECYCLE)]
    assert [e.stage for e in sent if e.status == "PROGRESS" and e.stage != "fetching"] == \
        ["writing", "uploading"]


async def test_one_export_is_one_trace_covering_every_stage(make_ctx):
    state, _stages, app, seen_headers = await run_export(make_ctx)
    spans = EXPORTER.get_finished_spans()
    mine = [s for s in spans if s.context.trace_id == spans[0].context.trace_id]
    root = next(s for s in spans if s.name == "export.request")
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}, \
        "every span of the export is in the request's trace"
    names = [s.name for s in mine]
    for stage in ("export.request", "export.admission", "export.fetch_page", "data_api.request",
                  "export.write_shard", "export.finalize", "export.write_file", "export.upload"):
        assert stage in names, f"no {stage} span in {sorted(set(names))}"
    assert names.count("export.fetch_page") == 3 and names.count("export.write_shard") == 3
    # every span but the root has a parent inside the trace: the hops chain
    ids = {s.context.span_id for s in mine}
    assert all(s.parent is not None and s.parent.span_id in ids for s in mine if s is not root)
    # the data API got the trace in its W3C traceparent header
    trace_hex = f"{root.context.trace_id:032x}"
    assert seen_headers and all(h.split("-")[1] == trace_hex for h in seen_headers), seen_headers
    # every Kafka record sent carried it in its traceparent header
    assert app.headers and all(h.split("-")[1] == trace_hex for h in app.headers), app.headers
    assert state.get("stage") is None  # the stage is dropped once the task ended



def _recorder(ctx):
    """``ctx.report`` as the runtime sets it, recording (status, stage, seq)
    of what is sent, in order."""
    sent: list[tuple] = []

    async def report(emits):
        for e in emits:
            await ctx.projection.apply(e.payload)
            sent.append((e.payload.status, e.payload.stage, e.payload.seq))
    ctx.report = report
    return sent


async def _pages(ctx, task: str, n: int, last: bool):
    from plait.events import PageBatch
    from streams.shards import write_shard

    emits = []
    for seq in range(n):
        rows = [{"id": seq * 10 + i, "name": f"r{i}"} for i in range(10)]
        emits = await write_shard(ctx, PageBatch(
            taskId=task, seq=seq, rows=rows, rowCount=10, rowsBefore=seq * 10,
            isLast=last and seq == n - 1, spec=make_spec()))
    return emits


async def test_the_last_page_reports_writing_then_uploading_then_succeeds(make_ctx):
    """Write while fetching: the last page's own PROGRESS says writing and is
    sent before the tail is written; uploading before the upload; both before
    SUCCESS, in the spans export.finalize > export.write_file, export.upload."""
    from export_harness import running

    EXPORTER.clear()
    ctx = make_ctx()
    await running(ctx, "t1")
    sent = _recorder(ctx)
    with tracing.span("export.write_shard"):
        emits = await _pages(ctx, "t1", 3, last=True)
    assert sent == [("PROGRESS", "writing", 2), ("PROGRESS", "uploading", None)]
    assert [e.payload.status for e in emits] == ["SUCCESS"]  # the PROGRESS went out already
    spans = {s.name: s for s in EXPORTER.get_finished_spans()}
    assert spans["export.write_file"].attributes["plait.grown"] is True
    for name in ("export.write_file", "export.upload"):
        assert spans[name].parent.span_id == spans["export.finalize"].context.span_id, name
    assert (await ctx.projection.get("t1"))["stage"] == "uploading"


async def test_a_redrive_reports_writing_then_uploading_around_building_from_shards(make_ctx):
    """The sweeper's re-drive (FinalizeRequested on a worker without the grown
    file) reports the same stages, and building from shards is traced."""
    from export_harness import running
    from plait.events import FinalizeRequested
    from streams.finalize import finalize

    EXPORTER.clear()
    ctx = make_ctx()
    await running(ctx, "t1")
    await _pages(ctx, "t1", 3, last=False)
    ctx.files.clear()  # another worker: the grown file is not here
    sent = _recorder(ctx)
    emits = await finalize(ctx, FinalizeRequested(taskId="t1", lastSeq=2, spec=make_spec()))
    assert [s[:2] for s in sent] == [("PROGRESS", "writing"), ("PROGRESS", "uploading")]
    assert [e.payload.status for e in emits] == ["SUCCESS"]
    assert emits[0].payload.file.rows == 30
    spans = {s.name: s for s in EXPORTER.get_finished_spans()}
    assert spans["export.write_file"].attributes["plait.grown"] is False
    assert "export.upload" in spans
