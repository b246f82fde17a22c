"""Property test of docs/fidelity-rules.md: generated rows of mixed types,
Unicode (lone surrogates, emoji, RTL, control characters), extreme numbers,
Decimals and dates travel as the pipeline moves them (JSON for transport,
parsed with ``json_number``), are normalized page by page, unified,
conformed and written to all four formats; read back, every cell equals its
source under the documented rules, and every replaced surrogate is counted."""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
from decimal import Decimal
from pathlib import Path

import openpyxl
import pyarrow.parquet as pq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plait.spec import DocumentConfig
from sinks.values import conform, dumps_rows, fix_unicode, json_number, rows_to_batch, unify_schemas
from sinks.writers import open_writer
from sinks.writers.cells import formula_like

UTC = dt.timezone.utc
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_OOXML_ESCAPE = re.compile(r"_x([0-9A-Fa-f]{4})_")

chars = st.characters(codec=None, categories=None, exclude_characters=None)
texts = st.one_of(
    st.text(chars, max_size=12),
    st.sampled_from(["cut \ud83d", "\U0001F600 ok", "\u05e9\u05dc\u05d5\u05dd", "\u202eRTL",
                     "tab\tx", "=1+1", "-3", "00123", "1E5", "", " pad ", "a\r\nb", "_x000D_"]))
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([1.7976931348623157e308, 5e-324, -0.0, 2.5, 1.0, 1e16]))
decimals = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
    lambda d: d.adjusted() < 60 and len(d.as_tuple().digits) <= 40)
ints = st.one_of(st.integers(-(2**53), 2**53), st.integers(-(2**70), 2**70))
instants = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                        timezones=st.just(UTC)).map(lambda d: d.isoformat())
scalars = st.one_of(st.none(), st.booleans(), ints, floats, decimals, texts)
nested = st.one_of(st.lists(st.integers(), max_size=3),
                   st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2))
cells = st.one_of(scalars, nested)
rows_st = st.lists(st.fixed_dictionaries({"a": scalars, "b": cells}, optional={
    "t": st.one_of(st.none(), instants, instants, instants, scalars),
    "n": st.one_of(st.none(), ints, floats, decimals)}), min_size=1, max_size=12)


def sent(rows: list[dict]) -> list[dict]:
    """The rows as the shard writer sees them after transport."""
    body, _ = dumps_rows(rows)
    return json.loads(body, parse_float=json_number)


def write_all(pages: list[list[dict]], tmp: Path) -> tuple[dict, dict]:
    out, counts = {}, {}
    for fmt in ("xlsx", "csv", "parquet", "jsonl"):
        doc = DocumentConfig(fileFormat=fmt, fileName=fmt, csvFlavour="plain")
        batches = []
        for seq, page in enumerate(pages):
            batch, c = rows_to_batch(page, doc, page=seq)
            batches.append(batch)
            if fmt == "csv":
                for k, n in c.items():
                    counts[k] = counts.get(k, 0) + n
        schema = unify_schemas([b.schema for b in batches])
        writer = open_writer(tmp / fmt, schema, doc)
        for b in batches:
            writer.write_batch(conform(b, schema))
        report = writer.close()
        out[fmt] = (read_back(report.path, fmt), schema.names)
    return out, counts


def read_back(path: Path, fmt: str) -> list[dict]:
    if fmt == "xlsx":
        ws = openpyxl.load_workbook(path).worksheets[0]
        rows = [[c.value for c in r] for r in ws.iter_rows()]
        head = [h.split(" (")[0] for h in rows[0]]
        return [dict(zip(head, r)) for r in rows[1:]]
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))
        return [dict(zip(rows[0], r)) for r in rows[1:]]
    if fmt == "parquet":
        return pq.read_table(path).to_pylist()
    # JSON Lines records end with "\n" only (U+0085, U+2028 are text)
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").split("\n") if line]


def unescape_ooxml(s: str) -> str:
    """What Excel shows for an xlsx string (ST_Xstring ``_xHHHH_`` escapes)."""
    return _OOXML_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), s)


def as_text(v: object) -> str | None:
    """Source text of a value rendered as text (strings fixed, JSON compact)."""
    if type(v) is str:
        return fix_unicode(v)
    if type(v) in (dict, list):
        return fix_unicode(json.dumps(v, sort_keys=True, separators=(",", ":"),
                                      ensure_ascii=False))
    return None


def number(v: object) -> Decimal | None:
    if type(v) in (int, Decimal):
        return Decimal(v)
    if type(v) is float and math.isfinite(v):
        return Decimal(repr(v))
    return None


def same(v: object, r: object, fmt: str) -> bool:
    """``r`` (read back from ``fmt``) equals source value ``v`` under the rules."""
    blank = r is None or (fmt == "csv" and r == "")
    if v is None or (type(v) is float and v != v):
        return blank or (fmt == "parquet" and type(r) is float and r != r)
    if type(r) is str and fmt == "xlsx":
        r = unescape_ooxml(r)
    text = as_text(v)
    if text is not None:
        if type(r) is dt.datetime and type(v) is str:  # F10: an offset date-time
            src = dt.datetime.fromisoformat(v)
            delta = abs((r.replace(tzinfo=r.tzinfo or UTC) - src).total_seconds())
            return delta < (0.0005001 if fmt == "xlsx" else 1e-6)
        if fmt in ("xlsx", "csv"):
            text = _BAD_XML.sub("", text)
        if fmt == "csv" and formula_like(text):  # E6; a negative number literal is no formula
            text = "'" + text
        if fmt == "csv" and type(v) is str and dt_text(v) is not None:
            return r == text or r == dt_text(v)
        return r == text or (blank and text == "")
    if fmt == "csv" and type(r) is str and r[:2] in ("'-", "'+"):
        r = r[1:]  # a number rendered into a text column is formula-escaped there (E6)
    if type(v) is bool:
        return r is v or r == ("true" if v else "false")
    if type(v) is float and math.isinf(v):
        return r == ("inf" if v > 0 else "-inf") or r == v
    want = number(v)
    if type(r) is str:  # a number as text: every digit, csv may quote-prefix "-1"
        try:
            return Decimal(r) == want
        except ArithmeticError:
            return False
    if type(r) in (int, float, Decimal) and type(r) is not bool:
        return number(r) == want  # exact: a number cell is never a rounded value
    return False


def dt_text(v: str) -> str | None:
    """csv text of an offset date-time in a datetime column (UTC export zone)."""
    try:
        return dt.datetime.fromisoformat(v).astimezone(UTC).isoformat()
    except ValueError:
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(rows=rows_st, split=st.integers(1, 4))
# a float page, then a decimal page that is its double: Arrow's decimal -> double cast is off by
# one ulp (5.9667340020000005e-09), so the merge goes through the decimal's text
@example(rows=[{"a": None, "b": None, "n": 0.0},
               {"a": None, "b": None, "n": Decimal("5.966734002E-9")}], split=2)
def test_every_value_reads_back_equal_under_the_rules_or_counted(tmp_path_factory, rows, split):
    src = sent(rows)
    pages = [src[i::split] for i in range(split)]
    pages = [p for p in pages if p]
    order = [r for p in pages for r in p]
    files, counts = write_all(pages, Path(tmp_path_factory.mktemp("prop")))
    for fmt, (back, names) in files.items():
        assert len(back) == len(order), fmt
        for i, (s, b) in enumerate(zip(order, back)):
            for name in names:
                v, r = s.get(name), b.get(name)
                assert same(v, r, fmt), (fmt, name, i, v, r)
    for name in ("a", "b", "t"):
        lone = sum(1 for r in src if type(r.get(name)) is str and fix_unicode(r[name]) != r[name])
        nested = sum(1 for r in src if type(r.get(name)) in (dict, list)
                     and as_text(r[name]) != json.dumps(r[name], sort_keys=True,
                                                        separators=(",", ":"),
                                                        ensure_ascii=False))
        assert counts.get(f"replaced_invalid_unicode:{name}", 0) == lone + nested
