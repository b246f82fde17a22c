"""Versioned event schemas: the contract between rooms (docs/events.md).

Every Kafka value is a CloudEvents 1.0 JSON envelope (``subject`` = task id) plus
``dataschemaversion`` and a W3C ``traceparent``; ``type`` names the payload model
(``plait.export.FetchPage.v1``). Readers ignore unknown fields; a breaking change gets a new
``.vN``."""
from __future__ import annotations

import json
import secrets
import uuid
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from plait.clock import utcnow_iso
from plait.errors import PoisonError
from plait.spec import ExportSpec

SPECVERSION = "1.0"


class Payload(BaseModel):
    """Base of every event payload; ``TYPE`` is its CloudEvents ``type``."""

    # Rows may hold +/-inf and NaN (JSON's extension); the writers decide how to show them.
    model_config = ConfigDict(extra="ignore", populate_by_name=True,
                              ser_json_inf_nan="constants")
    TYPE: ClassVar[str] = ""


class ExportRequested(Payload):
    """``export.requests``: a validated task spec, ready for admission."""

    TYPE: ClassVar[str] = "plait.export.ExportRequested.v1"
    taskId: str
    spec: ExportSpec
    fingerprint: str
    requestedAt: str


def _in_range(event: Any) -> Any:
    """An event's ``partition`` must be below its ``partitions`` (``ValueError``
    naming both otherwise)."""
    if event.partition >= event.partitions:
        raise ValueError(f"partition {event.partition} is not below partitions "
                         f"{event.partitions}")
    return event


class FetchPage(Payload):
    """``export.fetch``: fetch page ``seq`` of partition ``partition`` (of ``partitions``) with
    cursor ``runtimeContext``; ``rowsBefore``: rows in the partition's pages < seq; ``attempt``:
    sweeper re-drives. Raises ``ValueError`` when ``partition >= partitions`` (docs/events.md,
    "Partitions")."""

    TYPE: ClassVar[str] = "plait.export.FetchPage.v1"
    taskId: str
    seq: int = Field(ge=0)
    runtimeContext: dict[str, Any] = Field(default_factory=dict)
    rowsBefore: int = Field(default=0, ge=0)
    attempt: int = Field(default=0, ge=0)
    partition: int = Field(default=0, ge=0)
    partitions: int = Field(default=1, ge=1)
    spec: ExportSpec

    _partition_in_range = model_validator(mode="after")(_in_range)

    @property
    def chainId(self) -> str:
        """The fetch chain this page belongs to: the task id, or
        ``<taskId>#<partition>`` for a partitioned task (its Kafka key, and
        what orders and holds its pages on a worker)."""
        return self.taskId if self.partitions == 1 else f"{self.taskId}#{self.partition}"


class PageBatch(Payload):
    """``export.pages``: one page of rows, inline (``rows``/``rowsJson``), as ``blobKey`` (a JSON
    array in object storage) or ``shardKey`` (already in its shard, an Arrow IPC file). Its place is
    (``partition``, ``seq``); ``isLast`` closes a partition (docs/events.md, "Push contract").
    Raises ``ValueError`` when ``partition >= partitions``."""

    TYPE: ClassVar[str] = "plait.export.PageBatch.v1"
    taskId: str
    seq: int = Field(ge=0)
    partition: int = Field(default=0, ge=0)
    partitions: int = Field(default=1, ge=1)
    rows: list[dict[str, Any]] | None = None
    #: The rows as a JSON array text, numbers read exactly (``Decimal`` when a double cannot).
    rowsJson: str | None = None
    blobKey: str | None = None
    shardKey: str | None = None
    rowCount: int = Field(ge=0)
    rowsBefore: int = Field(default=0, ge=0)
    nextContext: dict[str, Any] | None = None
    isLast: bool = False
    truncated: bool = False
    totalRows: int | None = None
    spec: ExportSpec

    _partition_in_range = model_validator(mode="after")(_in_range)


class FinalizeRequested(Payload):
    """``export.finalize``: build the file from shards 0..lastSeq (or 0..lastSeqs[p] of each
    partition p)."""

    TYPE: ClassVar[str] = "plait.export.FinalizeRequested.v1"
    taskId: str
    lastSeq: int = Field(ge=0)
    lastSeqs: list[int] | None = None
    truncated: bool = False
    spec: ExportSpec


class CancelRequested(Payload):
    """``export.control``: an operator or the owner asks to stop a task."""

    TYPE: ClassVar[str] = "plait.export.CancelRequested.v1"
    taskId: str
    reason: str = "cancelled by user"


Status = Literal["CREATED", "WAITING", "RUNNING", "PROGRESS", "SUCCESS", "FAILED",
                 "CANCELLED", "TIMEOUT"]


class FileInfo(BaseModel):
    """The produced file: object key, name, format, bytes, sha256, rows, parts."""

    key: str
    fileName: str
    fileFormat: str
    bytes: int
    sha256: str
    rows: int
    files: list[dict[str, Any]] = Field(default_factory=list)
    sheets: int = 0
    url: str | None = None
    urlExpiresAt: str | None = None


class Lifecycle(Payload):
    """``export.lifecycle``: one state change or progress report of a task."""

    TYPE: ClassVar[str] = "plait.export.Lifecycle.v1"
    taskId: str
    status: Status
    at: str = Field(default_factory=utcnow_iso)
    sysCode: str | None = None
    bizType: str | None = None
    bizDesc: str | None = None
    userId: str | None = None
    fileName: str | None = None
    fileFormat: str | None = None
    fingerprint: str | None = None
    timeout: float | None = None
    exportedRows: int | None = None
    totalRows: int | None = None
    seq: int | None = None
    truncated: bool | None = None
    errorMessage: str | None = None
    workerId: str | None = None
    file: FileInfo | None = None
    quality: dict[str, int] | None = None
    #: What a RUNNING task is doing now.
    stage: Literal["fetching", "writing", "uploading"] | None = None


class DeadLetter(Payload):
    """``export.dlq``: an event that could not be processed, kept with the error."""

    TYPE: ClassVar[str] = "plait.DeadLetter.v1"
    topic: str
    partition: int | None = None
    offset: int | None = None
    key: str | None = None
    error: str
    errorClass: str
    payload: str


PAYLOADS: dict[str, type[Payload]] = {
    cls.TYPE: cls for cls in (ExportRequested, FetchPage, PageBatch, FinalizeRequested,
                              CancelRequested, Lifecycle, DeadLetter)
}


def new_traceparent() -> str:
    """A fresh W3C trace-context ``traceparent`` header value."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def encode(payload: Payload, subject: str, source: str = "plait",
           traceparent: str | None = None) -> bytes:
    """Wrap ``payload`` in a CloudEvents envelope; returns UTF-8 JSON bytes."""
    env = {
        "specversion": SPECVERSION,
        "id": uuid.uuid4().hex,
        "source": source,
        "type": payload.TYPE,
        "time": utcnow_iso(),
        "subject": subject,
        "datacontenttype": "application/json",
        "traceparent": traceparent or new_traceparent(),
        "data": payload.model_dump(mode="json", exclude_none=True),
    }
    return json.dumps(env, separators=(",", ":"), ensure_ascii=False).encode()


def decode(raw: bytes | str) -> tuple[dict[str, Any], Payload]:
    """``(envelope attributes, payload model)`` of ``raw``. Raises PoisonError: not a JSON envelope,
    unknown ``type``, or a payload breaking its schema (naming the field)."""
    try:
        env = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError, TypeError) as exc:
        raise PoisonError(f"event is not JSON: {type(exc).__name__}: {str(exc)[:200]}") from exc
    if not isinstance(env, dict) or "type" not in env or "data" not in env:
        raise PoisonError("event is not a CloudEvents envelope (needs 'type' and 'data')")
    model = PAYLOADS.get(env["type"])
    if model is None:
        raise PoisonError(f"unknown event type {env['type']!r}")
    try:
        payload = model.model_validate(env["data"])
    except RecursionError as exc:
        raise PoisonError(f"{env['type']}: payload nested too deeply") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "data"
        raise PoisonError(f"{env['type']}: field {field}: {first['msg']}") from exc
    attrs = {k: v for k, v in env.items() if k != "data"}
    return attrs, payload
