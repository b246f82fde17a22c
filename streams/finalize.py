"""Finalizing: stream a task's shards in seq order into the requested format,
upload the file, and report SUCCESS with rows, bytes, sha256 and a signed link
(docs/architecture.md, "Data flow of an export", step 5)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq

from plait import tracing
from plait.errors import PermanentError
from plait.events import FileInfo, FinalizeRequested
from plait.lifecycle import TERMINAL
from plait.logs import get_logger
from plait.spec import DocumentConfig
from sinks.values import conform, unify_schemas
from sinks.store import ObjectStore
from sinks.writers import open_writer
from sinks.writers.base import WriteReport
from streams.context import Context, Emit
from streams.emits import lifecycle
from streams.layout import QUALITY_KEY, cleanup, shard_key, shard_prefix

log = get_logger("plait.finalize")

#: Rows per record batch handed to a writer.
BATCH_ROWS = 8192


@dataclass
class Built:
    """A finished, uploaded file."""

    key: str
    report: WriteReport
    bytes: int
    sha256: str
    quality: dict[str, int]


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def build_file(store: ObjectStore, task_id: str, last_seq: int, doc: DocumentConfig,
               on_stage: Callable[[str], None] | None = None) -> Built:
    """Blocking: merge shards 0..last_seq into one file and upload it to
    ``results/{task_id}/{file name}``. Peak memory is one shard plus one batch.
    ``on_stage("uploading")`` is called when the file is written and its
    upload starts (spans ``export.write_file`` and ``export.upload``).

    Raises:
        PermanentError: a shard is missing (names the first missing pages).
    """
    present = set(store.list(shard_prefix(task_id)))
    missing = [s for s in range(last_seq + 1) if shard_key(task_id, s) not in present]
    if missing:
        raise PermanentError(f"shards missing for pages {missing[:10]} of 0..{last_seq}")
    with tempfile.TemporaryDirectory(prefix=f"plait-{task_id}-") as tmp:
        work = Path(tmp)
        paths, quality = [], {}
        for seq in range(last_seq + 1):
            path = work / f"{seq:08d}.parquet"
            path.write_bytes(store.get_bytes(shard_key(task_id, seq)))
            paths.append(path)
        schemas = []
        for path in paths:
            schema = pq.read_schema(path)
            for k, v in json.loads((schema.metadata or {}).get(QUALITY_KEY, b"{}")).items():
                quality[k] = quality.get(k, 0) + v
            schemas.append(schema.remove_metadata())
        schema = unify_schemas(schemas)
        out = work / "out"
        out.mkdir()
        writing = tracing.span("export.write_file", **{"plait.task_id": task_id,
                                                       "plait.file_format": doc.fileFormat})
        with writing:
            writer = open_writer(out, schema, doc)
            for seq, path in enumerate(paths):
                try:
                    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
                        writer.write_batch(conform(batch, schema))
                except PermanentError:
                    raise
                except Exception as exc:  # a data problem never surfaces as "internal error"
                    raise PermanentError(f"page {seq}: cannot write its rows as {doc.fileFormat} "
                                         f"({type(exc).__name__}: {str(exc)[:200]})") from exc
                path.unlink()
            report = writer.close()
        for k, v in report.quality.items():
            quality[k] = quality.get(k, 0) + v
        key = f"results/{task_id}/{report.path.name}"
        size, digest = report.path.stat().st_size, sha256_file(report.path)
        if on_stage is not None:
            on_stage("uploading")
        with tracing.span("export.upload", **{"plait.task_id": task_id, "plait.bytes": size}):
            store.put_file(key, report.path)
    return Built(key, report, size, digest, quality)


async def finalize(ctx: Context, cmd: FinalizeRequested) -> list[Emit]:
    """FinalizeRequested -> the file in object storage and SUCCESS.

    Skips a task already finalized or ended (cancelled, timed out).
    """
    marks = await ctx.checkpoints.get(cmd.taskId)
    state = await ctx.projection.get(cmd.taskId)
    if "finalized" in marks or (state and state["status"] in TERMINAL):
        return []
    doc = cmd.spec.documentConfig
    loop = asyncio.get_running_loop()

    async def report_stage(stage: str) -> None:
        # a PROGRESS event on export.lifecycle (so a rebuilt projection reads the
        # same): the page shows the file being written/uploaded instead of a bar
        # sitting at 100%
        # (applied here first, like state changes: the projector may consume it
        # only after SUCCESS, which would drop it and make a rebuild differ)
        try:
            event = lifecycle(cmd.spec, cmd.taskId, "PROGRESS", stage=stage,
                              workerId=ctx.worker_id)
            await ctx.projection.apply(event.payload)
            if ctx.report is not None:  # None in handler unit tests (no runtime)
                await ctx.report([event])
        except Exception:  # a progress report never fails the export
            log.warning("cannot report stage", taskId=cmd.taskId, stage=stage)

    def on_stage(stage: str) -> None:
        asyncio.run_coroutine_threadsafe(report_stage(stage), loop)

    await report_stage("writing")
    built = await asyncio.to_thread(build_file, ctx.store, cmd.taskId, cmd.lastSeq, doc, on_stage)
    ttl = ctx.settings.link_ttl_seconds
    name = built.report.path.name
    url = await asyncio.to_thread(ctx.store.link, built.key, name, ttl)
    expires = datetime.now(timezone.utc) + timedelta(seconds=ttl)
    info = FileInfo(key=built.key, fileName=name, fileFormat=doc.fileFormat, bytes=built.bytes,
                    sha256=built.sha256, rows=built.report.rows, sheets=built.report.sheets,
                    files=[{"name": f.name, "rows": f.rows} for f in built.report.files],
                    url=url, urlExpiresAt=expires.isoformat().replace("+00:00", "Z"))
    return [lifecycle(cmd.spec, cmd.taskId, "SUCCESS", exportedRows=built.report.rows,
                      truncated=cmd.truncated, file=info, quality=built.quality,
                      workerId=ctx.worker_id)]


async def after_finalize(ctx: Context, cmd: FinalizeRequested, emits: list[Emit]) -> None:
    """Once SUCCESS is acked: mark finalized and delete shards and page blobs."""
    await ctx.checkpoints.set(cmd.taskId, finalized=1)
    await cleanup(ctx, cmd.taskId)
