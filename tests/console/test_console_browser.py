"""Issue 15: the console in a real headless browser (Debian ``chromium``,
driven by Playwright for Python pointed at the system binary; never
``playwright install``). One stack (``plait dev``'s ``ops.stack.Stack``) with
the alert funnel; screenshots of both pages go to ``tests/artifacts/``
(gitignored; the path is printed)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "alerting_e2e"))
sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))

from alert_e2e_support import Receiver, wait_until, write_config  # noqa: E402
from support import seq_spec, submit, wait_task  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).parents[1] / "artifacts"

playwright_api = pytest.importorskip("playwright.sync_api",
                                     reason="Playwright for Python is not installed "
                                            "(pip install playwright; no browser download needed)")
if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
    pytest.skip("Debian chromium is absent (apt-get install -y chromium): the browser tests "
                "of the console cannot run", allow_module_level=True)

pytestmark = pytest.mark.integration


@pytest.fixture
def console_stack(make_stack, tmp_path):
    receiver = Receiver().start()
    cfg = write_config(tmp_path / "alerting.yaml", [{"name": "oncall", "url": receiver.url("/hook")}],
                       grouping={"group_by": ["alertname"]})
    stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
    yield stack
    receiver.stop()


@pytest.fixture
def page():
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        ctx = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
        pg = ctx.new_page()
        yield pg
        browser.close()


def rows_shown(page, task_id: str) -> int:
    text = page.locator(f'tr[data-task="{task_id}"] td.rows').inner_text()
    return int(text.split("/")[0].strip() or 0)


def test_export_center_and_alert_console(console_stack, page, tmp_path):
    stack = console_stack
    api = stack.api_url
    ARTIFACTS.mkdir(exist_ok=True)
    reloads = []
    page.on("framenavigated", lambda frame: reloads.append(frame.url) if frame == page.main_frame else None)

    # sign in (open mode: sysCode + userId), as the API's tenant rule wants
    page.goto(f"{api}/ui/exports")
    page.fill("#login [name=sysCode]", "tests")
    page.fill("#login [name=userId]", "alice")
    page.click("#login button")
    page.wait_for_selector("#center:not([hidden])")
    navigations = len(reloads)

    # an export whose rows arrive over a few seconds (200 ms per page of 100)
    slow = submit(api, seq_spec(stack.demo_data_api, "csv", 3000, 100, query="?delay_ms=200"))
    row = page.locator(f'tr[data-task="{slow}"]')
    row.wait_for(timeout=20_000)
    seen = set()
    wait_until(lambda: seen.add(rows_shown(page, slow)) or len({n for n in seen if 0 < n < 3000}) >= 2,
               60, "the row count to rise on the page")
    # and it ends SUCCESS on the page, still without a reload
    page.wait_for_selector(f'tr[data-task="{slow}"][data-status="SUCCESS"]', timeout=90_000)
    assert rows_shown(page, slow) == 3000
    assert len(reloads) == navigations, f"the page navigated: {reloads}"
    assert "quality" in row.inner_text()

    # cancel a second export from the page
    doomed = submit(api, seq_spec(stack.demo_data_api, "csv", 20000, 100, query="?delay_ms=300"))
    with page.expect_response(lambda r: r.url.split("?")[0].endswith(f"/{doomed}/cancel"),
                              timeout=30_000) as answer:
        page.locator(f'tr[data-task="{doomed}"] button.cancel').click(timeout=20_000)
    assert answer.value.status == 202, answer.value.text()  # the API took the page's request
    page.wait_for_selector(f'tr[data-task="{doomed}"][data-status="CANCELLED"]', timeout=60_000)
    assert wait_task(api, doomed, 30)["status"] == "CANCELLED"

    # download the finished file from the page
    page.wait_for_selector(f'tr[data-task="{slow}"] a.download', timeout=20_000)
    with page.expect_download() as dl:
        page.locator(f'tr[data-task="{slow}"] a.download').click()
    path = tmp_path / "download.csv"
    dl.value.save_as(path)
    lines = path.read_text("utf-8-sig").splitlines()
    assert len(lines) == 3001, lines[:3]

    shot = ARTIFACTS / "export-center.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")

    # an alert fires; the alert console shows it, then a silence made there mutes it
    alert = [{"labels": {"alertname": "DiskFull", "severity": "critical", "instance": "h01"},
              "annotations": {"summary": "disk 97% full on h01"}}]
    assert httpx.post(f"{api}/api/v2/alerts", json=alert, timeout=10).status_code == 200
    page.goto(f"{api}/ui/alerts")
    page.wait_for_selector('#alerts tr[data-alertname="DiskFull"][data-state="firing"]', timeout=60_000)
    page.fill("#silence-form [name=matchers]", 'alertname="DiskFull"')
    wait_until(lambda: "Would mute 1 of" in page.inner_text("#preview"), 10,
               "the preview (GET /api/v2/alerts?filter=...)")
    page.click("#create-silence")
    page.wait_for_selector('#alerts tr[data-alertname="DiskFull"][data-state="silenced"]', timeout=30_000)
    page.wait_for_selector('#silences tr[data-state="active"]', timeout=10_000)
    page.wait_for_selector('#funnel [data-outcome="received"]', timeout=10_000)
    silenced = httpx.get(f"{api}/api/v2/alerts", timeout=10).json()
    assert silenced[0]["status"]["silencedBy"], silenced
    shot = ARTIFACTS / "alert-console.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")


ACME, GLOBEX = "acme-secret-" + "a" * 32, "globex-secret-" + "g" * 32


@pytest.fixture
def signed_stack(tmp_path):
    """A stack whose API requires signed requests (two registered callers)."""
    import yaml

    from ops.stack import Stack
    from stack_env import drop_redis_keys, isolated_env

    stack = Stack(tmp_path / "stack", isolated_env())
    stack.start(workers=0, api=False)
    try:
        callers = {"callers": {
            name: {"appKey": f"{name}-key", "appSecret": secret, "bizTypes": ["seq"],
                   "dataApiPrefixes": [f"{stack.demo_data_api}/data"], "fileFormats": ["csv"],
                   "maxRows": 100_000, "linkTtlSeconds": 600}
            for name, secret in (("acme", ACME), ("globex", GLOBEX))}}
        path = tmp_path / "callers.yaml"
        path.write_text(yaml.safe_dump(callers))
        stack.env["PLAIT_CALLERS_FILE"] = str(path)
        stack.spawn_worker("worker-0")
        stack.start_api()
        stack.wait_workers_ready()
        yield stack
    finally:
        stack.stop()
        drop_redis_keys(stack)


def test_signed_in_caller_sees_and_cancels_only_its_own_tasks(signed_stack, page):
    """With a caller registry the page signs every call in the browser
    (WebCrypto HMAC of plait/signature.py's canonical request): list, SSE,
    cancel; another caller's task never shows."""
    from producers.signing import PlaitAuth

    stack = signed_stack

    def create(name: str, secret: str, rows: int, query: str = "") -> str:
        spec = seq_spec(stack.demo_data_api, "csv", rows, 100, query=query, sys_code=name, user="u1")
        with httpx.Client(base_url=stack.api_url, auth=PlaitAuth(f"{name}-key", secret),
                          timeout=10) as c:
            resp = c.post("/export/tasks", json=spec)
        assert resp.status_code == 202, resp.text
        return resp.json()["data"]["taskId"]

    mine, theirs = create("acme", ACME, 300), create("globex", GLOBEX, 300)
    page.goto(f"{stack.api_url}/ui/exports")
    page.fill("#login [name=appKey]", "acme-key")
    page.fill("#login [name=secret]", ACME)
    page.fill("#login [name=userId]", "u1")
    page.click("#login button")
    page.wait_for_selector(f'tr[data-task="{mine}"][data-status="SUCCESS"]', timeout=60_000)
    assert page.locator(f'tr[data-task="{theirs}"]').count() == 0
    slow = create("acme", ACME, 20000, "?delay_ms=300")
    page.locator(f'tr[data-task="{slow}"] button.cancel').click(timeout=20_000)
    page.wait_for_selector(f'tr[data-task="{slow}"][data-status="CANCELLED"]', timeout=60_000)
    assert "cannot list" not in page.inner_text("#count")


def _prefixed(make_stack, tmp_path):
    """``(receiver, stack)``: a webhook receiver and a stack with the alert funnel sending to
    it, its API under ``PLAIT_WEB_ROUTE_PREFIX=/foo``."""
    receiver = Receiver().start()
    cfg = write_config(tmp_path / "alerting.yaml", [{"name": "oncall", "url": receiver.url("/hook")}],
                       grouping={"group_by": ["alertname"]})
    try:
        stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg), PLAIT_WEB_ROUTE_PREFIX="/foo")
    except BaseException:
        receiver.stop()
        raise
    assert stack.api_url.endswith("/foo")
    return receiver, stack


def test_alert_console_under_a_route_prefix(make_stack, tmp_path, page):
    """With ``PLAIT_WEB_ROUTE_PREFIX=/foo`` (Alertmanager's
    ``--web.route-prefix``) the console at ``/foo/ui/alerts`` loads its files
    and calls the API under the prefix: an alert posted shows, a silence made
    there mutes it."""
    receiver, stack = _prefixed(make_stack, tmp_path)
    try:
        api = stack.api_url
        alert = [{"labels": {"alertname": "DiskFull", "instance": "h01"}}]
        assert httpx.post(f"{api}/api/v2/alerts", json=alert, timeout=10).status_code == 200
        page.goto(f"{api}/ui/alerts")
        page.wait_for_selector('#alerts tr[data-alertname="DiskFull"][data-state="firing"]',
                               timeout=60_000)
        page.wait_for_selector('#receivers tbody tr', timeout=10_000)
        page.fill("#silence-form [name=matchers]", 'alertname="DiskFull"')
        page.click("#create-silence")
        page.wait_for_selector('#alerts tr[data-alertname="DiskFull"][data-state="silenced"]',
                               timeout=30_000)
    finally:
        receiver.stop()


def test_message_links_open_their_pages_under_a_route_prefix(make_stack, tmp_path, page):
    """The console links alert messages carry (``alerting.templates.task_url`` and
    ``silence_url``, built on the external URL) open real pages, here under
    ``PLAIT_WEB_ROUTE_PREFIX=/foo``: ``/ui/tasks/<taskId>`` shows that task alone, with a way
    back to the list; ``/ui/silences/new?matchers=...`` opens the alert console with the
    silence form filled with those matchers. Every request stays under the prefix and none
    fails."""
    from alerting.templates import silence_url, task_url

    receiver, stack = _prefixed(make_stack, tmp_path)
    try:
        api = stack.api_url
        requested, failed = [], []
        page.on("request", lambda req: requested.append(req.url))
        page.on("response", lambda r: failed.append((r.status, r.url)) if r.status >= 400 else None)
        tasks = [submit(api, seq_spec(stack.demo_data_api, "csv", 50 + i, 100)) for i in range(2)]
        for t in tasks:
            assert wait_task(api, t, 60)["status"] == "SUCCESS"

        # a task's link: that task alone, signed in as the export center asks
        page.goto(task_url(api, {"taskId": tasks[0]}))
        page.fill("#login [name=sysCode]", "tests")
        page.fill("#login [name=userId]", "alice")
        page.click("#login button")
        page.wait_for_selector(f'tr[data-task="{tasks[0]}"][data-status="SUCCESS"]', timeout=20_000)
        assert page.eval_on_selector_all("#tasks tbody tr", "rs => rs.map(r => r.dataset.task)") \
            == [tasks[0]]
        assert page.inner_text("#count") == f"task {tasks[0]}"
        page.wait_for_selector(f'tr[data-task="{tasks[0]}"] a.download', timeout=20_000)
        # and back to every task
        page.click("#all-tasks")
        page.wait_for_url(f"{api}/ui/exports")
        for t in tasks:
            page.wait_for_selector(f'tr[data-task="{t}"]', timeout=20_000)

        # a group's "silence" link: the form filled, the preview names the alert it mutes
        alert = [{"labels": {"alertname": "DiskFull", "instance": "h01"}}]
        assert httpx.post(f"{api}/api/v2/alerts", json=alert, timeout=10).status_code == 200
        wait_until(lambda: httpx.get(f"{api}/api/v2/alerts", timeout=10).json(), 30,
                   "the alert in GET /api/v2/alerts")
        page.goto(silence_url(api, {"alertname": "DiskFull", "instance": "h01"}))
        page.wait_for_selector('#alerts tr[data-alertname="DiskFull"]', timeout=30_000)
        assert page.input_value("#silence-form [name=matchers]") \
            == 'alertname="DiskFull", instance="h01"'
        wait_until(lambda: "Would mute 1 of 1" in page.inner_text("#preview"), 10, "the preview")
        page.fill("#silence-form [name=comment]", "from the message")
        page.click("#create-silence")
        page.wait_for_selector('#alerts tr[data-alertname="DiskFull"][data-state="silenced"]',
                               timeout=30_000)
        made = [s for s in httpx.get(f"{api}/api/v2/silences", timeout=10).json()
                if s["comment"] == "from the message"]
        assert [sorted((m["name"], m["value"]) for m in s["matchers"]) for s in made] \
            == [[("alertname", "DiskFull"), ("instance", "h01")]]
        outside = [u for u in requested if not u.startswith(api + "/")]
        assert requested and not outside, outside
        assert not failed, failed
    finally:
        receiver.stop()
