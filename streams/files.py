"""A task's output file: grown page by page on this worker, or built from its
shards (the durable checkpoint, kept until SUCCESS); then uploaded
(``docs/architecture.md``, "Write while fetching"). Used by ``streams.shards``
and ``streams.finalize``. Spans: ``export.write_file``, ``export.upload``."""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from plait import tracing
from plait.errors import PermanentError
from plait.events import FileInfo
from plait.logs import get_logger
from plait.memory import release_in_background
from plait.spec import DocumentConfig, ExportSpec
from sinks.store import ObjectStore
from sinks.values import conform, rows_to_batch, unify_schemas, with_int_digits
from sinks.writers import concatenable, open_writer
from sinks.writers.base import WriteReport
from streams.context import Context, Emit
from streams.emits import lifecycle, record
from streams.layout import (QUALITY_KEY, PageKey, legacy_shard_key, page_keys,
                           parse_shard_key, shard_key, shard_prefix)

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


#: Arrow IPC options of a shard: LZ4 frames (encodes ~4x faster than Parquet: docs/perf-notes.md,
#: "Page shards").
_SHARD_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
#: Unthreaded, as Parquet shards are read (below).
_SHARD_READ = pa.ipc.IpcReadOptions(use_threads=False)
_PARQUET_MAGIC = b"PAR1"


def encode_shard(batch: pa.RecordBatch, quality: dict[str, int]) -> bytes:
    """A record batch as an Arrow IPC file (LZ4-compressed buffers), quality counts in the schema
    metadata, the digits of each ``int64`` column in its field metadata (``with_int_digits``:
    read by ``unify_schemas``). Transient and read at most once: fast to write beats small."""
    meta = dict(batch.schema.metadata or {}) | {QUALITY_KEY: json.dumps(quality).encode()}
    batch = with_int_digits(batch).replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema, options=_SHARD_IPC) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def read_shard(source: bytes | Path) -> tuple[pa.Schema, Iterable[pa.RecordBatch]]:
    """A shard's schema (with its metadata) and its record batches, lazily, from its bytes or its
    file (memory-mapped): an Arrow IPC file, or Parquet (a shard an earlier version stored,
    ``streams.layout.LEGACY_SHARD_SUFFIX``). Read unthreaded: a threaded read can abort the
    interpreter at exit (apache/arrow#33975). Raises ``pyarrow.ArrowInvalid`` when it is
    neither."""
    data = pa.memory_map(str(source)).read_buffer() if isinstance(source, Path) else source
    if bytes(data[:4]) == _PARQUET_MAGIC:
        shard = pq.ParquetFile(pa.BufferReader(data))
        return shard.schema_arrow, _checked(
            shard.iter_batches(batch_size=BATCH_ROWS, use_threads=False))
    reader = pa.ipc.open_file(pa.BufferReader(data), options=_SHARD_READ)
    return reader.schema, _checked(reader.get_batch(i) for i in range(reader.num_record_batches))


def _checked(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` fully validated, in pieces of at most :data:`BATCH_ROWS` rows. A damaged
    shard can decode without error into offsets that abort a compute kernel (the process, not
    the task), so ``validate`` raises ``pyarrow.ArrowInvalid`` first; the pieces are what the
    growing file writes, so a file built from shards has its row groups and bytes."""
    for batch in batches:
        batch.validate(full=True)
        for start in range(0, batch.num_rows, BATCH_ROWS):
            yield batch.slice(start, BATCH_ROWS)


def decode_shard(data: bytes) -> tuple[pa.RecordBatch, dict[str, int]]:
    """A shard's rows as one batch (schema without metadata) and its quality counts."""
    schema, batches = read_shard(data)
    table = pa.Table.from_batches(list(batches), schema=schema).replace_schema_metadata(None)
    merged = table.combine_chunks().to_batches()
    batch = merged[0] if merged else pa.RecordBatch.from_pylist([], schema=table.schema)
    return batch, shard_quality(schema)


def get_shard(store: ObjectStore, key: str) -> bytes:
    """Blocking: the shard stored at ``key`` (a :func:`streams.layout.shard_key`), or at its legacy
    key. Raises ``KeyError`` / ``FileNotFoundError`` when neither is stored."""
    try:
        return store.get_bytes(key)
    except (KeyError, FileNotFoundError):
        return store.get_bytes(legacy_shard_key(key))


def page_shard(rows: list[dict], doc: DocumentConfig, seq: int,
               batch: pa.RecordBatch | None = None,
               partition: int = 0) -> tuple[bytes, pa.RecordBatch, dict[str, int]]:
    """Blocking: (shard bytes, batch, quality counts) of page ``seq`` of ``partition``; ``batch``
    when already normalized. Raises ``PermanentError`` on a column-spec break."""
    if batch is not None:
        return encode_shard(batch, {}), batch, {}
    batch, quality = rows_to_batch(rows, doc, page=seq, partition=partition)
    return encode_shard(batch, quality), batch, quality


#: Bytes of normalized pages held for this worker's page writer.
HANDOFF_BYTES = 8 << 20

#: Bytes of pages one growing file holds while they wait behind an earlier page
#: (:meth:`TaskFile.keep`): in file order, a partition's pages wait until every earlier partition
#: is in the file; in parts, only pages past a gap in their own partition wait.
WAITING_BYTES = 8 << 20


def hand_off(ctx: Context, key: str, batch: pa.RecordBatch, quality: dict[str, int]) -> None:
    """Keep a page's batch (stored as shard ``key``) for this worker's page
    writer; past :data:`HANDOFF_BYTES` the oldest go (read from shards)."""
    handed = ctx.handed
    take_handed(ctx, key)
    handed[key] = (batch, quality)
    ctx.handed_bytes += batch.nbytes
    while ctx.handed_bytes > HANDOFF_BYTES and len(handed) > 1:
        take_handed(ctx, next(iter(handed)))


def take_handed(ctx: Context, key: str) -> tuple[pa.RecordBatch, dict[str, int]] | None:
    """The (batch, quality) handed off for shard ``key``, removed; or None."""
    handed = ctx.handed.pop(key, None)
    if handed is not None:
        ctx.handed_bytes -= handed[0].nbytes
    return handed


def _add(total: dict[str, int], counts: dict[str, int]) -> None:
    for k, v in counts.items():
        total[k] = total.get(k, 0) + v


def shard_quality(schema: pa.Schema) -> dict[str, int]:
    """The quality counts a shard carries in its schema metadata."""
    return json.loads((schema.metadata or {}).get(QUALITY_KEY, b"{}"))


class Diverged(Exception):
    """A page does not fit the schema the first page fixed: build from shards."""


class PageOrder:
    """Pages in the file: ``done``, each partition's pages from seq 0 (:meth:`written`), so every
    page before ``next`` (:class:`PageKey` order) is in; ``ahead``: keys of pages stored early;
    ``ends``: partition -> last seq. No I/O."""

    def __init__(self, partitions: int = 1, ends: dict[int, int] | None = None) -> None:
        self.partitions = partitions
        self.ends: dict[int, int] = dict(ends or {})
        #: partition -> its pages in the file (seqs 0..n-1)
        self.done: dict[int, int] = {}
        self.ahead: set[PageKey] = set()
        #: ahead page -> when :meth:`gaps` first saw it (epoch s), pruned with ``ahead``
        self.seen_at: dict[PageKey, float] = {}
        #: missing page -> since when (epoch s) as an earlier owner of the file recorded it
        self.known: dict[PageKey, float] = {}

    def note(self, key: PageKey, is_last: bool, partitions: int) -> None:
        """Learn a page's partition count and end. ``PermanentError`` when pages
        disagree on ``partitions`` or a page lies past its partition's end."""
        if partitions != self.partitions:
            raise PermanentError(f"page {key.seq} of partition {key.partition}: partitions "
                                 f"{partitions} differs from {self.partitions} of earlier pages")
        end = self.ends.get(key.partition)
        if end is not None and (key.seq > end or (is_last and key.seq != end)):
            raise PermanentError(f"page {key.seq} of partition {key.partition}: isLast was "
                                 f"page {end} of that partition")
        if is_last:
            later = max([self.done.get(key.partition, 0) - 1]
                        + [k.seq for k in self.ahead if k.partition == key.partition])
            if later > key.seq:
                raise PermanentError(f"page {key.seq} of partition {key.partition}: isLast, but "
                                     f"page {later} of that partition came before it")
            self.ends[key.partition] = key.seq

    def passed(self, key: PageKey) -> None:
        """``key`` (the first page of its partition not in the file) is in the file now."""
        self.ahead.discard(key)
        self.done[key.partition] = key.seq + 1

    def written(self, key: PageKey) -> bool:
        """Whether page ``key`` is in the file."""
        return key.seq < self.done.get(key.partition, 0)

    def is_head(self, key: PageKey) -> bool:
        """Whether ``key`` is the first page not in the file of a partition not yet complete."""
        return (key.partition < self.partitions and key.seq == self.done.get(key.partition, 0)
                and key.seq <= self.ends.get(key.partition, math.inf))

    def heads(self) -> list[PageKey]:
        """:meth:`is_head` pages, in partition order."""
        return [k for k in (PageKey(p, self.done.get(p, 0)) for p in range(self.partitions))
                if self.is_head(k)]

    @property
    def next(self) -> PageKey:
        """The first page in file order not in the file; ``PageKey(partitions, 0)`` when none."""
        for p in range(self.partitions):
            seq = self.done.get(p, 0)
            if seq <= self.ends.get(p, math.inf):
                return PageKey(p, seq)
        return PageKey(self.partitions, 0)

    @property
    def complete(self) -> bool:
        """Every page of every partition is in the file."""
        return self.next == PageKey(self.partitions, 0)

    def ends_list(self) -> list[int]:
        """Each partition's last seq, in partition order (only when complete)."""
        return [self.ends[p] for p in range(self.partitions)]

    def gaps(self, now: float) -> list[tuple[PageKey, float]]:
        """Of each partition, its first page skipped by a later page of its own, and since when
        (epoch s): since the first of those later pages was seen (at ``now`` when this is the
        first call to see it), or since :attr:`known` says, the earlier. Partition order."""
        for key in [k for k in self.seen_at if k not in self.ahead]:
            del self.seen_at[key]
        for key in self.ahead:
            self.seen_at.setdefault(key, now)
        out = []
        for partition in sorted({k.partition for k in self.ahead}):
            seq = self.done.get(partition, 0)
            while PageKey(partition, seq) in self.ahead:
                seq += 1
            later = [t for k, t in self.seen_at.items() if k.partition == partition and k.seq > seq]
            if later:
                gap = PageKey(partition, seq)
                out.append((gap, min(min(later), self.known.get(gap, math.inf))))
        return out


class TaskFile:
    """One task's file growing on this worker. The first page fixes the
    schema; a page that changes it stops the growing (built from shards
    instead), so the result equals :func:`build_file`'s. With partitions and a
    :func:`sinks.writers.concatenable` format (``parts``), each partition's pages are appended
    as they come, partitions after the first into a part file of their own, joined in
    partition order when the file is finished; else pages go in in file order."""

    def __init__(self, task_id: str, doc: DocumentConfig, order: PageOrder | None = None) -> None:
        self.task_id = task_id
        self.doc = doc
        self.order = order or PageOrder()
        self.schema: pa.Schema | None = None
        self.writer = None
        self.dir = Path(tempfile.mkdtemp(prefix=f"plait-{task_id}-"))
        self.parts = self.order.partitions > 1 and concatenable(doc)
        self.grown = True
        self.pages = 0
        self.quality: dict[str, int] = {}
        #: the gaps the ``missing`` checkpoint holds: [(page, since)] (:meth:`PageOrder.gaps`)
        self.missing_mark: list[tuple[PageKey, float]] = []
        #: monotonic seconds of this worker's last progress report
        self.reported_at: float | None = None
        #: pages stored ahead of ``order.next``, kept decoded (:meth:`keep`)
        self.waiting: dict[PageKey, tuple[pa.RecordBatch, dict[str, int]]] = {}
        self.waiting_bytes = 0

    @property
    def next_seq(self) -> int:
        """Pages of partition 0 in the file."""
        return self.order.done.get(0, 0)

    def appendable(self, key: PageKey) -> bool:
        """Whether page ``key`` goes into the file now: the next page in file order, or, in
        ``parts``, the first page of its partition not in the file once the first page of all is
        in (the first page fixes the columns and their order, as in :func:`build_file`)."""
        order = self.order
        if self.parts and (key.partition == 0 or order.written(PageKey(0, 0))):
            return order.is_head(key)
        return key == order.next

    def fits(self, schema: pa.Schema) -> bool:
        """Whether a page of ``schema`` goes into the file unchanged."""
        if self.schema is None:
            return True
        unified = unify_schemas([self.schema, schema.remove_metadata()])
        return unified.equals(self.schema, check_metadata=True)

    def append(self, key: PageKey, batch: pa.RecordBatch | Iterable[pa.RecordBatch],
               schema: pa.Schema, quality: dict[str, int]) -> None:
        """Append page ``key`` (:meth:`appendable`). ``PermanentError`` when the
        writer refuses its rows."""
        if not self.appendable(key):
            raise ValueError(f"page {key} is not the next page ({self.order.next})")
        if self.grown and not self.fits(schema):
            log.info("page does not fit the growing file; it will be built from shards",
                     task=self.task_id, partition=key.partition, seq=key.seq)
            self.stop()
        if self.grown:
            if self.writer is None:
                self.schema = unify_schemas([schema.remove_metadata()])
                self.writer = open_writer(self.dir / "out", self.schema, self.doc)
            own = self.writer.out if self.parts and key.partition else None
            try:
                if own is not None:
                    self.writer.out = open(self._part_path(key.partition), "ab")
                for part in [batch] if isinstance(batch, pa.RecordBatch) else batch:
                    self._write(key, part)
            finally:
                if own is not None:
                    self.writer.out.close()
                    self.writer.out = own
            _add(self.quality, quality)
        self.pages += 1
        self.order.passed(key)

    def _write(self, key: PageKey, batch: pa.RecordBatch) -> None:
        where = f"page {key.seq}" + (f" of partition {key.partition}" if key.partition else "")
        try:
            for start in range(0, batch.num_rows, BATCH_ROWS):
                self.writer.write_batch(conform(batch.slice(start, BATCH_ROWS), self.schema))
        except PermanentError:
            raise
        except Exception as exc:  # a data problem never surfaces as "internal error"
            raise PermanentError(f"{where}: cannot write its rows as {self.doc.fileFormat} "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from exc

    def _part_path(self, partition: int) -> Path:
        """The part file of ``partition`` (``parts``: partitions after the first)."""
        return self.dir / f"part-{partition:05d}"

    def keep(self, key: PageKey, batch: pa.RecordBatch, quality: dict[str, int]) -> None:
        """Hold page ``key``'s batch (its shard is stored) until it is next, so it is appended
        without reading its shard again; past :data:`WAITING_BYTES` the pages furthest in file
        order go (read from their shards when next)."""
        if not self.grown or key in self.waiting:
            return
        self.waiting[key] = (batch, quality)
        self.waiting_bytes += batch.nbytes
        while self.waiting_bytes > WAITING_BYTES and self.waiting:
            self.waiting_bytes -= self.waiting.pop(max(self.waiting))[0].nbytes

    def kept(self, key: PageKey) -> tuple[pa.RecordBatch, dict[str, int]] | None:
        """Page ``key``'s batch held by :meth:`keep`, removed; or None."""
        held = self.waiting.pop(key, None)
        if held is not None:
            self.waiting_bytes -= held[0].nbytes
        return held

    def stop(self) -> None:
        """Stop growing the file (it will be built from shards); keep the order."""
        self.grown = False
        self._close_writer()
        self.waiting.clear()
        self.waiting_bytes = 0

    def _close_writer(self) -> None:
        abort = getattr(self.writer, "abort", None)
        if abort is not None:
            abort()
        self.writer = None

    def finish(self, store: ObjectStore, on_stage: OnStage | None = None) -> Built:
        """Close the writer and upload to ``results/{task id}/{file name}``."""
        with tracing.span("export.write_file", **{"plait.task_id": self.task_id,
                                                  "plait.file_format": self.doc.fileFormat,
                                                  "plait.pages": self.pages,
                                                  "plait.grown": True}):
            report = self.writer.close()
            if self.parts:
                with open(report.path, "ab") as out:
                    for p in range(1, self.order.partitions):
                        part = self._part_path(p)
                        if part.exists():
                            with open(part, "rb") as fh:
                                shutil.copyfileobj(fh, out, 1 << 20)
                            part.unlink()
        quality = dict(self.quality)
        _add(quality, report.quality)
        return upload(store, self.task_id, report, quality, on_stage)

    def discard(self) -> None:
        """Stop the writer, remove the directory; idempotent."""
        self._close_writer()
        self.waiting.clear()
        self.waiting_bytes = 0
        shutil.rmtree(self.dir, ignore_errors=True)


def upload(store: ObjectStore, task_id: str, report: WriteReport,
           quality: dict[str, int], on_stage: OnStage | None = None) -> Built:
    """Blocking: upload a closed writer's file (``on_stage("uploading")`` first)."""
    key = f"results/{task_id}/{report.path.name}"
    size, digest = report.path.stat().st_size, sha256_file(report.path)
    if on_stage is not None:
        on_stage("uploading")
    with tracing.span("export.upload", **{"plait.task_id": task_id, "plait.bytes": size}):
        store.put_file(key, report.path)
    return Built(key, report, size, digest, quality)


def _drain(store: ObjectStore, tf: TaskFile) -> None:
    """Append the waiting pages that are next now (:meth:`TaskFile.appendable`), held or from
    their shards."""
    order = tf.order
    moved = True
    while moved and not order.complete:
        moved = False
        for key in order.heads() if tf.parts else [order.next]:
            while key in order.ahead and tf.appendable(key):
                if not _append_waiting(store, tf, key):
                    return
                moved = True
                key = PageKey(key.partition, key.seq + 1)


def _append_waiting(store: ObjectStore, tf: TaskFile, key: PageKey) -> bool:
    """Append waiting page ``key``: held, else from its shard (counted only, once the file stopped
    growing). False, forgetting it, when its shard is gone (the task ended)."""
    if not tf.grown:
        tf.pages += 1
        tf.order.passed(key)
        return True
    held = tf.kept(key)
    if held is not None:
        tf.append(key, held[0], held[0].schema, held[1])
        return True
    try:
        schema, batches = read_shard(get_shard(store, shard_key(tf.task_id, key.seq,
                                                                 key.partition)))
    except (KeyError, FileNotFoundError):
        tf.order.ahead.discard(key)
        return False
    tf.append(key, batches, schema, shard_quality(schema))
    return True


def _take_stored(ctx: Context, tf: TaskFile) -> None:
    """Append each next page whose shard is stored though its event has not reached this worker's
    writer (taken by another worker before a rebalance, or on its way), one probe per page:
    listing every shard of the task on each page that waits would cost a partitioned export time
    quadratic in its pages. A page fetched here and not yet written (:func:`hand_off`) is left
    to its own event, which follows."""
    order = tf.order
    while not order.complete and order.next not in order.ahead:
        nxt = order.next
        key = shard_key(tf.task_id, nxt.seq, nxt.partition)
        if key in ctx.handed or not (ctx.store.exists(key)
                                     or ctx.store.exists(legacy_shard_key(key))):
            return
        order.ahead.add(nxt)
        _drain(ctx.store, tf)
        if order.next == nxt:  # its shard went meanwhile (the task ended)
            return


def rescan(store: ObjectStore, tf: TaskFile) -> None:
    """Blocking: learn every stored shard of the task and append those next."""
    for key in store.list(shard_prefix(tf.task_id)):
        page = parse_shard_key(tf.task_id, key)
        if page is not None and not tf.order.written(page):
            tf.order.ahead.add(page)
    _drain(store, tf)


def grow(ctx: Context, tf: TaskFile, key: PageKey, batch: pa.RecordBatch,
         quality: dict[str, int]) -> None:
    """Blocking: append page ``key`` when it may go in (:meth:`TaskFile.appendable`; then the
    waiting pages that follow, and the file's front from its shard when stored), skip it when
    already in the file (a redelivery, or appended from its shard before its ``isLast`` was known),
    else hold its key and append the next pages whose shards are stored (:func:`_take_stored`).
    ``PermanentError`` propagates; any failure drops the file (then built from shards)."""
    order = tf.order
    try:
        if tf.appendable(key):
            tf.append(key, batch, batch.schema, quality)
            _drain(ctx.store, tf)
            if order.next.partition != key.partition:
                _take_stored(ctx, tf)  # the front may be a page whose event went elsewhere
        elif not order.written(key):
            order.ahead.add(key)
            tf.keep(key, batch, quality)
            _take_stored(ctx, tf)
        else:  # in the file already (from its shard); its isLast may have moved
            _drain(ctx.store, tf)  # ``next`` to a partition whose pages wait ahead
    except BaseException:
        drop(ctx, tf.task_id)
        raise


def drop(ctx: Context, task_id: str) -> None:
    """Forget a task's growing file on this worker (idempotent)."""
    tf = ctx.files.pop(task_id, None)
    if tf is not None:
        tf.discard()


def finish(ctx: Context, task_id: str, last: int | list[int], doc: DocumentConfig,
           on_stage: OnStage | None = None) -> Built:
    """Blocking: upload the grown file when it holds every page up to ``last``
    (per partition), else one built from the shards; then, done or failed, hands
    the memory freed back to the OS (:func:`plait.memory.release_in_background`: the caller
    does not wait for it)."""
    ends = [last] if isinstance(last, int) else list(last)
    try:
        tf = ctx.files.pop(task_id, None)
        if tf is not None:
            try:
                order = tf.order
                if (tf.grown and tf.writer is not None and order.complete
                        and order.ends_list() == ends):
                    return tf.finish(ctx.store, on_stage)
            finally:
                tf.discard()
        return build_file(ctx.store, task_id, ends, doc, on_stage)
    finally:
        release_in_background()  # not on the way to SUCCESS


def build_file(store: ObjectStore, task_id: str, last: int | list[int], doc: DocumentConfig,
               on_stage: OnStage | None = None) -> Built:
    """Blocking: merge the shards up to ``last`` (per partition) into one file
    and upload it. Raises ``PermanentError`` when a shard is missing."""
    ends = [last] if isinstance(last, int) else list(last)
    keys = list(page_keys(ends))
    present = set(store.list(shard_prefix(task_id)))
    stored = {}  # page -> the key its shard is stored at (this version's, or an earlier one's)
    for k in keys:
        key = shard_key(task_id, k.seq, k.partition)
        legacy = legacy_shard_key(key)
        stored[k] = legacy if key not in present and legacy in present else key
    missing = [k for k in keys if stored[k] not in present]
    if missing and len(ends) == 1:
        raise PermanentError(f"shards missing for pages {[k.seq for k in missing[:10]]} "
                             f"of 0..{ends[0]}")
    if missing:
        raise PermanentError("shards missing for pages " + ", ".join(
            f"{k.seq} of partition {k.partition}" for k in missing[:10]))
    with tempfile.TemporaryDirectory(prefix=f"plait-{task_id}-") as tmp:
        work = Path(tmp)
        paths, quality = [], {}
        for n, key in enumerate(keys):
            path = work / f"{n:08d}.shard"
            path.write_bytes(store.get_bytes(stored[key]))
            paths.append(path)
        schemas = []
        for path in paths:
            schema, _ = read_shard(path)
            _add(quality, shard_quality(schema))
            schemas.append(schema.remove_metadata())
        schema = unify_schemas(schemas)
        out = work / "out"
        out.mkdir()
        with tracing.span("export.write_file", **{"plait.task_id": task_id,
                                                  "plait.file_format": doc.fileFormat,
                                                  "plait.pages": len(keys),
                                                  "plait.grown": False}):
            writer = open_writer(out, schema, doc)
            for (_, seq), path in zip(keys, paths):
                try:
                    for batch in read_shard(path)[1]:
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
    """Send a PROGRESS with ``stage`` (``docs/events.md``), recorded in the
    projection first (SUCCESS drops it). Returns whether it was sent; never
    raises: a progress report never fails the export."""
    if event is None:
        event = lifecycle(spec, task_id, "PROGRESS", stage=stage, workerId=ctx.worker_id)
    else:
        event.payload.stage = stage
    try:
        await record(ctx, event.payload)
        if ctx.report is None:
            return False
        await ctx.report([event])
        return True
    except Exception as exc:
        log.warning("cannot report stage", task=task_id, stage=stage,
                    reason=f"{type(exc).__name__}: {exc}")
        return False


def stage_reporter(ctx: Context, spec: ExportSpec, task_id: str) -> OnStage:
    """An ``on_stage`` for a worker thread: runs :func:`report_stage` on this
    loop and waits (<= 30 s) so it precedes the upload and SUCCESS."""
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
