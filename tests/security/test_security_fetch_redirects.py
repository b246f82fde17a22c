"""The fetcher never follows redirects: a data API answering 302 to another
host fails the page permanently, and the other host is never called (SSRF
through an allowed URL). Uses the worker's real HTTP client configuration
(streams.context.build_context) and two local HTTP servers."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from security_helpers import make_caller, make_spec

from plait.callers import check_spec
from plait.errors import PermanentError
from plait.settings import Settings
from streams.context import build_context
from streams.datasource import fetch_page


class Server:
    """A local HTTP server answering every POST with ``status`` and ``headers``;
    records the paths it was asked for."""

    def __init__(self, status=200, headers=None, body=b"{}"):
        self.hits: list[str] = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                srv.hits.append(self.path)
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
async def worker_http(tmp_path):
    """The httpx client a worker really uses for data-API calls."""
    ctx = build_context(Settings(storage_url=f"file://{tmp_path}/store"))
    yield ctx.http
    await ctx.http.aclose()
    await ctx.projection.redis.aclose()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_to_another_host_fails_the_page_and_is_not_followed(worker_http, status):
    # given an allowed data API that redirects to another host (the internal target)
    with Server(200, body=b'{"code":200,"data":{"status":"finish","rows":[]}}') as target, \
            Server(status, {"Location": f"http://localhost:{target.port}/steal"}) as api:
        url = f"http://127.0.0.1:{api.port}/export/orders"
        caller = make_caller(dataApiPrefixes=[f"http://127.0.0.1:{api.port}/export/"])
        spec = make_spec(url=url)
        check_spec(caller, spec)  # the URL itself is allowed
        # when the page is fetched
        with pytest.raises(PermanentError) as err:
            await fetch_page(worker_http, spec, {}, seq=0, attempts=3, backoff=0.01)
    # then the page fails permanently, once (no retries), with the status in the message,
    # and the other host was never called
    assert f"page 0: data API answered HTTP {status}" in str(err.value)
    assert api.hits == ["/export/orders"]
    assert target.hits == []
