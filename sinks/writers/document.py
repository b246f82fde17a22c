"""What the document writers (pdf, docx) share: cells as text, long values
cut, the column and row caps of ``plait.documents`` enforced as rows arrive.

A document is for reading: every cell is shown as text, the way the csv
writer prints it (:func:`sinks.writers.columns.text_column`: numbers with
every digit, ISO-8601 instants in the export zone, ``true``/``false``),
without formula escaping (no spreadsheet evaluates a pdf or a Word file).
Line breaks are kept (``CR LF`` and a lone ``CR`` become ``LF``), other
XML-forbidden control characters removed (``sanitized``). A value longer than
``PLAIT_DOCUMENT_CELL_CHARS`` characters is cut to that length, its last
character an ellipsis (U+2026), and counted ``truncated`` (per column too).

The caps are checked here, once per batch, before anything is written: a
schema wider than the column cap refuses to open, a batch that would take
the file past the row cap is refused; both raise ``PermanentError`` (the
task ends FAILED naming the cap and pointing to xlsx/csv).
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from plait.documents import ELLIPSIS, DocumentCaps, caps_for, columns_refused, rows_refused
from plait.errors import PermanentError
from plait.spec import DocumentConfig
from sinks.writers.base import WriteReport
from sinks.writers.cells import SingleFileWriter, headers, kind_of_field
from sinks.writers.columns import clean_text, text_column

#: One row of a document: each cell's text, None for no value.
Row = tuple


def cut_texts(col: pa.Array, limit: int) -> tuple[pa.Array, int]:
    """``col`` (strings) with every value longer than ``limit`` characters
    cut to ``limit - 1`` characters plus an ellipsis; and how many were cut."""
    long = pc.fill_null(pc.greater(pc.utf8_length(col), limit), False)
    n = pc.sum(long.cast(pa.int64())).as_py() or 0
    if not n:
        return col, 0
    cut = pc.binary_join_element_wise(pc.utf8_slice_codeunits(col, 0, limit - 1), ELLIPSIS, "")
    return pc.if_else(long, cut, col), n


def _one_break(col: pa.Array) -> pa.Array:
    """CR LF and a lone CR as LF (a document has one kind of line break)."""
    if not pc.any(pc.fill_null(pc.match_substring(col, "\r"), False)).as_py():
        return col
    return pc.replace_substring(pc.replace_substring(col, "\r\n", "\n"), "\r", "\n")


class DocumentWriter(SingleFileWriter):
    """Base of the pdf and docx writers. Subclasses implement
    :meth:`_write_rows` (rows of one batch, each a tuple of texts) and
    :meth:`_save` (write ``self.path``); ``self.header`` holds the header
    texts (timestamp columns name their zone, cut like values).

    ``caps``: the format's limits; None reads them from the process settings
    (``plait.settings.get_settings``: a worker's own environment).

    Raises:
        PermanentError: the schema has more columns than ``caps.columns``.
    """

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig,
                 caps: DocumentCaps | None = None) -> None:
        super().__init__(path, schema, doc)
        if caps is None:
            from plait.settings import get_settings

            caps = caps_for(doc.fileFormat, get_settings())
        self.caps = caps
        why = columns_refused(caps, len(schema))
        if why:
            raise PermanentError(why)
        self._kinds = [kind_of_field(f) for f in schema]
        head = clean_text(pa.array(headers(schema, doc, with_zone=True), pa.string()),
                          self.quality, None, escape=False)
        self.header: list[str] = cut_texts(_one_break(head), caps.cell_chars)[0].to_pylist()

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append the rows of ``batch``. Raises ``PermanentError`` when the
        file would hold more rows than ``caps.rows``."""
        self._check_batch(batch)
        if batch.num_rows == 0:
            return
        why = rows_refused(self.caps, self.rows + batch.num_rows)
        if why:
            raise PermanentError(why)
        columns = []
        for c, col in enumerate(batch.columns):
            name = self.names[c]
            text = _one_break(text_column(self._kinds[c], col, name, self.quality, self.doc,
                                          escape=False))
            text, n = cut_texts(text, self.caps.cell_chars)
            if n:
                self.quality.add("truncated", n, name)
            columns.append(text.to_pylist())
        rows = list(zip(*columns)) if columns else [()] * batch.num_rows
        self._write_rows(rows)
        self.rows += batch.num_rows

    def _write_rows(self, rows: list[Row]) -> None:
        raise NotImplementedError

    def _save(self) -> None:
        raise NotImplementedError

    def close(self) -> WriteReport:
        """Write the document to ``self.path``; returns the report."""
        if not self.closed:
            self._save()
        return self.report()
