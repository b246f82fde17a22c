"""The export flow end to end on the real broker (Tansu), the real Redis and
the local object store: every format, retries, redelivery, bad specs."""
from __future__ import annotations

import httpx
import pytest

from plait.spec import ExportSpec
from producers.sdk import PlaitProducer
from support import fetch_file, read_rows, seq_spec, source_ids, submit, wait_task

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fmt", ["csv", "xlsx", "parquet", "jsonl"])
def test_multi_page_export_has_every_row_once(stack, tmp_path, fmt):
    # given 1,050 source rows served in pages of 100 (11 pages)
    task_id = submit(stack.api_url, seq_spec(stack.demo_data_api, fmt, 1050, 100))
    # when the task runs through the pipeline
    task = wait_task(stack.api_url, task_id)
    # then it succeeded and the file holds ids 1..1050 exactly once, in order
    assert task["status"] == "SUCCESS", task
    assert task["exportedRows"] == 1050 and task["file"]["rows"] == 1050
    rows = read_rows(fetch_file(task, tmp_path))
    header, data = rows[0], rows[1:]
    assert header[:3] == ["id", "name", "value"]
    assert [int(r[0]) for r in data] == source_ids(1050)
    assert data[-1][1] == "row-1050"


def test_transient_500_is_retried_and_the_task_succeeds(stack, tmp_path):
    # given a data API that answers page 2 with HTTP 500 once
    spec = seq_spec(stack.demo_data_api, "csv", 500, 100,
                    query="?fail_status=500&fail_page=2&fail_times=1&run=t500")
    # when
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    # then the failure was injected, retried, and nothing is missing
    faults = httpx.get(f"{stack.demo_data_api}/faults").json()
    assert any("run=t500" in k and v == 1 for k, v in faults.items()), faults
    assert task["status"] == "SUCCESS", task
    data = read_rows(fetch_file(task, tmp_path))[1:]
    assert [int(r[0]) for r in data] == source_ids(500)


def test_permanent_400_fails_naming_the_page(stack):
    spec = seq_spec(stack.demo_data_api, "csv", 500, 100,
                    query="?fail_status=400&fail_page=3&fail_times=99&run=t400")
    task = wait_task(stack.api_url, submit(stack.api_url, spec))
    assert task["status"] == "FAILED"
    assert "page 3" in task["errorMessage"] and "HTTP 400" in task["errorMessage"]


def test_redelivered_pages_are_written_once(stack, tmp_path):
    # given a push-mode task whose producer sends page 1 three times
    # (the original and two redeliveries), as at-least-once delivery may
    spec = ExportSpec.model_validate({
        "sysCode": "tests", "bizType": "push", "userId": "alice",
        "dataConfig": {"mode": "push"},
        "documentConfig": {"fileName": "pushed", "fileFormat": "csv"}})
    sdk = PlaitProducer(stack.env["PLAIT_BROKER_URL"], stack.env["PLAIT_TOPIC_PREFIX"])
    task_id = sdk.request_export(spec)
    pages = [[{"id": i} for i in range(s * 10 + 1, s * 10 + 11)] for s in range(3)]
    for seq in (0, 1, 1, 1, 2):
        sdk.send_page(task_id, spec, seq, pages[seq], seq * 10, is_last=seq == 2)
    sdk.flush()
    # when the task completes
    task = wait_task(stack.api_url, task_id)
    # then every row is in the file exactly once
    assert task["status"] == "SUCCESS", task
    data = read_rows(fetch_file(task, tmp_path))[1:]
    assert [int(r[0]) for r in data] == list(range(1, 31))


def test_sdk_and_api_give_the_same_file(stack):
    # given the same spec sent once through the API and once with the SDK
    spec = seq_spec(stack.demo_data_api, "xlsx", 300, 100)
    via_api = wait_task(stack.api_url, submit(stack.api_url, spec))
    sdk = PlaitProducer(stack.env["PLAIT_BROKER_URL"], stack.env["PLAIT_TOPIC_PREFIX"])
    via_sdk = wait_task(stack.api_url, sdk.request_export(spec))
    # then both files are byte-identical
    assert via_api["status"] == via_sdk["status"] == "SUCCESS"
    assert via_api["file"]["sha256"] == via_sdk["file"]["sha256"]


def test_task_list_by_caller_and_user(stack):
    task_id = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 10, 10))
    wait_task(stack.api_url, task_id)
    listed = httpx.get(f"{stack.api_url}/export/tasks",
                       params={"sysCode": "tests", "userId": "alice"}).json()["data"]["tasks"]
    assert task_id in [t["taskId"] for t in listed]
    other = httpx.get(f"{stack.api_url}/export/tasks",
                      params={"sysCode": "tests", "userId": "bob"}).json()["data"]["tasks"]
    assert task_id not in [t["taskId"] for t in other]


@pytest.mark.parametrize("mutate, field", [
    (lambda s: s["documentConfig"].update(fileFormat="odt"), "documentConfig.fileFormat"),
    (lambda s: s["dataConfig"].update(pageSize=0), "dataConfig.pageSize"),
    (lambda s: s.pop("userId"), "userId"),
    (lambda s: s["dataConfig"].update(dataApiUrl="ftp://x/data"), "dataConfig"),
    (lambda s: s["jobConfig"].update(maxRows=-5), "jobConfig.maxRows"),
])
def test_invalid_spec_is_a_422_naming_the_field(stack, mutate, field):
    spec = seq_spec(stack.demo_data_api, "csv", 10)
    mutate(spec)
    resp = httpx.post(f"{stack.api_url}/export/tasks", json=spec)
    body = resp.json()
    assert resp.status_code == 422 and body["code"] == 422
    assert field in body["message"]
    assert any(e["field"].startswith(field) for e in body["data"]["errors"])


def test_unknown_task_is_404_with_envelope(stack):
    resp = httpx.get(f"{stack.api_url}/export/tasks/nope")
    assert resp.status_code == 404 and resp.json()["code"] == 404
    route = httpx.get(f"{stack.api_url}/no/such/route")
    assert route.status_code == 404 and route.json()["code"] == 404
    garbage = httpx.post(f"{stack.api_url}/export/tasks", content=b"{not json",
                         headers={"content-type": "application/json"})
    assert garbage.status_code == 422 and garbage.json()["code"] == 422


def test_tampered_and_expired_links_are_403(stack):
    task = wait_task(stack.api_url, submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 5, 5)))
    url = task["file"]["url"]
    assert httpx.get(url).status_code == 200
    assert httpx.get(url.replace("sig=", "sig=0")).status_code == 403
    expired = url.replace("expires=", "expires=1")  # a different expiry breaks the signature
    assert httpx.get(expired).status_code == 403
