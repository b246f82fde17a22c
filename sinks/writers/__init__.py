"""File writers: record batches into csv, xlsx, parquet, jsonl, pdf or docx through
:func:`open_writer` (``write_batch``, then ``close`` returning a
:class:`~sinks.writers.base.WriteReport`)."""
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

__all__ = ["XlsxWriter", "NativeXlsxWriter", "FileEntry", "FileWriter", "WriteReport", "concatenable", "open_writer", "sanitize_file_name", "WRITERS"]

#: xlsx: the native engine, falling back per file to xlsxwriter; pdf and docx capped
#: (plait.documents).
WRITERS = {"csv": CsvWriter, "xlsx": NativeXlsxWriter, "parquet": ParquetFileWriter,
           "jsonl": JsonlWriter, "pdf": PdfWriter, "docx": DocxWriter}
#: Leaves room for ``_part001.parquet`` under the 255-byte name limit.
MAX_STEM_BYTES = 200
_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"/\\|?*]')
#: Windows reserved device names (Microsoft, "Naming Files, Paths, and Namespaces").
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)),
             *(f"LPT{i}" for i in range(10))}
_KNOWN_EXT = (".csv", ".xlsx", ".parquet", ".jsonl", ".pdf", ".docx", ".zip", ".xls", ".json",
              ".txt")


def sanitize_file_name(name: str, default: str = "export") -> str:
    """A safe file stem from a caller's ``fileName``: separators, Unicode Cc/Cf characters (bidi
    overrides) and ``<>:"|?*`` become ``_``; a typed known extension, edge dots and spaces go;
    Windows reserved names get a ``_`` prefix; NFC, at most 200 UTF-8 bytes; empty -> ``default``.
    """
    stem = unicodedata.normalize("NFC", name)
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


def concatenable(doc: DocumentConfig) -> bool:
    """Whether ``doc``'s file is its header then each batch's bytes, which depend on no batch
    before them (csv, jsonl; not split into a zip): the writer's ``out`` may then take some
    batches into another file, appended to the writer's own after ``close`` in the order wanted."""
    return getattr(WRITERS[doc.fileFormat], "concatenable", False) and not doc.maxRowsPerFile


def open_writer(out_dir: Path, schema: pa.Schema, doc: DocumentConfig) -> FileWriter:
    """A writer for ``doc.fileFormat`` producing ``out_dir/<sanitized fileName>.<ext>`` (a ``.zip``
    of ``_part001`` files when ``maxRowsPerFile`` splits). Raises PermanentError past Excel's 16,384
    columns or a document cap, or for an unknown zone."""
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
