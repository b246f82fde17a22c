"""File writers: stream record batches into csv, xlsx, parquet, jsonl, pdf or docx.

:func:`open_writer` is the one entry point the finalizer uses; every writer
follows :class:`sinks.writers.base.FileWriter` (``write_batch`` then ``close``
returning a :class:`~sinks.writers.base.WriteReport`).
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pyarrow as pa

from plait.errors import PermanentError
from plait.spec import XLSX_DATA_TOO_WIDE, DocumentConfig, check_xlsx_columns
from sinks.values import zone_of
from sinks.writers.base import FileEntry, FileWriter, WriteReport
from sinks.writers.csv_writer import CsvWriter
from sinks.writers.docx_writer import DocxWriter
from sinks.writers.jsonl_writer import JsonlWriter
from sinks.writers.parquet_writer import ParquetFileWriter
from sinks.writers.pdf_writer import PdfWriter
from sinks.writers.split import SplitWriter
from sinks.writers.xlsx_native import NativeXlsxWriter
from sinks.writers.xlsx_writer import XlsxWriter

__all__ = ["XlsxWriter", "NativeXlsxWriter", "FileEntry", "FileWriter", "WriteReport", "open_writer", "sanitize_file_name", "WRITERS"]

#: Writer class per ``doc.fileFormat``. xlsx: the native engine
#: (rustpy-xlsxwriter), falling back per file to :class:`XlsxWriter`
#: (xlsxwriter, the reference engine) for what it cannot hold (issue 12).
#: pdf and docx: documents with a column and a row cap (``plait.documents``).
WRITERS = {"csv": CsvWriter, "xlsx": NativeXlsxWriter, "parquet": ParquetFileWriter,
           "jsonl": JsonlWriter, "pdf": PdfWriter, "docx": DocxWriter}
#: Longest file stem in UTF-8 bytes; leaves room for ``_part001.parquet`` under
#: the 255-byte name limit of common file systems.
MAX_STEM_BYTES = 200
_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"/\\|?*]')
#: Windows reserved device names (Microsoft, "Naming Files, Paths, and Namespaces").
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)),
             *(f"LPT{i}" for i in range(10))}
_KNOWN_EXT = (".csv", ".xlsx", ".parquet", ".jsonl", ".pdf", ".docx", ".zip", ".xls", ".json",
              ".txt")


def sanitize_file_name(name: str, default: str = "export") -> str:
    """A safe file stem from a caller's ``fileName``.

    Path separators, control and format characters (Unicode Cc, Cf: C1
    controls, bidi overrides) and ``<>:"|?*`` become ``_``; a known
    extension the caller typed is dropped (the writer adds the right one);
    leading/trailing dots and spaces go; Windows reserved names (``CON``,
    ``NUL``, ``COM1``...) get a ``_`` prefix; the result is NFC-normalized and
    capped at 200 UTF-8 bytes. Empty results become ``default``.
    """
    stem = unicodedata.normalize("NFC", name)
    # Unicode categories Cc (C0/C1 controls) and Cf (bidi overrides such as
    # U+202E, zero-width U+200B) can disguise a name: they become "_".
    stem = "".join("_" if unicodedata.category(c) in ("Cc", "Cf") else c for c in stem)
    if stem.lower().endswith(_KNOWN_EXT):
        stem = stem[: stem.rfind(".")]
    stem = _UNSAFE.sub("_", stem).strip(" .")
    if not stem.strip("_"):
        stem = default
    if stem.split(".")[0].upper() in _RESERVED:
        stem = "_" + stem
    raw = stem.encode("utf-8")[:MAX_STEM_BYTES]
    return raw.decode("utf-8", errors="ignore").rstrip(" .") or default


def open_writer(out_dir: Path, schema: pa.Schema, doc: DocumentConfig) -> FileWriter:
    """Open a writer for ``doc.fileFormat`` producing
    ``out_dir/<sanitized doc.fileName>.<ext>`` (or ``.zip`` of parts named
    ``<name>_part001.<ext>``... when ``doc.maxRowsPerFile`` splits the output).

    Raises :class:`PermanentError` when the format is xlsx and ``schema`` has
    more than 16,384 columns (Excel limit), pdf or docx and more columns than
    their cap (``plait.documents``), or the time zone is unknown.
    """
    out_dir = Path(out_dir)
    check_xlsx_columns(doc.fileFormat, len(schema), PermanentError, XLSX_DATA_TOO_WIDE)
    zone_of(doc.timeZone)
    cls = WRITERS[doc.fileFormat]
    stem = sanitize_file_name(doc.fileName)
    out_dir.mkdir(parents=True, exist_ok=True)
    if doc.maxRowsPerFile:
        return SplitWriter(out_dir, stem, cls.ext, doc.maxRowsPerFile,
                           lambda path: cls(path, schema, doc))
    return cls(out_dir / f"{stem}.{cls.ext}", schema, doc)
