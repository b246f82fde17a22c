"""The export task spec: what a caller asks for (docs/events.md, "The export request contract").

Field names follow the camelCase contract (``sysCode``, ``dataConfig``...).
Pydantic validation errors name the field path (``documentConfig.fileFormat``)
and the rule, which the API turns into a 422. Unknown fields are refused at
every level, named by their path (``jobConfig.timeoutt``).

The written contract's request is accepted verbatim::

    {"sysCode", "bizType", "bizDesc", "userId",
     "dataConfig": {"dataApiUrl", "queryConditions"},
     "documentConfig": {"fileName", "fileFormat", "xlsx": {"sheetName"}, "columns"},
     "jobConfig": {"timeout", "maxRows", "pageSize"}}

Two spellings of one setting are accepted and must agree (a conflict is a 422
naming both fields, so nothing is silently dropped):

- page size: ``dataConfig.pageSize`` or ``jobConfig.pageSize`` (the contract's
  spelling); 1..10,000 rows, default 1,000. After validation
  ``dataConfig.pageSize`` holds the value in force.
- sheet name: ``documentConfig.xlsx.sheetName`` (the contract's spelling,
  checked against Excel's sheet-name rules) or ``documentConfig.sheetName``
  (older spelling, made Excel-valid by the xlsx writer). After validation
  ``documentConfig.sheetName`` holds the value in force.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from plait.partitions import MAX_PARTITIONS, check_fragments, split_windows
from plait.records import MAX_RECORD_BYTES

FileFormat = Literal["csv", "xlsx", "parquet", "jsonl", "pdf", "docx"]
ColumnType = Literal["string", "int", "float", "decimal", "bool", "date", "datetime", "json"]

#: Excel's sheet limits (Microsoft, "Excel specifications and limits").
XLSX_MAX_COLUMNS = 16_384
XLSX_MAX_ROWS = 1_048_576
#: The tail of the column-cap message when the data (not the request) is too wide.
XLSX_DATA_TOO_WIDE = "the data has {count:,}: choose csv or parquet, or list fewer columns"


def xlsx_columns_fit(count: int) -> bool:
    """True when ``count`` columns fit one xlsx sheet (:data:`XLSX_MAX_COLUMNS`,
    Microsoft, "Excel specifications and limits")."""
    return count <= XLSX_MAX_COLUMNS


def check_xlsx_columns(file_format: str, count: int, error: type[Exception] = ValueError,
                       advice: str = "got {count:,}: use csv or parquet") -> None:
    """The one check of Excel's column cap: nothing unless ``file_format`` is
    ``"xlsx"`` and ``count`` columns do not fit (:func:`xlsx_columns_fit`).

    Raises:
        error: ``"xlsx allows at most 16,384 columns (Excel limit); "`` plus
            ``advice`` formatted with ``count``.
    """
    if file_format == "xlsx" and not xlsx_columns_fit(count):
        raise error(f"xlsx allows at most {XLSX_MAX_COLUMNS:,} columns (Excel limit); "
                    + advice.format(count=count))


#: Longest sheet name Excel accepts.
XLSX_MAX_SHEET_NAME = 31
#: Characters Excel refuses in a sheet name (plus control characters).
XLSX_SHEET_FORBIDDEN = "[]:*?/\\"
#: Rows per page when neither ``dataConfig.pageSize`` nor ``jobConfig.pageSize`` is given.
DEFAULT_PAGE_SIZE = 1000
#: Largest page size accepted, rows.
MAX_PAGE_SIZE = 10_000


#: Most bytes of a spec's JSON (the form the events carry): three quarters
#: of :data:`plait.records.MAX_RECORD_BYTES`, leaving 64 KiB for the
#: envelope and the fields of an event that carries the spec
#: (``ExportRequested``, ``FetchPage`` with its cursor), so each stays one
#: bounded Kafka record (docs/kafka-rules.md #17). It caps declared columns
#: (about 9,000 of short names); undeclared columns are not limited.
MAX_SPEC_BYTES = MAX_RECORD_BYTES * 3 // 4


def _json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (as ``plait.events.encode`` writes it)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _largest_field(doc: dict[str, Any]) -> tuple[tuple[str, ...], int]:
    """``(location, bytes)`` of the largest field of ``doc`` at most two
    levels deep (``("dataConfig", "queryConditions")``)."""
    best: tuple[tuple[str, ...], int] = ((), -1)
    for key, value in doc.items():
        inner = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in inner:
            size = _json_size(v)
            if size > best[1]:
                best = ((key,) if sub is None else (key, sub), size)
    return best


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


def _conflict(title: str, *fields: tuple[tuple[str, ...], str, Any]) -> ValidationError:
    """A validation error for two spellings of one setting given different
    values: one entry per ``(location relative to the model, name as the
    caller spells it, value)``, each naming the others and what is accepted."""
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
    """Check ``name`` against Excel's sheet-name rules (Microsoft, "Rename a
    worksheet"): 1..31 characters, none of ``[]:*?/\\`` or control
    characters, not starting or ending with an apostrophe or a space, and not
    ``History`` (reserved, any case). Returns ``name`` unchanged.

    Raises:
        PydanticCustomError ``sheet_name``: saying which rule failed and what
            is accepted.
    """
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
    """One output column.

    ``fieldName`` is the key in source rows; ``headerName`` the header text
    (default: the field name); ``type`` is inferred from the values when absent;
    ``format`` is an xlsx number/date format such as ``0.00`` or ``yyyy-mm-dd``;
    ``dictionary`` maps source codes to labels (``{"1": "Online"}``); ``mask``
    keeps the first/last N characters of a sensitive value.
    """

    fieldName: str = Field(min_length=1, max_length=256)
    headerName: str | None = Field(default=None, max_length=256)
    type: ColumnType | None = None
    format: str | None = Field(default=None, max_length=64)
    dictionary: dict[str, str] | None = None
    mask: dict[str, int] | None = None

    @property
    def header(self) -> str:
        """The header text of the column."""
        return self.headerName or self.fieldName


class SplitConfig(_Model):
    """``dataConfig.split``: cut ``from``..``to`` of ``field`` (integers, or
    ISO 8601 date-times with an offset) into ``parts`` windows, one partition
    each (``plait.partitions.split_windows``)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", serialize_by_alias=True)
    field: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    start: int | str = Field(alias="from")
    stop: int | str = Field(alias="to")
    parts: int = Field(ge=1, le=MAX_PARTITIONS, strict=True)

    @model_validator(mode="after")
    def _windows(self) -> "SplitConfig":
        split_windows(self.field, self.start, self.stop, self.parts)
        return self


class DataConfig(_Model):
    """Where rows come from.

    ``mode`` ``pull``: Plait calls ``dataApiUrl`` page by page (pull contract);
    ``push``: the caller sends PageBatch events itself with the producer SDK.
    ``pageSize`` is rows per page (1..10,000; ``jobConfig.pageSize`` is the
    contract's spelling of the same setting, see the module docstring);
    ``runtimeContext`` is the initial cursor sent on the first call (of
    each partition). ``partitions`` (``queryConditions`` fragments) or
    ``split`` (a range cut into windows) make the export several partitions
    pulled in parallel, the file holding them in partition order
    (``plait.partitions``; pull mode only, not both).
    """

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
            raise ValueError("partitions and split: give one of them")
        if (self.partitions is not None or self.split is not None) and self.mode != "pull":
            raise ValueError("partitions and split are for pull mode (push: the producer "
                             "numbers its partitions)")
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
    """xlsx-only options (``documentConfig.xlsx`` in the contract).

    ``sheetName``: the name of the first sheet, checked against Excel's rules
    (:func:`excel_sheet_name`); further sheets (past 1,048,575 rows) are named
    ``<sheetName> (2)``... Ignored for other formats.
    """

    sheetName: str | None = Field(default=None, json_schema_extra={
        "minLength": 1, "maxLength": XLSX_MAX_SHEET_NAME,
        "description": "Excel sheet name: no [ ] : * ? / \\, no apostrophe or space at "
                       "either end, not 'History'"})

    @field_validator("sheetName")
    @classmethod
    def _excel_rules(cls, value: str | None) -> str | None:
        return None if value is None else excel_sheet_name(value)


class DocumentConfig(_Model):
    """What file to produce.

    ``sheetName`` names the xlsx sheet (older spelling of ``xlsx.sheetName``,
    see the module docstring; default ``Sheet1``); ``xlsx`` holds xlsx options;
    ``columns`` fixes order, headers and types (absent: every field, inferred);
    ``csvFlavour`` ``excel`` = UTF-8 with BOM and CRLF, ``plain`` = UTF-8 and LF;
    ``timeZone`` is the IANA zone that aware datetimes are converted to;
    ``maxRowsPerFile`` splits the export into several files in one zip;
    ``allowMissingColumns``: a declared column that no row of the first page
    has is an empty column (default: the task fails naming it, since its
    ``fieldName`` is most likely misspelt).
    """

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
    maxRowsPerFile: int | None = Field(default=None, ge=1)
    #: A value the normalizer cannot map exactly (docs/fidelity-rules.md): ``keep``
    #: writes the most faithful form and counts it in the quality report; ``fail``
    #: fails the task naming column, page, row, value and rule.
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
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"columns: fieldName repeated: {dupes[:5]}")
        for i, col in enumerate(self.columns or []):
            if col.mask and any(not isinstance(v, int) or v < 0 for v in col.mask.values()):
                raise ValueError(f"columns.{i}.mask: values must be whole numbers >= 0")
        self._one_sheet_name()
        return self._xlsx_columns()

    def _one_sheet_name(self) -> None:
        """Fold ``xlsx.sheetName`` into ``sheetName``; both given and different
        is a conflict naming both."""
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
    """How the task runs: ``timeout`` seconds until TIMEOUT, ``maxRows`` cap
    (the task succeeds truncated, it never fails for it), ``pageSize`` rows per
    page (1..10,000; the contract's spelling of ``dataConfig.pageSize``, see the
    module docstring), ``notifyUrl`` a completion webhook (http/https; with a
    caller registry it must be under the caller's ``notifyUrlPrefixes``) that
    receives the final status and the signed link (``schedules.notify``); not
    part of the fingerprint."""

    timeout: float = Field(default=3600, gt=0, le=7 * 24 * 3600)
    maxRows: int | None = Field(default=None, ge=1)
    pageSize: int | None = Field(default=None, ge=1, le=MAX_PAGE_SIZE, strict=True)
    notifyUrl: str | None = Field(default=None, max_length=2048,
                                  pattern=r"^https?://[^\s]+$")


class ExportSpec(_Model):
    """A whole export request as a caller sends it.

    ``bizDesc`` is a free-text description of the export (up to 256
    characters) shown in task lists; it does not shape the file, so it is not
    part of the fingerprint.

    Raises (``pydantic.ValidationError``, a 422 at the API): any field out of
    its rule, an unknown field (named by its path), or ``dataConfig.pageSize``
    and ``jobConfig.pageSize`` given different values (both named).
    """

    sysCode: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    bizType: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    bizDesc: str | None = Field(default=None, max_length=256)
    userId: str = Field(min_length=1, max_length=128)
    dataConfig: DataConfig
    documentConfig: DocumentConfig = Field(default_factory=DocumentConfig)
    jobConfig: JobConfig = Field(default_factory=JobConfig)

    @model_validator(mode="after")
    def _one_page_size(self) -> "ExportSpec":
        """Fold ``jobConfig.pageSize`` into ``dataConfig.pageSize`` (the value in
        force); both given and different is a conflict naming both."""
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
        """Refuse a spec whose JSON passes :data:`MAX_SPEC_BYTES`, naming
        its largest field (``dataConfig.queryConditions``) and the limit."""
        doc = self.model_dump(mode="json", exclude_none=True)
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
        """sha256 (hex) of the canonical JSON (sorted keys) of everything that
        decides the file: sysCode, bizType, userId, the data source (mode,
        dataApiUrl, queryConditions, initial runtimeContext, the partitions'
        fragments when partitioned), the whole
        documentConfig (columns, fileFormat, name, sheet name in force, xlsx
        options, flavour, zone, split...) and jobConfig.maxRows. Not in it:
        bizDesc, timeout and the page size (they do not change the file), nor
        which spelling named the sheet. Two requests with one fingerprint give
        the same file, so dedupe and reuse may answer one with the other's task.

        ``slot``: a schedule slot's idempotency key (``"{scheduleId}:{slotMs}"``,
        ``schedules.runner``), added to the inputs when given, so each slot's
        export is its own task and a repeated fire of one slot finds it."""
        data = self.dataConfig
        # sheetName holds the name in force; xlsx.sheetName is only its other spelling
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
