"""``/docs`` and ``/redoc`` work on a machine without internet: the pages
and every asset they reference come from the API itself (the
fastapi-offline package's Swagger UI and ReDoc files), and a headless
Chromium renders the operations without one request leaving the machine."""
from __future__ import annotations

import re
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import uvicorn

from api.app import create_api
from ops.infra import free_port
from plait.settings import Settings

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
LOCAL = {"127.0.0.1", "localhost", "::1", "[::1]"}


def referenced(html: str) -> list[str]:
    """Every URL a page loads: ``src``/``href`` attributes and the quoted
    ``url: '...'`` settings of the Swagger UI bootstrap script."""
    attrs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
    script = re.findall(r"""(?:url|spec-url)\s*[:=]\s*["']([^"']+)["']""", html)
    return attrs + script


@pytest.fixture
def settings(tmp_path):
    return Settings(redis_url="redis://127.0.0.1:6379/0", redis_prefix="plait-docs-offline",
                    storage_url=f"file://{tmp_path}/store", broker_url="127.0.0.1:1")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_page_and_every_asset_it_references_come_from_the_api(settings, page):
    from fastapi.testclient import TestClient

    with TestClient(create_api(settings)) as c:
        resp = c.get(page)
        assert resp.status_code == 200 and "text/html" in resp.headers["content-type"]
        urls = referenced(resp.text)
        assert any(u.endswith(".js") for u in urls), urls
        for url in urls:
            parts = urlsplit(url)
            assert not parts.netloc, f"{page} loads {url} from outside the API"
            asset = c.get(url)
            assert asset.status_code == 200 and asset.content, f"{url}: {asset.status_code}"


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # runs in a thread
        pass


@contextmanager
def serving(app, port: int):
    """``app`` served by uvicorn on 127.0.0.1:``port`` in a thread; yields its URL."""
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the API did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def api_url(settings):
    with serving(create_api(settings), free_port()) as url:
        yield url


def test_chromium_renders_the_operations_with_no_outside_request(api_url):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Debian chromium is absent (apt-get install -y chromium)")
    outside: list[str] = []

    def guard(route):
        host = urlsplit(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in LOCAL:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page()
            page.route("**/*", guard)
            page.goto(f"{api_url}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            paths = page.locator(".opblock-summary-path").all_inner_texts()
        finally:
            browser.close()
    assert outside == [], f"/docs reached outside the machine: {outside}"
    assert "/export/tasks" in {p.strip().replace("\u200b", "") for p in paths}, paths[:10]
