"""The written export contract is accepted verbatim (issue 10, item 1): its
request validates as sent, the two spellings of page size and sheet name
agree or are refused naming both, sheet names follow Excel's rules, unknown
fields are still refused by path, and the fingerprint covers what shapes the
file."""
from __future__ import annotations

import copy
import json

import httpx
import pytest
from pydantic import ValidationError

from plait.events import Lifecycle
from plait.lifecycle import apply
from plait.spec import DEFAULT_PAGE_SIZE, ExportSpec, excel_sheet_name

#: The contract's request, exactly as a service following it sends it.
CONTRACT = {
    "sysCode": "App", "bizType": "AppExport", "bizDesc": "App data export", "userId": "user_001",
    "dataConfig": {"dataApiUrl": "http://127.0.0.1:1/data",
                   "queryConditions": {"deviceType": "sensor", "from": "2024-01-01"}},
    "documentConfig": {"fileName": "device-reports", "fileFormat": "xlsx",
                       "xlsx": {"sheetName": "Device reports"},
                       "columns": [{"fieldName": "id", "headerName": "ID"},
                                   {"fieldName": "name", "headerName": "Name"}]},
    "jobConfig": {"timeout": 600, "maxRows": 1000000, "pageSize": 1000},
}


def contract(**changes) -> dict:
    """A deep copy of the contract body with ``{"a.b.c": value}`` changes
    (value ``...`` deletes the key)."""
    body = copy.deepcopy(CONTRACT)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = body
        for p in parents:
            node = node.setdefault(p, {})
        if value is ...:
            node.pop(last, None)
        else:
            node[last] = value
    return body


def errors(body: dict) -> list[tuple[str, str]]:
    """``(field path, message)`` of each validation error of ``body``."""
    with pytest.raises(ValidationError) as info:
        ExportSpec.model_validate(body)
    return [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in info.value.errors()]


def test_the_contract_request_is_accepted_as_written():
    spec = ExportSpec.model_validate(CONTRACT)
    assert spec.bizDesc == "App data export"
    assert spec.dataConfig.pageSize == 1000
    assert spec.documentConfig.sheetName == "Device reports"
    assert spec.jobConfig.timeout == 600 and spec.jobConfig.maxRows == 1_000_000


def test_the_spec_survives_the_event_round_trip():
    # workers re-read the spec from ExportRequested / FetchPage events
    spec = ExportSpec.model_validate(CONTRACT)
    again = ExportSpec.model_validate_json(spec.model_dump_json())
    assert again == spec and again.fingerprint() == spec.fingerprint()


@pytest.mark.parametrize("data, job, expected", [
    (None, None, DEFAULT_PAGE_SIZE),
    (None, 250, 250),
    (250, None, 250),
    (250, 250, 250),
])
def test_either_page_size_spelling_sets_the_page_size(data, job, expected):
    body = contract(**{"dataConfig.pageSize": ... if data is None else data,
                       "jobConfig.pageSize": ... if job is None else job})
    assert ExportSpec.model_validate(body).dataConfig.pageSize == expected


def test_conflicting_page_sizes_are_refused_naming_both():
    found = dict(errors(contract(**{"dataConfig.pageSize": 500})))
    assert set(found) == {"dataConfig.pageSize", "jobConfig.pageSize"}
    assert "jobConfig.pageSize (1000)" in found["dataConfig.pageSize"]
    assert "dataConfig.pageSize (500)" in found["jobConfig.pageSize"]


@pytest.mark.parametrize("value", [0, 10_001, "1000", 1.5])
def test_job_page_size_is_bounded_and_whole(value):
    found = errors(contract(**{"jobConfig.pageSize": value}))
    assert [f for f, _ in found] == ["jobConfig.pageSize"]


@pytest.mark.parametrize("name", ["Device reports", "x" * 31, "Q1 2024 (final)", "上海 报表",
                                  "History of sales", "it's"])
def test_valid_sheet_names_name_the_sheet(name):
    assert ExportSpec.model_validate(
        contract(**{"documentConfig.xlsx.sheetName": name})).documentConfig.sheetName == name


@pytest.mark.parametrize("name, words", [
    ("x" * 32, "32 characters"),
    ("", "blank"),
    ("   ", "blank"),
    ("Q1/Q2", "contains /"),
    ("a[b]", "contains [ ]"),
    ("a:b", "contains :"),
    ("a*b?", "contains * ?"),
    ("a\\b", "contains \\"),
    ("History", "reserved"),
    ("HISTORY", "reserved"),
    ("'quoted'", "apostrophe"),
    ("tab\there", "control character"),
])
def test_invalid_sheet_names_are_refused_naming_the_field(name, words):
    [(field, message)] = errors(contract(**{"documentConfig.xlsx.sheetName": name}))
    assert field == "documentConfig.xlsx.sheetName"
    assert words in message and "1 to 31 characters" in message
    assert not message.startswith("Value error")


def test_sheet_name_spellings_must_agree():
    same = contract(**{"documentConfig.sheetName": "Device reports"})
    assert ExportSpec.model_validate(same).documentConfig.sheetName == "Device reports"
    found = dict(errors(contract(**{"documentConfig.sheetName": "Other"})))
    assert set(found) == {"documentConfig.sheetName", "documentConfig.xlsx.sheetName"}
    assert "documentConfig.xlsx.sheetName ('Device reports')" in found["documentConfig.sheetName"]


def test_xlsx_options_may_be_empty():
    spec = ExportSpec.model_validate(contract(**{"documentConfig.xlsx": {}}))
    assert spec.documentConfig.sheetName == "Sheet1"


@pytest.mark.parametrize("path", ["extra", "dataConfig.extra", "documentConfig.extra",
                                  "documentConfig.xlsx.extra", "jobConfig.extra",
                                  "documentConfig.xlsx.sheet_name"])
def test_unknown_fields_are_still_refused_by_path(path):
    assert errors(contract(**{path: 1})) == [(path, "Extra inputs are not permitted")]


def test_biz_desc_is_bounded_text():
    assert errors(contract(bizDesc="x" * 257))[0][0] == "bizDesc"
    assert ExportSpec.model_validate(contract(bizDesc=...)).bizDesc is None


def fingerprint(**changes) -> str:
    return ExportSpec.model_validate(contract(**changes)).fingerprint()


def test_the_sheet_name_shapes_the_file_and_is_in_the_fingerprint():
    assert fingerprint() != fingerprint(**{"documentConfig.xlsx.sheetName": "Other"})
    assert fingerprint() != fingerprint(**{"documentConfig.xlsx": ...})


def test_the_spelling_of_the_sheet_name_is_not_in_the_fingerprint():
    flat = contract(**{"documentConfig.xlsx": ..., "documentConfig.sheetName": "Device reports"})
    assert ExportSpec.model_validate(flat).fingerprint() == fingerprint()


@pytest.mark.parametrize("changes", [
    {"jobConfig.pageSize": 50},
    {"jobConfig.pageSize": ..., "dataConfig.pageSize": 50},
    {"bizDesc": "something else"},
    {"bizDesc": ...},
    {"jobConfig.timeout": 30},
])
def test_what_does_not_shape_the_file_is_not_in_the_fingerprint(changes):
    assert fingerprint(**changes) == fingerprint()


def test_excel_sheet_name_returns_a_valid_name_unchanged():
    assert excel_sheet_name("Device reports") == "Device reports"


def test_biz_desc_is_kept_in_the_projection():
    state = apply(None, Lifecycle(taskId="t1", status="CREATED", sysCode="App",
                                  bizType="AppExport", bizDesc="App data export"))
    state = apply(state, Lifecycle(taskId="t1", status="RUNNING"))
    assert state["bizDesc"] == "App data export" and state["status"] == "RUNNING"


async def test_the_first_data_api_call_sends_last_id_null_then_the_answered_context():
    from streams.datasource import fetch_page

    sent: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        last = body["runtimeContext"]["lastId"] or 0
        return httpx.Response(200, json={"code": 200, "message": "ok", "data": {
            "status": "continue", "rows": [{"id": last + 1}],
            "runtimeContext": {"pageSize": body["runtimeContext"]["pageSize"],
                               "lastId": last + 1}}})

    spec = ExportSpec.model_validate(CONTRACT)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        first = await fetch_page(client, spec, spec.dataConfig.runtimeContext, 0, 1, 0)
        await fetch_page(client, spec, first.next_context, 1, 1, 0)
    assert sent[0] == {"queryConditions": CONTRACT["dataConfig"]["queryConditions"],
                       "runtimeContext": {"pageSize": 1000, "lastId": None},
                       "userId": "user_001"}
    assert sent[1]["runtimeContext"] == {"pageSize": 1000, "lastId": 1}


async def test_an_initial_cursor_of_the_spec_overrides_last_id_null():
    from streams.datasource import fetch_page

    sent: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"code": 200, "data": {
            "status": "finish", "rows": [], "runtimeContext": {}}})

    spec = ExportSpec.model_validate(contract(**{"dataConfig.runtimeContext": {"lastId": 41}}))
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        await fetch_page(client, spec, spec.dataConfig.runtimeContext, 0, 1, 0)
    assert sent[0]["runtimeContext"] == {"pageSize": 1000, "lastId": 41}
