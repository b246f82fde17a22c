"""Acting from the console, in headless Chromium (the stack and browser
fixtures of ``test_console_browser``): the alert console's per-alert Silence
(prefilled matchers, a server-side preview of the other alerts it mutes),
filter, group-by, severity colours, runbook/source links, escaping of
label values, the alert's history drawer; the export center's rows/s, ETA, link expiry, description,
downloads, "Run again" and paging. Screenshots go to ``tests/artifacts/``."""
from __future__ import annotations

import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "alerting_e2e"))
sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))

from alert_e2e_support import wait_until  # noqa: E402
from support import seq_spec, submit, wait_task  # noqa: E402
from test_console_browser import ARTIFACTS, console_stack, page  # noqa: E402,F401

pytestmark = pytest.mark.integration

XSS = '<img src=x onerror="window.__xss=1">'
RUNBOOK = "http://runbooks.example/disk-full"
SOURCE = "http://prometheus.example/graph?g0.expr=disk_used"


def sign_in(page, api: str) -> None:
    page.goto(f"{api}/ui/exports")
    page.fill("#login [name=sysCode]", "tests")
    page.fill("#login [name=userId]", "alice")
    page.click("#login button")
    page.wait_for_selector("#center:not([hidden])")


def shown_tasks(page) -> list[str]:
    return page.eval_on_selector_all("#tasks tbody tr", "rows => rows.map(r => r.dataset.task)")


def check_export_center(stack, page, tmp_path) -> None:
    api = stack.api_url
    spec = {**seq_spec(stack.demo_data_api, "csv", 3000, 100, query="?delay_ms=200"),
            "bizDesc": "orders of June"}
    sign_in(page, api)
    done = submit(api, spec)
    page.click("#refresh")
    # while it runs: a rate and a time left
    running = page.locator(f'tr[data-task="{done}"][data-status="RUNNING"]')
    eta = wait_until(lambda: running.count() and re.fullmatch(
        r"ETA \d+ s", running.locator(".eta").inner_text()), 30, "an ETA while running")
    assert re.fullmatch(r"\d+ rows/s", running.locator(".rate").inner_text()), eta
    small = [submit(api, seq_spec(stack.demo_data_api, "csv", 10 + i, 100)) for i in range(4)]
    task = wait_task(api, done, 90)
    assert task["status"] == "SUCCESS", task
    got = httpx.get(task["file"]["url"], timeout=10)
    assert got.status_code == 200

    row = page.locator(f'tr[data-task="{done}"][data-status="SUCCESS"]')
    row.wait_for(timeout=30_000)
    assert row.locator(".desc").inner_text() == "orders of June"
    rate = re.fullmatch(r"(\d+) rows/s", row.locator(".rate").inner_text())
    assert rate and int(rate[1]) > 0, row.locator(".rate").inner_text()
    assert row.locator(".eta").inner_text() == "ETA done"
    expires = datetime.fromisoformat(row.locator(".expiry").get_attribute("data-expires")
                                     .replace("Z", "+00:00"))
    left = (expires - datetime.now(timezone.utc)).total_seconds()
    link = int(re.search(r"expires=(\d+)", task["file"]["url"])[1])
    assert left > 0 and abs(expires.timestamp() - link) < 600, (expires, link)
    page.wait_for_selector(f'tr[data-task="{done}"] .downloads[data-count="1"]', timeout=15_000)
    shot = ARTIFACTS / "export-center-actions.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")

    # run again: a new task, the same request (reuse of the recent result refused)
    row.locator("button.again").click()
    wait_until(lambda: len(shown_tasks(page)) == 6, 30, "the run-again task on the page")
    again = next(t for t in shown_tasks(page) if t not in small + [done])
    first, second = (httpx.get(f"{api}/export/tasks/{t}", timeout=10).json()["data"]
                     for t in (done, again))
    assert second["spec"] == first["spec"] and first["spec"]["bizDesc"] == "orders of June"
    assert first["spec"]["dataConfig"]["queryConditions"] == spec["dataConfig"]["queryConditions"]

    # paging: 5 per page, the sixth task on the next page
    page.select_option("#filters [name=limit]", "5")
    wait_until(lambda: len(shown_tasks(page)) == 5, 15, "a page of 5 tasks")
    one = shown_tasks(page)
    page.click("#next-page")
    wait_until(lambda: shown_tasks(page) and shown_tasks(page) != one, 15, "the next page")
    two = shown_tasks(page)
    assert not set(one) & set(two) and set(one) | set(two) == set(small + [done, again]), (one, two)
    assert page.is_disabled("#next-page")
    page.click("#prev-page")
    wait_until(lambda: shown_tasks(page) == one, 15, "back to the first page")


def row_of(page, fingerprint: str):
    return page.locator(f'#alerts tr[data-fingerprint="{fingerprint}"]')


def check_alert_console(stack, page) -> None:
    api = stack.api_url
    disk = {"alertname": "DiskFull", "severity": "critical", "instance": "h01"}
    alerts = [
        {"labels": disk, "generatorURL": SOURCE,
         "annotations": {"summary": "disk 97% full", "runbook_url": RUNBOOK}},
        {"labels": {**disk, "mount": "/var"}, "annotations": {"summary": "same disk, /var"}},
        {"labels": {"alertname": "CpuHigh", "severity": "warning", "instance": "h02"}},
        {"labels": {"alertname": "Note", "severity": "info", "instance": XSS}},
    ]
    assert httpx.post(f"{api}/api/v2/alerts", json=alerts, timeout=10).status_code == 200
    current = wait_until(lambda: (lambda got: got if len(got) == 4 else None)(
        httpx.get(f"{api}/api/v2/alerts", timeout=10).json()), 30, "4 alerts")
    fp = {(a["labels"]["alertname"], a["labels"].get("mount")): a["fingerprint"] for a in current}
    main, var = fp[("DiskFull", None)], fp[("DiskFull", "/var")]
    page.goto(f"{api}/ui/alerts")
    for f in fp.values():
        row_of(page, f).wait_for(timeout=30_000)

    # colours, links, escaping
    colour = row_of(page, main).locator("td").first.evaluate("td => getComputedStyle(td).backgroundColor")
    assert colour == "rgb(253, 236, 234)", colour
    assert row_of(page, fp[("CpuHigh", None)]).get_attribute("class") == "sev-warning"
    assert row_of(page, main).locator("a.runbook").get_attribute("href") == RUNBOOK
    assert row_of(page, main).locator("a.generator").get_attribute("href") == SOURCE
    assert row_of(page, var).locator("a.runbook, a.generator").count() == 0
    assert page.locator("#alerts img").count() == 0 and page.evaluate("window.__xss") is None
    assert XSS in row_of(page, fp[("Note", None)]).inner_text()

    # filter: matchers and free text
    page.fill("#alert-filter", "severity=critical")
    wait_until(lambda: page.locator("#alerts tbody tr").count() == 2, 10, "2 critical alerts")
    page.fill("#alert-filter", 'instance=~"h0.*" cpu')
    wait_until(lambda: page.eval_on_selector_all(
        "#alerts tbody tr", "rs => rs.map(r => r.dataset.fingerprint)") == [fp[("CpuHigh", None)]],
        10, "the filter to keep CpuHigh only")
    page.fill("#alert-filter", "")

    # group by receiver, then by a label
    page.select_option("#group-by", "receiver")
    groups = page.eval_on_selector_all("#alerts tr.group-head", "rs => rs.map(r => r.dataset.group)")
    assert groups == ["oncall"], groups
    page.select_option("#group-by", "severity")
    groups = page.eval_on_selector_all("#alerts tr.group-head", "rs => rs.map(r => r.dataset.group)")
    assert groups == ["severity=critical", "severity=info", "severity=warning"], groups
    page.select_option("#group-by", "")

    # Silence from the alert's row: prefilled, the preview names the other alert muted
    row_of(page, main).locator("button.silence").click()
    prefilled = page.input_value("#silence-form [name=matchers]")
    assert prefilled == 'alertname="DiskFull", severity="critical", instance="h01"', prefilled
    page.wait_for_selector(f'#preview code.other-muted[data-fingerprint="{var}"]', timeout=10_000)
    assert page.locator("#preview code.other-muted").count() == 1
    assert "Would mute 2 of 4" in page.inner_text("#preview")
    muted = page.eval_on_selector_all("#preview code.would-mute", "cs => cs.map(c => c.dataset.fingerprint)")
    assert sorted(muted) == sorted([main, var]), muted
    page.fill("#silence-form [name=comment]", "disk being replaced")
    page.click("#create-silence")
    silence = wait_until(lambda: next((s for s in httpx.get(f"{api}/api/v2/silences", timeout=10).json()
                                       if s["comment"] == "disk being replaced"), None),
                         15, "the silence in GET /api/v2/silences")
    assert {(m["name"], m["value"], m["isRegex"], m.get("isEqual", True))
            for m in silence["matchers"]} == {(k, v, False, True) for k, v in disk.items()}
    for f in (main, var):
        page.wait_for_selector(f'#alerts tr[data-fingerprint="{f}"][data-state="silenced"]',
                               timeout=30_000)
    listed = page.locator(f'#silences tr[data-silence="{silence["id"]}"] td.silenced-alerts code')
    wait_until(lambda: listed.count() == 2, 10, "the silence's muted alerts listed")
    assert row_of(page, fp[("CpuHigh", None)]).get_attribute("data-state") == "firing"

    # History: the alert's story (GET /api/v2/alerts/{fingerprint}/history) in a drawer
    row_of(page, main).locator("button.history").click()
    page.wait_for_selector('#history li[data-kind="received"]', timeout=15_000)
    assert "DiskFull" in page.inner_text("#history h3")
    kinds = page.eval_on_selector_all("#history li", "ls => ls.map(l => l.dataset.kind)")
    story = httpx.get(f"{api}/api/v2/alerts/{main}/history", timeout=10).json()["entries"]
    assert kinds == [e["kind"] for e in story][:len(kinds)], (kinds, story)
    received = page.locator('#history li[data-kind="received"]').first.inner_text()
    assert "received from plait-api-v2 for oncall" in received, received
    shot = ARTIFACTS / "alert-console-actions.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")


def test_operator_acts_from_the_console(console_stack, page, tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    start = time.monotonic()
    requested = []
    page.on("request", lambda req: requested.append(req.url))
    check_alert_console(console_stack, page)
    check_export_center(console_stack, page, tmp_path)
    outside = [u for u in requested if not u.startswith(console_stack.api_url + "/")]
    assert requested and not outside, outside
    assert time.monotonic() - start < 90
