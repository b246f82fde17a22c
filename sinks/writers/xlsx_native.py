"""Native xlsx engine: rustpy-xlsxwriter 0.8.0 (rust_xlsxwriter) behind the writer interface, with
xlsxwriter (:class:`sinks.writers.xlsx_writer.XlsxWriter`) as reference engine and per-file
fallback.

The library has a bulk API only (it pulls a ``RecordBatchReader``; per-column formats), so:

1. ``write_batch`` spools each batch to Arrow IPC beside the output and scans it for what the native
engine cannot hold (:data:`FALLBACK_RULES`): the first such cell sends the file to xlsxwriter. 2.
While every batch is clean a thread streams them into the engine; it stops on a fallback, a second
sheet, or a number format change (F3). 3. ``close`` ends the stream or replays the spool into the
engine chosen, each batch first prepared with the rules the library lacks: text sanitized and cut to
32,767 UTF-16 units; date serials computed here (ms, F3; 1900 serials 1..59, F12); ``-0.0`` -> 0
(F2), NaN blank, inf as ``doc.infText``; decimals as doubles (F11); header, widths, autofilter as
the reference engine; sheets roll over after 1,048,575 rows; integers without ``.0`` (F8,
:func:`finish_package`); fixed ``docProps/core.xml`` time. A single sheet goes in chunks of
:data:`CHUNK_CELLS` cells (:func:`write_chunked`), so save and rewrite overlap the fetch."""
from __future__ import annotations

import io
import os
import queue
import re
import shutil
import threading
import zipfile
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from plait.logs import get_logger
from plait.spec import DocumentConfig
from sinks.values import MAX_EXACT_INT, is_mixed
from sinks.writers.base import WriteReport
from sinks.writers.cells import (
    BAD_PY, BAD_RE2, XLSX_MAX_CELL_CHARS, EXCEL_MAX_NUMBER, EXCEL_MIN_NUMBER, SingleFileWriter,
    decimal_float, headers, kind_of_field, other_cells, text_cells, utf16_cut,
)
from sinks.writers.xlsx_writer import (
    DAY_US, DEFAULT_FORMATS, SERIAL_1970, EXCEL_FIRST_DAY, EXCEL_LAST_DAY, MAX_DATA_ROWS,
    MS_FORMAT, XlsxWriter, sheet_name,
)

try:  # pinned in pyproject.toml (rustpy-xlsxwriter==0.8.0)
    import rustpy_xlsxwriter as _native
except ImportError:  # pragma: no cover - the reference engine still works
    _native = None

log = get_logger(__name__)

#: Why a file falls back to xlsxwriter (rule -> what rustpy-xlsxwriter 0.8.0 lacks).
FALLBACK_RULES = {
    "mixed_types": "per-cell types in a mixed column (F7): the library types a whole column",
    "formula_escaped": "per-cell quote-prefix style: the library has column formats only",
    "int_beyond_2**53": "integers a double cannot hold are text cells in a number column",
    "excel_number_range": "doubles Excel cannot show are text cells in a number column (F2)",
    "decimal_digits": "decimals a double cannot hold to 15 digits are text cells (F11)",
    "date_range": "dates before 1900 / after 9999 are text cells in a date column (F12, F4)",
    "subsecond_mixed": "a datetime column with and without sub-second cells needs two formats (F3)",
    "trailing_blank_row": "a sheet ending in an all-blank row needs a styled blank cell",
    "header": "duplicate or empty header texts (the library keys columns by header)",
    "no_native_engine": "rustpy-xlsxwriter is not installed",
    "native_error": "the native engine raised",
}
_ABORT = object()


class _Aborted(Exception):
    """Raised into the native engine to stop a stream that cannot be the file."""


_FORMULA_AFTER_BAD = r"^[\x00-\x08\x0b\x0c\x0e-\x1f\x{FFFE}\x{FFFF}]*[=+\-@\t\r]"
FIXED_W3CDTF = "2000-01-01T00:00:00Z"
_CORE_XML = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
    'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/'
    'dc/terms/" xmlns:dcmitype="http://purl.org/dc/dcmitype/" xmlns:xsi="http://www.w3.org/2001/'
    'XMLSchema-instance"><dc:creator></dc:creator><cp:lastModifiedBy></cp:lastModifiedBy>'
    f'<dcterms:created xsi:type="dcterms:W3CDTF">{FIXED_W3CDTF}</dcterms:created>'
    f'<dcterms:modified xsi:type="dcterms:W3CDTF">{FIXED_W3CDTF}</dcterms:modified>'
    '</cp:coreProperties>')


def native_available() -> bool:
    """Whether rustpy-xlsxwriter imports in this process."""
    return _native is not None


class NativeXlsxWriter(SingleFileWriter):
    """xlsx via rustpy-xlsxwriter, falling back to xlsxwriter per file; same output rules as
    :class:`~sinks.writers.xlsx_writer.XlsxWriter`. After ``close()``: ``engine`` and ``fallback``
    (the :data:`FALLBACK_RULES` key, or None). Memory: one batch; the spool holds the rows on disk.
    """

    ext = "xlsx"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        self._kinds = [kind_of_field(f) for f in schema]
        self.engine: str | None = None
        self.fallback: str | None = None if native_available() else "no_native_engine"
        self._spool_path = path.with_name(f".{path.name}.spool.arrow")
        self._sink = pa.OSFile(str(self._spool_path), "wb")
        self._spool = pa.ipc.new_file(self._sink, schema)
        self._sub = [False] * len(schema)    # a datetime cell with a sub-second part
        self._whole = [False] * len(schema)  # ... and one without
        self._last_blank: list[bool] = []    # per sheet: does its last row hold only blanks
        for i, f in enumerate(schema):
            if is_mixed(f):
                self._fail("mixed_types", f.name)
        heads = headers(schema, doc, with_zone=True)
        if len(set(heads)) != len(heads) or not all(heads):
            self._fail("header")
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stream_error: BaseException | None = None
        self._stream_formats: list | None = None
        self._aborted = False

    # -- scanning -----------------------------------------------------------
    def _fail(self, rule: str, column: str | None = None) -> None:
        if self.fallback is None:
            self.fallback = rule if column is None else f"{rule}:{column}"

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Spool ``batch`` and check it for cells only xlsxwriter can write."""
        self._check_batch(batch)
        if batch.num_rows == 0:
            return
        self._spool.write_batch(batch)
        if self.fallback is None:
            self._scan(batch)
        self.rows += batch.num_rows
        self._stream(batch)

    # -- streaming ------------------------------------------------------------
    def _stream(self, batch: pa.RecordBatch) -> None:
        """Hand ``batch`` to the streaming thread (started on the first batch), or stop the stream
        when it can no longer be the file (fallback, second sheet, format change); ``close`` then
        writes from the spool."""
        if self._queue is None:
            if self.fallback is None and self._thread is None and self.rows <= MAX_DATA_ROWS:
                self._stream_formats = self._format_names()
                self._queue = queue.Queue(maxsize=8)
                self._thread = threading.Thread(target=self._stream_main, daemon=True,
                                                name=f"xlsx-native-{self.path.name}")
                self._queue.put(batch)
                self._thread.start()
            return
        if (self.fallback is not None or self.rows > MAX_DATA_ROWS
                or self._format_names() != self._stream_formats):
            self._stop_stream(abort=True)
            return
        self._put(batch)

    def _put(self, item) -> None:
        while self._thread.is_alive():
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def _queued(self) -> Iterator[pa.RecordBatch]:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if item is _ABORT:
                raise _Aborted("stream stopped")
            yield item

    def _stream_main(self) -> None:
        try:
            self._write_native(self._queued(), 1, self._stream_formats)
        except BaseException as exc:  # noqa: BLE001 - reported by close()
            self._stream_error = exc

    def abort(self) -> None:
        """Drop the file unfinished, stopping the streaming thread. Idempotent."""
        self._stop_stream(abort=True)

    def _stop_stream(self, abort: bool) -> bool:
        """End the stream; True when the thread wrote the whole file."""
        if self._queue is None:
            return False
        self._aborted = abort
        self._put(_ABORT if abort else None)
        self._thread.join()
        q, self._queue = self._queue, None
        del q
        ok = not abort and self._stream_error is None
        if not ok:
            self.quality = type(self.quality)()  # counts start again from the spool
        return ok

    def _scan(self, batch: pa.RecordBatch) -> None:
        escape = self.doc.escapeFormulas
        for c, col in enumerate(batch.columns):
            kind, name = self._kinds[c], self.names[c]
            if col.null_count == len(col):
                continue
            if kind in ("text", "other"):
                if kind == "other" or not pa.types.is_string(col.type):
                    col = _as_text(col)
                if escape and pc.any(pc.match_substring_regex(col, _FORMULA_AFTER_BAD)).as_py():
                    return self._fail("formula_escaped", name)
            elif kind == "int":
                lo, hi = (s.as_py() for s in pc.min_max(col).values())
                if lo < -MAX_EXACT_INT or hi > MAX_EXACT_INT:
                    return self._fail("int_beyond_2**53", name)
            elif kind == "float":
                a = pc.abs(col)
                bad = pc.or_(pc.and_(pc.greater(a, EXCEL_MAX_NUMBER), pc.is_finite(a)),
                             pc.and_(pc.greater(a, 0.0), pc.less(a, EXCEL_MIN_NUMBER)))
                if pc.any(bad).as_py():
                    return self._fail("excel_number_range", name)
            elif kind == "decimal":
                if any(decimal_float(d) is None for d in col.to_pylist() if d is not None):
                    return self._fail("decimal_digits", name)
            elif kind in ("datetime", "date"):
                days, rem = _wall_days(col)
                lo, hi = (s.as_py() for s in pc.min_max(days).values())
                if lo < EXCEL_FIRST_DAY or hi > EXCEL_LAST_DAY:
                    return self._fail("date_range", name)
                if rem is not None:
                    sub = pc.not_equal(pc.subtract(rem, pc.multiply(
                        pc.divide(rem, 1_000_000), 1_000_000)), 0)
                    self._sub[c] = self._sub[c] or bool(pc.any(sub).as_py())
                    self._whole[c] = self._whole[c] or bool(pc.any(pc.invert(sub)).as_py())
                    if self._sub[c] and self._whole[c] and not self._has_spec_format(name):
                        return self._fail("subsecond_mixed", name)
        # The last data row of each sheet must hold a value (checked at close for the file's last).
        start = self.rows
        ends = [k * MAX_DATA_ROWS - 1 - start
                for k in range(start // MAX_DATA_ROWS + 1, (start + batch.num_rows) // MAX_DATA_ROWS + 1)]
        ends.append(batch.num_rows - 1)
        for i in ends:
            if 0 <= i < batch.num_rows:
                blank = all(not _cell_present(col, i) for col in batch.columns)
                if i != batch.num_rows - 1 and blank:
                    return self._fail("trailing_blank_row")
                if i == batch.num_rows - 1:
                    self._tail_blank = blank
                    if blank and (start + i + 1) % MAX_DATA_ROWS == 0:
                        return self._fail("trailing_blank_row")

    def _has_spec_format(self, name: str) -> bool:
        return any(c.fieldName == name and c.format for c in self.doc.columns or [])

    # -- closing ------------------------------------------------------------
    def close(self) -> WriteReport:
        """Write the workbook with the engine chosen; returns the report."""
        if self.closed:
            return self.report()
        self._spool.close()
        self._sink.close()
        try:
            if self.fallback is None and getattr(self, "_tail_blank", False):
                self._fail("trailing_blank_row")
            streamed = self._stop_stream(abort=self.fallback is not None)
            if self._stream_error is not None and not self._aborted:
                log.warning("xlsx_native_stream_failed", error=repr(self._stream_error)[:200])
            if self.fallback is None and streamed:
                self.engine = "rustpy-xlsxwriter"
                return self.report()
            if self.fallback is None:
                try:
                    self._write_native(self._spooled(), max(1, -(-self.rows // MAX_DATA_ROWS)),
                                       self._format_names())
                    self.engine = "rustpy-xlsxwriter"
                    return self.report()
                except Exception as exc:  # noqa: BLE001 - the reference engine still can
                    log.warning("xlsx_native_failed", error=repr(exc)[:200], file=self.path.name)
                    self.fallback = "native_error"
                    self.quality = type(self.quality)()
            log.info("xlsx_fallback", rule=self.fallback, file=self.path.name,
                     why=FALLBACK_RULES.get(self.fallback.split(":")[0]))
            ref = XlsxWriter(self.path, self.schema, self.doc)
            for batch in self._spooled():
                ref.write_batch(batch)
            rep = ref.close()
            self.engine, self.quality, self.sheets = "xlsxwriter", ref.quality, ref.sheets
            return rep
        finally:
            self.closed = True
            self._spool_path.unlink(missing_ok=True)

    def _spooled(self) -> Iterator[pa.RecordBatch]:
        with pa.memory_map(str(self._spool_path)) as src:
            reader = pa.ipc.open_file(src)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    def _format_names(self) -> list:
        spec_fmt = {c.fieldName: c.format for c in self.doc.columns or [] if c.format}
        return [spec_fmt.get(f.name) or (MS_FORMAT if kind == "datetime" and sub and not whole
                                         else DEFAULT_FORMATS.get(kind))
                for f, kind, sub, whole in zip(self.schema, self._kinds, self._sub, self._whole)]

    def _write_native(self, batches: Iterator[pa.RecordBatch], n_sheets: int,
                      format_names: list) -> None:
        """Write ``batches`` with the native engine into ``n_sheets`` sheets with ``format_names``:
        one sheet chunk by chunk (:func:`write_chunked`), else in one call; then
        :func:`finish_package`."""
        heads = text_cells(pa.array(headers(self.schema, self.doc, with_zone=True), pa.string()),
                           self.quality, escape=False, mark=str, max_chars=XLSX_MAX_CELL_CHARS)
        out_schema = pa.schema([pa.field(h, _out_type(k)) for h, k in zip(heads, self._kinds)])
        formats = [_native.Format().set_num_format(num) if num else None
                   for num in format_names]
        names = [sheet_name(self.doc.sheetName, "" if k == 0 else f" ({k + 1})")
                 for k in range(n_sheets)]
        state = {"widths": None}

        def prepared() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                out = pa.RecordBatch.from_arrays(
                    [self._prepare(c, col) for c, col in enumerate(batch.columns)],
                    schema=out_schema)
                if state["widths"] is None:
                    state["widths"] = self._widths(heads, batch.slice(0, 1000), out)
                yield out

        def take(source, want: int) -> Iterator[pa.RecordBatch]:
            # the next ``want`` rows of the prepared stream
            while want:
                batch = source["pending"] or next(source["it"], None)
                source["pending"] = None
                if batch is None:
                    return
                if batch.num_rows > want:
                    source["pending"] = batch.slice(want)
                    batch = batch.slice(0, want)
                want -= batch.num_rows
                yield batch

        source = {"it": prepared(), "pending": None}
        first = next(source["it"], None)
        source["pending"] = first
        widths = state["widths"]  # None without rows: Excel's default widths, as xlsxwriter
        options = dict(
            freeze_panes={"general": {"row": 1}}, bold_headers=True, inf_value=self.doc.infText,
            autofilter={n: True for n in names},
            column_widths={n: widths for n in names} if widths else None,
            column_formats={n: formats for n in names})
        ints = [c for c, k in enumerate(self._kinds) if k == "int"]
        keep_floats = any(k in ("float", "decimal") for k in self._kinds)
        if n_sheets == 1 and first is not None:
            rows = max(1, CHUNK_CELLS // max(1, len(self._kinds)))

            def next_chunk() -> Iterator[pa.RecordBatch] | None:
                if source["pending"] is None:
                    source["pending"] = next(source["it"], None)
                return None if source["pending"] is None else take(source, rows)

            write_chunked(self.path, names[0], next_chunk, out_schema, options,
                          _stripper(ints, keep_floats))
            self.sheets = 1
            return
        sheets = [(names[k], pa.RecordBatchReader.from_batches(out_schema,
                                                               take(source, MAX_DATA_ROWS)))
                  for k in range(n_sheets)]
        _native.write_worksheets(sheets, str(self.path), **options)
        self.sheets = n_sheets
        finish_package(self.path, ints, keep_floats)

    def _widths(self, heads: list, raw: pa.RecordBatch, out: pa.RecordBatch) -> list[int]:
        """Column widths as the reference engine estimates them (first 1,000 rows)."""
        widths = []
        for c, kind in enumerate(self._kinds):
            longest = len(heads[c] or "")
            if kind == "datetime":
                longest = max(longest, 19)
            else:
                if kind == "date":
                    values = [None if d is None else d * DAY_US
                              for d in raw.column(c).cast(pa.int32()).to_pylist()]
                elif kind == "decimal":
                    values = raw.column(c).to_pylist()
                elif kind == "float":
                    values = [None if v is None or v != v else
                              v if v not in (float("inf"), float("-inf")) else
                              (self.doc.infText if v > 0 else "-" + self.doc.infText)
                              for v in raw.column(c).to_pylist()]
                else:
                    values = out.column(c).slice(0, 1000).to_pylist()
                for v in values[:1000]:
                    if v is not None:
                        longest = max(longest, len(str(v)))
            widths.append(min(max(longest + 2, 8), 60))
        return widths

    def _prepare(self, c: int, col: pa.Array) -> pa.Array:
        kind, name = self._kinds[c], self.names[c]
        if kind in ("text", "other"):
            return self._text(col if kind == "text" else _as_text(col), name)
        if kind == "int":
            return col.cast(pa.int64())
        if kind == "float":
            return pc.add(col.cast(pa.float64()), 0.0)  # -0.0 -> 0.0
        if kind == "decimal":
            return pa.array([None if d is None else decimal_float(d) for d in col.to_pylist()],
                            pa.float64())
        if kind == "bool":
            return col
        days, rem = _wall_days(col)
        days = days.cast(pa.int64())
        day = pc.add(days, SERIAL_1970)
        day = pc.if_else(pc.less(day, 61), pc.subtract(day, 1), day).cast(pa.float64())
        if rem is None:
            return day
        ms = pc.min_element_wise(pc.divide(pc.add(rem, 500), 1000), 86_399_999)
        return pc.add(day, pc.divide(ms.cast(pa.float64()), 86_400_000.0))

    def _text(self, col: pa.Array, name: str) -> pa.Array:
        if not pa.types.is_string(col.type):
            col = col.cast(pa.string())
        if col.null_count == len(col):
            return col
        bad = pc.fill_null(pc.match_substring_regex(col, BAD_RE2), False)
        n = pc.sum(bad).as_py() or 0
        if n:
            col = pc.replace_substring_regex(col, BAD_RE2, "")
            self.quality.add("sanitized", n, name)
        # a UTF-8 byte count above the limit is needed for more than 32,767 UTF-16 units
        long = pc.fill_null(pc.greater(pc.binary_length(col), XLSX_MAX_CELL_CHARS), False)
        if pc.any(long).as_py():
            values = col.to_pylist()
            for i in pc.indices_nonzero(long).to_pylist():
                cut = utf16_cut(values[i], XLSX_MAX_CELL_CHARS)
                if len(cut) != len(values[i]):
                    self.quality.add("truncated", 1, name)
                    values[i] = cut
            col = pa.array(values, pa.string())
        empty = pc.equal(pc.binary_length(col), 0)
        if pc.any(empty).as_py():
            col = pc.if_else(empty, pa.scalar(None, pa.string()), col)
        return col


def _out_type(kind: str) -> pa.DataType:
    return {"int": pa.int64(), "float": pa.float64(), "decimal": pa.float64(), "bool": pa.bool_(),
            "datetime": pa.float64(), "date": pa.float64()}.get(kind, pa.string())


def _as_text(col: pa.Array) -> pa.Array:
    if pa.types.is_string(col.type):
        return col
    if pa.types.is_null(col.type) or pa.types.is_large_string(col.type):
        return col.cast(pa.string())
    return pa.array(other_cells(col), pa.string())


def _wall_days(col: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """``(days since 1970-01-01, microseconds into the day or None)`` of the
    wall time in the column's zone (dates: ``rem`` is ``None``)."""
    if pa.types.is_date(col.type):
        return col.cast(pa.int32()), None
    if col.type.unit != "us":
        col = col.cast(pa.timestamp("us", col.type.tz))
    wall = pc.local_timestamp(col) if col.type.tz else col
    us = wall.cast(pa.int64())
    days = pc.divide(us, DAY_US)  # truncates toward zero
    rem = pc.subtract(us, pc.multiply(days, DAY_US))
    neg = pc.less(rem, 0)  # floor division for instants before 1970
    return (pc.if_else(neg, pc.subtract(days, 1), days),
            pc.if_else(neg, pc.add(rem, DAY_US), rem))


def _cell_present(col: pa.Array, i: int) -> bool:
    """Whether row ``i`` of ``col`` is a cell: null, NaN, ``""`` and text of forbidden characters
    only are blank."""
    v = col[i]
    if not v.is_valid:
        return False
    py = v.as_py()
    if isinstance(py, float) and py != py:
        return False
    return not (isinstance(py, str) and BAD_PY.sub("", py) == "")


_INT_SUFFIX = b".0</v>"
_CHUNK = 4 << 20
#: Deflate level of rewritten sheets, on the path to SUCCESS (docs/perf-notes.md).
SHEET_DEFLATE_LEVEL = 1
#: Deflating threads (zlib releases the GIL) and chunks in flight (memory: that many x 4 MiB).
DEFLATE_THREADS = 2
_IN_FLIGHT = 4


def _column_letters(c: int) -> bytes:
    out = ""
    c += 1
    while c:
        c, r = divmod(c - 1, 26)
        out = chr(65 + r) + out
    return out.encode()


def _deflate_chunk(data: bytes) -> bytes:
    """``data`` as raw deflate blocks ending byte-aligned, not final (``Z_SYNC_FLUSH``, fresh
    compressor), so independent chunks concatenate into one stream, ended by an empty final block.
    """
    comp = zlib.compressobj(SHEET_DEFLATE_LEVEL, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush(zlib.Z_SYNC_FLUSH)


def finish_package(path: Path, int_columns: list[int], keep_float_columns: bool) -> None:
    """Rewrite the native package for two rules it does not keep: integers as ``517`` (F8; in
    ``int_columns``, or everywhere when ``keep_float_columns`` is false) and deterministic bytes
    (:data:`FIXED_W3CDTF` in ``docProps/core.xml``, entries dated 1980-01-01).

    Entries are copied into a new zip that replaces ``path``; a sheet is inflated in 4 MiB chunks
    cut after ``</c>``, rewritten, and deflated by :data:`DEFLATE_THREADS` threads while the next is
    inflated. Same input, same bytes."""
    if not int_columns:
        _fix_core_in_place(path)
        return
    tmp = path.with_name(f".{path.name}.pkg")
    pattern = None
    if int_columns and keep_float_columns:
        letters = b"|".join(_column_letters(c) for c in int_columns)
        pattern = re.compile(rb'(<c r="(?:' + letters + rb')\d+"(?: s="\d+")?><v>-?\d+)\.0</v>')
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst, \
            ThreadPoolExecutor(DEFLATE_THREADS, thread_name_prefix="xlsx-deflate") as pool:
        for info in src.infolist():
            new = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            new.compress_type = zipfile.ZIP_DEFLATED
            new.external_attr = info.external_attr
            if info.filename == "docProps/core.xml":
                dst.writestr(new, _CORE_XML.encode())
            elif info.filename.startswith("xl/worksheets/sheet"):
                new._compresslevel = SHEET_DEFLATE_LEVEL
                with src.open(info) as fin, dst.open(new, "w", force_zip64=True) as fout:
                    _write_sheet(fin, fout, pattern, pool)
            else:
                dst.writestr(new, src.read(info))
    os.replace(tmp, path)


def _rewritten_chunks(fin, pattern) -> Iterator[bytes]:
    """The sheet XML of ``fin`` in about 4 MiB chunks, each cut after a ``</c>`` (a ``.0</v>`` is
    never split) and with the ``.0`` removed."""
    carry = b""
    while True:
        chunk = fin.read(_CHUNK)
        data = carry + chunk
        if not chunk:
            if data:
                yield _strip(data, pattern)
            return
        cut = data.rfind(b"</c>") + 4
        if cut <= 4:
            carry = data
            continue
        yield _strip(data[:cut], pattern)
        carry = data[cut:]


def _write_sheet(fin, fout, pattern, pool: ThreadPoolExecutor) -> None:
    """Write the rewritten sheet from ``fin`` into ``fout`` (a zipfile write handle) as chunks
    deflated in ``pool``, the bytes straight to the archive with CRC-32 and sizes kept as the
    handle's ``write`` keeps them."""
    pending: deque = deque()

    def drain(keep: int) -> None:
        while len(pending) > keep:
            compressed = pending.popleft().result()
            fout._fileobj.write(compressed)
            fout._compress_size += len(compressed)

    for data in _rewritten_chunks(fin, pattern):
        pending.append(pool.submit(_deflate_chunk, data))
        fout._file_size += len(data)
        fout._crc = zlib.crc32(data, fout._crc)
        drain(_IN_FLIGHT)
    drain(0)


#: Cells per chunk of a single sheet (131,072: 6,898 rows of 19 columns), each a workbook of its
#: own in memory (``header_row`` places its rows), so deflate and rewrite run while pages are
#: fetched. Memory: about two chunks, each the library's cells, then its package and sheet XML
#: (docs/perf-notes.md, "Writer worker peak RSS").
CHUNK_CELLS = 1 << 17
_SHEET_XML = "xl/worksheets/sheet1.xml"
_DIMENSION_RE = re.compile(rb'(<dimension ref="[A-Z]+\d+:)([A-Z]+\d+)("/>)')
_AUTOFILTER_RE = re.compile(rb'(<autoFilter ref="[A-Z]+\d+:)([A-Z]+\d+)("/>)')
_DEFINED_END_RE = re.compile(rb'(:)\$([A-Z]+)\$(\d+)(</definedName>)')


def _stripper(int_columns: list[int], keep_float_columns: bool):
    """The ``.0`` rewrite of :func:`finish_package` as a function of a piece
    of row XML (whole ``<row>`` elements, bytes) returning a buffer: none
    without integer columns, a literal replace without float/decimal columns,
    else a regex (RE2, the same pattern) on the integer columns' cells. Both
    run in Arrow, which releases the GIL (the worker's loop keeps running)."""
    if not int_columns:
        return lambda data: data
    if not keep_float_columns:
        return lambda data: _arrow_replace(pc.replace_substring, data, _INT_SUFFIX, b"</v>")
    letters = "|".join(_column_letters(c).decode() for c in int_columns)
    pattern = r'(<c r="(?:' + letters + r')\d+"(?: s="\d+")?><v>-?\d+)\.0</v>'
    return lambda data: _arrow_replace(pc.replace_substring_regex, data, pattern, r"\1</v>")


def _arrow_replace(fn, data: bytes, pattern, replacement) -> pa.Buffer:
    arr = pa.Array.from_buffers(pa.large_binary(), 1, [
        None, pa.array([0, len(data)], pa.int64()).buffers()[1], pa.py_buffer(data)])
    return fn(arr, pattern, replacement)[0].as_buffer()


def _rewrite_piece(strip, piece: memoryview) -> tuple:
    """``(rewritten piece, its deflate blocks)`` (:func:`_deflate_chunk`)."""
    data = strip(piece)
    return data, _deflate_chunk(data)


def _gf2_times(mat: list[int], vec: int) -> int:
    total, i = 0, 0
    while vec:
        if vec & 1:
            total ^= mat[i]
        vec >>= 1
        i += 1
    return total


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of ``a + b`` from ``crc1 = crc32(a)``, ``crc2 = crc32(b)`` and
    ``len2 = len(b)`` (zlib's ``crc32_combine``, which Python's zlib does not
    expose). O(log len2)."""
    if len2 <= 0:
        return crc1

    def square(m: list[int]) -> list[int]:
        return [_gf2_times(m, m[n]) for n in range(32)]

    op = square(square([0xEDB88320] + [1 << n for n in range(31)]))  # 1 -> 4 zero bits
    while len2:  # squared once per bit of len2: 1, 2, 4... zero bytes
        op = square(op)
        if len2 & 1:
            crc1 = _gf2_times(op, crc1)
        len2 >>= 1
    return crc1 ^ crc2


def _pieces(xml: bytes, begin: int, end: int, size: int = _CHUNK) -> Iterator[memoryview]:
    """``xml[begin:end]`` (whole ``<row>`` elements) in pieces of about
    ``size`` bytes, each cut after a ``</row>``; views, no copies."""
    view = memoryview(xml)
    while begin < end:
        cut = xml.find(b"</row>", begin + size, end)
        stop = end if cut < 0 else cut + 6
        yield view[begin:stop]
        begin = stop


def write_chunked(path: Path, name: str, next_chunk, schema: pa.Schema, options: dict,
                  strip) -> None:
    """Write one sheet named ``name`` into the xlsx ``path`` with the native
    engine, chunk by chunk, and fix the package as :func:`finish_package` does.

    ``next_chunk()`` returns the next chunk's batches (prepared, ``schema``)
    or ``None`` after the last; at least one chunk. ``options``: the library's
    keyword arguments (the same for every chunk, so styles and their indexes
    agree); ``strip``: the ``.0`` rewrite (:func:`_stripper`).

    Chunk ``k`` is a workbook of its own written into memory with its header
    at row ``start`` (the rows written before it), so its data rows carry
    their final row numbers. Its rows (without that repeated header) are
    rewritten and deflated in a thread while the library writes chunk
    ``k + 1``, appended to a spool of compressed rows next to ``path``. At the
    end the package of chunk 0 is copied with: its sheet's rows replaced by
    the spool, the sheet's ``<dimension>``, ``<autoFilter>`` and the
    ``_xlnm._FilterDatabase`` name ending at the last chunk's last cell (what
    one write of all rows gives), ``docProps/core.xml`` fixed, entries dated
    1980-01-01. Same rows -> same bytes (chunks are cut at fixed row counts).
    Raises what the library raises (the caller falls back).
    """
    spool_path = path.with_name(f".{path.name}.rows")
    acc = {"crc": 0, "size": 0, "compressed": 0}
    first: dict = {}
    last_end = {}

    def post(k: int, package: bytes, out, deflate: ThreadPoolExecutor) -> None:
        # runs in ``post_pool`` (one thread: chunks in order)
        with zipfile.ZipFile(io.BytesIO(package)) as zf:
            if _SHEET_XML not in zf.namelist() or len(zf.namelist()) != len(set(zf.namelist())):
                raise RuntimeError("unexpected package from the native engine")
            if k == 0:  # every entry but the sheet, kept for the end
                first["entries"] = [(i, b"" if i.filename == _SHEET_XML else zf.read(i))
                                    for i in zf.infolist()]
            xml = zf.read(_SHEET_XML)
        begin = xml.index(b"<sheetData>") + len(b"<sheetData>")
        end = xml.rindex(b"</sheetData>")
        if k == 0:
            first["head"], first["tail"] = xml[:begin], xml[end:]
        else:  # drop the chunk's own header row
            begin = xml.index(b"</row>", begin) + 6
        last_end["ref"] = _DIMENSION_RE.search(xml[:begin]).group(2)
        pending: deque = deque()

        def drain(keep: int) -> None:
            while len(pending) > keep or (pending and pending[0].done()):
                data, compressed = pending.popleft().result()
                acc["crc"] = zlib.crc32(data, acc["crc"])  # in order; releases the GIL
                acc["size"] += len(data)
                out.write(compressed)
                acc["compressed"] += len(compressed)

        for piece in _pieces(xml, begin, end):
            pending.append(deflate.submit(_rewrite_piece, strip, piece))
            drain(_IN_FLIGHT)
        drain(0)

    try:
        with open(spool_path, "wb") as out, \
                ThreadPoolExecutor(DEFLATE_THREADS, thread_name_prefix="xlsx-deflate") as deflate, \
                ThreadPoolExecutor(1, thread_name_prefix="xlsx-chunk") as post_pool:
            start, k, done = 0, 0, None
            while (batches := next_chunk()) is not None:
                package, rows = _write_chunk(name, batches, schema,
                                             {name: start} if k else None, options)
                if done is not None:
                    done.result()  # at most two chunks in memory
                done = post_pool.submit(post, k, package, out, deflate)
                start += rows
                k += 1
            done.result()
        _assemble(path, first, last_end["ref"], spool_path, acc)
    finally:
        spool_path.unlink(missing_ok=True)


def _write_chunk(name: str, batches, schema: pa.Schema, header_row: dict | None,
                 options: dict) -> tuple[bytes, int]:
    """One chunk of :func:`write_chunked` as a workbook in memory (the native
    engine, ``header_row``: sheet -> row of its header); its bytes and rows."""
    rows = 0

    def counting() -> Iterator[pa.RecordBatch]:
        nonlocal rows
        for b in batches:
            rows += b.num_rows
            yield b

    buf = io.BytesIO()
    _native.write_worksheets([(name, pa.RecordBatchReader.from_batches(schema, counting()))],
                             buf, header_row=header_row, **options)
    return buf.getvalue(), rows


def _assemble(path: Path, first: dict, end_ref: bytes, spool_path: Path, acc: dict) -> None:
    """Write the package of :func:`write_chunked` (see there) to ``path``."""
    def one(regex, data: bytes, repl) -> bytes:
        out, n = regex.subn(repl, data, count=1)
        if n != 1:
            raise RuntimeError("unexpected sheet XML from the native engine")
        return out

    col, row = re.fullmatch(rb"([A-Z]+)(\d+)", end_ref).groups()
    head = one(_DIMENSION_RE, first["head"], lambda m: m.group(1) + end_ref + m.group(3))
    tail = first["tail"]
    if b"<autoFilter" in tail:
        tail = one(_AUTOFILTER_RE, tail, lambda m: m.group(1) + end_ref + m.group(3))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info, data in first["entries"]:
            new = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            new.compress_type = zipfile.ZIP_DEFLATED
            new.external_attr = info.external_attr
            if info.filename == "docProps/core.xml":
                dst.writestr(new, _CORE_XML.encode())
            elif info.filename == "xl/workbook.xml" and b"_xlnm._FilterDatabase" in data:
                dst.writestr(new, one(_DEFINED_END_RE, data,
                                      lambda m: b":$" + col + b"$" + row + m.group(4)))
            elif info.filename == _SHEET_XML:
                new._compresslevel = SHEET_DEFLATE_LEVEL
                with dst.open(new, "w", force_zip64=True) as fout:
                    crc = zlib.crc32(head)
                    crc = crc32_combine(crc, acc["crc"], acc["size"])
                    crc = crc32_combine(crc, zlib.crc32(tail), len(tail))
                    for part in (_deflate_chunk(head), None, _deflate_chunk(tail)):
                        if part is None:
                            with open(spool_path, "rb") as src:
                                shutil.copyfileobj(src, fout._fileobj, _CHUNK)
                            fout._compress_size += acc["compressed"]
                        else:
                            fout._fileobj.write(part)
                            fout._compress_size += len(part)
                    fout._file_size += len(head) + acc["size"] + len(tail)
                    fout._crc = crc
            else:
                dst.writestr(new, data)


def _fix_core_in_place(path: Path) -> None:
    """Replace ``docProps/core.xml`` and the entries after it (the library
    writes it next to last, before ``docProps/app.xml``) without touching the
    sheets: the file is cut at core.xml's local header and the tail appended
    again (zipfile's append mode rewrites the central directory)."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        if "docProps/core.xml" not in names:
            return
        k = names.index("docProps/core.xml")
        if any(i.filename.startswith("xl/worksheets/") for i in infos[k:]):
            raise RuntimeError("unexpected entry order in the native engine's package")
        tail = [(i, _CORE_XML.encode() if i.filename == "docProps/core.xml" else zf.read(i))
                for i in infos[k:]]
    zf = zipfile.ZipFile(path, "a")
    try:
        cut = tail[0][0].header_offset
        zf.filelist = [i for i in zf.filelist if i.header_offset < cut]
        zf.NameToInfo = {i.filename: i for i in zf.filelist}
        zf.start_dir = cut
        zf.fp.seek(cut)
        for info, data in tail:
            new = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            new.compress_type = zipfile.ZIP_DEFLATED
            new.external_attr = info.external_attr
            zf.writestr(new, data)
    finally:
        zf.close()


def _strip(data: bytes, pattern) -> bytes:
    if pattern is None:
        return data.replace(_INT_SUFFIX, b"</v>")
    return pattern.sub(rb"\1</v>", data)
