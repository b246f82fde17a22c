"""Registers the sink test fixtures (defined in sink_helpers) and, for every
test here, the xlsx engine comparison (``engine_compare``): each xlsx the
native engine writes is also written by xlsxwriter and compared cell by cell;
each csv and jsonl the vectorized writers write is also written by the former cell-by-cell
writer (``reference_csv``, ``reference_jsonl``) and must be byte-identical.
Every page a test normalizes (``rows_to_batch``) is also decoded by the fast
page decode and must give the same batch or be declined (``fast_compare``)."""
import sys

import pytest
from fast_compare import FAST, checking
from engine_compare import ENGINES, FALLBACKS, Comparing, comparing_text
from reference_csv import ReferenceCsvWriter
from reference_jsonl import ReferenceJsonlWriter
from sink_helpers import export  # noqa: F401  (pytest fixture)

from sinks import values, writers
from sinks.writers.csv_writer import CsvWriter
from sinks.writers.jsonl_writer import JsonlWriter


@pytest.fixture(autouse=True)
def _compare_xlsx_engines(monkeypatch):
    monkeypatch.setitem(writers.WRITERS, "xlsx", Comparing)
    monkeypatch.setitem(writers.WRITERS, "csv", comparing_text(CsvWriter, ReferenceCsvWriter))
    monkeypatch.setitem(writers.WRITERS, "jsonl",
                        comparing_text(JsonlWriter, ReferenceJsonlWriter))
    yield


@pytest.fixture(autouse=True)
def _compare_fast_decode(monkeypatch):
    original = values.rows_to_batch
    wrapped = checking(original)
    for module in list(sys.modules.values()):
        if getattr(module, "rows_to_batch", None) is original:
            monkeypatch.setattr(module, "rows_to_batch", wrapped)
    yield


def pytest_terminal_summary(terminalreporter):
    if FAST:
        terminalreporter.write_line(f"fast page decode vs exact: {dict(FAST)}")
    if ENGINES:
        terminalreporter.write_line(f"xlsx engines: {ENGINES}; fallbacks by rule: {FALLBACKS}")
