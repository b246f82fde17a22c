"""Registers the sink test fixtures (defined in sink_helpers) and, for every
test here, the xlsx engine comparison (``engine_compare``): each xlsx the
native engine writes is also written by xlsxwriter and compared cell by cell."""
import pytest
from engine_compare import ENGINES, FALLBACKS, Comparing
from sink_helpers import export  # noqa: F401  (pytest fixture)

from sinks import writers


@pytest.fixture(autouse=True)
def _compare_xlsx_engines(monkeypatch):
    monkeypatch.setitem(writers.WRITERS, "xlsx", Comparing)
    yield


def pytest_terminal_summary(terminalreporter):
    if ENGINES:
        terminalreporter.write_line(f"xlsx engines: {ENGINES}; fallbacks by rule: {FALLBACKS}")
