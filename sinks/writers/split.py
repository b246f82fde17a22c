"""Splitting an export into several files of at most ``doc.maxRowsPerFile``
data rows, each with the header, delivered as one deterministic zip.

Parts are named in order ``<name>_part001.<ext>``, ``_part002``...; when the
data fits in one part no zip is made and the single file keeps the plain
``<name>.<ext>``. The zip is reproducible: entries in part order (which is
name order up to 999 parts), fixed timestamp 1980-01-01 00:00:00 (the DOS
epoch, the earliest a zip can hold), fixed permissions, ZIP_DEFLATED; parts are
copied in 1 MiB chunks, never loaded whole.
"""
from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from sinks.writers.base import FileEntry, WriteReport

#: The zip entries' timestamp (DOS epoch) for byte-identical archives.
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_CHUNK = 1 << 20


def deterministic_zip(zip_path: Path, members: list[Path]) -> None:
    """Write ``members`` (in the given order, by base name) into ``zip_path``
    with fixed metadata so equal inputs give byte-identical archives."""
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member in members:
            info = zipfile.ZipInfo(member.name, date_time=ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            size = member.stat().st_size
            with open(member, "rb") as src, zf.open(info, "w", force_zip64=size >= 2**31) as dst:
                shutil.copyfileobj(src, dst, _CHUNK)


class SplitWriter:
    """A :class:`~sinks.writers.base.FileWriter` that rolls over to a new part
    file every ``max_rows`` data rows.

    ``make(path)`` opens a one-file writer for a part. ``close()`` returns a
    report whose ``path`` is the zip (or the single file when only one part
    was needed), ``files`` lists every part with its rows, and ``quality`` sums
    the parts' counts (``files`` = number of parts, ``sheets`` summed).
    """

    def __init__(self, out_dir: Path, stem: str, ext: str, max_rows: int,
                 make: Callable[[Path], object]) -> None:
        if max_rows < 1:
            raise ValueError("max_rows must be >= 1")
        self._dir, self._stem, self._ext = out_dir, stem, ext
        self._max, self._make = max_rows, make
        self._parts: list[Path] = []
        self._reports: list[WriteReport] = []
        self._current = None
        self._rows_in_part = 0
        self._closed = False

    def _open_part(self) -> None:
        if self._current is not None:
            self._reports.append(self._current.close())
        path = self._dir / f"{self._stem}_part{len(self._parts) + 1:03d}.{self._ext}"
        self._parts.append(path)
        self._current = self._make(path)
        self._rows_in_part = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Write ``batch``, slicing it where a part fills up."""
        if self._closed:
            raise RuntimeError("split writer is closed")
        if self._current is None:
            self._open_part()
        start = 0
        while start < batch.num_rows:
            if self._rows_in_part >= self._max:
                self._open_part()
            take = min(self._max - self._rows_in_part, batch.num_rows - start)
            self._current.write_batch(batch.slice(start, take))
            self._rows_in_part += take
            start += take

    def close(self) -> WriteReport:
        """Close the last part and zip the parts (or keep the single file)."""
        if self._closed:
            raise RuntimeError("split writer is closed")
        self._closed = True
        if self._current is None:
            self._open_part()
        self._reports.append(self._current.close())
        quality: dict[str, int] = {}
        for rep in self._reports:
            for k, n in rep.quality.items():
                quality[k] = quality.get(k, 0) + n
        rows = sum(r.rows for r in self._reports)
        sheets = sum(r.sheets for r in self._reports)
        if len(self._parts) == 1:
            final = self._dir / f"{self._stem}.{self._ext}"
            self._parts[0].replace(final)
            return WriteReport(path=final, rows=rows, files=[FileEntry(final.name, rows)],
                               sheets=sheets, quality=quality)
        zip_path = self._dir / f"{self._stem}.zip"
        deterministic_zip(zip_path, self._parts)
        files = [FileEntry(p.name, r.rows) for p, r in zip(self._parts, self._reports)]
        for p in self._parts:
            p.unlink()
        return WriteReport(path=zip_path, rows=rows, files=files, sheets=sheets, quality=quality)
