"""Both xlsx engines over the whole sink corpus (issue 12 item 4).

While any test of ``tests/sinks`` runs, every file the native engine
(:class:`sinks.writers.xlsx_native.NativeXlsxWriter`) writes is written a
second time from the same batches by the reference engine (xlsxwriter,
:class:`sinks.writers.xlsx_writer.XlsxWriter`), and both are read back with
openpyxl: every sheet name, freeze pane, autofilter range, column width and
every cell's value, type (``data_type`` and the Python type of the value),
number format, bold and quote prefix must be equal, and so must the quality
counts. Files over :data:`COMPARE_MAX_ROWS` rows are compared on their first
and last rows only (openpyxl's read-only mode) to keep the E1 case fast.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import openpyxl

from sinks.writers import xlsx_native
from sinks.writers.xlsx_writer import XlsxWriter

COMPARE_MAX_ROWS = 50_000
#: Files each engine wrote during the session (the report prints them).
ENGINES: dict[str, int] = {}
FALLBACKS: dict[str, int] = {}


def cell_key(c) -> tuple:
    v = c.value
    return (v, type(v).__name__, c.data_type, c.number_format, bool(c.font and c.font.b),
            bool(c.quotePrefix))


def read_all(path: Path) -> dict:
    wb = openpyxl.load_workbook(path)
    try:
        return {ws.title: {"freeze": ws.freeze_panes, "filter": ws.auto_filter.ref,
                           "widths": {k: d.width for k, d in ws.column_dimensions.items()},
                           "cells": [[cell_key(c) for c in row] for row in ws.iter_rows()]}
                for ws in wb.worksheets}
    finally:
        wb.close()


def read_ends(path: Path) -> dict:
    wb = openpyxl.load_workbook(path, read_only=True)
    try:
        out = {}
        for ws in wb.worksheets:
            rows = list(itertools.islice(ws.iter_rows(values_only=True), 3))
            out[ws.title] = {"head": rows, "max_row": ws.max_row}
        return out
    finally:
        wb.close()


def assert_same_xlsx(native: Path, ref: Path, rows: int) -> None:
    """Raise AssertionError naming the first difference between the files."""
    read = read_all if rows <= COMPARE_MAX_ROWS else read_ends
    a, b = read(native), read(ref)
    assert list(a) == list(b), f"sheets {list(a)} != {list(b)}"
    for name in a:
        sa, sb = a[name], b[name]
        for key in sa:
            if key != "cells":
                assert sa[key] == sb[key], f"{name} {key}: native {sa[key]} != xlsxwriter {sb[key]}"
        if "cells" in sa:
            assert len(sa["cells"]) == len(sb["cells"]), f"{name}: row count differs"
            for r, (ra, rb) in enumerate(zip(sa["cells"], sb["cells"])):
                assert ra == rb, f"{name} row {r + 1}: native {ra} != xlsxwriter {rb}"


class Comparing(xlsx_native.NativeXlsxWriter):
    """The native writer that also writes the same batches with xlsxwriter."""

    def __init__(self, path, schema, doc):
        super().__init__(path, schema, doc)
        self._ref = XlsxWriter(path.with_name("ref-" + path.name), schema, doc)

    def write_batch(self, batch):
        super().write_batch(batch)
        self._ref.write_batch(batch)

    def close(self):
        rep = super().close()
        ref = self._ref.close()
        ENGINES[self.engine] = ENGINES.get(self.engine, 0) + 1
        if self.fallback:
            rule = self.fallback.split(":")[0]
            FALLBACKS[rule] = FALLBACKS.get(rule, 0) + 1
        try:
            assert rep.quality == ref.quality, f"quality {rep.quality} != {ref.quality}"
            assert (rep.rows, rep.sheets) == (ref.rows, ref.sheets)
            if self.engine == "rustpy-xlsxwriter":
                assert_same_xlsx(rep.path, ref.path, rep.rows)
        finally:
            ref.path.unlink(missing_ok=True)
        return rep


class ComparingText:
    """A vectorized text writer (csv or jsonl) that also writes the same
    batches with the former cell-by-cell writer (the oracle); ``close``
    asserts byte-identical files and equal quality counts."""

    def __init__(self, fast_cls, ref_cls, path, schema, doc):
        self._fast = fast_cls(path, schema, doc)
        self._ref = ref_cls(path.with_name("ref-" + path.name), schema, doc)

    def write_batch(self, batch):
        self._fast.write_batch(batch)
        self._ref.write_batch(batch)

    def close(self):
        rep, ref = self._fast.close(), self._ref.close()
        try:
            fast_bytes, ref_bytes = rep.path.read_bytes(), ref.path.read_bytes()
            if fast_bytes != ref_bytes:
                at = next((i for i, (x, y) in enumerate(zip(fast_bytes, ref_bytes)) if x != y),
                          min(len(fast_bytes), len(ref_bytes)))
                raise AssertionError(f"{rep.path.name} differs at byte {at}: vectorized "
                                     f"{fast_bytes[at - 40:at + 40]!r} != cell by cell "
                                     f"{ref_bytes[at - 40:at + 40]!r}")
            assert rep.quality == ref.quality, f"quality {rep.quality} != {ref.quality}"
        finally:
            ref.path.unlink(missing_ok=True)
        return rep


def comparing_text(fast_cls, ref_cls):
    """A writer class (same constructor as the writers) for ``WRITERS``."""
    def make(path, schema, doc):
        return ComparingText(fast_cls, ref_cls, path, schema, doc)
    make.ext = fast_cls.ext
    return make
