"""Export flow handlers (admission, page fetching): payload in, ``Emit`` list out."""
from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from plait import topics as T
from plait.callers import NotAllowed, check_spec
from plait.documents import check_request as check_document
from plait.clock import parse_iso
from plait.errors import FieldError, PermanentError
from plait.events import ExportRequested, FetchPage, PageBatch
from plait.lifecycle import TERMINAL
from plait.spec import ExportSpec
from streams.context import Context, Emit
from plait.tokens import HEADER_DATA_TOKEN, HEADER_TASK_ID, mint_data_token
from streams.datasource import Answer, Page, fetch_answer
from streams.emits import created, fetch_page, lifecycle, start
from streams.files import hand_off, page_shard
from streams.layout import forget_ahead, shard_key, shard_prefix
from streams.partitions import chain_marks, claim, fetched_seq, mark, within_max_rows
from streams.quota import within_quota


async def admit(ctx: Context, req: ExportRequested) -> list[Emit]:
    """ExportRequested -> CREATED, then RUNNING + FetchPage within the caller's
    limits, else WAITING. A redelivery of an admitted task emits nothing."""
    marks = await ctx.checkpoints.get(req.taskId)
    if "admitted" in marks:
        return []
    spec = req.spec
    check_caller(ctx, spec)
    await ctx.slots.enqueue(req)
    started = await ctx.slots.promote()
    emits = [created(req)]
    if req.taskId not in {r.taskId for r in started}:
        emits.append(lifecycle(spec, req.taskId, "WAITING"))
    for other in started:
        emits.extend(start(ctx, other))
    return emits


async def after_admit(ctx: Context, req: ExportRequested, emits: list[Emit]) -> None:
    """Mark the task admitted, keeping its request for re-drives."""
    await ctx.checkpoints.set(req.taskId, admitted=1, request=req.model_dump_json())


def data_token_headers(ctx: Context, task_id: str, spec: ExportSpec,
                       state: dict | None) -> dict[str, str] | None:
    """The per-task data token headers (``plait.tokens``); None without callers."""
    caller = ctx.callers.by_sys_code(spec.sysCode) if ctx.callers else None
    if caller is None:
        return None
    created = parse_iso(state["createdAt"]) if state else time.time()
    token = mint_data_token(caller.secret(), task_id, spec.userId,
                            int(created + spec.jobConfig.timeout))
    return {HEADER_DATA_TOKEN: token, HEADER_TASK_ID: task_id}


def check_caller(ctx: Context, spec: ExportSpec) -> None:
    """Check allowances and document limits (SDK requests skip the API).
    Raises ``PermanentError`` naming the field."""
    try:
        check_document(spec, ctx.settings)
    except FieldError as exc:
        raise PermanentError(f"not allowed: {exc}") from None
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
    """Fetch one page into its shard; emit its PageBatch and the next
    FetchPage. Pages are prepared ahead (:class:`Ahead`; docs/architecture.md,
    "Write while fetching"). Skips duplicates and ended tasks; stops at
    ``jobConfig.maxRows``. Raises ``PermanentError`` when the data API fails."""
    try:
        return await _fetch(ctx, cmd)
    except BaseException:
        forget_ahead(ctx, cmd.chainId)
        raise


async def _fetch(ctx: Context, cmd: FetchPage) -> list[Emit]:
    # a partition's pages are prepared ahead under its chain id (streams.partitions)
    spec, task, own = cmd.spec, cmd.taskId, cmd.chainId
    if cmd.seq <= await fetched_seq(ctx, cmd):
        forget_ahead(ctx, own)
        await ctx.checkpoints.count(task, "absorbed")
        return []
    state = await ctx.projection.get(task)
    if state and state["status"] in TERMINAL:
        forget_ahead(ctx, own)
        return []
    await claim(ctx, cmd)
    headers = data_token_headers(ctx, task, spec, state)
    chain = ctx.ahead.get(own)
    if not chain or not chain[0].matches(cmd):
        chain = _prepare_anew(ctx, cmd, headers, cmd.seq, cmd.runtimeContext, cmd.rowsBefore)
    entry = chain.popleft()
    entry.taken = True
    if entry.hint is not None and not chain:  # its envelope gave the next cursor: go on
        _prepare_next(ctx, cmd, chain, headers, cmd.seq + 1, entry.hint, None)
    # maxRows over all partitions first: the quota counts only the rows granted
    taken = await within_max_rows(ctx, cmd, await entry.future)
    taken = await within_quota(ctx, cmd, taken)  # may end the task here
    del entry
    page, row_count, last, truncated, shard, normalized, quality = taken
    del taken
    if last:
        forget_ahead(ctx, own)
    else:
        rows_before = cmd.rowsBefore + row_count
        if chain and chain[0].seq == cmd.seq + 1 and chain[0].cursor == page.next_context:
            chain[0].rows_before = rows_before
        else:
            _prepare_anew(ctx, cmd, headers, cmd.seq + 1, page.next_context, rows_before)
    batch = PageBatch(taskId=task, seq=cmd.seq, partition=cmd.partition,
                      partitions=cmd.partitions, rowCount=row_count,
                      rowsBefore=cmd.rowsBefore, nextContext=page.next_context,
                      isLast=last, truncated=truncated, totalRows=page.total, spec=spec)
    batch.shardKey = shard_key(task, cmd.seq, cmd.partition)
    # a cancelled step ends only once the shard landed, so cleanup deletes it
    await in_thread(ctx.store.put_bytes, batch.shardKey, shard)
    del shard
    if await ctx.projection.status(task) in TERMINAL:  # cleanup may have run already
        await asyncio.to_thread(ctx.store.delete_prefix, shard_prefix(task))
        forget_ahead(ctx, own)
        return []
    hand_off(ctx, batch.shardKey, normalized, quality)
    emits = [Emit(T.PAGES, task, batch)]
    if not last:
        emits.append(fetch_page(FetchPage(
            taskId=task, seq=cmd.seq + 1, runtimeContext=page.next_context,
            rowsBefore=cmd.rowsBefore + batch.rowCount, partition=cmd.partition,
            partitions=cmd.partitions, spec=spec)))
    return emits


async def in_thread(fn, *args):
    """``fn(*args)`` in a thread; cancelled, raises only once the call ended."""
    work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await asyncio.wait([work])
        work.cancelled() or work.exception()
        raise


#: Pages of one task prepared ahead (docs/perf-notes.md); each holds a page.
AHEAD_PAGES = 2


@dataclass
class Ahead:
    """A page being prepared by ``future``; ``rows_before`` None while unknown,
    ``hint``: the next cursor from its envelope."""

    seq: int
    cursor: dict[str, Any]
    rows_before: int | None
    hint: dict[str, Any] | None = None
    taken: bool = False
    future: asyncio.Future = None  # type: ignore[assignment]  # set as it starts

    def matches(self, cmd: FetchPage) -> bool:
        """Whether this is the page ``cmd`` asks for."""
        return (self.seq == cmd.seq and self.cursor == cmd.runtimeContext
                and self.rows_before in (None, cmd.rowsBefore))


def _prepare_anew(ctx: Context, cmd: FetchPage, headers: dict[str, str] | None,
                  seq: int, cursor: dict[str, Any], rows_before: int) -> collections.deque:
    """A new chain of pages prepared ahead from page ``seq`` (``cmd.chainId``)."""
    forget_ahead(ctx, cmd.chainId)
    chain = ctx.ahead[cmd.chainId] = collections.deque()
    _prepare_next(ctx, cmd, chain, headers, seq, cursor, rows_before)
    return chain


def _prepare_next(ctx: Context, cmd: FetchPage, chain: collections.deque,
                  headers: dict[str, str] | None, seq: int, cursor: dict[str, Any],
                  rows_before: int | None) -> None:
    """Start preparing page ``seq`` of ``cmd``'s chain at the end of ``chain``."""
    entry = Ahead(seq, cursor, rows_before)
    entry.future = asyncio.ensure_future(prepare(ctx, cmd, chain, entry, headers))
    chain.append(entry)


async def prepare(ctx: Context, cmd: FetchPage, chain: collections.deque, entry: Ahead,
                  headers: dict[str, str] | None,
                  ) -> tuple[Page, int, bool, bool, bytes, pa.RecordBatch, dict[str, int]]:
    """Page ``entry.seq`` fetched and turned into its shard; decodes take a
    ``DECODE_SLOTS`` slot (a decode holds ~5x the page's bytes). Without a row
    cap, starts the next page from this envelope's cursor."""
    s, spec = ctx.settings, cmd.spec
    try:
        answer = await fetch_answer(ctx.http, spec, entry.cursor, entry.seq, s.fetch_retries,
                                    s.fetch_backoff_seconds, headers,
                                    spec.dataConfig.conditions(cmd.partition))
        async with ctx.decoding:
            if spec.jobConfig.maxRows is None:
                hint = answer.next_cursor()
                last = chain[-1] is entry if chain else entry.taken
                if hint is not None and last and ctx.ahead.get(cmd.chainId) is chain \
                        and len(chain) < AHEAD_PAGES:
                    _prepare_next(ctx, cmd, chain, headers, entry.seq + 1, hint, None)
                else:
                    entry.hint = hint
            return await in_thread(_take_page, answer, spec, entry.seq, entry.rows_before,
                                   cmd.partition)
    except PermanentError as e:
        raise in_partition(e, entry.seq, cmd.partition, spec) from None


def in_partition(error: PermanentError, seq: int, partition: int,
                 spec: ExportSpec) -> PermanentError:
    """``error`` (``page <seq>: ...``) as ``page <seq> of partition <p>: ...`` when the task
    has partitions, since every partition has a page ``seq``; unchanged otherwise."""
    head = f"page {seq}:"
    if len(spec.dataConfig.fragments()) < 2 or not error.message.startswith(head):
        return error
    return PermanentError(f"page {seq} of partition {partition}:{error.message[len(head):]}")


def _take_page(answer: Answer, spec: ExportSpec, seq: int, rows_before: int | None,
               partition: int = 0,
               ) -> tuple[Page, int, bool, bool, bytes, pa.RecordBatch, dict[str, int]]:
    """Blocking: ``(page, rows, last, truncated, shard, batch, quality)`` of
    page ``seq`` of ``partition``, cut at ``jobConfig.maxRows``."""
    cap = spec.jobConfig.maxRows
    # with a cap, rows are cut before normalizing: no fast decode
    page = answer.page(spec.documentConfig if cap is None else None)
    rows, last, truncated = page.rows, page.finished, False
    if cap is not None and rows_before + len(rows) >= cap:
        truncated = rows_before + len(rows) > cap or not page.finished
        rows, last = rows[: cap - rows_before], True
    row_count = len(rows) if page.batch is None else page.row_count
    page.rows = []
    shard, normalized, quality = page_shard(rows, spec.documentConfig, seq, page.batch,
                                            partition)
    page.batch = None
    return page, row_count, last, truncated, shard, normalized, quality


async def after_fetch(ctx: Context, cmd: FetchPage, emits: list[Emit]) -> None:
    """Checkpoint the fetched seq, next cursor and this worker as ``fetcher``
    (the sweeper re-drives when it dies)."""
    nxt = next((e.payload for e in emits if isinstance(e.payload, FetchPage)), None)
    fields = {mark(cmd, "fetched"): cmd.seq, mark(cmd, "fetcher"): ctx.worker_id}
    if nxt is not None:
        fields |= {mark(cmd, "next_seq"): nxt.seq, mark(cmd, "next_ctx"): nxt.runtimeContext,
                   mark(cmd, "rows_before"): nxt.rowsBefore}
    await ctx.checkpoints.set(cmd.taskId, **fields, **chain_marks(cmd, emits))
