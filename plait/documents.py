"""Limits of the document formats (pdf, docx): a few columns, a bounded number
of rows, long values cut (docs/events.md, "Document formats").

PDF and Word files are for reading, not for data: a wide or long table does
not fit them, and their libraries (reportlab, python-docx) keep the document
in memory until it is saved. So each format has a column cap and a row cap
(``PLAIT_PDF_MAX_COLUMNS``, ``PLAIT_PDF_MAX_ROWS``, ``PLAIT_DOCX_MAX_COLUMNS``,
``PLAIT_DOCX_MAX_ROWS``) and cells longer than ``PLAIT_DOCUMENT_CELL_CHARS``
characters are cut with an ellipsis. Each rule is written once, here:

- :func:`check_request`: what a request says before any row is read
  (``documentConfig.columns``, ``jobConfig.maxRows``,
  ``documentConfig.maxRowsPerFile``); the API answers 422, admission ends the
  task FAILED (producer-SDK requests).
- :func:`columns_refused`, :func:`rows_refused`: what the data shows while it
  is written (columns inferred from the first page; rows when no
  ``jobConfig.maxRows`` bounds them). The file writers raise
  ``PermanentError`` with these texts, so the task ends FAILED naming the cap.
  A request that gives ``jobConfig.maxRows`` (at most the cap) is cut there
  and succeeds ``truncated``, as any export: ``maxRows`` is the caller's
  consent to a cut, its absence is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plait.errors import FieldError

#: The formats these limits apply to.
DOCUMENT_FORMATS = ("pdf", "docx")
#: What to use instead, said in every refusal.
INSTEAD = "use xlsx or csv for wider or longer exports"
#: The character a cut value ends with (U+2026, horizontal ellipsis).
ELLIPSIS = "\u2026"


@dataclass(frozen=True)
class DocumentCaps:
    """One document format's limits: ``columns`` and ``rows`` at most,
    ``cell_chars`` characters per cell (longer: cut with an ellipsis)."""

    fmt: str
    columns: int
    rows: int
    cell_chars: int


def caps_for(fmt: str, settings: Any) -> DocumentCaps | None:
    """The caps of ``fmt`` from ``settings`` (``plait.settings.Settings``);
    None for a format without them (csv, xlsx, parquet, jsonl)."""
    if fmt not in DOCUMENT_FORMATS:
        return None
    return DocumentCaps(fmt, getattr(settings, f"{fmt}_max_columns"),
                        getattr(settings, f"{fmt}_max_rows"), settings.document_cell_chars)


def columns_refused(caps: DocumentCaps, columns: int) -> str | None:
    """Why ``columns`` columns are too many for ``caps.fmt``, or None."""
    if columns <= caps.columns:
        return None
    return (f"{caps.fmt} allows at most {caps.columns:,} columns "
            f"(PLAIT_{caps.fmt.upper()}_MAX_COLUMNS); the export has {columns:,}: "
            f"{INSTEAD}, or list fewer columns")


def rows_refused(caps: DocumentCaps, rows: int, asked: bool = False) -> str | None:
    """Why ``rows`` rows are too many for ``caps.fmt``, or None; ``asked``:
    ``rows`` is what a request asks for (else: rows met while writing)."""
    if rows <= caps.rows:
        return None
    has = f"{rows:,} asked" if asked else "the export has more"
    return (f"{caps.fmt} allows at most {caps.rows:,} rows "
            f"(PLAIT_{caps.fmt.upper()}_MAX_ROWS); {has}: {INSTEAD}, or set "
            f"jobConfig.maxRows to at most {caps.rows:,} to export the first rows only")


def check_request(spec: Any, settings: Any) -> None:
    """Refuse a request (``plait.spec.ExportSpec``) whose document format
    cannot hold what it asks for: more ``documentConfig.columns`` than the
    column cap, a ``jobConfig.maxRows`` over the row cap, or a
    ``documentConfig.maxRowsPerFile`` (a document is one file).

    Raises:
        FieldError: code ``limit``, naming the field, the cap and the
            setting, and saying to use xlsx or csv.
    """
    doc = spec.documentConfig
    caps = caps_for(doc.fileFormat, settings)
    if caps is None:
        return
    why = columns_refused(caps, len(doc.columns or []))
    if why:
        raise FieldError("documentConfig.columns", why, f"at most {caps.columns:,} columns",
                         "limit")
    asked = spec.jobConfig.maxRows
    why = rows_refused(caps, asked, asked=True) if asked is not None else None
    if why:
        raise FieldError("jobConfig.maxRows", why, f"at most {caps.rows:,}", "limit")
    if doc.maxRowsPerFile is not None:
        raise FieldError("documentConfig.maxRowsPerFile",
                         f"{caps.fmt} exports are one file and are not split: {INSTEAD}",
                         "no maxRowsPerFile", "limit")
