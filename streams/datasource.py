"""The business data API client (docs/events.md, "Business data API (pull contract)").

``POST {dataApiUrl}`` with ``{"queryConditions", "runtimeContext", "userId"}``
answers ``{"code": 200, "data": {"status": "continue"|"finish",
"runtimeContext": {...}, "rows": [...], "total"?: int}}``. The first call's
runtime context is ``{"pageSize": n, "lastId": null}`` merged with the spec's
initial ``dataConfig.runtimeContext``; later calls send back the context the
data API answered (opaque: stored and sent back as is, numbers as doubles,
:func:`cursor_numbers`), with ``pageSize`` added when it left it out.
"""
from __future__ import annotations

import email.utils
import math
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pyarrow as pa
from tenacity import AsyncRetrying, RetryError, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_base, wait_exponential_jitter

from plait.errors import PermanentError, RetryableError
from plait.patches import httpcore_read_bytes
from plait.spec import DocumentConfig, ExportSpec
from sinks.fastpage import decode_page, read_envelope
from sinks.values import all_dicts, loads_exact

#: Longest Retry-After we honour, seconds (a longer one is capped, not obeyed).
MAX_RETRY_AFTER = 60.0

#: Bytes httpcore asks its socket stream for per read of a response (its
#: default: 64 KiB). asyncio's transport hands over up to 256 KiB at a time,
#: so 64 KiB reads split each into four trips through h11, httpcore, anyio
#: and httpx: a 1.5 MB page (flights, 5,000 rows) cost ~2.3 ms of the worker's
#: CPU (GIL held) to receive, 1.3 ms with 256 KiB reads. No more memory: a
#: read returns at most what the transport already holds.
HTTP_READ_BYTES = 256 * 1024


def tune_http_reads(read_bytes: int = HTTP_READ_BYTES) -> None:
    """Make httpcore (under httpx) read responses ``read_bytes`` at a time in
    this process (:data:`HTTP_READ_BYTES`); never lowers it
    (:func:`plait.patches.httpcore_read_bytes`)."""
    httpcore_read_bytes(read_bytes)


@dataclass
class Page:
    """One page from the data API: ``rows``, the cursor for the next page,
    whether the source said ``finish``, and the total when it gave one."""

    rows: list[dict[str, Any]]
    next_context: dict[str, Any]
    finished: bool
    total: int | None = None
    #: The rows already normalized (``rows`` is then empty): set when the page
    #: was decoded with its documentConfig and the fast decode took it
    #: (:func:`sinks.fastpage.decode_page`; its quality counts are none).
    batch: pa.RecordBatch | None = None

    @property
    def row_count(self) -> int:
        """Rows on the page (``rows`` or ``batch``)."""
        return len(self.rows) if self.batch is None else self.batch.num_rows


def retry_after_seconds(value: str | None) -> float | None:
    """Parse a ``Retry-After`` header (RFC 9110 s10.2.3: seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value)))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return min(MAX_RETRY_AFTER, max(0.0, parsed.timestamp() - time.time())) if parsed else None


def check_status(seq: int, status_code: int, headers: httpx.Headers, body: bytes) -> None:
    """Classify the HTTP status of one answer of the data API for page ``seq``.

    Raises:
        RetryableError: 429 (with Retry-After) or 5xx.
        PermanentError: any other non-2xx (a 3xx names where it pointed).
    """
    if status_code == 429 or status_code >= 500:
        raise RetryableError(f"page {seq}: data API answered HTTP {status_code}",
                             retry_after_seconds(headers.get("retry-after")))
    if 300 <= status_code < 400:
        raise PermanentError(f"page {seq}: data API answered HTTP {status_code} redirect to "
                             f"{headers.get('location', '?')!r}; redirects are not followed")
    if status_code >= 400:
        raise PermanentError(f"page {seq}: data API answered HTTP {status_code}: "
                             f"{body[:200].decode(errors='replace')}")


def cursor_numbers(value: Any) -> Any:
    """A runtime context as it is sent back, stored and checkpointed: every
    number a double cannot hold exactly (the exact decode keeps it a
    ``Decimal``, docs/fidelity-rules.md F11: ``1E2``,
    ``0.10000000000000001``) as the double it denotes, so JSON can write it
    (the cursor is opaque to Plait; a data API reads the same number back).
    Anything else unchanged. Raises ``ValueError`` for a number no JSON
    document can hold (``NaN``, or beyond a double's range such as ``1E400``:
    the next request could not be written)."""
    if isinstance(value, (Decimal, float)):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"{value} is not a finite number a double can hold")
        return number
    if isinstance(value, dict):
        return {k: cursor_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [cursor_numbers(v) for v in value]
    return value


def parse_body(seq: int, body: bytes, doc: DocumentConfig | None = None,
               envelope: tuple[dict, int, int] | None = None) -> Page:
    """Decode a 2xx answer's body for page ``seq`` (CPU: ~3 ms per 2,000
    flights rows; run it off the event loop for big pages).

    With the export's ``doc``, the rows may come back already normalized as
    ``Page.batch`` (``rows`` empty, no quality counts): the fast decode
    (:func:`sinks.fastpage.decode_page`; docs/fidelity-rules.md,
    "Fast page decode") takes the page when it can prove the batch is what
    ``rows_to_batch`` gives; else the rows are decoded exactly as without
    ``doc``. The envelope checks and their errors are the same either way.
    ``envelope``: :func:`sinks.fastpage.read_envelope` of ``body``, when
    read already.

    Raises:
        PermanentError: a body that breaks the contract; the message names the
            page and the cause.
    """
    try:
        # numbers exactly: a literal that is not a double's shortest repr stays a
        # Decimal (docs/fidelity-rules.md, F11); loads_exact: orjson when that
        # cannot change a value
        fast = None if doc is None else decode_page(body, doc, envelope)
        answer, batch = (loads_exact(body), None) if fast is None else fast
        code, data = answer.get("code"), answer.get("data")
    except (ValueError, AttributeError):
        raise PermanentError(f"page {seq}: data API answer is not a JSON object") from None
    except RecursionError:
        raise PermanentError(f"page {seq}: data API answer nests objects or arrays too deeply "
                             "for Python's JSON decoder (about 500 levels)") from None
    if code is None:
        raise PermanentError(f"page {seq}: data API answer has no 'code' (the contract is "
                             '{"code", "message", "data"})')
    if code != 200:
        raise PermanentError(f"page {seq}: data API answered code {code}: {answer.get('message')}")
    if not isinstance(data, dict) or data.get("status") not in ("continue", "finish"):
        raise PermanentError(f"page {seq}: data.status must be 'continue' or 'finish'")
    rows = data.get("rows") or []
    if not isinstance(rows, list) or not all_dicts(rows):
        raise PermanentError(f"page {seq}: data.rows must be a list of objects")
    ctx = data.get("runtimeContext") or {}
    if not isinstance(ctx, dict):
        raise PermanentError(f"page {seq}: data.runtimeContext must be an object")
    try:
        ctx = cursor_numbers(ctx)
    except ValueError as exc:
        if data["status"] != "continue":  # the last page: its cursor is never sent back
            ctx = {}
        else:
            raise PermanentError(f"page {seq}: data.runtimeContext must hold only finite "
                                 f"numbers (it is sent back as JSON): {exc}") from None
    total = data.get("total")
    return Page(rows, ctx, data["status"] == "finish", total if isinstance(total, int) else None,
                batch)


def parse_answer(seq: int, status_code: int, headers: httpx.Headers, body: bytes) -> Page:
    """Classify one HTTP answer of the data API for page ``seq``
    (:func:`check_status`, then :func:`parse_body`).

    Raises:
        RetryableError: 429 (with Retry-After) or 5xx.
        PermanentError: any other non-2xx, or a body that breaks the contract;
            the message names the page and the cause.
    """
    check_status(seq, status_code, headers, body)
    return parse_body(seq, body)


@dataclass
class Answer:
    """A 2xx answer of the data API for page ``seq``, its body not decoded yet
    (what is held for a page fetched ahead: bytes, not Python rows).
    ``sent``: the runtime context the request carried."""

    seq: int
    context: dict[str, Any]
    sent: dict[str, Any]
    body: bytes
    sys_code: str = ""
    #: :func:`sinks.fastpage.read_envelope` of ``body`` once :meth:`next_cursor` read it
    _envelope: tuple[dict, int, int] | None = None

    def next_cursor(self) -> dict[str, Any] | None:
        """The next page's cursor as this answer's envelope gives it, read
        apart from the rows (:func:`sinks.fastpage.read_envelope`: scans of
        the body, no row decoded), so the next page can be asked for before
        this one is decoded: when it says ``continue`` with a cursor other
        than the one sent; else None (finished, or not provable: ask once
        decoded). A hint: the page may still be refused; whenever it is
        accepted, its ``next_context`` is this cursor. The envelope is kept
        for :meth:`page`."""
        self._envelope = read = read_envelope(self.body)
        if read is None:
            return None
        envelope = read[0]
        data = envelope.get("data")
        if envelope.get("code") != 200 or not isinstance(data, dict) \
                or data.get("status") != "continue":
            return None
        nxt = data.get("runtimeContext") or {}
        if not isinstance(nxt, dict):
            return None
        try:
            nxt = cursor_numbers(nxt)
        except ValueError:  # refused when the page is decoded
            return None
        return None if nxt in (self.context, self.sent) else nxt

    def page(self, doc: DocumentConfig | None = None) -> Page:
        """Blocking (CPU): the decoded page (:func:`parse_body`; with ``doc``,
        maybe already normalized as ``Page.batch``). Raises
        ``PermanentError`` when the body breaks the contract (counted in
        ``plait_data_api_errors_total``, ``permanent``) or the data API
        answered ``continue`` with the cursor it was given."""
        try:
            page = parse_body(self.seq, self.body, doc, self._envelope)
        except PermanentError:
            from plait import metrics

            metrics.DATA_API_ERRORS.labels(self.sys_code, "permanent").inc()
            raise
        if not page.finished and page.next_context in (self.context, self.sent):
            raise PermanentError(f"page {self.seq}: data API answered 'continue' with the "
                                 "cursor it was given; the export would never finish")
        return page


class _wait_retry_after(wait_base):
    """Honour the peer's Retry-After, else exponential backoff with jitter."""

    def __init__(self, initial: float) -> None:
        self.backoff = wait_exponential_jitter(multiplier=initial, max=30, jitter=initial)

    def __call__(self, retry_state) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, RetryableError) and exc.retry_after is not None:
            return exc.retry_after
        return self.backoff(retry_state)


async def fetch_page(client: httpx.AsyncClient, spec: ExportSpec, context: dict[str, Any],
                     seq: int, attempts: int, backoff: float,
                     headers: dict[str, str] | None = None) -> Page:
    """:func:`fetch_answer`, decoded (:meth:`Answer.page`, on the calling
    thread). Raises ``PermanentError`` as both do."""
    answer = await fetch_answer(client, spec, context, seq, attempts, backoff, headers)
    return answer.page()


async def fetch_answer(client: httpx.AsyncClient, spec: ExportSpec, context: dict[str, Any],
                       seq: int, attempts: int, backoff: float,
                       headers: dict[str, str] | None = None,
                       conditions: dict[str, Any] | None = None) -> Answer:
    """POST one page request, retrying transient failures (transport errors,
    timeouts, 429, 5xx). Redirects are never followed (a 3xx is permanent):
    the data API cannot send Plait elsewhere. The body is not decoded here
    (:meth:`Answer.page`): a page held ahead costs its bytes only.

    Args:
        context: the runtime context (cursor) to send; on page 0 it is
            completed to the contract's ``{"pageSize", "lastId": null}``.
        attempts: tries in all (>= 1); backoff: first wait, seconds.
        headers: extra request headers (the per-task data token).
        conditions: the ``queryConditions`` to send (a partition's,
            ``DataConfig.conditions``); the spec's when None.
    Raises:
        PermanentError: a permanent answer, or transient failures ``attempts`` times.
    """
    first = {"lastId": None} if seq == 0 else {}
    body = {"queryConditions": spec.dataConfig.queryConditions if conditions is None
            else conditions,
            "runtimeContext": {"pageSize": spec.dataConfig.pageSize, **first, **context},
            "userId": spec.userId}

    async def once() -> Answer:
        import time

        from plait import metrics, tracing

        t0 = time.monotonic()
        try:
            with tracing.span("data_api.request", **{"http.request.method": "POST",
                                                     "plait.seq": seq}):
                resp = await client.post(spec.dataConfig.dataApiUrl, json=body,
                                         headers=tracing.inject(dict(headers or {})),
                                         follow_redirects=False)
        except httpx.TimeoutException as exc:
            metrics.DATA_API_ERRORS.labels(spec.sysCode, "timeout").inc()
            raise RetryableError(f"page {seq}: data API timed out ({type(exc).__name__})")
        except httpx.TransportError as exc:
            metrics.DATA_API_ERRORS.labels(spec.sysCode, "transport").inc()
            raise RetryableError(f"page {seq}: cannot reach data API ({exc})")
        finally:
            metrics.DATA_API_SECONDS.labels(spec.sysCode).observe(time.monotonic() - t0)
        try:
            check_status(seq, resp.status_code, resp.headers, resp.content)
        except RetryableError:
            metrics.DATA_API_ERRORS.labels(spec.sysCode, "retryable").inc()
            raise
        except PermanentError:
            metrics.DATA_API_ERRORS.labels(spec.sysCode, "permanent").inc()
            raise
        return Answer(seq, context, body["runtimeContext"], resp.content, spec.sysCode)

    try:
        async for attempt in AsyncRetrying(stop=stop_after_attempt(attempts),
                                           wait=_wait_retry_after(backoff),
                                           retry=retry_if_exception_type(RetryableError),
                                           reraise=False):
            with attempt:
                return await once()
    except RetryError as exc:
        last = exc.last_attempt.exception()
        raise PermanentError(f"{last} (gave up after {attempts} attempts)") from last
    raise AssertionError("unreachable")
