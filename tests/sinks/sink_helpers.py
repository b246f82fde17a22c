"""Helpers for the sink tests: rows -> rows_to_batch -> open_writer -> close,
and readers that open the produced file the way a user's tool would (openpyxl
for xlsx, the csv module for csv, pyarrow for parquet)."""
from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

import openpyxl
import pyarrow.parquet as pq
import pytest

from plait.spec import ColumnSpec, DocumentConfig
from sinks.values import rows_to_batch
from sinks.writers import WriteReport, open_writer


def make_doc(fmt: str = "xlsx", types: dict[str, str] | None = None, **kwargs) -> DocumentConfig:
    """A DocumentConfig; ``types`` declares column types ({"ts": "datetime"})
    and with it the column list (in the dict's order)."""
    if types is not None:
        kwargs["columns"] = [ColumnSpec(fieldName=k, type=t) for k, t in types.items()]
    return DocumentConfig(fileFormat=fmt, **kwargs)


@pytest.fixture
def export(tmp_path: Path) -> Callable[..., tuple[WriteReport, dict[str, int]]]:
    """``export(pages, doc, out=None)`` -> (report, normalization counts).

    ``pages`` is a list of rows (one page) or an iterable of pages; all pages
    are normalized first with the same doc, then written in order.
    """
    counter = iter(range(1_000_000))

    def run(pages, doc: DocumentConfig, out: Path | None = None):
        if pages and isinstance(pages, list) and isinstance(pages[0], dict):
            pages = [pages]
        batches, counts = [], {}
        for rows in pages:
            batch, c = rows_to_batch(rows, doc)
            batches.append(batch)
            for k, n in c.items():
                counts[k] = counts.get(k, 0) + n
        out = out or tmp_path / f"out{next(counter)}"
        writer = open_writer(out, batches[0].schema, doc)
        for batch in batches:
            writer.write_batch(batch)
        return writer.close(), counts

    return run


def xlsx_sheets(path: Path) -> dict[str, list[tuple]]:
    """Every sheet's rows (values only) read with openpyxl in read-only mode."""
    wb = openpyxl.load_workbook(path, read_only=True)
    try:
        return {ws.title: list(ws.iter_rows(values_only=True)) for ws in wb.worksheets}
    finally:
        wb.close()


def xlsx_cells(path: Path) -> list[list]:
    """The first sheet's cells (value, data_type, number_format, quotePrefix)."""
    wb = openpyxl.load_workbook(path)
    ws = wb.worksheets[0]
    return [[c for c in row] for row in ws.iter_rows()]


def sheet_xml(path: Path, n: int = 1) -> str:
    """The raw XML of sheet ``n`` inside the xlsx."""
    with zipfile.ZipFile(path) as zf:
        return zf.read(f"xl/worksheets/sheet{n}.xml").decode("utf-8")


def csv_rows(path_or_bytes, encoding: str = "utf-8-sig", delimiter: str = ",") -> list[list[str]]:
    """All records of a csv file, parsed with the csv module."""
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    return list(csv.reader(io.StringIO(data.decode(encoding), newline=""), delimiter=delimiter))


def parquet_rows(path: Path) -> list[dict]:
    """All rows of a parquet file as dicts."""
    return pq.read_table(path).to_pylist()


def pages_of(rows: Iterable[dict], size: int) -> Iterable[list[dict]]:
    """Split ``rows`` into pages of ``size``."""
    page: list[dict] = []
    for r in rows:
        page.append(r)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page
