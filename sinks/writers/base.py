"""The contract between the finalizer and the file writers: conformed batches in seq order, never
more than one held; ``close()`` returns a :class:`WriteReport`."""
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
    """What a writer produced: ``path`` (a zip when split), data ``rows``, the ``files`` inside,
    xlsx ``sheets``, ``quality`` counts by kind."""

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
