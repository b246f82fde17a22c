"""The contract between the finalizer and the file writers.

The finalizer streams Parquet shards in seq order and hands each record batch
(already conformed to one unified schema) to a writer; the writer never holds
more than one batch. ``close()`` returns a :class:`WriteReport`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa


@dataclass
class FileEntry:
    """One produced file: its name and data rows (header excluded)."""

    name: str
    rows: int


@dataclass
class WriteReport:
    """What a writer produced.

    ``path``: the single local file to upload (a zip when split into several);
    ``rows``: data rows written; ``files``: the files inside (one entry when not
    split); ``sheets``: xlsx sheets (0 for other formats); ``quality``: counts of
    cells changed, by kind (``truncated``, ``converted_to_text``, ``sanitized``,
    ``formula_escaped``...).
    """

    path: Path
    rows: int
    files: list[FileEntry]
    sheets: int = 0
    quality: dict[str, int] = field(default_factory=dict)


class FileWriter(Protocol):
    """Streams record batches into one output (see ``sinks.writers.open_writer``)."""

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append one batch (schema = the one given to ``open_writer``)."""

    def close(self) -> WriteReport:
        """Finish the file(s) and report; the writer is unusable afterwards."""
