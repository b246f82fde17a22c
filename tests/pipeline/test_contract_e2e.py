"""The written export contract end to end (issue 10, item 1): a service posts
the contract's request exactly as written; a data API that implements exactly
the contract's pull shape serves the rows; the xlsx read back has the sheet
named by ``documentConfig.xlsx.sheetName`` and every row.

The data API here checks each request against the contract and answers HTTP
400 (a permanent failure that ends the task, naming the cause) when Plait
sends anything else: the body is exactly ``{"queryConditions", "runtimeContext",
"userId"}``, the first call's ``runtimeContext`` is exactly ``{"pageSize": 1000,
"lastId": null}``, each later call sends back the context it answered.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import httpx
import pytest

from support import fetch_file, wait_task

pytestmark = pytest.mark.integration

ROWS = 2_345  # three pages of 1,000: continue, continue, finish
QUERY = {"deviceType": "sensor", "from": "2024-01-01", "to": "2024-01-31"}


def device_row(i: int) -> dict[str, Any]:
    """Source row ``i`` (1-based)."""
    return {"id": i, "device": f"dev-{i:05d}", "temperature": round(15 + (i % 200) * 0.1, 1)}


class ContractDataApi(BaseHTTPRequestHandler):
    """``POST /data`` exactly as the contract says (docs/events.md, "Business data API (pull contract)"); every request body is kept in ``server.calls``."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append(body)
        problem = self.server.check(body)
        if problem:
            return self.answer(400, {"code": 400, "message": problem})
        ctx = body["runtimeContext"]
        start = ctx["lastId"] or 0
        stop = min(ROWS, start + ctx["pageSize"])
        nxt = {"pageSize": ctx["pageSize"], "lastId": stop}
        self.server.answered.append(nxt)
        self.answer(200, {"code": 200, "message": "success", "data": {
            "status": "finish" if stop >= ROWS else "continue",
            "runtimeContext": nxt,
            "rows": [device_row(i) for i in range(start + 1, stop + 1)]}})

    def answer(self, status: int, doc: dict[str, Any]) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


class ContractServer(ThreadingHTTPServer):
    """The server with the contract checks and the calls it saw."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ContractDataApi)
        self.calls: list[dict[str, Any]] = []
        self.answered: list[dict[str, Any]] = []

    def check(self, body: dict[str, Any]) -> str | None:
        """What in ``body`` breaks the contract, or None."""
        if set(body) != {"queryConditions", "runtimeContext", "userId"}:
            return f"body keys {sorted(body)} are not queryConditions, runtimeContext, userId"
        if body["queryConditions"] != QUERY or body["userId"] != "user_001":
            return f"queryConditions/userId not as requested: {body}"
        # the first call, or a cursor this API answered (a retry may repeat one)
        allowed = [{"pageSize": 1000, "lastId": None}, *self.answered]
        if body["runtimeContext"] not in allowed:
            return f"runtimeContext {body['runtimeContext']} is none of {allowed}"
        return None


@pytest.fixture(scope="module")
def data_api() -> Iterator[ContractServer]:
    server = ContractServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def contract_body(data_api_url: str) -> dict[str, Any]:
    """The contract's request, exactly as written (only the placeholders filled)."""
    return {"sysCode": "App", "bizType": "AppExport", "bizDesc": "App data export",
            "userId": "user_001",
            "dataConfig": {"dataApiUrl": data_api_url, "queryConditions": QUERY},
            "documentConfig": {"fileName": "device-reports", "fileFormat": "xlsx",
                               "xlsx": {"sheetName": "Device reports"},
                               "columns": [
                                   {"fieldName": "id", "headerName": "ID", "type": "int"},
                                   {"fieldName": "device", "headerName": "Device"},
                                   {"fieldName": "temperature", "headerName": "Temperature",
                                    "type": "float"}]},
            "jobConfig": {"timeout": 600, "maxRows": 1000000, "pageSize": 1000}}


def test_the_contract_request_exports_through_the_contract_data_api(stack, data_api, tmp_path):
    import openpyxl

    url = f"http://127.0.0.1:{data_api.server_address[1]}/data"
    body = contract_body(url)
    # when a service posts the contract's request as written
    resp = httpx.post(f"{stack.api_url}/export/tasks", json=body, timeout=10)
    # then it is accepted with the contract's answer (HTTP 202, code 200)
    assert resp.status_code == 202, resp.text
    answer = resp.json()
    assert answer["code"] == 200 and answer["message"] and answer["data"]["taskId"]
    task_id = answer["data"]["taskId"]
    task = wait_task(stack.api_url, task_id)
    assert task["status"] == "SUCCESS", (task, data_api.calls[-1:])
    # the data API saw lastId null first, then each cursor it answered, and said finish
    contexts = [c["runtimeContext"] for c in data_api.calls]
    unique = [c for i, c in enumerate(contexts) if c not in contexts[:i]]
    assert unique == [{"pageSize": 1000, "lastId": None}, {"pageSize": 1000, "lastId": 1000},
                      {"pageSize": 1000, "lastId": 2000}], contexts
    # bizDesc is kept in the task and in the task list
    assert task["bizDesc"] == "App data export" and task["bizType"] == "AppExport"
    listed = httpx.get(f"{stack.api_url}/export/tasks",
                       params={"sysCode": "App", "userId": "user_001"}, timeout=10).json()
    assert [t["bizDesc"] for t in listed["data"]["tasks"] if t["taskId"] == task_id] == [
        "App data export"]
    # the file: one sheet named as asked, the header, every row in order
    assert task["exportedRows"] == ROWS and task["file"]["rows"] == ROWS
    path = fetch_file(task, tmp_path)
    wb = openpyxl.load_workbook(path, read_only=True)
    assert wb.sheetnames == ["Device reports"]
    rows = [list(r) for r in wb["Device reports"].iter_rows(values_only=True)]
    wb.close()
    assert rows[0] == ["ID", "Device", "Temperature"]
    assert rows[1:] == [[r["id"], r["device"], r["temperature"]]
                        for r in map(device_row, range(1, ROWS + 1))]
    # the same request again is answered with that result (same fingerprint)
    again = httpx.post(f"{stack.api_url}/export/tasks", json=body, timeout=10)
    assert again.status_code == 200 and again.json()["code"] == 200
    assert again.json()["data"]["taskId"] == task_id and again.json()["data"]["reused"] is True
    assert len(data_api.calls) == len(contexts)  # nothing fetched again


def test_a_conflicting_page_size_is_refused_naming_both_fields(stack, data_api):
    body = contract_body(f"http://127.0.0.1:{data_api.server_address[1]}/data")
    body["dataConfig"]["pageSize"] = 500
    resp = httpx.post(f"{stack.api_url}/export/tasks", json=body, timeout=10)
    assert resp.status_code == 422
    fields = {e["field"] for e in resp.json()["data"]["errors"]}
    assert fields == {"dataConfig.pageSize", "jobConfig.pageSize"}


@pytest.mark.parametrize("name", ["Q1/Q2", "x" * 32, "History", " "])
def test_an_invalid_sheet_name_is_refused_naming_the_field(stack, data_api, name):
    body = contract_body(f"http://127.0.0.1:{data_api.server_address[1]}/data")
    body["documentConfig"]["xlsx"]["sheetName"] = name
    resp = httpx.post(f"{stack.api_url}/export/tasks", json=body, timeout=10)
    assert resp.status_code == 422
    assert [e["field"] for e in resp.json()["data"]["errors"]] == ["documentConfig.xlsx.sheetName"]
    assert "documentConfig.xlsx.sheetName" in resp.json()["message"]


def test_unknown_fields_are_refused_naming_them(stack, data_api):
    body = contract_body(f"http://127.0.0.1:{data_api.server_address[1]}/data")
    body["jobConfig"]["pagesize"] = 1000
    body["documentConfig"]["xlsx"]["tabColor"] = "red"
    resp = httpx.post(f"{stack.api_url}/export/tasks", json=body, timeout=10)
    assert resp.status_code == 422
    assert sorted(e["field"] for e in resp.json()["data"]["errors"]) == [
        "documentConfig.xlsx.tabColor", "jobConfig.pagesize"]
