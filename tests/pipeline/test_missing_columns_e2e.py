"""A declared column whose ``fieldName`` no row has (misspelt) fails the
task before any file is written, naming the column and the fields the rows
have; ``documentConfig.allowMissingColumns`` keeps it as an empty column,
counted in the quality report. Real broker, Redis, workers and the demo
data API (``seq`` rows: id, name, value, ts)."""
from __future__ import annotations

import pytest

from support import fetch_file, read_rows, seq_spec, submit, wait_task

pytestmark = pytest.mark.integration

COLUMNS = [{"fieldName": "id", "type": "int"}, {"fieldName": "nmae", "type": "string"}]


def test_a_misspelt_column_fails_the_task_naming_it_and_writes_no_file(stack):
    spec = seq_spec(stack.demo_data_api, "csv", 300, 100, columns=COLUMNS)
    task_id = submit(stack.api_url, spec)
    task = wait_task(stack.api_url, task_id)
    assert task["status"] == "FAILED", task
    msg = task["errorMessage"]
    assert "'nmae'" in msg and "'id', 'name', 'value', 'ts'" in msg, msg
    assert "allowMissingColumns" in msg and "'id' is" not in msg
    assert not task.get("file")
    storage = stack.data_dir / "storage"
    left = [p for p in storage.rglob("*") if task_id in str(p) and p.is_file()]
    assert left == [], left


def test_allow_missing_columns_gives_an_empty_counted_column(stack, tmp_path):
    spec = seq_spec(stack.demo_data_api, "csv", 300, 100, columns=COLUMNS,
                    allowMissingColumns=True)
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    assert task["status"] == "SUCCESS", task
    assert task["quality"]["missing_field:nmae"] == 300, task["quality"]
    rows = read_rows(fetch_file(task, tmp_path))
    assert rows[0] == ["id", "nmae"] and rows[1] == ["1", ""] and len(rows) == 301
