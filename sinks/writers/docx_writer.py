"""Word (docx) writer: one table on landscape A4 pages, its header row
repeated at the top of every page (``w:tblHeader``).

python-docx makes the document (styles, page setup, the table and its header
row); the data rows are WordprocessingML ``w:tr`` elements written to a
temporary file as batches arrive, and spliced into the table when the file is
saved, so memory holds one batch, not the document (python-docx's tree takes
~14 KB per row of 12 short cells: docs/perf-notes.md, "Document formats").

Cells hold their text as runs: a line break is ``w:br``, a tab ``w:tab``
(what python-docx's ``cell.text`` reads back as ``\\n`` and ``\\t``). Text in
East Asian scripts uses the ``SimSun`` font (``w:eastAsia``), others the
document's default; Word substitutes what a machine lacks.
"""
from __future__ import annotations

import shutil
import zipfile
from io import BytesIO
from pathlib import Path
from xml.sax.saxutils import escape

import pyarrow as pa
from docx import Document
from docx.enum.section import WD_ORIENT
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls, qn
from docx.shared import Cm

from plait.documents import DocumentCaps
from plait.spec import DocumentConfig
from sinks.writers.document import DocumentWriter, Row
from sinks.writers.split import ZIP_DATE_TIME

_DOCUMENT = "word/document.xml"
_END_OF_TABLE = b"</w:tbl>"
_CHUNK = 1 << 20


def _runs(text: str) -> str:
    """A cell's text as ``w:r`` runs (``w:t``, ``w:br``, ``w:tab``)."""
    parts = []
    for i, line in enumerate(text.split("\n")):
        if i:
            parts.append("<w:br/>")
        for j, piece in enumerate(line.split("\t")):
            if j:
                parts.append("<w:tab/>")
            if piece:
                parts.append(f'<w:t xml:space="preserve">{escape(piece)}</w:t>')
    return "<w:r>" + "".join(parts) + "</w:r>" if parts else ""


class DocxWriter(DocumentWriter):
    """Writes ``path`` as a Word table; see the module docstring."""

    ext = "docx"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig,
                 caps: DocumentCaps | None = None) -> None:
        super().__init__(path, schema, doc, caps)
        self._document = Document()
        section = self._document.sections[0]
        section.orientation = WD_ORIENT.LANDSCAPE
        section.page_width, section.page_height = Cm(29.7), Cm(21.0)
        for side in ("left_margin", "right_margin", "top_margin", "bottom_margin"):
            setattr(section, side, Cm(1.5))
        normal = self._document.styles["Normal"].font
        normal.size = Cm(0.28)  # 8 pt
        normal.element.get_or_add_rPr().get_or_add_rFonts().set(qn("w:eastAsia"), "SimSun")
        n = max(len(self.names), 1)
        table = self._document.add_table(rows=1, cols=n)
        table.style = "Table Grid"
        self._width = int(Cm(29.7 - 3.0).twips // n)
        for cell, text in zip(table.rows[0].cells, self.header):
            cell.text = text
            for run in cell.paragraphs[0].runs:
                run.bold = True
        table.rows[0]._tr.get_or_add_trPr().append(parse_xml(f"<w:tblHeader {nsdecls('w')}/>"))
        self._rows_path = path.with_name(path.name + ".rows.xml")
        self._rows_file = open(self._rows_path, "w", encoding="utf-8", buffering=_CHUNK)

    def _write_rows(self, rows: list[Row]) -> None:
        tc = f'<w:tc><w:tcPr><w:tcW w:w="{self._width}" w:type="dxa"/></w:tcPr><w:p>'
        out = []
        for row in rows:
            out.append("<w:tr>")
            for text in row:
                out.append(tc + (_runs(text) if text else "") + "</w:p></w:tc>")
            if not row:
                out.append(tc + "</w:p></w:tc>")
            out.append("</w:tr>")
        self._rows_file.write("".join(out))

    def _save(self) -> None:
        """The document python-docx made, with the rows spliced in before the
        end of its table, written as a zip with fixed entry times."""
        self._rows_file.close()
        skeleton = BytesIO()
        self._document.save(skeleton)
        self._document = None
        with zipfile.ZipFile(skeleton) as src, \
                zipfile.ZipFile(self.path, "w", compression=zipfile.ZIP_DEFLATED) as dst:
            for item in src.infolist():
                info = zipfile.ZipInfo(item.filename, date_time=ZIP_DATE_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                data = src.read(item.filename)
                if item.filename != _DOCUMENT:
                    dst.writestr(info, data)
                    continue
                at = data.rindex(_END_OF_TABLE)
                with dst.open(info, "w", force_zip64=True) as out, \
                        open(self._rows_path, "rb") as rows:
                    out.write(data[:at])
                    shutil.copyfileobj(rows, out, _CHUNK)
                    out.write(data[at:])
        self._rows_path.unlink()
