"""The business data API client (docs/events.md, "Business data API (pull
contract)"): POST ``{queryConditions, runtimeContext, userId}``, answer
``{code, data: {status, runtimeContext, rows, total?}}``; the runtime context
is opaque and sent back as answered."""
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

#: Bytes per httpcore socket read: asyncio hands over up to 256 KiB at a time
#: (httpcore's 64 KiB default splits it; docs/perf-notes.md).
HTTP_READ_BYTES = 256 * 1024


def tune_http_reads(read_bytes: int = HTTP_READ_BYTES) -> None:
    """Make httpcore read ``read_bytes`` at a time in this process (never lower)."""
    httpcore_read_bytes(read_bytes)


@dataclass
class Page:
    """One page: rows, next cursor, ``finish`` said, total when given."""

    rows: list[dict[str, Any]]
    next_context: dict[str, Any]
    finished: bool
    total: int | None = None
    #: rows already normalized by :func:`sinks.fastpage.decode_page` (``rows`` empty)
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
    """Raises ``RetryableError`` on 429/5xx, ``PermanentError`` on other non-2xx."""
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
    """A runtime context with each ``Decimal`` (docs/fidelity-rules.md F11) as
    its double, so JSON can write it. ``ValueError`` for NaN or out of range."""
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
    """Decode a 2xx body for page ``seq`` (CPU-bound). With ``doc`` the rows
    may come normalized as ``Page.batch`` (docs/fidelity-rules.md, "Fast page
    decode"). Raises ``PermanentError`` when the body breaks the contract."""
    try:
        # exact numbers: docs/fidelity-rules.md F11
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
    total = data.get("total")  # optional (progress): a count, else unknown
    known = isinstance(total, int) and not isinstance(total, bool) and total >= 0
    return Page(rows, ctx, data["status"] == "finish", total if known else None, batch)


def parse_answer(seq: int, status_code: int, headers: httpx.Headers, body: bytes) -> Page:
    """:func:`check_status`, then :func:`parse_body`; raises as they do."""
    check_status(seq, status_code, headers, body)
    return parse_body(seq, body)


@dataclass
class Answer:
    """A 2xx answer for page ``seq``, body undecoded; ``sent``: the context sent."""

    seq: int
    context: dict[str, Any]
    sent: dict[str, Any]
    body: bytes
    sys_code: str = ""
    _envelope: tuple[dict, int, int] | None = None

    def next_cursor(self) -> dict[str, Any] | None:
        """The next cursor read from the envelope without decoding rows, so
        the next page can be asked for early; None when finished or unsure."""
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
        """Blocking (CPU): the decoded page. ``PermanentError`` on a contract
        break or ``continue`` with the cursor it was given."""
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
    """:func:`fetch_answer`, decoded on the calling thread."""
    answer = await fetch_answer(client, spec, context, seq, attempts, backoff, headers)
    return answer.page()


async def fetch_answer(client: httpx.AsyncClient, spec: ExportSpec, context: dict[str, Any],
                       seq: int, attempts: int, backoff: float,
                       headers: dict[str, str] | None = None,
                       conditions: dict[str, Any] | None = None) -> Answer:
    """POST one page request with ``conditions`` (a partition's ``queryConditions``; the spec's when
    None); ``attempts`` tries (``backoff`` s first wait) on transport errors, timeouts, 429, 5xx;
    redirects never followed. Raises ``PermanentError`` on a permanent answer or when the tries run
    out."""
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
