"""The worker's HTTP client reads a data API answer in large reads
(streams.datasource.tune_http_reads, set up by streams.context.build_context):
a big page is received in few trips through h11/httpcore/anyio, and whole."""
from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from httpcore._async.http11 import AsyncHTTP11Connection

from export_harness import spec
from plait.settings import Settings
from streams.context import build_context
from streams.datasource import HTTP_READ_BYTES, fetch_answer


def serve(body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    return httpd


async def test_a_big_answer_is_read_in_large_reads_and_whole(tmp_path, monkeypatch):
    rows = ",".join('{"id":%d,"name":"%s"}' % (i, "x" * 40) for i in range(40_000))
    body = ('{"code":200,"data":{"status":"finish","rows":[%s]}}' % rows).encode()
    assert len(body) > 2_000_000
    reads = []
    receive = AsyncHTTP11Connection._receive_event

    async def counted(self, *a, **k):
        reads.append(1)
        return await receive(self, *a, **k)

    monkeypatch.setattr(AsyncHTTP11Connection, "_receive_event", counted)
    ctx = build_context(Settings(storage_url=f"file://{tmp_path}/store"))
    httpd = serve(body)
    try:
        assert AsyncHTTP11Connection.READ_NUM_BYTES >= HTTP_READ_BYTES
        s = spec()
        s.dataConfig.dataApiUrl = f"http://127.0.0.1:{httpd.server_port}/data"
        answer = await fetch_answer(ctx.http, s, {}, 0, 1, 0.0)
        assert answer.body == body
        # 64 KiB reads (httpcore's default) would take > 30 trips for 2.4 MB
        assert len(reads) < 2 * len(body) // HTTP_READ_BYTES + 4, len(reads)
        assert len(answer.page().rows) == 40_000
    finally:
        httpd.shutdown()
        httpd.server_close()
        await ctx.http.aclose()
        await ctx.projection.redis.aclose()
        await asyncio.sleep(0)
