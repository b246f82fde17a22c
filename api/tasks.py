"""Export task routes: create, read, list, cancel, progress events.

With a caller registry, every call is signed, and ``userId`` (a query
parameter, or the spec's on create) names the end user: a caller sees only
its own sysCode's tasks, a user only their own; anything else is a 404, as
for an unknown task.
"""
from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Annotated, AsyncIterator, Callable

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from prometheus_client import Counter
from pydantic import AwareDatetime

from api.envelope import envelope, refuse_unknown_query
from api.openapi import Envelope, errors, link, ok, required_query
from api.services import Services, get_services
from plait import keys as K
from plait import topics as T
from plait import documents, quotas, tracing
from plait.callers import NotAllowed, check_spec
from plait.errors import Conflict, FieldError, NotFound, Unavailable
from plait.clock import new_task_id, utcnow_iso
from plait.events import CancelRequested, ExportRequested, Lifecycle
from plait.lifecycle import ACTIVE, TERMINAL, created
from plait.projection import Projection
from plait.spec import ExportSpec

TASKS_CREATED = Counter("plait_api_tasks_created_total", "Export tasks accepted", ["sysCode"])


def sse(state: dict) -> str:
    """One Server-Sent Event (WHATWG HTML, "Server-sent events") for a task state."""
    return f"event: {state['status']}\ndata: {json.dumps(state, separators=(',', ':'))}\n\n"


async def sse_stream(projection: Projection, task_id: str,
                     stopping: Callable[[], bool]) -> AsyncIterator[str]:
    """The task's current state, then each published change, until terminal
    (a comment line every 4 s keeps proxies from closing the stream), or
    until ``stopping()`` (the server shuts down): then it ends at the next
    change or comment, and the client reconnects (WHATWG HTML, "Server-sent
    events") to another replica, which starts with the state then."""
    pubsub = projection.redis.pubsub()
    await pubsub.subscribe(projection.channel(task_id))
    try:
        state = await projection.get(task_id)  # read after subscribing: no gap
        yield sse(state)
        while state["status"] not in TERMINAL and not stopping():
            msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=4)
            if msg is None:
                yield ": keep-alive\n\n"
                continue
            state = json.loads(msg["data"])
            yield sse(state)
    finally:
        await pubsub.aclose()


SYS_CODE_DOC = ("the caller's sysCode: required without a caller registry; with one, the "
                "signed caller's is used")
USER_ID_DOC = ("the end user acted for: required with a caller registry (another user's or "
               "no user's task is a 404); without one, narrows a list to that user")
UserId = Annotated[str | None, Query(description=USER_ID_DOC)]


#: One Server-Sent Event of ``/events`` (the schema of each event, as
#: OpenAPI 3.2's ``itemSchema`` says; keep-alive comments are not events).
SSE_EVENT = {"type": "object", "required": ["event", "data"], "properties": {
    "event": {"type": "string", "description": "the task's status (CREATED, RUNNING, ...)"},
    "data": {"type": "string", "contentMediaType": "application/json",
             "description": "the task's state, as GET /export/tasks/{taskId} answers it"}}}


REUSE_DOC = ("false: run the export again even when an identical one succeeded within "
             "the reuse window (an identical running task is still answered instead)")
CURSOR_DOC = "data.nextCursor of the page before (opaque); absent: the newest tasks"
STATUSES = (*sorted(ACTIVE), *sorted(TERMINAL))
STATUS_DOC = f"only tasks in these statuses, comma-separated ({', '.join(STATUSES)})"


def parse_statuses(text: str | None) -> set[str] | None:
    """``status=SUCCESS,FAILED`` -> the set; None when not given.
    Raises FieldError ``status`` naming an unknown status."""
    if text is None:
        return None
    wanted = {p.strip() for p in text.split(",") if p.strip()}
    unknown = sorted(wanted - set(STATUSES))
    if unknown or not wanted:
        raise FieldError("status", f"unknown status {', '.join(unknown) or '(empty)'}",
                         ", ".join(STATUSES), "enum")
    return wanted


def encode_cursor(pos: tuple[int, str] | None) -> str | None:
    """A page position ``(createdAt ms, taskId)`` as an opaque cursor."""
    if pos is None:
        return None
    return base64.urlsafe_b64encode(f"{pos[0]}:{pos[1]}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[int, str] | None:
    """Inverse of :func:`encode_cursor`; FieldError ``cursor`` when not one."""
    if cursor is None:
        return None
    try:
        ms, task_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(
            ":", 1)
        return int(ms), task_id
    except (ValueError, UnicodeDecodeError):
        raise FieldError("cursor", "is not a cursor this API gave",
                         "data.nextCursor of the page before", "invalid") from None


def epoch_ms(at: datetime | None) -> int | None:
    """An aware datetime as epoch milliseconds (None stays None)."""
    return None if at is None else int(at.timestamp() * 1000)


def not_found(task_id: str) -> NotFound:
    """The one error for unknown and invisible tasks alike (404)."""
    return NotFound(f"task {task_id} not found")


TASK_LINKS = {"links": {
    "GetTask": link("getTask", "/data/taskId", "taskId", "the task's state"),
    "TaskEvents": link("taskEvents", "/data/taskId", "taskId", "the task's progress events"),
    "CancelTask": link("cancelTask", "/data/taskId", "taskId", "cancel the task")}}
TASK_ERRORS = errors(401, 404, 503)
SV = Annotated[Services, Depends(get_services)]


async def create_task(spec: ExportSpec, request: Request, sv: SV,
                      reuse: bool = Query(True, description=REUSE_DOC)):
    """Accept an export (the written contract's request, see ``plait.spec``).

    Answers at once with the contract's body ``{"code": 200, "message":
    "accepted", "data": {"taskId", "status": "CREATED", "reused": false,
    "deduplicated": false}}`` and HTTP status 202 (accepted, not done);
    or, for an identical running task / a recent identical result, that
    task with ``code`` 200 and HTTP 200. An invalid spec is a 422 naming
    the field; a caller over its daily row quota a 429 naming the quota,
    what is used and when it resets (``plait.quotas``). ``reuse=false``
    runs it again even when an identical export succeeded recently."""
    with tracing.span("export.request", **{"http.route": "/export/tasks",
                                            "plait.sys_code": spec.sysCode}) as sp:
        return await accept(sv, spec, request, sp, reuse)


async def accept(sv: Services, spec: ExportSpec, request: Request, sp, reuse: bool = True):
    """:func:`create_task` inside its span ``sp``."""
    caller = await sv.authenticate(request, changes=True)
    try:
        check_request(sv, caller, spec)
        await quotas.check_request(sv.projection.redis, sv.settings.redis_prefix, caller, spec)
    except (NotAllowed, quotas.QuotaExceeded) as exc:
        await sv.audit(request, "access.refused", caller, reason=str(exc),
                       userId=spec.userId, sysCode=spec.sysCode)
        raise
    task_id, now = new_task_id(), utcnow_iso()
    if sp is not None:
        sp.set_attribute("plait.task_id", task_id)
    fingerprint = spec.fingerprint()
    existing, reused = await sv.projection.claim_fingerprint(
        fingerprint, task_id, sv.reuse_window(caller) if reuse else 0)
    if existing is not None:
        message = "reused a recent identical export" if reused else "identical task running"
        return envelope(200, message, {**await sv.with_fresh_link(existing, caller),
                                       "reused": reused, "deduplicated": not reused})
    doc = spec.documentConfig
    await sv.projection.apply(created(spec, task_id, fingerprint, now))
    await sv.projection.redis.set(K.task_spec(sv.settings.redis_prefix, task_id),
                                  spec.model_dump_json(exclude_none=True), ex=K.TASK_SPEC_TTL)
    try:
        await sv.emit(T.REQUESTS, task_id, ExportRequested(
            taskId=task_id, spec=spec, fingerprint=fingerprint, requestedAt=now))
    except Unavailable as exc:  # never queued: it ends now, the fingerprint is free
        await sv.projection.apply(Lifecycle(taskId=task_id, status="FAILED",
                                            errorMessage=f"not queued: {exc.message}"))
        raise
    TASKS_CREATED.labels(spec.sysCode).inc()
    await sv.audit(request, "task.created", caller, taskId=task_id, userId=spec.userId,
                   bizType=spec.bizType, fileName=doc.fileName, fileFormat=doc.fileFormat,
                   sysCode=spec.sysCode)
    # the contract's answer carries code 200; HTTP 202 says the work is queued
    return JSONResponse({"code": 200, "message": "accepted", "data": {
        "taskId": task_id, "status": "CREATED", "reused": False, "deduplicated": False}},
        status_code=202)


async def get_task(taskId: str, request: Request, sv: SV, userId: UserId = None):
    """One task's state: status, counts, progress, file info with a fresh link,
    and ``spec``: the accepted request (``plait.spec.ExportSpec`` JSON; null
    when no longer kept, ``plait.keys.task_spec``), to submit it again."""
    caller = await sv.authenticate(request)
    task = await sv.projection.get(taskId)
    if not sv.visible(task, caller, userId):
        raise not_found(taskId)
    await sv.audit(request, "task.read", caller, taskId=taskId, userId=userId)
    view = (await sv.task_views([task], caller))[0]
    raw = await sv.projection.redis.get(K.task_spec(sv.settings.redis_prefix, taskId))
    return envelope(200, "ok", {**view, "spec": json.loads(raw) if raw else None})


async def list_tasks(request: Request, sv: SV,
                     sysCode: str | None = Query(None, description=SYS_CODE_DOC),
                     userId: UserId = None,
                     limit: int = Query(100, ge=1, le=1000, description="tasks per page"),
                     cursor: str | None = Query(None, description=CURSOR_DOC),
                     status: str | None = Query(None, description=STATUS_DOC),
                     bizType: str | None = Query(None, description="only this bizType"),
                     createdFrom: AwareDatetime | None = Query(
                         None, description="RFC 3339: tasks created at or after"),
                     createdTo: AwareDatetime | None = Query(
                         None, description="RFC 3339: tasks created at or before")):
    """Tasks of a caller (and user), newest first, a page at a time:
    ``data.nextCursor`` (null on the last page) is the ``cursor`` of the
    next. With authentication the caller is the signed one and
    ``userId`` is required. An unknown query parameter is a 422 naming it."""
    caller = await sv.authenticate(request)
    if caller is not None:
        if not userId:
            raise FieldError("userId", "is required with a caller registry",
                             "the query parameter userId=<the end user's id>", "required")
        sysCode = caller.sysCode
    if not sysCode:
        raise FieldError("sysCode", "is required without a caller registry",
                         "the query parameter sysCode=<your sysCode>", "required")
    statuses = parse_statuses(status)
    tasks, nxt = await sv.projection.page(
        sysCode, userId, limit, decode_cursor(cursor), epoch_ms(createdFrom),
        epoch_ms(createdTo), lambda t: (statuses is None or t["status"] in statuses)
        and (bizType is None or t.get("bizType") == bizType))
    await sv.audit(request, "task.listed", caller, userId=userId, sysCode=sysCode)
    return envelope(200, "ok", {"tasks": await sv.task_views(tasks, caller),
                                "nextCursor": encode_cursor(nxt)})


async def task_events(taskId: str, request: Request, sv: SV, userId: UserId = None):
    """Server-Sent Events: the task's state now, then every change, until it
    ends (``event:`` = status, ``data:`` = the task JSON)."""
    caller = await sv.authenticate(request)
    if not sv.visible(await sv.projection.get(taskId), caller, userId):
        raise not_found(taskId)
    return StreamingResponse(sse_stream(sv.projection, taskId, request.app.state.stopping),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


async def cancel_task(taskId: str, request: Request, sv: SV, userId: UserId = None):
    """Ask to cancel; 409 when the task already ended."""
    caller = await sv.authenticate(request, changes=True)
    task = await sv.projection.get(taskId)
    if not sv.visible(task, caller, userId):
        raise not_found(taskId)
    if task["status"] in TERMINAL:
        raise Conflict(f"task {taskId} already ended as {task['status']}",
                       {"status": task["status"]})
    await sv.emit(T.CONTROL, taskId, CancelRequested(taskId=taskId))
    await sv.audit(request, "task.cancelled", caller, taskId=taskId, userId=userId,
                   sysCode=task.get("sysCode"))
    return envelope(202, "cancel requested", {"taskId": taskId})


def create_tasks_router(services: Services) -> APIRouter:
    """The ``/export/tasks`` routes (services from ``app.state.services``);
    ``services`` picks the query parameter the list documents as required:
    with a caller registry the signed caller is the sysCode and userId is
    required, without one sysCode is."""
    router = APIRouter(tags=["export"])
    add = router.add_api_route
    add("/export/tasks", create_task, methods=["POST"], status_code=202,
        operation_id="createTask", response_model=Envelope,
        responses={202: TASK_LINKS,
                   **ok(200, "An identical task is running, or a recent identical export is "
                             "reused: that task (data.reused / data.deduplicated)",
                        **TASK_LINKS),
                   **errors(401, 403, 429, 503)})
    add("/export/tasks/{taskId}", get_task, methods=["GET"], operation_id="getTask",
        response_model=Envelope, responses=TASK_ERRORS)
    add("/export/tasks", list_tasks, methods=["GET"], operation_id="listTasks",
        response_model=Envelope, responses=errors(401, 503),
        openapi_extra=required_query("sysCode" if services.callers is None else "userId"),
        dependencies=[Depends(refuse_unknown_query)])
    add("/export/tasks/{taskId}/events", task_events, methods=["GET"],
        operation_id="taskEvents", response_class=StreamingResponse, responses={
            200: {"description": "text/event-stream: one event per state, until the task ends",
                  "content": {"text/event-stream": {"schema": SSE_EVENT}}},
            **TASK_ERRORS})
    add("/export/tasks/{taskId}/cancel", cancel_task, methods=["POST"], status_code=202,
        operation_id="cancelTask", response_model=Envelope, responses=errors(401, 404, 409, 503))
    return router


def check_request(sv: Services, caller, spec: ExportSpec) -> None:
    """The caller's allowances (registry) or, in open mode, the data-API
    allowlist; and the limits of the document formats (``plait.documents``).
    Raises ``NotAllowed`` / ``FieldError`` naming the field. ``jobConfig.maxRows`` is for
    pull mode: a pushed export holds the rows its producers send, in any order, and no grant
    cuts it (checked here, for new requests: a task already running keeps its spec)."""
    if spec.dataConfig.mode == "push" and spec.jobConfig.maxRows is not None:
        raise FieldError("jobConfig.maxRows", "is for pull mode: a push export holds the rows "
                         "its producers send (send fewer rows to cap it)", "no maxRows with "
                         "dataConfig.mode push", "mode")
    documents.check_request(spec, sv.settings)
    if caller is not None:
        check_spec(caller, spec)
        return
    url, allow = spec.dataConfig.dataApiUrl, sv.settings.data_api_allowlist
    if url and allow and not any(url.startswith(p) for p in allow):
        raise NotAllowed("dataConfig.dataApiUrl", "not in the allowed data-API URL prefixes",
                         "allowlist")
