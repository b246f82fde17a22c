"""pdf and docx exports end to end on the real broker (Tansu), Redis and the
local object store: pulled pages and pushed CJK rows read back from the
files, a request over the caps refused, the row cap met while fetching."""
from __future__ import annotations

from pathlib import Path

import docx
import httpx
import pypdf
import pytest

from ops.stack import Stack
from plait.spec import ExportSpec
from producers.sdk import PlaitProducer
from stack_env import drop_redis_keys, isolated_env
from support import fetch_file, seq_spec, source_ids, submit, wait_task

pytestmark = pytest.mark.integration
#: Small caps so a few pages cross them.
CAP = 150


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(Path(tmp_path_factory.mktemp("stack")),
              isolated_env(PLAIT_PDF_MAX_ROWS=str(CAP), PLAIT_DOCX_MAX_ROWS=str(CAP)))
    try:
        yield s.start(workers=1)
    finally:
        s.stop()
        drop_redis_keys(s)


def docx_cells(path: Path) -> list[list[str]]:
    return [[c.text for c in row.cells] for row in docx.Document(str(path)).tables[0].rows]


def pdf_pages(path: Path) -> list[str]:
    return [p.extract_text() for p in pypdf.PdfReader(str(path)).pages]


def test_docx_pulled_in_pages_holds_every_row(stack, tmp_path):
    task = wait_task(stack.api_url, submit(stack.api_url, seq_spec(
        stack.demo_data_api, "docx", 140, 40)))
    assert task["status"] == "SUCCESS", task
    cells = docx_cells(fetch_file(task, tmp_path))
    assert cells[0] == ["id", "name", "value", "ts (UTC)"]
    assert [int(r[0]) for r in cells[1:]] == source_ids(140)
    assert cells[1] == ["1", "row-1", "0.5", "2024-01-02T01:00:00+00:00"]


def test_pdf_pulled_in_pages_has_the_header_on_every_page(stack, tmp_path):
    task = wait_task(stack.api_url, submit(stack.api_url, seq_spec(
        stack.demo_data_api, "pdf", 140, 40)))
    assert task["status"] == "SUCCESS", task
    pages = pdf_pages(fetch_file(task, tmp_path))
    assert len(pages) >= 3
    assert all(p.split("\n")[:4] == ["id", "name", "value", "ts (UTC)"] for p in pages)
    text = "\n".join(pages)
    assert all(f"\nrow-{i}\n" in text for i in range(1, 141))


@pytest.mark.parametrize("fmt", ["pdf", "docx"])
def test_rows_beyond_the_cap_fail_the_task_naming_it(stack, fmt):
    # no jobConfig.maxRows: the source has more rows than the format holds
    task = wait_task(stack.api_url, submit(stack.api_url, seq_spec(
        stack.demo_data_api, fmt, 400, 50)))
    assert task["status"] == "FAILED", task
    assert f"{fmt} allows at most {CAP} rows" in task["errorMessage"]
    assert "xlsx or csv" in task["errorMessage"]


def test_max_rows_within_the_cap_cuts_the_export_truncated(stack, tmp_path):
    task = wait_task(stack.api_url, submit(stack.api_url, seq_spec(
        stack.demo_data_api, "docx", 400, 50, job={"maxRows": 120})))
    assert task["status"] == "SUCCESS" and task["truncated"] is True, task
    assert [int(r[0]) for r in docx_cells(fetch_file(task, tmp_path))[1:]] == source_ids(120)


def test_max_rows_over_the_cap_is_refused_at_the_api(stack):
    spec = seq_spec(stack.demo_data_api, "pdf", 400, 50, job={"maxRows": CAP + 1})
    resp = httpx.post(f"{stack.api_url}/export/tasks", json=spec, timeout=10)
    assert resp.status_code == 422, resp.text
    assert resp.json()["data"]["errors"][0]["field"] == "jobConfig.maxRows"


@pytest.mark.parametrize("fmt", ["pdf", "docx"])
def test_pushed_cjk_rows_are_in_the_file_with_long_values_cut(stack, tmp_path, fmt):
    spec = ExportSpec.model_validate({
        "sysCode": "tests", "bizType": "push", "userId": "alice",
        "dataConfig": {"mode": "push"},
        "documentConfig": {"fileName": f"cjk-{fmt}", "fileFormat": fmt}})
    sdk = PlaitProducer(stack.env["PLAIT_BROKER_URL"], stack.env["PLAIT_TOPIC_PREFIX"])
    task_id = sdk.request_export(spec)
    long = "数据" * 150  # 300 characters: cut to 200 (PLAIT_DOCUMENT_CELL_CHARS)
    pages = [[{"id": 1, "city": "東京都", "memo": "売上報告"}, {"id": 2, "city": "北京", "memo": long}],
             [{"id": 3, "city": "서울", "memo": "보고서"}]]
    for seq, rows in enumerate(pages):
        sdk.send_page(task_id, spec, seq, rows, seq * 2, is_last=seq == 1)
    sdk.flush()
    task = wait_task(stack.api_url, task_id)
    assert task["status"] == "SUCCESS", task
    assert task["quality"]["truncated:memo"] == 1
    path = fetch_file(task, tmp_path)
    cut = long[:199] + "\u2026"
    if fmt == "docx":
        assert docx_cells(path) == [["id", "city", "memo"], ["1", "東京都", "売上報告"],
                                    ["2", "北京", cut], ["3", "서울", "보고서"]]
    else:
        text = "\n".join(pdf_pages(path))
        assert all(s in text for s in ("東京都", "売上報告", "北京", "서울", "보고서"))
        assert cut in text.replace("\n", "")
