"""Issue 13 end to end (docs/fidelity-rules.md): the demo data API serves a
lone surrogate (F1), an instant beyond year 9999 (F4), a BigDecimal literal
(F11) and a MySQL zero date (F5) through the real broker, Redis and workers;
the task SUCCEEDs with the quality report, or with ``onInvalidValue: "fail"``
FAILs naming column, page and row (never "internal error")."""
from __future__ import annotations

import datetime as dt

import pytest

from support import fetch_file, read_rows, seq_spec, submit, wait_task

pytestmark = pytest.mark.integration


def fidelity_spec(data_api: str, fmt: str, **doc) -> dict:
    spec = seq_spec(data_api, fmt, 2, 100, **doc)
    spec["dataConfig"]["queryConditions"]["dataset"] = "fidelity"
    spec["documentConfig"]["columns"] = [
        {"fieldName": "memo"}, {"fieldName": "t", "type": "datetime"},
        {"fieldName": "amount", "type": "decimal", "format": "0.00"},
        {"fieldName": "d", "type": "date"}]
    return spec


@pytest.mark.parametrize("fmt", ["xlsx", "csv"])
def test_bad_values_keep_the_export_going_and_are_counted(stack, tmp_path, fmt):
    task = wait_task(stack.api_url, submit(stack.api_url, fidelity_spec(stack.demo_data_api, fmt)))
    assert task["status"] == "SUCCESS", task
    quality = task["quality"]
    assert quality["replaced_invalid_unicode:memo"] == 1
    assert quality["out_of_range:t"] == 1 and quality["invalid_date:d"] == 1
    header, first, second = read_rows(fetch_file(task, tmp_path))
    assert first[0] == "cut \ufffd" and first[1] == "+10000-01-01T04:00:00+00:00"
    if fmt == "xlsx":
        assert quality["converted_to_text:amount"] == 1
        assert first[2] == "12345678901234567890.12" and second[2] == 0.1
        assert first[3] is None and second[1] == dt.datetime(2020, 1, 1)
    else:
        assert first[2] == "12345678901234567890.12" and second[2] == "0.10"
        assert first[3] == "" and second[1] == "2020-01-01T00:00:00+00:00"


def test_strict_mode_fails_naming_column_page_and_row(stack):
    spec = fidelity_spec(stack.demo_data_api, "csv", onInvalidValue="fail")
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    assert task["status"] == "FAILED", task
    msg = task["errorMessage"]
    assert "internal error" not in msg
    assert "'memo'" in msg and "page 0" in msg and "row 0" in msg
    assert "replaced_invalid_unicode" in msg
