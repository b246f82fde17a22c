"""CSV writer (RFC 4180), one record batch at a time, rendered column-wise in Arrow
(:mod:`sinks.writers.columns`) byte for byte as Python's ``csv`` module writes with this dialect:

- ``QUOTE_MINIMAL`` (RFC 4180 s2), newlines kept in quoted fields; a lone CR in the ``plain``
flavour quotes its whole row (the csv module quotes only the terminator's characters); -
``csvFlavour`` ``excel``: UTF-8 with BOM and CRLF (Excel reads UTF-8 so); ``plain``: UTF-8, LF; -
cells as :func:`sinks.writers.columns.text_column` (formula escape: OWASP CSV injection).

A batch in which no cell needs quoting (the usual case) is written by Arrow's CSV writer with
``quoting_style="none"``, integers as they are (Arrow casts them to text as ``text_column``
does), decimals as :func:`sinks.writers.columns.decimal_texts` renders them, text columns holding nothing to clean, escape or quote as they are: one
regex pass per text column and one C++ pass per batch instead of the cast, the clean-up
regexes and the joins. Any other batch is joined in Arrow compute, quoting where needed."""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from plait.spec import DocumentConfig
from sinks.writers.base import WriteReport
from sinks.writers.cells import (
    BAD_RE2, FORMULA_RE2, SingleFileWriter, headers, kind_of_field,
)
from sinks.writers.columns import clean_text, decimal_texts, text_column

_BUFFER = 64 << 10
_BOM = "\ufeff".encode()
#: Every character a column of each kind may hold (floats: also ``doc.infText``); unlisted:
#: anything.
_CHARS = {"int": set("-0123456789"), "decimal": set("-+.0123456789E"),
          "float": set("-+.0123456789e"), "bool": set("truefals"),
          "datetime": set("+-.:0123456789T"), "date": set("+-0123456789")}


class CsvWriter(SingleFileWriter):
    """Writes ``path`` as csv. Memory: one batch of rendered columns plus a 64 KiB buffer. A
    batch's records go to :attr:`out` (the file unless pointed elsewhere between batches) and
    depend on no batch before them (:attr:`concatenable`)."""

    ext = "csv"
    concatenable = True

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        self._excel = doc.csvFlavour == "excel"
        self._delim = doc.csvDelimiter
        self._term = "\r\n" if self._excel else "\n"
        # QUOTE_MINIMAL: the delimiter, the quote and the line terminator's characters
        specials = {self._delim, '"', *self._term}
        self._needs_quote = "[" + "".join(re.escape(ch) for ch in sorted(specials)) + "]"
        # a text cell as it is: nothing to sanitize, escape, quote, nor a CR (``plain``'s rule)
        self._as_is = "|".join([BAD_RE2, self._needs_quote[:-1] + "\r]",
                                *([FORMULA_RE2] if doc.escapeFormulas else [])])
        try:
            self._arrow: pcsv.WriteOptions | None = pcsv.WriteOptions(
                include_header=False, delimiter=self._delim, eol=self._term,
                quoting_style="none")
        except ValueError:  # Arrow takes an ASCII delimiter other than NUL only: joins always
            self._arrow = None
        self._kinds = [kind_of_field(f) for f in schema]
        self._plain = [not (_CHARS.get(k, specials) | ({*doc.infText} if k == "float" else set()))
                       & specials for k in self._kinds]
        self._file = self.out = open(path, "wb", buffering=_BUFFER)
        if self._excel:
            self._file.write(_BOM)
        head = clean_text(pa.array(headers(schema, doc, with_zone=False), pa.string()),
                          self.quality, None, escape=doc.escapeFormulas)
        self._write_records([pa.array([h], pa.string()) for h in head.to_pylist()], cr_rows=None,
                           header=True)

    def _column(self, c: int, col: pa.Array) -> pa.Array:
        return text_column(self._kinds[c], col, self.names[c], self.quality, self.doc,
                           escape=self.doc.escapeFormulas)

    def _cells(self, c: int, col: pa.Array) -> tuple[pa.Array, bool]:
        """``(cells, quote-free)`` of column ``c``: its text (:meth:`_column`), or ``col`` itself
        when Arrow's CSV writer renders it so (ints and decimals whose characters cannot be the
        delimiter, text with nothing to change); quote-free when no cell can need quoting or a
        CR rule."""
        kind = self._kinds[c]
        if kind in ("int", "decimal") and self._plain[c]:
            return (col if kind == "int" else decimal_texts(col)), True
        if (kind == "text" and pa.types.is_string(col.type)
                and not pc.any(pc.match_substring_regex(col, self._as_is)).as_py()):
            return col, True
        cells = self._column(c, col)
        return cells, self._plain[c] or cells.null_count == len(cells)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append the rows of ``batch`` (columns as the writer's schema)."""
        self._check_batch(batch)
        if batch.num_rows == 0:
            return
        cells = [self._cells(c, col) for c, col in enumerate(batch.columns)]
        columns, free = [col for col, _ in cells], [ok for _, ok in cells]
        cr_rows = None
        if not self._excel:
            for c, kind in enumerate(self._kinds):
                if kind in ("text", "mixed") and not free[c]:
                    hit = pc.fill_null(pc.match_substring(columns[c], "\r"), False)
                    cr_rows = hit if cr_rows is None else pc.or_(cr_rows, hit)
            if cr_rows is not None and not pc.any(cr_rows).as_py():
                cr_rows = None
        needs = [None if ok else self._need(col) for ok, col in zip(free, columns)]
        if not (cr_rows is None and len(columns) > 1 and self._arrow is not None
                and all(n is None for n in needs) and self._write_as_is(columns)):
            self._write_records([col if pa.types.is_string(col.type) else col.cast(pa.string())
                                 for col in columns], cr_rows, needs=needs)
        self.rows += batch.num_rows

    def _write_as_is(self, columns: list[pa.Array]) -> bool:
        """Write ``columns``, no cell of which needs quoting, with Arrow's CSV writer (the csv
        module's QUOTE_MINIMAL output then); False, writing nothing, if Arrow finds a cell it
        would have to quote (its structural characters: the delimiter, ``"``, CR, LF)."""
        sink = pa.BufferOutputStream()
        try:
            pcsv.write_csv(pa.RecordBatch.from_arrays(columns, [""] * len(columns)), sink,
                           self._arrow)
        except pa.ArrowInvalid:
            return False
        self.out.write(sink.getvalue())
        return True

    def _need(self, col: pa.Array) -> pa.Array | None:
        """Which cells of text ``col`` need quotes (QUOTE_MINIMAL), or None when none do."""
        need = pc.fill_null(pc.match_substring_regex(col, self._needs_quote), False)
        return need if pc.any(need).as_py() else None

    def _write_records(self, columns: list[pa.Array], cr_rows: pa.Array | None,
                       header: bool = False, needs: list[pa.Array | None] | None = None) -> None:
        """Write ``columns`` (text) as records; ``needs``: per column, which cells need quotes
        (None: none), else found here."""
        out = []
        for c, col in enumerate(columns):
            if cr_rows is None and (col.null_count == len(col) or not header and self._plain[c]):
                out.append(col)
                continue
            need = needs[c] if needs is not None else self._need(col)
            if cr_rows is not None:
                need = cr_rows if need is None else pc.or_(need, cr_rows)
                col = pc.if_else(cr_rows, pc.fill_null(col, ""), col)
            if need is not None:
                quoted = pc.binary_join_element_wise(
                    '"', pc.replace_substring(col, '"', '""'), '"', "")
                col = pc.if_else(need, quoted, col)
            out.append(col)
        if len(out) == 1:
            # the csv module writes a record of one empty field as ""
            out[0] = pc.if_else(pc.equal(pc.fill_null(out[0], ""), ""), '""', out[0])
        if not out:  # no columns: the header is an empty record, rows are nothing
            if header:
                self._file.write(self._term.encode())
            return
        lines = pc.binary_join_element_wise(*out, self._delim, null_handling="replace",
                                            null_replacement="")
        lines = pc.binary_join_element_wise(lines, self._term, "")
        self.out.write(joined_bytes(lines))

    def close(self) -> WriteReport:
        """Flush and close the file; returns the report."""
        if not self.closed:
            self._file.close()
        return self.report()


def joined_bytes(arr: pa.Array) -> memoryview | bytes:
    """The concatenated UTF-8 bytes of a string array without nulls."""
    if len(arr) == 0:
        return b""
    offsets = pa.Array.from_buffers(pa.int32(), len(arr) + 1, [None, arr.buffers()[1]],
                                    offset=arr.offset)
    first, last = offsets[0].as_py(), offsets[len(arr)].as_py()
    return memoryview(arr.buffers()[2])[first:last]
