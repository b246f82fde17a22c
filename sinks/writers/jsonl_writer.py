"""JSON Lines writer: one JSON object per row, keys in column order, UTF-8 without ``\\u`` escapes,
compact, LF after each record. NaN and null -> ``null``; +/-inf -> ``doc.infText`` strings (RFC 8259
has no infinities); datetimes ISO-8601 with offset in the export zone; text as is (no formula
escaping: no spreadsheet evaluates it); decimals as numbers when a double reads back the same, else
strings (``converted_to_text``); mixed cells keep their JSON type (F7).

Rendered column-wise in Arrow (:mod:`sinks.writers.columns`), byte for byte what
``json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))`` writes; decimal, mixed and other
columns, and text with control characters other than LF, CR and tab, go cell by cell."""
from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from plait.spec import DocumentConfig
from sinks.writers.base import WriteReport
from sinks.writers.cells import (
    SingleFileWriter, json_decimal, kind_of_field, mixed_column, other_cells,
)
from sinks.writers.columns import bool_texts, float_texts, iso_array
from sinks.writers.csv_writer import joined_bytes

#: Control characters JSON escapes as \uXXXX (LF, CR, tab are done column-wise).
_OTHER_CONTROLS = r"[\x00-\x08\x0b\x0c\x0e-\x1f]"

_BUFFER = 1 << 20


class JsonlWriter(SingleFileWriter):
    """Writes ``path`` as JSON Lines; see the module docstring. A batch's lines go to :attr:`out`
    (the file unless pointed elsewhere between batches) and depend on no batch before them
    (:attr:`concatenable`)."""

    ext = "jsonl"
    concatenable = True

    def __init__(self, path: Path, schema: pa.Schema, doc: DocumentConfig) -> None:
        super().__init__(path, schema, doc)
        self._file = self.out = open(path, "wb", buffering=_BUFFER)
        self._encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                                        separators=(",", ":")).encode
        self._kinds = [kind_of_field(f) for f in schema]

    def _decimals(self, values: list, name: str) -> list:
        inf = self.doc.infText
        out = []
        for v in values:
            if type(v) is Decimal:
                f = json_decimal(v)
                if f is None:
                    self.quality.add("converted_to_text", 1, name)
                    v = str(v)
                else:
                    v = f
            elif type(v) is float and not math.isfinite(v):
                v = inf if v > 0 else "-" + inf
            out.append(v)
        return out

    def _column(self, c: int, col: pa.Array) -> pa.Array:
        """One column as JSON fragments (``null`` for a missing value)."""
        kind, name = self._kinds[c], self.names[c]
        if kind == "text":
            out = self._json_strings(col if pa.types.is_string(col.type) else
                                     col.cast(pa.string()))
        elif kind == "int":
            out = col.cast(pa.string())
        elif kind == "float":
            out = float_texts(col, self.doc.infText, json_style=True)
            inf = pc.fill_null(pc.is_inf(col), False)
            if pc.any(inf).as_py():
                inf_text = self.doc.infText
                out = pc.if_else(inf, pc.if_else(pc.greater(col, 0), self._encode(inf_text),
                                                 self._encode("-" + inf_text)), out)
        elif kind == "bool":
            out = bool_texts(col)
        elif kind in ("datetime", "date"):
            out = pc.binary_join_element_wise('"', iso_array(col), '"', "")
        else:
            if kind == "mixed":
                values = self._decimals(mixed_column(col, name, self.quality, escape=False,
                                                     mark=str, sanitize=False), name)
            elif kind == "decimal":
                values = self._decimals(col.to_pylist(), name)
            else:
                values = other_cells(col)
            encode = self._encode
            out = pa.array([None if v is None else encode(v) for v in values], pa.string())
        return pc.fill_null(out, "null")

    def _json_strings(self, col: pa.Array) -> pa.Array:
        if col.null_count == len(col):
            return col
        out = col
        for raw, esc in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"),
                         ("\t", "\\t")):
            if pc.any(pc.match_substring(out, raw)).as_py():
                out = pc.replace_substring(out, raw, esc)
        out = pc.binary_join_element_wise('"', out, '"', "")
        odd = pc.fill_null(pc.match_substring_regex(col, _OTHER_CONTROLS), False)
        if pc.any(odd).as_py():
            encode = self._encode
            picked = pc.filter(col, odd).to_pylist()
            out = pc.replace_with_mask(out, odd, pa.array([encode(v) for v in picked],
                                                          pa.string()))
        return out

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append one line per row of ``batch``."""
        self._check_batch(batch)
        if batch.num_rows == 0:
            return
        names = batch.schema.names
        columns = [self._column(c, col) for c, col in enumerate(batch.columns)]
        if len(set(names)) != len(names) or not names:
            # duplicate keys: a dict keeps the last value, as the encoder would
            self._write_dicts(names, [col.to_pylist() for col in columns])
        else:
            parts: list = []
            for i, (name, col) in enumerate(zip(names, columns)):
                parts.append(("{" if i == 0 else ",") + self._encode(name) + ":")
                parts.append(col)
            parts.append("}\n")
            lines = pc.binary_join_element_wise(*parts, "")
            self.out.write(joined_bytes(lines))
        self.rows += batch.num_rows

    def _write_dicts(self, names: list[str], columns: list[list]) -> None:
        write = self.out.write
        for row in zip(*columns):
            d = dict(zip(names, row))
            write(("{" + ",".join(f"{self._encode(k)}:{v}" for k, v in d.items())
                   + "}\n").encode())

    def close(self) -> WriteReport:
        """Flush and close the file; returns the report."""
        if not self.closed:
            self._file.close()
        return self.report()
