"""pdf and docx requests over their caps are refused at the API (422) naming
the limit and pointing to xlsx/csv (plait.documents); within the caps they
pass on to the broker."""
from __future__ import annotations

import pytest

SPEC = {"sysCode": "crm", "bizType": "orders", "userId": "alice",
        "dataConfig": {"dataApiUrl": "http://data.example/export"}}


def post(client, fmt: str, job: dict | None = None, **doc):
    spec = {**SPEC, "documentConfig": {"fileFormat": fmt, **doc}, "jobConfig": job or {}}
    return client.post("/export/tasks", json=spec)


def refusal(resp, field: str) -> dict:
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["code"] == 422 and field in body["message"]
    entry = next(e for e in body["data"]["errors"] if e["field"] == field)
    assert entry["code"] == "limit" and "xlsx or csv" in entry["rule"]
    return entry


@pytest.mark.parametrize("fmt,cap", [("pdf", 12), ("docx", 12)])
def test_too_many_columns_is_a_422_naming_the_cap(client, fmt, cap):
    columns = [{"fieldName": f"c{i}"} for i in range(cap + 1)]
    entry = refusal(post(client, fmt, columns=columns), "documentConfig.columns")
    assert f"{fmt} allows at most {cap} columns" in entry["rule"]
    assert f"has {cap + 1}" in entry["rule"]
    assert entry["accepted"] == f"at most {cap} columns"


@pytest.mark.parametrize("fmt,cap", [("pdf", 10_000), ("docx", 20_000)])
def test_max_rows_over_the_row_cap_is_a_422_naming_it(client, fmt, cap):
    entry = refusal(post(client, fmt, {"maxRows": cap + 1}), "jobConfig.maxRows")
    assert f"{fmt} allows at most {cap:,} rows" in entry["rule"]
    assert f"PLAIT_{fmt.upper()}_MAX_ROWS" in entry["rule"]


def test_a_split_document_is_a_422(client):
    refusal(post(client, "docx", maxRowsPerFile=100), "documentConfig.maxRowsPerFile")


@pytest.mark.parametrize("fmt", ["pdf", "docx"])
def test_within_the_caps_the_request_goes_on_to_the_broker(client, fmt):
    columns = [{"fieldName": f"c{i}"} for i in range(12)]
    resp = post(client, fmt, {"maxRows": 500}, columns=columns)
    # the test app's broker is unreachable: the request got past every check
    assert resp.status_code == 503, resp.text
