"""``/docs`` and ``/redoc`` work on a machine without internet: the pages
and every asset they reference come from the API itself (the
fastapi-offline package's Swagger UI and ReDoc files; ReDoc's bundle
without its remote footer image, ``api/docs_offline.py``), no script they
load names a remote image, script, style or font to fetch, and a headless
Chromium renders both pages without one request leaving the machine."""
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
#: A quoted absolute URL of something a page would fetch (ReDoc's bundle drew its footer logo
#: from https://cdn.redoc.ly/redoc/logo-mini.svg once rendered).
REMOTE_ASSET = re.compile(r"""["'`](https?://[^"'`\s]+\.(?:svg|png|gif|jpe?g|webp|ico|js|css|woff2?|ttf))["'`]""")


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
            # and the scripts it loads fetch nothing from outside either
            if url.endswith(".js"):
                assert REMOTE_ASSET.findall(asset.text) == [], f"{url} fetches from outside"


def test_the_remote_asset_scan_finds_a_remote_image():
    assert REMOTE_ASSET.findall('r.createElement("img",{src:"https://cdn.redoc.ly/redoc/logo-mini.svg"})') \
        == ["https://cdn.redoc.ly/redoc/logo-mini.svg"]
    assert REMOTE_ASSET.findall('{xmlns:"http://www.w3.org/2000/svg",href:"https://x.example/docs"}') == []


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


@pytest.mark.parametrize("page_path,operation,path_text", [
    ("/docs", ".opblock", ".opblock-summary-path"),
    ("/redoc", "[data-section-id^='operation/']", "[data-section-id^='operation/'] h2"),
])
def test_chromium_renders_the_operations_with_no_outside_request(api_url, page_path, operation,
                                                                 path_text):
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
            page.goto(f"{api_url}{page_path}")
            page.wait_for_selector(operation, timeout=30_000)
            page.wait_for_load_state("networkidle")  # what rendering fetched (ReDoc's footer)
            paths = page.locator(path_text).all_inner_texts()
        finally:
            browser.close()
    assert outside == [], f"{page_path} reached outside the machine: {outside}"
    assert paths, f"{page_path} rendered no operation"
    if page_path == "/docs":
        assert "/export/tasks" in {p.strip().replace("\u200b", "") for p in paths}, paths[:10]
