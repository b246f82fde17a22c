"""Partitioned pull tasks (``dataConfig.partitions`` / ``split``,
``plait.partitions``): one fetch chain per partition, run in parallel
(docs/events.md, "Partitions").

- Start (``streams.emits.start``): one ``FetchPage`` (seq 0) per
  partition, keyed ``<taskId>#<p>`` (``FetchPage.chainId``) and sent to
  ``export.fetch`` partition p after the task id's own
  (``streams.emits.fetch_page``), so the chains take distinct partitions,
  hence spread over the workers; a worker runs up to
  ``PLAIT_MAX_PARALLEL_FETCHES`` chains at once, in order per chain.
- Each chain pulls with its partition's ``queryConditions`` and its own
  cursor, and sends its pages as ``PageBatch`` (``partition``, ``seq``) keyed
  by task id: one page writer places them in (partition, seq) order
  (``streams.files.PageOrder``), as for push mode.
- Checkpoints per chain: :func:`mark` names (``fetched:<p>``,
  ``next_seq:<p>``, ``next_ctx:<p>``, ``rows_before:<p>``, ``fetcher:<p>``),
  plus ``rows:<p>`` (rows fetched), ``total:<p>`` (the data API's total),
  ``at:<p>`` (epoch seconds of the chain's last record) and ``done:<p>``
  (its last page fetched).
- ``jobConfig.maxRows`` counts the whole task: each page is granted its rows
  from one budget (:func:`within_max_rows`); a chain that is granted fewer
  ends there, truncated.
- Re-drives per chain (:func:`redrive_chains`): a chain whose fetcher
  stopped heartbeating resumes from its checkpoints.
"""
from __future__ import annotations

import asyncio
import json
import time

from plait import keys as K
from plait import topics as T
from plait.events import ExportRequested, FetchPage, Lifecycle, PageBatch
from streams.context import Context, Emit
from streams.emits import ended, first_page
from streams.files import encode_shard

#: ``fetcher:<p>`` after a re-drive: ``redrive@<sweeping worker>``, given
#: ``PLAIT_STALE_AFTER_SECONDS`` from the re-drive (``at:<p>``) for the new
#: chain to claim it (:func:`claim`).
REDRIVEN = "redrive@"


def redrive_tries(marks: dict[str, str], point: str, part: int | None = None) -> int:
    """How many re-drives at ``point`` (``fetch:<seq>``, ``fetch:<p>:<seq>``,
    ``finalize``) a re-drive now makes, from the checkpoint ``marks`` of the
    task (``part`` None) or of its partition ``part``'s chain: 1 at a new
    point; one more than recorded when a worker claimed the last one; as many
    as recorded when the last re-drive is unclaimed (``fetcher`` still
    ``redrive@…``, e.g. on the broker while the group rebalances): only a
    worker that took the page can fail at it. The one rule of both the
    sweeper's task-level and per-chain re-drives."""
    suffix = "" if part is None else f":{part}"
    same = marks.get(f"redrive_point{suffix}") == point
    tries = int(marks.get(f"redrives{suffix}", 0)) if same else 0
    return tries if same and marks.get(f"fetcher{suffix}", "").startswith(REDRIVEN) else tries + 1


def mark(cmd: FetchPage, name: str) -> str:
    """Checkpoint field ``name`` of ``cmd``'s chain: ``name`` itself for a
    task of one partition, else ``<name>:<partition>``."""
    return name if cmd.partitions == 1 else f"{name}:{cmd.partition}"


async def fetched_seq(ctx: Context, cmd: FetchPage) -> int:
    """The last seq of ``cmd``'s chain whose fetch completed, -1 when none
    (one field read: the task's hash holds every chain's marks and the spec)."""
    if cmd.partitions == 1:
        return await ctx.checkpoints.fetched_seq(cmd.taskId)
    return int(await ctx.checkpoints.field(cmd.taskId, mark(cmd, "fetched")) or -1)


def chain_marks(cmd: FetchPage, emits: list[Emit]) -> dict:
    """The checkpoint fields ``after_fetch`` records for ``cmd``'s chain
    beyond the task's own: rows fetched, the data API's total, ``done``."""
    if cmd.partitions == 1:
        return {}
    batch = next((e.payload for e in emits if isinstance(e.payload, PageBatch)), None)
    if batch is None:
        return {}
    fields = {mark(cmd, "rows"): batch.rowsBefore + batch.rowCount, mark(cmd, "at"): time.time()}
    if batch.totalRows is not None:
        fields[mark(cmd, "total")] = batch.totalRows
    if batch.isLast:
        fields[mark(cmd, "done")] = 1
    return fields


async def task_progress(ctx: Context, page: PageBatch) -> tuple[int, int | None]:
    """``(exportedRows, totalRows)`` of a page's task: the page's own counts
    for one partition; else the rows fetched summed over the partitions, and
    the totals summed once every partition gave one (None before)."""
    rows = page.rowsBefore + page.rowCount
    if page.partitions == 1:
        return rows, page.totalRows
    marks = await ctx.checkpoints.get(page.taskId)
    fetched = {p: int(marks.get(f"rows:{p}", 0)) for p in range(page.partitions)}
    fetched[page.partition] = max(fetched[page.partition], rows)
    totals = [marks.get(f"total:{p}") for p in range(page.partitions)]
    total = sum(int(t) for t in totals) if all(t is not None for t in totals) else None
    return sum(fetched.values()), total


#: Grant a page rows from its task's ``maxRows`` budget, once per page:
#: KEYS[1] the task's grants hash; ARGV page field, rows asked, cap, ttl.
_GRANT = """
local got = redis.call('HGET', KEYS[1], ARGV[1])
if got then return tonumber(got) end
local taken = tonumber(redis.call('HGET', KEYS[1], 'granted') or '0')
local grant = math.max(0, math.min(tonumber(ARGV[2]), tonumber(ARGV[3]) - taken))
redis.call('HSET', KEYS[1], ARGV[1], grant)
redis.call('HINCRBY', KEYS[1], 'granted', grant)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
return grant
"""


async def within_max_rows(ctx: Context, cmd: FetchPage, taken: tuple) -> tuple:
    """A fetched page (``streams.handlers._take_page``'s tuple: page, rows,
    last, truncated, shard, batch, quality) within its task's
    ``jobConfig.maxRows``, counted over all partitions: granted its rows from
    one budget (idempotent per page: a re-fetched page gets its grant
    again); a page granted fewer is cut there and ends its chain, truncated.
    Unchanged for a task of one partition or without a cap."""
    cap = cmd.spec.jobConfig.maxRows
    if cmd.partitions == 1 or cap is None:
        return taken
    page, rows, last, truncated, shard, batch, quality = taken
    cp = ctx.checkpoints
    key = K.row_grants(cp.prefix, cmd.taskId)
    grant = int(await cp.redis.eval(_GRANT, 1, key, f"{cmd.partition}:{cmd.seq}", rows, cap,
                                    14 * 24 * 3600))
    if grant >= rows:
        return taken
    batch = batch.slice(0, grant)
    shard = await asyncio.to_thread(encode_shard, batch, quality)
    return page, grant, True, True, shard, batch, quality


async def redrive_chains(ctx: Context, task_id: str, state: dict, now: float,
                         stale: bool) -> list[Emit] | None:
    """Re-drives of a partitioned pull task's chains whose fetcher is gone
    (checkpoint ``fetcher:<p>`` names a worker that stopped heartbeating), or,
    when the task is ``stale`` (no heartbeat, its reporter gone), of chains
    that never recorded a fetcher: each resumes from its checkpoints. None
    when the task is not a partitioned pull task still fetching (the
    sweeper's task-level re-drive applies). A chain re-driven more than
    ``PLAIT_MAX_REDRIVES`` times at one page ends the task FAILED; a re-drive
    no worker claimed (:func:`claim`) is sent again without counting
    (:func:`redrive_tries`)."""
    marks = await ctx.checkpoints.get(task_id)
    if "request" not in marks or "last_seq" in marks or "finalized" in marks:
        return None
    req = ExportRequested.model_validate_json(marks["request"])
    count = len(req.spec.dataConfig.fragments())
    if req.spec.dataConfig.mode != "pull" or count == 1:
        return None
    emits: list[Emit] = []
    for part in range(count):
        if f"done:{part}" in marks or f"end:{part}" in marks:
            continue
        if not await _chain_gone(ctx, marks.get(f"fetcher:{part}"),
                                 float(marks.get(f"at:{part}", 0)), now, stale):
            continue
        seq = int(marks.get(f"next_seq:{part}", 0))
        point = f"fetch:{part}:{seq}"
        tries = redrive_tries(marks, point, part)
        if tries > ctx.settings.max_redrives:
            return [ended(task_id, "FAILED", f"re-driven {tries - 1} times at page {seq} of "
                                             f"partition {part} without progress", ctx.worker_id,
                          state)]
        await ctx.checkpoints.set(task_id, **{f"redrive_point:{part}": point,
                                              f"redrives:{part}": tries, f"at:{part}": now,
                                              f"fetcher:{part}": REDRIVEN + ctx.worker_id})
        cursor = json.loads(marks.get(f"next_ctx:{part}", "null"))
        cmd = first_page(req, part, count, seq, cursor, int(marks.get(f"rows_before:{part}", 0)))
        cmd.payload.attempt = tries
        emits.append(cmd)
    if emits:
        emits.insert(0, Emit(T.LIFECYCLE, task_id, Lifecycle(
            taskId=task_id, status="RUNNING", workerId=f"sweeper@{ctx.worker_id}")))
    return emits


async def _chain_gone(ctx: Context, fetcher: str | None, at: float, now: float,
                      stale: bool) -> bool:
    """Whether a chain needs a re-drive: its ``fetcher`` recorded nothing for
    ``PLAIT_STALE_AFTER_SECONDS`` (``at``: epoch seconds of its last record)
    and stopped heartbeating; without a fetcher, when the task is ``stale``."""
    if fetcher is None:
        return stale
    if now - at <= ctx.settings.stale_after_seconds:
        return False
    return fetcher.startswith(REDRIVEN) or not await ctx.workers.alive(fetcher)


async def claim(ctx: Context, cmd: FetchPage) -> None:
    """Record this worker as the fetcher of ``cmd``'s chain as the chain
    starts (page 0 of a partition, or any task's re-drive), before its first
    page is fetched, so the sweeper watches the worker holding it
    (:func:`redrive_chains`, ``streams.sweeper.redrive``) and counts the
    re-drive as claimed (:func:`redrive_tries`)."""
    if cmd.attempt or (cmd.partitions > 1 and cmd.seq == 0):
        await ctx.checkpoints.set(cmd.taskId, **{mark(cmd, "fetcher"): ctx.worker_id,
                                                 mark(cmd, "at"): time.time()})
