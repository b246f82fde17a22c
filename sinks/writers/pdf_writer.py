"""PDF writer (reportlab): a table on landscape A4 pages (1 cm margins, 7 pt, equal columns, grid),
the header on every page, drawn page by page as rows arrive.

- Cells wrap to their column (at a space, else between characters: CJK has none), at most
:data:`MAX_LINES` lines (more: ellipsis, ``truncated``). - Fonts: WenQuanYi Zen Hei
(``fonts-wqy-zenhei``) embedded as a subset when installed, else reportlab's CID fonts
``STSong-Light`` (Adobe-GB1) and, for Hangul cells, ``HYSMyeongJo-Medium`` (not embedded). A
character the font cannot show (CID: beyond the BMP) becomes :data:`MISSING`, counted ``sanitized``.
- Memory: one page of rows; reportlab keeps finished pages until saved, bounded by
``PLAIT_PDF_MAX_ROWS`` (docs/perf-notes.md, "Document formats")."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4, landscape
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Table, TableStyle

from plait.documents import ELLIPSIS, DocumentCaps
from plait.spec import DocumentConfig
from sinks.writers.document import DocumentWriter, Row

#: TrueType fonts with CJK glyphs, embedded when one is installed (first found).
FONT_FILES = ("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",)
EMBEDDED_FONT = "PlaitCJK"
#: The fallback: reportlab CID fonts (no file needed), and when each is used.
FONT = "STSong-Light"
KOREAN_FONT = "HYSMyeongJo-Medium"
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
#: What a character the font cannot show becomes (U+25A1 WHITE SQUARE: in both fonts).
MISSING = "\u25a1"
FONT_SIZE = 7.0
LEADING = 8.5
PAD = 2.0
MARGIN = 28.35  # 1 cm
#: Lines a cell shows at most; the rest is cut (with an ellipsis).
MAX_LINES = 12
PAGE = landscape(A4)


def fonts() -> tuple[str, str]:
    """The registered fonts ``(for every cell, for a cell in Hangul)``: the
    first of :data:`FONT_FILES` installed, else the CID fonts."""
    registered = pdfmetrics.getRegisteredFontNames()
    for path in FONT_FILES:
        if os.path.exists(path):
            if EMBEDDED_FONT not in registered:
                pdfmetrics.registerFont(TTFont(EMBEDDED_FONT, path, subfontIndex=0))
            return EMBEDDED_FONT, EMBEDDED_FONT
    for name in (FONT, KOREAN_FONT):
        if name not in registered:
            pdfmetrics.registerFont(UnicodeCIDFont(name))
    return FONT, KOREAN_FONT


_WIDTHS: dict[tuple[str, str], float] = {}


def char_width(ch: str, font: str, size: float = FONT_SIZE) -> float:
    """Width of one character in points (cached per font and character)."""
    w = _WIDTHS.get((font, ch))
    if w is None:
        w = _WIDTHS[(font, ch)] = pdfmetrics.stringWidth(ch, font, FONT_SIZE)
    return w * size / FONT_SIZE


def wrap(text: str, width: float, font: str = FONT, size: float = FONT_SIZE) -> list[str]:
    """``text`` as lines no wider than ``width`` points in ``font``: each
    line break kept; a longer line is broken after its last space that
    fits, else between characters."""
    out: list[str] = []
    for para in text.split("\n"):
        while True:
            used, fit = 0.0, 0
            for ch in para:
                used += char_width(ch, font, size)
                if used > width:
                    break
                fit += 1
            if fit == len(para):
                out.append(para)
                break
            fit = max(fit, 1)
            space = para.rfind(" ", 0, fit + 1)
            cut = space if space > 0 else fit
            out.append(para[:cut])
            para = para[cut:].lstrip(" ") if space > 0 else para[cut:]
            if not para:
                break
    return out


class PdfWriter(DocumentWriter):
    """Writes ``path`` as a pdf table; see the module docstring."""

    ext = "pdf"

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig,
                 caps: DocumentCaps | None = None) -> None:
        super().__init__(path, schema, doc, caps)
        self._font, self._korean_font = fonts()
        face = getattr(pdfmetrics.getFont(self._font), "face", None)
        #: characters the embedded font has (None: CID fonts, see the module docstring)
        self._glyphs = getattr(face, "charToGlyph", None) if self._font == EMBEDDED_FONT else None
        self._canvas = Canvas(str(path), pagesize=PAGE, pageCompression=1,
                              invariant=1)
        self._canvas.setTitle(doc.fileName)
        n = max(len(self.names), 1)
        self._col_width = (PAGE[0] - 2 * MARGIN) / n
        self._text_width = self._col_width - 2 * PAD
        self._head, self._head_height, _ = self._cells(self.header)
        self._page: list[list[str]] = []
        self._heights: list[float] = []
        self._korean: list[tuple[int, int]] = []
        self._room = PAGE[1] - 2 * MARGIN - self._head_height

    def _cells(self, row: Row) -> tuple[list[str], float, list[int]]:
        """A row's cells as wrapped text, its height, the cells in Hangul."""
        cells, lines, korean = [], 1, []
        for c, text in enumerate(row):
            if text is None:
                cells.append("")
                continue
            text = self._showable(text, c)
            font = self._font
            if _HANGUL.search(text) and self._korean_font != self._font:
                font = self._korean_font
                korean.append(c)
            wrapped = wrap(text, self._text_width, font)
            if len(wrapped) > MAX_LINES:
                wrapped = wrapped[:MAX_LINES]
                wrapped[-1] = wrapped[-1][:-1] + ELLIPSIS if len(wrapped[-1]) > 1 else ELLIPSIS
                self.quality.add("truncated", 1, self.names[c] if c < len(self.names) else None)
            cells.append("\n".join(wrapped))
            lines = max(lines, len(wrapped))
        return cells, lines * LEADING + 2 * PAD, korean

    def _showable(self, text: str, c: int) -> str:
        """``text`` with what the font cannot show as :data:`MISSING` (the cell
        counted ``sanitized`` for column ``c``)."""
        if self._glyphs is None:
            shown = _ASTRAL.sub(MISSING, text)
        else:
            glyphs = self._glyphs
            lacking = {ch for ch in set(text) if ord(ch) not in glyphs and ch != "\n"}
            shown = "".join(MISSING if ch in lacking else ch for ch in text) if lacking else text
        if shown != text and c < len(self.names):
            self.quality.add("sanitized", 1, self.names[c])
        return shown

    def _write_rows(self, rows: list[Row]) -> None:
        for row in rows:
            cells, height, korean = self._cells(row)
            if self._page and sum(self._heights) + height > self._room:
                self._flush()
            self._korean.extend((c, len(self._page) + 1) for c in korean)
            self._page.append(cells)
            self._heights.append(height)

    def _flush(self) -> None:
        """Draw the header and the rows gathered as one page."""
        style = [("FONTNAME", (0, 0), (-1, -1), self._font),
                 ("FONTSIZE", (0, 0), (-1, -1), FONT_SIZE),
                 ("LEADING", (0, 0), (-1, -1), LEADING), ("VALIGN", (0, 0), (-1, -1), "TOP"),
                 ("LEFTPADDING", (0, 0), (-1, -1), PAD), ("RIGHTPADDING", (0, 0), (-1, -1), PAD),
                 ("TOPPADDING", (0, 0), (-1, -1), PAD), ("BOTTOMPADDING", (0, 0), (-1, -1), PAD),
                 ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                 ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8e8e8"))]
        style += [("FONTNAME", cell, cell, self._korean_font) for cell in self._korean]
        if self.names:
            table = Table([self._head] + self._page, colWidths=[self._col_width] * len(self.names),
                          rowHeights=[self._head_height] + self._heights)
            table.setStyle(TableStyle(style))
            _, h = table.wrapOn(self._canvas, PAGE[0] - 2 * MARGIN, PAGE[1] - 2 * MARGIN)
            table.drawOn(self._canvas, MARGIN, PAGE[1] - MARGIN - h)
        self._canvas.showPage()
        self._page, self._heights, self._korean = [], [], []

    def _save(self) -> None:
        if self._page or self.rows == 0:
            self._flush()
        self._canvas.save()
