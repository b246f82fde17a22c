"""Plain handlers of the export flow: admission and page fetching.

Each takes the worker ``Context`` and one decoded payload and returns the
events to emit (``Emit``); the agents only decode, call and send.
"""
from __future__ import annotations

import asyncio
import time

import pyarrow as pa

from plait import topics as T
from plait.callers import NotAllowed, check_spec
from plait.clock import parse_iso
from plait.errors import PermanentError
from plait.events import ExportRequested, FetchPage, PageBatch
from plait.lifecycle import TERMINAL
from plait.spec import ExportSpec
from streams.context import Context, Emit
from plait.tokens import HEADER_DATA_TOKEN, HEADER_TASK_ID, mint_data_token
from streams.datasource import Answer, Page, fetch_answer
from streams.emits import lifecycle, start
from streams.files import hand_off, page_shard
from streams.layout import shard_key, shard_prefix


async def admit(ctx: Context, req: ExportRequested) -> list[Emit]:
    """ExportRequested -> CREATED, then RUNNING + first FetchPage when the
    caller's limits allow, else WAITING (it starts when a slot frees). Other
    waiting tasks the freed capacity allows start too.

    A redelivered request of an admitted task emits nothing.
    """
    marks = await ctx.checkpoints.get(req.taskId)
    if "admitted" in marks:
        return []
    spec = req.spec
    check_caller(ctx, spec)
    await ctx.slots.enqueue(req)
    started = await ctx.slots.promote()
    emits = [lifecycle(spec, req.taskId, "CREATED", at=req.requestedAt,
                       fingerprint=req.fingerprint, timeout=spec.jobConfig.timeout,
                       bizDesc=spec.bizDesc)]
    if req.taskId not in {r.taskId for r in started}:
        emits.append(lifecycle(spec, req.taskId, "WAITING"))
    for other in started:
        emits.extend(start(ctx, other))
    return emits


async def after_admit(ctx: Context, req: ExportRequested, emits: list[Emit]) -> None:
    """Mark the task admitted (and keep its request for re-drives) once its
    events are acked."""
    await ctx.checkpoints.set(req.taskId, admitted=1, request=req.model_dump_json())


def data_token_headers(ctx: Context, task_id: str, spec: ExportSpec,
                       state: dict | None) -> dict[str, str] | None:
    """The per-task data token for the business system (``plait.tokens``),
    valid until the task's deadline; None without a caller registry."""
    caller = ctx.callers.by_sys_code(spec.sysCode) if ctx.callers else None
    if caller is None:
        return None
    created = parse_iso(state["createdAt"]) if state else time.time()
    token = mint_data_token(caller.secret(), task_id, spec.userId,
                            int(created + spec.jobConfig.timeout))
    return {HEADER_DATA_TOKEN: token, HEADER_TASK_ID: task_id}


def check_caller(ctx: Context, spec: ExportSpec) -> None:
    """Producer-SDK requests skip the API: check the caller's allowances here.
    Raises ``PermanentError`` (task FAILED) naming the field."""
    if ctx.callers is None:
        return
    caller = ctx.callers.by_sys_code(spec.sysCode)
    if caller is None:
        raise PermanentError(f"sysCode: {spec.sysCode!r} is not a registered caller")
    try:
        check_spec(caller, spec)
    except NotAllowed as exc:
        raise PermanentError(f"not allowed: {exc}") from None


async def fetch(ctx: Context, cmd: FetchPage) -> list[Emit]:
    """Fetch one page: store it as its Parquet shard, emit its PageBatch
    (``shardKey``) and the FetchPage of the next page (followed in process by
    the runtime, ``Route.follow``).

    Page n+1 is requested from the data API as soon as its cursor is known
    (``Context.ahead``): without a row cap, from page n's envelope before
    page n is decoded (``Answer.next_cursor``), else once it is decoded and
    encoded as its shard; the next step uses that answer when its cursor is
    the one asked for, else asks again.

    Skips a duplicate (seq already fetched) and a task that ended (the sweeper
    ends tasks past ``jobConfig.timeout``); stops at ``jobConfig.maxRows``
    (``truncated``). Raises ``PermanentError`` (task FAILED) when the data API
    fails permanently or transiently too often.
    """
    spec, task = cmd.spec, cmd.taskId
    if cmd.seq <= await ctx.checkpoints.fetched_seq(task):
        forget_ahead(ctx, task)
        await ctx.checkpoints.count(task, "absorbed")
        return []
    state = await ctx.projection.get(task)
    if state and state["status"] in TERMINAL:
        forget_ahead(ctx, task)
        return []
    s = ctx.settings
    headers = data_token_headers(ctx, task, spec, state)

    def ask_ahead(seq: int, cursor: dict) -> None:
        """Ask the data API for page ``seq`` at ``cursor`` now, held in
        ``ctx.ahead`` for the next step (which compares its own cursor)."""
        forget_ahead(ctx, task)
        ctx.ahead[task] = ((seq, cursor), asyncio.ensure_future(
            fetch_answer(ctx.http, spec, cursor, seq, s.fetch_retries,
                         s.fetch_backoff_seconds, headers)))

    try:
        ahead = ctx.ahead.pop(task, None)
        if ahead is not None and ahead[0] == (cmd.seq, cmd.runtimeContext):
            answer = await ahead[1]
        else:
            if ahead is not None:
                ahead[1].cancel()
            answer = await fetch_answer(ctx.http, spec, cmd.runtimeContext, cmd.seq,
                                        s.fetch_retries, s.fetch_backoff_seconds, headers)
        # Decoding a page makes it Python rows (~5x its JSON bytes) until its
        # batch is built: DECODE_SLOTS (one) page at a time per worker, so that
        # memory does not grow with the tasks fetching (the GIL gives no more
        # throughput anyway). A page held ahead is only its bytes.
        async with ctx.decoding:
            if spec.jobConfig.maxRows is None:
                # The cursor makes pages sequential, not the broker: without a
                # row cap, page n+1 is asked for now, at the cursor page n's
                # envelope gives (read apart from its rows), while page n is
                # decoded, stored and sent (docs/architecture.md, "Write while
                # fetching"). Not before this page's turn to decode: a task
                # waiting for it holds one answer, not two.
                cursor = answer.next_cursor()
                if cursor is not None:
                    ask_ahead(cmd.seq + 1, cursor)
            # decoded, normalized and encoded as its shard in one trip to a thread
            taken = await asyncio.to_thread(_take_page, answer, cmd)
            del answer
        page, row_count, last, truncated, shard, normalized, quality = taken
        del taken
        if last:
            forget_ahead(ctx, task)
        elif ctx.ahead.get(task, ((None, None),))[0] != (cmd.seq + 1, page.next_context):
            # the envelope gave no cursor (a row cap, or not readable apart
            # from the rows), or another one: ask now
            ask_ahead(cmd.seq + 1, page.next_context)
        batch = PageBatch(taskId=task, seq=cmd.seq, rowCount=row_count,
                          rowsBefore=cmd.rowsBefore, nextContext=page.next_context,
                          isLast=last, truncated=truncated, totalRows=page.total, spec=spec)
        batch.shardKey = shard_key(task, cmd.seq)
        await asyncio.to_thread(ctx.store.put_bytes, batch.shardKey, shard)
        del shard
        if await ctx.projection.status(task) in TERMINAL:  # cancelled meanwhile: the
            # task's cleanup may have run before this shard landed; leave nothing behind
            await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(task))
            forget_ahead(ctx, task)
            return []
        # the page writer on this worker takes the batch as is, without reading
        # the shard back (streams.files.hand_off; bounded, else it reads the shard)
        hand_off(ctx, batch.shardKey, normalized, quality)
    except BaseException:
        forget_ahead(ctx, task)
        raise
    emits = [Emit(T.PAGES, task, batch)]
    if not last:
        emits.append(Emit(T.FETCH, task, FetchPage(
            taskId=task, seq=cmd.seq + 1, runtimeContext=page.next_context,
            rowsBefore=cmd.rowsBefore + batch.rowCount, spec=spec)))
    return emits


def _take_page(answer: Answer, cmd: FetchPage,
               ) -> tuple[Page, int, bool, bool, bytes, pa.RecordBatch, dict[str, int]]:
    """Blocking: page ``cmd.seq`` of ``answer`` decoded, cut at
    ``jobConfig.maxRows``, normalized and encoded as its shard: ``(page, rows,
    last, truncated, shard bytes, normalized batch, quality counts)``. Raises
    what decoding and normalizing raise."""
    spec = cmd.spec
    cap = spec.jobConfig.maxRows
    # Without a row cap the page may come back normalized already (page.batch:
    # the fast decode, in C++ off the GIL; see docs/fidelity-rules.md, "Fast
    # page decode"); with a cap, rows are cut before normalizing.
    page = answer.page(spec.documentConfig if cap is None else None)
    rows, last, truncated = page.rows, page.finished, False
    if cap is not None and cmd.rowsBefore + len(rows) >= cap:
        truncated = cmd.rowsBefore + len(rows) > cap or not page.finished
        rows, last = rows[: cap - cmd.rowsBefore], True
    row_count = len(rows) if page.batch is None else page.row_count
    page.rows = []
    # The page normalized once, here, into its shard (what a re-drive resumes
    # from); only its key crosses the broker (docs/architecture.md, "Write
    # while fetching"). A redelivered page overwrites its own shard.
    shard, normalized, quality = page_shard(rows, spec.documentConfig, cmd.seq, page.batch)
    page.batch = None
    return page, row_count, last, truncated, shard, normalized, quality


def forget_ahead(ctx: Context, task_id: str) -> None:
    """Cancel and forget the page requested ahead for ``task_id``, if any."""
    ahead = ctx.ahead.pop(task_id, None)
    if ahead is not None:
        ahead[1].cancel()
        ahead[1].add_done_callback(lambda f: f.cancelled() or f.exception())


async def after_fetch(ctx: Context, cmd: FetchPage, emits: list[Emit]) -> None:
    """Record the fetched seq and the next cursor (what a re-drive starts from),
    and this worker as the task's ``fetcher``: its fetch chain runs in process,
    so when it dies the sweeper re-drives (``streams.sweeper.owner_alive``)."""
    nxt = next((e.payload for e in emits if isinstance(e.payload, FetchPage)), None)
    fields = {"fetched": cmd.seq, "fetcher": ctx.worker_id}
    if nxt is not None:
        fields |= {"next_seq": nxt.seq, "next_ctx": nxt.runtimeContext,
                   "rows_before": nxt.rowsBefore}
    await ctx.checkpoints.set(cmd.taskId, **fields)
