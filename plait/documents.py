"""Limits of the document formats, pdf and docx (docs/events.md, "Document formats"): their
libraries hold the document in memory, so each has column and row caps and cuts long cells."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plait.errors import FieldError

DOCUMENT_FORMATS = ("pdf", "docx")
INSTEAD = "use xlsx or csv for wider or longer exports"
ELLIPSIS = "\u2026"


@dataclass(frozen=True)
class DocumentCaps:
    """One format's caps: ``columns``, ``rows``, ``cell_chars`` characters per cell."""

    fmt: str
    columns: int
    rows: int
    cell_chars: int


def caps_for(fmt: str, settings: Any) -> DocumentCaps | None:
    """The caps of ``fmt`` from ``settings``; None for a format without them."""
    if fmt not in DOCUMENT_FORMATS:
        return None
    return DocumentCaps(fmt, getattr(settings, f"{fmt}_max_columns"),
                        getattr(settings, f"{fmt}_max_rows"), settings.document_cell_chars)


def columns_refused(caps: DocumentCaps, columns: int) -> str | None:
    """Why ``columns`` is too many for ``caps.fmt``, or None."""
    if columns <= caps.columns:
        return None
    return (f"{caps.fmt} allows at most {caps.columns:,} columns "
            f"(PLAIT_{caps.fmt.upper()}_MAX_COLUMNS); the export has {columns:,}: "
            f"{INSTEAD}, or list fewer columns")


def rows_refused(caps: DocumentCaps, rows: int, asked: bool = False) -> str | None:
    """Why ``rows`` is too many for ``caps.fmt`` (``asked``: by a request), or None."""
    if rows <= caps.rows:
        return None
    has = f"{rows:,} asked" if asked else "the export has more"
    return (f"{caps.fmt} allows at most {caps.rows:,} rows "
            f"(PLAIT_{caps.fmt.upper()}_MAX_ROWS); {has}: {INSTEAD}, or set "
            f"jobConfig.maxRows to at most {caps.rows:,} to export the first rows only")


def check_request(spec: Any, settings: Any) -> None:
    """Raises FieldError (code ``limit``) for a document request over its column or row cap, or with
    ``documentConfig.maxRowsPerFile`` (a document is one file)."""
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
