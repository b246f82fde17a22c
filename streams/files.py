"""A task's output file: grown page by page where its pages are written, or
built from its shards; uploaded and reported SUCCESS (``docs/architecture.md``,
"Write while fetching").

Shared floor of the page writer (``streams.shards``) and the finalizer
(``streams.finalize``); neither imports the other.

- :class:`TaskFile`: the file of one task growing on this worker. Its
  progress is ``next_seq`` (pages 0..next_seq-1 are in it, each once, in page
  order). It lives only in this process (``Context.files``); the durable
  checkpoint is the shards, kept until SUCCESS, so any worker can rebuild.
- :func:`grow`: append one page, catching up from shards when this worker
  did not see the earlier pages (a re-drive, a rebalance).
- :func:`build_file`: the whole file from shards 0..last_seq (the re-drive
  path and the fallback whenever the growing file is in doubt).
- :func:`report_stage`, :func:`stage_reporter`: the ``writing`` and
  ``uploading`` PROGRESS reports of a task being finished (``docs/events.md``,
  ``stage``). Wherever a file is finished (:meth:`TaskFile.finish`,
  :func:`build_file`) writing it is the span ``export.write_file`` and the
  upload the span ``export.upload`` (``plait.tracing``).
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from plait import tracing
from plait.errors import PermanentError
from plait.events import FileInfo
from plait.logs import get_logger
from plait.spec import DocumentConfig, ExportSpec
from sinks.store import ObjectStore
from sinks.values import conform, rows_to_batch, unify_schemas
from sinks.writers import open_writer
from sinks.writers.base import WriteReport
from streams.context import Context, Emit
from streams.emits import lifecycle
from streams.layout import QUALITY_KEY, shard_key, shard_prefix

log = get_logger("plait.files")

#: Rows per record batch handed to a writer.
BATCH_ROWS = 8192

#: Called (blocking, from the thread finishing a file) with ``"uploading"``
#: when the file is written and its upload starts; see :func:`stage_reporter`.
OnStage = Callable[[str], None]


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


def encode_shard(batch: pa.RecordBatch, quality: dict[str, int]) -> bytes:
    """A record batch as Parquet bytes, quality counts in the schema metadata."""
    meta = dict(batch.schema.metadata or {}) | {QUALITY_KEY: json.dumps(quality).encode()}
    table = pa.Table.from_batches([batch.replace_schema_metadata(meta)])
    buf = io.BytesIO()
    # transient (deleted at SUCCESS), written once and read at most once: lz4
    # with no dictionary pages and no statistics. Measured on a 5,000-row
    # flights page: 2.2 ms to write and 2.1 ms to read, 222 KB, where the
    # defaults with lz4 took 3.9 and 3.1 ms for 119 KB (zstd/snappy: slower).
    pq.write_table(table, buf, compression="lz4", use_dictionary=False,
                   write_statistics=False)
    return buf.getvalue()


def decode_shard(data: bytes) -> tuple[pa.RecordBatch, dict[str, int]]:
    """A shard's rows as one batch and its quality counts. Read from an Arrow
    buffer on the calling thread: a threaded read (from a Python file object
    most often) can leave work that aborts the interpreter at exit
    ("terminate called without an active exception", apache/arrow#33975,
    #34314; 8 of 200 short processes here, 0 of 200 read this way)."""
    table = pq.read_table(pa.BufferReader(data), use_threads=False)
    quality = shard_quality(table.schema)
    table = table.replace_schema_metadata(None)
    batches = table.combine_chunks().to_batches()
    batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)
    return batch, quality


def page_shard(rows: list[dict], doc: DocumentConfig, seq: int,
               batch: pa.RecordBatch | None = None) -> tuple[bytes, pa.RecordBatch, dict[str, int]]:
    """Blocking: one fetched page normalized (``rows_to_batch``) and encoded
    as its shard; (shard bytes, the batch, its quality counts). ``batch``:
    the page already normalized by the fast decode (``Page.batch``; no
    counts), then ``rows`` is not read. Raises ``PermanentError`` when rows
    break the column spec."""
    if batch is not None:
        return encode_shard(batch, {}), batch, {}
    batch, quality = rows_to_batch(rows, doc, page=seq)
    return encode_shard(batch, quality), batch, quality


#: Bytes of normalized pages held for the page writer of this worker
#: (:func:`hand_off`); past it the oldest are dropped (read back from shards).
HANDOFF_BYTES = 8 << 20


def hand_off(ctx: Context, key: str, batch: pa.RecordBatch, quality: dict[str, int]) -> None:
    """Keep a page's normalized batch (just stored as shard ``key``) for the
    page writer of this worker, which then need not read the shard back
    (:func:`take_handed`). Pages of a task are keyed by task id, so its
    fetcher and page writer are usually one worker; when they are not, or
    the writer lags, the oldest entries beyond :data:`HANDOFF_BYTES` are
    dropped and the writer reads their shards: memory stays bounded."""
    handed = ctx.handed
    handed.pop(key, None)
    handed[key] = (batch, quality)
    size = sum(b.nbytes for b, _ in handed.values())
    while size > HANDOFF_BYTES and len(handed) > 1:
        old = next(iter(handed))
        size -= handed.pop(old)[0].nbytes


def take_handed(ctx: Context, key: str) -> tuple[pa.RecordBatch, dict[str, int]] | None:
    """The batch and quality counts handed off for shard ``key`` (removed),
    exactly what decoding that shard gives (:func:`decode_shard`); None when
    this worker holds none."""
    return ctx.handed.pop(key, None)


def _add(total: dict[str, int], counts: dict[str, int]) -> None:
    for k, v in counts.items():
        total[k] = total.get(k, 0) + v


def shard_quality(schema: pa.Schema) -> dict[str, int]:
    """The quality counts a shard carries in its schema metadata."""
    return json.loads((schema.metadata or {}).get(QUALITY_KEY, b"{}"))


class Diverged(Exception):
    """A page's columns do not fit the file's schema as the first page fixed
    it (a later page widened a type or added a column): the file must be
    built from all shards with the unified schema instead."""


class TaskFile:
    """The output file of one task, growing on this worker page by page.

    The schema is fixed by the first page (``unify_schemas`` of it: all-null
    columns become text); a page is appended only when unifying it changes
    nothing, so the file equals what :func:`build_file` makes of the same
    shards. Memory: one page's batch at a time; the file is on local disk in
    a private temporary directory (removed by :meth:`discard`).
    """

    def __init__(self, task_id: str, schema: pa.Schema, doc: DocumentConfig) -> None:
        self.task_id = task_id
        self.doc = doc
        self.schema = unify_schemas([schema.remove_metadata()])
        self.dir = Path(tempfile.mkdtemp(prefix=f"plait-{task_id}-"))
        self.writer = open_writer(self.dir / "out", self.schema, doc)
        #: pages 0..next_seq-1 are in the file
        self.next_seq = 0
        self.quality: dict[str, int] = {}
        #: when this worker last reported the task's progress (monotonic
        #: seconds; ``streams.shards.due``), None before its first report
        self.reported_at: float | None = None

    def fits(self, schema: pa.Schema) -> bool:
        """Whether a page of ``schema`` goes into the file unchanged."""
        unified = unify_schemas([self.schema, schema.remove_metadata()])
        return unified.equals(self.schema, check_metadata=True)

    def append(self, seq: int, batch: pa.RecordBatch, quality: dict[str, int]) -> None:
        """Append page ``seq`` (must be ``next_seq``). Raises :class:`Diverged`
        when it does not fit, ``PermanentError`` when the writer refuses its
        rows (names the page)."""
        if seq != self.next_seq:
            raise ValueError(f"page {seq} is not the next page ({self.next_seq})")
        if not self.fits(batch.schema):
            raise Diverged(f"page {seq}")
        self._write(seq, batch)
        _add(self.quality, quality)
        self.next_seq = seq + 1

    def _write(self, seq: int, batch: pa.RecordBatch) -> None:
        try:
            for start in range(0, batch.num_rows, BATCH_ROWS):
                self.writer.write_batch(conform(batch.slice(start, BATCH_ROWS), self.schema))
        except PermanentError:
            raise
        except Exception as exc:  # a data problem never surfaces as "internal error"
            raise PermanentError(f"page {seq}: cannot write its rows as {self.doc.fileFormat} "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from exc

    def finish(self, store: ObjectStore, on_stage: OnStage | None = None) -> Built:
        """Close the writer (the tail of the file is written: span
        ``export.write_file``) and upload to ``results/{task id}/{file name}``
        (:func:`upload`: ``on_stage("uploading")``, span ``export.upload``)."""
        with tracing.span("export.write_file", **{"plait.task_id": self.task_id,
                                                  "plait.file_format": self.doc.fileFormat,
                                                  "plait.pages": self.next_seq,
                                                  "plait.grown": True}):
            report = self.writer.close()
        quality = dict(self.quality)
        _add(quality, report.quality)
        return upload(store, self.task_id, report, quality, on_stage)

    def discard(self) -> None:
        """Forget the file: a writer that streams from a thread (native xlsx)
        is stopped, its directory removed; idempotent."""
        abort = getattr(self.writer, "abort", None)
        if abort is not None:
            abort()
        shutil.rmtree(self.dir, ignore_errors=True)


def upload(store: ObjectStore, task_id: str, report: WriteReport,
           quality: dict[str, int], on_stage: OnStage | None = None) -> Built:
    """Blocking: upload a closed writer's file; its sha256 and size.
    ``on_stage("uploading")`` is called first; the upload is the span
    ``export.upload``."""
    key = f"results/{task_id}/{report.path.name}"
    size, digest = report.path.stat().st_size, sha256_file(report.path)
    if on_stage is not None:
        on_stage("uploading")
    with tracing.span("export.upload", **{"plait.task_id": task_id, "plait.bytes": size}):
        store.put_file(key, report.path)
    return Built(key, report, size, digest, quality)


def _read_shard(store: ObjectStore, task_id: str, seq: int) -> pq.ParquetFile:
    return pq.ParquetFile(pa.BufferReader(store.get_bytes(shard_key(task_id, seq))))


def catch_up(store: ObjectStore, task_id: str, upto: int, doc: DocumentConfig) -> TaskFile | None:
    """Blocking: a :class:`TaskFile` holding pages 0..upto-1 read back from
    their shards (one shard in memory at a time); None when ``upto`` is 0, a
    shard is missing or a page does not fit (the last page then builds the
    file from shards)."""
    if upto == 0:
        return None
    tf = None
    try:
        for seq in range(upto):
            shard = _read_shard(store, task_id, seq)
            schema = shard.schema_arrow
            if tf is None:
                tf = TaskFile(task_id, schema, doc)
            if not tf.fits(schema):
                raise Diverged(f"page {seq}")
            for batch in shard.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
                tf._write(seq, batch)
            _add(tf.quality, shard_quality(schema))
            tf.next_seq = seq + 1
        return tf
    except (KeyError, FileNotFoundError, Diverged) as exc:  # KeyError: shard missing
        log.info("cannot catch up from shards; the file will be built from them",
                 task=task_id, reason=f"{type(exc).__name__}: {exc}")
        if tf is not None:
            tf.discard()
        return None


def grow(ctx: Context, task_id: str, seq: int, batch: pa.RecordBatch,
         quality: dict[str, int], doc: DocumentConfig) -> None:
    """Blocking: append page ``seq`` to the task's file on this worker.

    Page 0 opens the file; a page this worker already appended (a redelivery)
    is skipped; a page after a gap (this worker did not see the earlier pages)
    first catches up from their shards. Anything in doubt (a page that does
    not fit, a writer failure) drops the file: the last page then builds it
    from the shards. ``PermanentError`` from the writer propagates (the task
    fails, as when building from shards).
    """
    files = ctx.files
    tf = files.get(task_id)
    if tf is not None and seq < tf.next_seq:
        return  # redelivered: already in the file
    if tf is not None and tf.next_seq < seq:
        drop(ctx, task_id)
        tf = None
    if tf is None:
        if seq == 0:
            tf = TaskFile(task_id, batch.schema, doc)
        else:
            tf = catch_up(ctx.store, task_id, seq, doc)
            if tf is None:
                return
        files[task_id] = tf
    try:
        tf.append(seq, batch, quality)
    except Diverged:
        log.info("page does not fit the growing file; it will be built from shards",
                 task=task_id, seq=seq)
        drop(ctx, task_id)
    except BaseException:
        drop(ctx, task_id)
        raise


def drop(ctx: Context, task_id: str) -> None:
    """Forget a task's growing file on this worker (idempotent)."""
    tf = ctx.files.pop(task_id, None)
    if tf is not None:
        tf.discard()


def finish(ctx: Context, task_id: str, last_seq: int, doc: DocumentConfig,
           on_stage: OnStage | None = None) -> Built:
    """Blocking: the task's file, uploaded: the grown one when it holds pages
    0..last_seq, else built from the shards. The grown file is forgotten
    either way. ``on_stage("uploading")`` when the upload starts."""
    tf = ctx.files.pop(task_id, None)
    if tf is not None:
        try:
            if tf.next_seq == last_seq + 1:
                return tf.finish(ctx.store, on_stage)
        finally:
            tf.discard()
    return build_file(ctx.store, task_id, last_seq, doc, on_stage)


def build_file(store: ObjectStore, task_id: str, last_seq: int, doc: DocumentConfig,
               on_stage: OnStage | None = None) -> Built:
    """Blocking: merge shards 0..last_seq into one file and upload it to
    ``results/{task_id}/{file name}``. Peak memory is one shard plus one batch.
    Writing the file is the span ``export.write_file``; ``on_stage("uploading")``
    is called when its upload (span ``export.upload``) starts.

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
            _add(quality, shard_quality(schema))
            schemas.append(schema.remove_metadata())
        schema = unify_schemas(schemas)
        out = work / "out"
        out.mkdir()
        with tracing.span("export.write_file", **{"plait.task_id": task_id,
                                                  "plait.file_format": doc.fileFormat,
                                                  "plait.pages": last_seq + 1,
                                                  "plait.grown": False}):
            writer = open_writer(out, schema, doc)
            for seq, path in enumerate(paths):
                try:
                    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
                        writer.write_batch(conform(batch, schema))
                except PermanentError:
                    raise
                except Exception as exc:  # a data problem never surfaces as "internal error"
                    raise PermanentError(f"page {seq}: cannot write its rows as "
                                         f"{doc.fileFormat} ({type(exc).__name__}: "
                                         f"{str(exc)[:200]})") from exc
                path.unlink()
            report = writer.close()
        _add(quality, report.quality)
        return upload(store, task_id, report, quality, on_stage)


async def report_stage(ctx: Context, spec: ExportSpec, task_id: str, stage: str,
                       event: Emit | None = None) -> bool:
    """Report that a RUNNING task is in ``stage`` now, in the middle of its
    handler: a PROGRESS event on ``export.lifecycle`` (``event`` when given,
    e.g. the last page's own PROGRESS, with its ``stage`` set), so a rebuilt
    projection reads the same. Applied to the projection first (the projector
    may consume it only after SUCCESS, which drops the stage, and a rebuild
    would differ), then sent, acked, through ``ctx.report``.

    Returns whether it was sent: False without a runtime (``ctx.report`` is
    None: handler unit tests; the caller then returns ``event`` with its other
    events) or when sending failed (logged: a progress report never fails the
    export). Never raises."""
    if event is None:
        event = lifecycle(spec, task_id, "PROGRESS", stage=stage, workerId=ctx.worker_id)
    else:
        event.payload.stage = stage
    try:
        await ctx.projection.apply(event.payload)
        if ctx.report is None:
            return False
        await ctx.report([event])
        return True
    except Exception as exc:
        log.warning("cannot report stage", task=task_id, stage=stage,
                    reason=f"{type(exc).__name__}: {exc}")
        return False


def stage_reporter(ctx: Context, spec: ExportSpec, task_id: str) -> OnStage:
    """An ``on_stage`` for :func:`finish` / :func:`build_file`, which run in a
    thread: it runs :func:`report_stage` on the calling event loop and waits
    (up to 30 s) until it is done, so the report is on the lifecycle topic
    before the upload starts and before SUCCESS. Call it from the event loop's
    thread; the returned function only from another thread."""
    import asyncio

    loop = asyncio.get_running_loop()

    def on_stage(stage: str) -> None:
        future = asyncio.run_coroutine_threadsafe(
            report_stage(ctx, spec, task_id, stage), loop)
        try:
            future.result(timeout=30)
        except Exception:  # TimeoutError: the upload does not wait any longer
            log.warning("stage report still pending", task=task_id, stage=stage)

    return on_stage


async def success(ctx: Context, spec: ExportSpec, task_id: str, built: Built,
                  truncated: bool) -> Emit:
    """The SUCCESS event of an uploaded file, with a signed link."""
    import asyncio

    doc = spec.documentConfig
    ttl = ctx.settings.link_ttl_seconds
    name = built.report.path.name
    url = await asyncio.to_thread(ctx.store.link, built.key, name, ttl)
    expires = datetime.now(timezone.utc) + timedelta(seconds=ttl)
    info = FileInfo(key=built.key, fileName=name, fileFormat=doc.fileFormat, bytes=built.bytes,
                    sha256=built.sha256, rows=built.report.rows, sheets=built.report.sheets,
                    files=[{"name": f.name, "rows": f.rows} for f in built.report.files],
                    url=url, urlExpiresAt=expires.isoformat().replace("+00:00", "Z"))
    return lifecycle(spec, task_id, "SUCCESS", exportedRows=built.report.rows,
                     truncated=truncated, file=info, quality=built.quality,
                     workerId=ctx.worker_id)
