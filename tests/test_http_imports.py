"""An httpx request (webhooks, data API pages) imports nothing: a failed
import is not cached, so one attempted per request searched ``sys.path``
again every time (httpcore's ``current_async_library`` imports sniffio)."""
from __future__ import annotations

import asyncio
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


class _Count:
    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name, path=None, target=None):
        self.names.append(name)
        return None


def test_requests_attempt_no_imports():
    class Ok(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"

    async def run(count: _Count) -> list[int]:
        async with httpx.AsyncClient() as client:
            await client.post(url, content=b"{}")  # warm: lazy imports of the first request
            sys.meta_path.insert(0, count)
            try:
                return [(await client.post(url, content=b"{}")).status_code for _ in range(5)]
            finally:
                sys.meta_path.remove(count)

    count = _Count()
    try:
        assert asyncio.run(run(count)) == [204] * 5
    finally:
        server.shutdown()
    assert count.names == [], f"imports attempted on each request: {sorted(set(count.names))}"
