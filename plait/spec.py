"""The export task spec: what a caller asks for (DESIGN.md, "The API contract").

Field names follow the camelCase contract (``sysCode``, ``dataConfig``...).
Pydantic validation errors name the field path (``documentConfig.fileFormat``)
and the rule, which the API turns into a 422.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, model_validator

FileFormat = Literal["csv", "xlsx", "parquet", "jsonl"]
ColumnType = Literal["string", "int", "float", "decimal", "bool", "date", "datetime", "json"]

#: Excel's sheet limits (Microsoft, "Excel specifications and limits").
XLSX_MAX_COLUMNS = 16_384
XLSX_MAX_ROWS = 1_048_576


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


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


class DataConfig(_Model):
    """Where rows come from.

    ``mode`` ``pull``: Plait calls ``dataApiUrl`` page by page (pull contract);
    ``push``: the caller sends PageBatch events itself with the producer SDK.
    ``pageSize`` is rows per page (1..10,000).
    """

    mode: Literal["pull", "push"] = "pull"
    dataApiUrl: str | None = Field(default=None, max_length=2048)
    queryConditions: dict[str, Any] = Field(default_factory=dict)
    pageSize: int = Field(default=1000, ge=1, le=10_000, strict=True)
    runtimeContext: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _url_for_pull(self) -> "DataConfig":
        if self.mode == "pull":
            if not self.dataApiUrl:
                raise ValueError("dataApiUrl is required when mode is 'pull'")
            if not self.dataApiUrl.startswith(("http://", "https://")):
                raise ValueError("dataApiUrl must be an http:// or https:// URL")
        return self


class DocumentConfig(_Model):
    """What file to produce.

    ``columns`` fixes order, headers and types (absent: every field, inferred);
    ``csvFlavour`` ``excel`` = UTF-8 with BOM and CRLF, ``plain`` = UTF-8 and LF;
    ``timeZone`` is the IANA zone that aware datetimes are converted to;
    ``maxRowsPerFile`` splits the export into several files in one zip.
    """

    fileName: str = Field(default="export", min_length=1, max_length=255)
    fileFormat: FileFormat = "xlsx"
    sheetName: str = Field(default="Sheet1", min_length=1, max_length=255)
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
        return self._xlsx_columns()

    def _xlsx_columns(self) -> "DocumentConfig":
        if self.fileFormat == "xlsx" and self.columns and len(self.columns) > XLSX_MAX_COLUMNS:
            raise ValueError(
                f"xlsx allows at most {XLSX_MAX_COLUMNS:,} columns (Excel limit); "
                f"got {len(self.columns):,}: use csv or parquet")
        return self


class JobConfig(_Model):
    """How the task runs: ``timeout`` seconds until TIMEOUT, ``maxRows`` cap
    (the task succeeds truncated, it never fails for it)."""

    timeout: float = Field(default=3600, gt=0, le=7 * 24 * 3600)
    maxRows: int | None = Field(default=None, ge=1)


class ExportSpec(_Model):
    """A whole export request as a caller sends it."""

    sysCode: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    bizType: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    userId: str = Field(min_length=1, max_length=128)
    dataConfig: DataConfig
    documentConfig: DocumentConfig = Field(default_factory=DocumentConfig)
    jobConfig: JobConfig = Field(default_factory=JobConfig)

    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical JSON (sorted keys) of everything that
        decides the file: sysCode, bizType, userId, the data source (mode,
        dataApiUrl, queryConditions, initial runtimeContext), the whole
        documentConfig (columns, fileFormat, name, flavour, zone, split...) and
        jobConfig.maxRows. Two requests with one fingerprint give the same file,
        so dedupe and reuse may answer one with the other's task."""
        data = self.dataConfig
        key = {
            "sysCode": self.sysCode, "bizType": self.bizType, "userId": self.userId,
            "data": {"mode": data.mode, "dataApiUrl": data.dataApiUrl,
                     "queryConditions": data.queryConditions,
                     "runtimeContext": data.runtimeContext},
            "document": self.documentConfig.model_dump(exclude_none=True),
            "maxRows": self.jobConfig.maxRows,
        }
        canonical = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()
