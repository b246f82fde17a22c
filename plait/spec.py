"""The export task spec: what a caller asks for (docs/events.md, "The export request contract").

Fields are camelCase; unknown fields are refused at every level; a validation error names the field
path and the rule (422). Two spellings of one setting must agree (else a 422 naming both):
``dataConfig.pageSize``/``jobConfig.pageSize`` (held in the first), ``documentConfig.sheetName``/
``documentConfig.xlsx.sheetName`` (held in the first; the second is checked against Excel's rules).
"""
from __future__ import annotations

from collections import Counter
import hashlib
import json
import math
from typing import Any, Literal

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, PydanticSerializationError

from plait.partitions import MAX_PARTITIONS, check_fragments, parse_bound, split_windows
from plait.records import MAX_RECORD_BYTES

FileFormat = Literal["csv", "xlsx", "parquet", "jsonl", "pdf", "docx"]
ColumnType = Literal["string", "int", "float", "decimal", "bool", "date", "datetime", "json"]

#: Excel's sheet limits (Microsoft, "Excel specifications and limits").
XLSX_MAX_COLUMNS = 16_384
XLSX_MAX_ROWS = 1_048_576
XLSX_DATA_TOO_WIDE = "the data has {count:,}: choose csv or parquet, or list fewer columns"


def xlsx_columns_fit(count: int) -> bool:
    return count <= XLSX_MAX_COLUMNS


def check_xlsx_columns(file_format: str, count: int, error: type[Exception] = ValueError,
                       advice: str = "got {count:,}: use csv or parquet") -> None:
    """Raises ``error`` (Excel's column limit, then ``advice`` formatted with ``count``) when
    ``file_format`` is xlsx and ``count`` columns do not fit."""
    if file_format == "xlsx" and not xlsx_columns_fit(count):
        raise error(f"xlsx allows at most {XLSX_MAX_COLUMNS:,} columns (Excel limit); "
                    + advice.format(count=count))


XLSX_MAX_SHEET_NAME = 31
#: Plus control characters.
XLSX_SHEET_FORBIDDEN = "[]:*?/\\"
DEFAULT_PAGE_SIZE = 1000
MAX_PAGE_SIZE = 10_000


#: An event carrying the spec stays one record (docs/kafka-rules.md #17).
MAX_SPEC_BYTES = MAX_RECORD_BYTES * 3 // 4


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _largest_field(doc: dict[str, Any]) -> tuple[tuple[str, ...], int]:
    """``(location, bytes)`` of the largest field of ``doc``, at most two levels deep."""
    best: tuple[tuple[str, ...], int] = ((), -1)
    for key, value in doc.items():
        inner = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in inner:
            size = _json_size(v)
            if size > best[1]:
                best = ((key,) if sub is None else (key, sub), size)
    return best


def not_json_text(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """``(location, why)`` of the first value in ``value`` (dicts, lists, scalars) that JSON text
    cannot hold: a float that is NaN or infinite, or a string (key or value) with a lone surrogate,
    which UTF-8 cannot encode; None when there is none. A key in the location is shown with such a
    surrogate escaped (``\\udc00``)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        loc, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return loc, f"is {v}: JSON numbers are finite (no NaN or Infinity)"
        if isinstance(v, str) and not _utf8(v):
            return loc, "contains a lone surrogate (half of a UTF-16 pair): not Unicode text"
        if isinstance(v, dict):
            for k, item in reversed(v.items()):
                if isinstance(k, str) and not _utf8(k):
                    shown = k.encode("utf-8", "backslashreplace").decode()
                    return loc + (shown,), ("is a key with a lone surrogate (half of a UTF-16 "
                                            "pair): not Unicode text")
                stack.append((loc + (k,), item))
        elif isinstance(v, (list, tuple)):
            stack.extend((loc + (i,), item) for i, item in reversed(list(enumerate(v))))
    return None


#: Nesting pydantic serializes at most (pydantic-core's recursion guard).
SERIALIZED_DEPTH = 255


def deeper_than(doc: Any, most: int) -> bool:
    """True when ``doc`` nests lists and dicts more than ``most`` levels deep (iterative)."""
    level, depth = [c for c in (doc,) if isinstance(c, (list, dict))], 0
    while level:
        depth += 1
        if depth > most:
            return True
        level = [v for c in level for v in (c.values() if isinstance(c, dict) else c)
                 if isinstance(v, (list, dict))]
    return False



def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


def _conflict(title: str, *fields: tuple[tuple[str, ...], str, Any]) -> ValidationError:
    """A validation error for two spellings of one setting with different values: one entry per
    ``(location, name as spelt, value)``."""
    details = []
    for loc, name, value in fields:
        others = " and ".join(f"{n} ({v!r})" for _, n, v in fields if n != name)
        details.append(InitErrorDetails(
            type=PydanticCustomError(
                "conflict", "{value} differs from {others}: give one of them, or the same "
                "value in both", {"value": repr(value), "others": others}),
            loc=loc, input=value))
    return ValidationError.from_exception_data(title, details)


def excel_sheet_name(name: str) -> str:
    """``name`` when Excel accepts it as a sheet name (Microsoft, "Rename a worksheet"): 1..31
    characters, none of ``[]:*?/\\`` or controls, no leading/trailing apostrophe or space, not
    ``History``. Raises PydanticCustomError ``sheet_name``."""
    why = None
    found = sorted({c for c in name if c in XLSX_SHEET_FORBIDDEN})
    if not name.strip():
        why = "is blank"
    elif len(name) > XLSX_MAX_SHEET_NAME:
        why = f"has {len(name)} characters"
    elif found:
        why = f"contains {' '.join(found)}"
    elif any(ord(c) < 32 or ord(c) == 127 for c in name):
        why = "contains a control character"
    elif name[0] in "' " or name[-1] in "' ":
        why = "starts or ends with an apostrophe or a space"
    elif name.lower() == "history":
        why = f"{name!r} is reserved by Excel"
    if why:
        raise PydanticCustomError(
            "sheet_name", "{why}; a sheet name is 1 to 31 characters without [ ] : * ? / \\ "
            "or control characters, neither starts nor ends with an apostrophe or a space, "
            "and is not 'History'", {"why": why})
    return name


class ColumnSpec(_Model):
    """One output column: ``fieldName`` in the source rows, ``headerName`` (default the field name),
    ``type`` (inferred when absent), xlsx ``format`` (``0.00``), ``dictionary`` of code -> label,
    ``mask`` (first/last N characters kept)."""

    fieldName: str = Field(min_length=1, max_length=256)
    headerName: str | None = Field(default=None, max_length=256)
    type: ColumnType | None = None
    format: str | None = Field(default=None, max_length=64)
    dictionary: dict[str, str] | None = None
    mask: dict[str, int] | None = None

    @property
    def header(self) -> str:
        return self.headerName or self.fieldName


class SplitConfig(_Model):
    """``dataConfig.split``: cut ``from``..``to`` of ``field`` (integers, or
    ISO 8601 date-times with an offset) into ``parts`` windows, one partition
    each (``plait.partitions.split_windows``)."""

    # from/to only: start and stop are Python's names (``from`` is a keyword), not the contract's
    model_config = ConfigDict(populate_by_name=False, extra="forbid", serialize_by_alias=True)
    field: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    start: Any = Field(alias="from", json_schema_extra={"type": ["integer", "string"]})
    stop: Any = Field(alias="to", json_schema_extra={"type": ["integer", "string"]})
    parts: int = Field(ge=1, le=MAX_PARTITIONS, strict=True)

    @field_validator("start", "stop")
    @classmethod
    def _bound(cls, value: Any) -> int | str:
        """An integer (not a JSON boolean) or an ISO 8601 date-time with an offset, as sent."""
        parse_bound(value)
        return value

    @model_validator(mode="after")
    def _windows(self) -> "SplitConfig":
        split_windows(self.field, self.start, self.stop, self.parts)
        return self


class DataConfig(_Model):
    """Where rows come from: ``pull`` (Plait calls ``dataApiUrl`` page by page) or ``push`` (the
    caller sends PageBatch events); ``pageSize`` rows per page; ``runtimeContext`` the first call's
    cursor (of each partition). ``partitions`` (``queryConditions`` fragments) or ``split`` (a range
    cut into windows) make partitions pulled in parallel, the file in partition order
    (``plait.partitions``; pull mode only, not both)."""

    # the OpenAPI document states the cross-field rule of _url_for_pull
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"properties": {"mode": {"const": "push"}}, "required": ["mode"]},
        {"properties": {"dataApiUrl": {"type": "string", "pattern": "^https?://"}},
         "required": ["dataApiUrl"]}]})

    mode: Literal["pull", "push"] = "pull"
    dataApiUrl: str | None = Field(default=None, max_length=2048)
    queryConditions: dict[str, Any] = Field(default_factory=dict)
    pageSize: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE, strict=True)
    runtimeContext: dict[str, Any] = Field(default_factory=dict)
    partitions: list[dict[str, Any]] | None = Field(default=None, min_length=1,
                                                    max_length=MAX_PARTITIONS)
    split: SplitConfig | None = None

    @model_validator(mode="after")
    def _one_partitioning(self) -> "DataConfig":
        if self.partitions is not None and self.split is not None:
            raise ValueError("split: give partitions or split, not both")
        if (self.partitions is not None or self.split is not None) and self.mode != "pull":
            given = "partitions" if self.partitions is not None else "split"
            raise ValueError(f"{given}: is for pull mode (push: the producer numbers its "
                             "partitions)")
        return self

    @field_validator("partitions")
    @classmethod
    def _fragments(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if value is not None:
            check_fragments(value)
        return value

    def fragments(self) -> list[dict[str, Any]]:
        """Each partition's ``queryConditions`` fragment, in file order
        (``[{}]``: one partition, the export as a whole)."""
        if self.split is not None:
            s = self.split
            return split_windows(s.field, s.start, s.stop, s.parts)
        return list(self.partitions or [{}])

    def conditions(self, partition: int) -> dict[str, Any]:
        """The ``queryConditions`` partition ``partition`` is pulled with."""
        return self.queryConditions | self.fragments()[partition]

    @model_validator(mode="after")
    def _url_for_pull(self) -> "DataConfig":
        if self.mode == "pull":
            if not self.dataApiUrl:
                raise ValueError("dataApiUrl is required when mode is 'pull'")
            if not self.dataApiUrl.startswith(("http://", "https://")):
                raise ValueError("dataApiUrl must be an http:// or https:// URL")
        return self


class XlsxOptions(_Model):
    """xlsx-only options; ``sheetName`` (Excel's rules) names the first sheet, later ones
    ``<sheetName> (2)``..."""

    sheetName: str | None = Field(default=None, json_schema_extra={
        "minLength": 1, "maxLength": XLSX_MAX_SHEET_NAME,
        "description": "Excel sheet name: no [ ] : * ? / \\, no apostrophe or space at "
                       "either end, not 'History'"})

    @field_validator("sheetName")
    @classmethod
    def _excel_rules(cls, value: str | None) -> str | None:
        return None if value is None else excel_sheet_name(value)


class DocumentConfig(_Model):
    """What file to produce: ``columns`` fix order, headers and types (absent: every field,
    inferred); ``csvFlavour`` ``excel`` (BOM, CRLF) or ``plain``; ``timeZone`` for aware datetimes;
    ``maxRowsPerFile`` splits into a zip; ``allowMissingColumns``: a declared column absent from the
    first page is empty instead of failing the task."""

    fileName: str = Field(default="export", min_length=1, max_length=255)
    fileFormat: FileFormat = "xlsx"
    sheetName: str = Field(default="Sheet1", min_length=1, max_length=255)
    xlsx: XlsxOptions | None = None
    columns: list[ColumnSpec] | None = Field(default=None, max_length=XLSX_MAX_COLUMNS * 4)
    csvFlavour: Literal["excel", "plain"] = "excel"
    csvDelimiter: str = Field(default=",", min_length=1, max_length=1)
    timeZone: str = "UTC"
    infText: str = Field(default="inf", max_length=32)
    escapeFormulas: bool = True
    maxRowsPerFile: int | None = Field(default=None, ge=1, strict=True)
    #: keep: most faithful form, counted; fail: the task fails (docs/fidelity-rules.md).
    onInvalidValue: Literal["keep", "fail"] = "keep"
    allowMissingColumns: bool = False

    @model_validator(mode="after")
    def _checks(self) -> "DocumentConfig":
        try:
            ZoneInfo(self.timeZone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timeZone: unknown IANA time zone {self.timeZone!r}") from None
        if self.csvDelimiter in ('"', "\r", "\n"):
            raise ValueError("csvDelimiter: may not be a quote or a line break (RFC 4180)")
        names = [c.fieldName for c in self.columns or []]
        dupes = sorted(n for n, k in Counter(names).items() if k > 1)
        if dupes:
            raise ValueError(f"columns: fieldName repeated: {dupes[:5]}")
        for i, col in enumerate(self.columns or []):
            if col.mask and any(not isinstance(v, int) or v < 0 for v in col.mask.values()):
                raise ValueError(f"columns.{i}.mask: values must be whole numbers >= 0")
        self._one_sheet_name()
        return self._xlsx_columns()

    def _one_sheet_name(self) -> None:
        """Fold ``xlsx.sheetName`` into ``sheetName``; different values conflict."""
        wanted = self.xlsx.sheetName if self.xlsx else None
        if wanted is None:
            return
        if "sheetName" in self.model_fields_set and self.sheetName != wanted:
            raise _conflict("DocumentConfig",
                            (("sheetName",), "documentConfig.sheetName", self.sheetName),
                            (("xlsx", "sheetName"), "documentConfig.xlsx.sheetName", wanted))
        self.sheetName = wanted

    def _xlsx_columns(self) -> "DocumentConfig":
        check_xlsx_columns(self.fileFormat, len(self.columns or ()))
        return self


class JobConfig(_Model):
    """How the task runs: ``timeout`` seconds until TIMEOUT, ``maxRows`` cap (the task succeeds
    truncated), ``pageSize`` (see the module docstring), ``notifyUrl`` completion webhook (under the
    caller's ``notifyUrlPrefixes``; ``streams.notify``)."""

    timeout: float = Field(default=3600, gt=0, le=7 * 24 * 3600, strict=True, allow_inf_nan=False)
    maxRows: int | None = Field(default=None, ge=1, strict=True)
    pageSize: int | None = Field(default=None, ge=1, le=MAX_PAGE_SIZE, strict=True)
    notifyUrl: str | None = Field(default=None, max_length=2048,
                                  pattern=r"^https?://[^\s]+$")


class ExportSpec(_Model):
    """A whole export request. ``bizDesc``: free text (<= 256 characters) shown in task lists.
    Raises ``pydantic.ValidationError`` (422)."""

    sysCode: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    bizType: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    bizDesc: str | None = Field(default=None, max_length=256)
    userId: str = Field(min_length=1, max_length=128)
    dataConfig: DataConfig
    documentConfig: DocumentConfig = Field(default_factory=DocumentConfig)
    jobConfig: JobConfig = Field(default_factory=JobConfig)

    def _dumped(self, **kw: Any) -> dict[str, Any]:
        """``model_dump(**kw)``; ValidationError naming the field nested past pydantic's
        serialization limit (:data:`SERIALIZED_DEPTH`) instead of its bare ValueError."""
        try:
            return self.model_dump(**kw)
        except (ValueError, PydanticSerializationError) as exc:
            if "depth" not in str(exc):
                raise
            data = self.dataConfig
            deep = [n for n in ("queryConditions", "runtimeContext", "partitions")
                    if deeper_than(getattr(data, n), SERIALIZED_DEPTH - 8)]
            raise ValidationError.from_exception_data("ExportSpec", [InitErrorDetails(
                type=PydanticCustomError("json_value", "nests arrays and objects deeper than "
                                         "the {most} levels a spec can be written with",
                                         {"most": SERIALIZED_DEPTH}),
                loc=("dataConfig", *deep[:1]), input="(not shown)")]) from None

    @model_validator(mode="after")
    def _json_text(self) -> "ExportSpec":
        """Refuse what JSON text cannot carry to a data API, a producer or a Kafka record (RFC
        8259): NaN and Infinity (Python's JSON reader takes them, ``1e400`` too), and a lone
        surrogate (``"\\udc00"``) in a key or a value. Names the first such place."""
        doc = self._dumped(by_alias=True, exclude_none=True)
        try:  # in C, the common case; the walk below only finds where it failed
            json.dumps(doc, ensure_ascii=False, allow_nan=False, default=str).encode()
            return self
        except ValueError:  # NaN or Infinity; UnicodeEncodeError: a lone surrogate
            found = not_json_text(doc)
        if found is None:
            return self
        loc, why = found
        raise ValidationError.from_exception_data("ExportSpec", [InitErrorDetails(
            type=PydanticCustomError("json_value", why), loc=loc, input="(not shown)")])

    @model_validator(mode="after")
    def _one_page_size(self) -> "ExportSpec":
        """Fold ``jobConfig.pageSize`` into ``dataConfig.pageSize``; different values conflict."""
        data, job = self.dataConfig, self.jobConfig.pageSize
        if job is None:
            return self
        if "pageSize" in data.model_fields_set and data.pageSize != job:
            raise _conflict("ExportSpec",
                            (("dataConfig", "pageSize"), "dataConfig.pageSize", data.pageSize),
                            (("jobConfig", "pageSize"), "jobConfig.pageSize", job))
        data.pageSize = job
        return self

    @model_validator(mode="after")
    def _fits_a_record(self) -> "ExportSpec":
        """Refuse a spec over :data:`MAX_SPEC_BYTES`, naming its largest field."""
        doc = self._dumped(mode="json", exclude_none=True)
        size = _json_size(doc)
        if size <= MAX_SPEC_BYTES:
            return self
        loc, field_size = _largest_field(doc)
        too_large = InitErrorDetails(
            type=PydanticCustomError(
                "too_large", "is {field} bytes of JSON and makes the request {size} bytes; the "
                "whole request may be at most {most} bytes (it travels in one Kafka record)",
                {"field": field_size, "size": size, "most": MAX_SPEC_BYTES}),
            loc=loc, input="(too large to show)")
        raise ValidationError.from_exception_data("ExportSpec", [too_large])

    def fingerprint(self, slot: str | None = None) -> str:
        """sha256 hex of the canonical JSON of what decides the file (sysCode, bizType, userId, data
        source with the partitions' fragments, documentConfig with the sheet name in force, jobConfig.maxRows; not bizDesc,
        timeout, page size): one fingerprint, one file, so dedupe and reuse may answer with another
        task. ``slot`` (``"{scheduleId}:{slotMs}"``) makes each schedule slot its own task."""
        data = self.dataConfig
        document = self.documentConfig.model_dump(exclude_none=True,
                                                  exclude={"xlsx": {"sheetName"}})
        if not document.get("xlsx", True):
            del document["xlsx"]
        key = {
            "sysCode": self.sysCode, "bizType": self.bizType, "userId": self.userId,
            "data": {"mode": data.mode, "dataApiUrl": data.dataApiUrl,
                     "queryConditions": data.queryConditions,
                     "runtimeContext": data.runtimeContext},
            "document": document,
            "maxRows": self.jobConfig.maxRows,
        }
        if data.partitions is not None or data.split is not None:
            key["data"]["partitions"] = data.fragments()
        if slot is not None:
            key["scheduleSlot"] = slot
        canonical = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()
