"""Columns without a type take the fast page decode and give the same file.

Each case is a list of data-API pages (their ``rows`` as JSON text). Every
case is exported in every format three ways through the worker's own path
(``parse_body`` -> ``page_shard`` -> shard in a store -> ``build_file``):

- *slow*: each page decoded the exact way (``parse_body`` without the doc,
  then ``rows_to_batch``), as every page without declared types was;
- *untyped*: the pages decoded with the doc (the fast decode takes what it
  can prove), once with the columns as the contract writes them
  (``headerName`` + ``fieldName``, no type) and once without columns;
- *typed*: the columns declared with the types the slow file holds
  (``int64`` -> ``int``, ``string`` -> ``string``, ``timestamp`` ->
  ``datetime``, ...; mixed and all-null columns stay without a type).

The files must be byte-identical (xlsx: the same cells, types, formats and
sheet settings, read with openpyxl) with the same quality counts, or all
three ways fail with the same message. The corpus: the fidelity cases F1..F12
and E-cases, columns whose type changes on page 3, mixed-type first pages,
missing fields, a slice of flights, and generated pages (hypothesis, the
fidelity property test's values).
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pyarrow as pa
import pytest
from engine_compare import read_all
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sinks_fidelity_cases import EXTREMES, F11, PAGES_F7
from test_sinks_fidelity_property import rows_st, sent

from plait.errors import PermanentError
from plait.spec import ColumnSpec, DocumentConfig
from sinks.store import LocalStore
from sinks.values import dumps_rows, is_mixed
from streams.datasource import parse_body
from streams.files import build_file, page_shard
from streams.layout import shard_key

FORMATS = ["csv", "jsonl", "parquet", "xlsx"]


def flights_pages() -> list[str]:
    """Three pages of 40 flights rows as the demo data API serves them."""
    from producers.demo_api import flights

    rows = flights().slice(0, 120).to_pylist()
    return [json.dumps(rows[i:i + 40]) for i in range(0, 120, 40)]


def changes_on_page_3(first: str, later: str) -> list[str]:
    """Pages 1-2 hold ``{"id", "v": first}`` rows, page 3 ``v: later``."""
    page = lambda v, base: json.dumps([{"id": base + i, "v": json.loads(v)} for i in range(3)])  # noqa: E731
    return [page(first, 0), page(first, 3), page(later, 6)]


CASES: dict[str, list[str]] = {
    "int then float": changes_on_page_3("1", "2.5"),
    "int then string": changes_on_page_3("1", '"N/A"'),
    "date then free text": changes_on_page_3('"2013-01-01T10:00:00Z"', '"soon"'),
    "nulls then values": changes_on_page_3("null", "7"),
    "nulls then text": changes_on_page_3("null", '"x"'),
    "bool then yes": changes_on_page_3("true", '"yes"'),
    "int then beyond 2**53": changes_on_page_3("1", str(2**53 + 1)),
    "text then number": changes_on_page_3('"a"', "3"),
    "mixed first page": ['[{"v": 1}, {"v": "a"}, {"v": 2.5}, {"v": true}, {"v": "=1+1"}]',
                         '[{"v": 2}, {"v": 3}]', '[{"v": "b"}]'],
    "mixed int and bool first page": ['[{"v": 1, "w": true}, {"v": false, "w": 0}]',
                                      '[{"v": 2, "w": false}]'],
    "missing fields": ['[{"a": 1, "b": "x"}, {"a": 2}, {"c": true, "a": 3}]',
                       '[{"b": "y"}, {"d": null}]', '[{"a": 4, "b": "z", "c": false, "d": 5}]'],
    "first row without a field": ['[{"a": 1}, {"a": 2, "b": "x"}, {"b": "y", "a": null}]',
                                  '[{"b": null, "a": 3}]'],
    "empty page between": ['[{"a": 1}]', "[]", '[{"a": 2}]'],
    "keys in another order": ['[{"a": 1, "b": "x"}, {"b": "y", "a": 2}]',
                              '[{"b": "z", "a": 3}]'],
    "escaped keys": ['[{"a\\u0062": 1}, {"ab": 2}]', '[{"ab": 3}]'],
    "flights": flights_pages(),
    # the fidelity cases (docs/fidelity-rules.md F1..F12, docs/fidelity.md E*)
    "F1 lone surrogate": ['[{"memo": "ok"}, {"memo": "cut \\ud83d"}]', '[{"memo": "fine"}]'],
    "F2 extreme doubles": [EXTREMES],
    "F3 sub-second datetimes": ['[{"t": "2024-01-01T23:59:59.999999Z"}, '
                                '{"t": "2024-01-01T10:00:00.5Z"}]'],
    "F4 beyond year 9999": ['[{"t": "2020-01-01T00:00:00Z"}]',
                            '[{"t": "9999-12-31T23:00:00-05:00"}, {"t": "2020-01-01T00:00:00Z"}]'],
    "F5 zero dates": ['[{"d": "0000-00-00"}, {"d": "2024-02-29"}]'],
    "F6 wall times": ['[{"t": "2015-03-08 02:30:00"}, {"t": "2015-11-01 01:00:10"}]'],
    "F7 mixed across pages": PAGES_F7,
    "F8 ints with nulls": ['[{"dep_time": 517}, {"dep_time": null}]', '[{"dep_time": 533}]'],
    "F9 shortest numbers": ['[{"x": 1.0}, {"x": 2.5}, {"x": 1e16}, {"x": 5e-324}]'],
    "F10 offsets": ['[{"th": "2013-01-01T10:00:00Z"}, {"th": "2013-01-01T05:00:00-05:00"}]',
                    '[{"th": "2013-01-01T11:00:00Z"}]', '[{"th": "2013-01-01T10:00:00"}]'],
    "F11 decimals": [F11, '[{"amount": 1}]'],
    "F12 early dates": ['[{"t": "1899-12-31T00:00:00Z"}, {"t": "1900-01-01T00:00:00Z"}]'],
    "E3 long text": [json.dumps([{"note": "ab" * 20000}])],
    "E4 control characters": ['[{"memo": "kr 400\\u0016000"}, {"memo": "tab\\u000bvt"}, '
                              '{"memo": "nul\\u0000x"}]'],
    "E5 cjk": ['[{"city": "上海", "name": "王芳"}]'],
    "E6 formulas": ['[{"v": "=HYPERLINK(\\"http://x.invalid\\",\\"y\\")", "n": -12.5}, '
                    '{"v": "+1+1", "n": 1}, {"v": "@SUM(A1)"}, {"v": "\\t=1"}]'],
    "E8 long ids": ['[{"order_id": 1234567890123456789, "card": "6222020200112233445"}]'],
    "E9 numbers as text": ['[{"zip": "00123", "code": "1E5", "ver": "1.10"}]'],
    "E11 nan and infinities": ['[{"x": NaN}, {"x": Infinity}, {"x": -Infinity}, {"x": null}]'],
    "E12 null and empty": ['[{"a": null, "b": ""}]'],
    "E13 booleans": ['[{"active": true, "flag": "TRUE"}, {"active": false, "flag": "no"}]'],
    "E14 nested": ['[{"attrs": {"k": 1, "a": [2]}, "tags": ["a", "b"]}]'],
    "E15 quotes and newlines": ['[{"t": "line1\\nline2", "q": "say \\"hi\\", ok"}]'],
    "lone carriage return": ['[{"t": "a\\rb", "n": 1}]'],
}

#: Cases whose untyped pages the fast decode must take (all of the first
#: two pages): what shows the untyped path is the fast one.
TAKEN_FIRST_PAGES = ["int then float", "int then string", "date then free text",
                     "bool then yes", "int then beyond 2**53", "text then number",
                     "keys in another order", "flights"]


def body(rows_text: str, last: bool) -> bytes:
    """A data-API answer carrying ``rows_text``."""
    status = "finish" if last else "continue"
    return ('{"code":200,"message":"ok","data":{"status":"%s","runtimeContext":{"p":1},'
            '"rows":%s,"total":9}}' % (status, rows_text)).encode()


class Exporter:
    """Writes pages to a file as a worker does, into one store."""

    def __init__(self, tmp: Path) -> None:
        self.store = LocalStore(tmp / "store", "http://127.0.0.1:1", "secret")
        self.tasks = itertools.count()
        #: pages the fast decode took, per export
        self.taken: list[int] = []

    def export(self, bodies: list[bytes], doc: DocumentConfig, fast: bool) -> tuple:
        """``(file bytes or xlsx cells, quality)`` of ``bodies`` under ``doc``,
        each page decoded with the doc (``fast``) or the exact way; or
        ``("error", message)``."""
        task = f"t{next(self.tasks)}"
        taken = 0
        try:
            for seq, b in enumerate(bodies):
                page = parse_body(seq, b, doc if fast else None)
                taken += page.batch is not None
                shard, _, _ = page_shard(page.rows, doc, seq, page.batch)
                self.store.put_bytes(shard_key(task, seq), shard)
            built = build_file(self.store, task, len(bodies) - 1, doc)
        except PermanentError as exc:
            return "error", str(exc)
        finally:
            self.taken.append(taken)
        path = self.store.root / built.key
        content = read_all(path) if doc.fileFormat == "xlsx" else path.read_bytes()
        return content, built.quality


#: Arrow type of the slow file's column -> the declared type that reads so.
DECLARED = {pa.int64(): "int", pa.float64(): "float", pa.string(): "string",
            pa.bool_(): "bool"}


def inferred_types(bodies: list[bytes], doc: DocumentConfig) -> list[ColumnSpec] | None:
    """The columns of the slow path's unified schema declared with the types
    it inferred (mixed and all-null ones, and numbers it wrote as text,
    without a type); None when a page is refused."""
    from sinks.values import rows_to_batch, unify_schemas

    try:
        pages = [rows_to_batch(parse_body(s, b).rows, doc) for s, b in enumerate(bodies)]
    except PermanentError:
        return None
    schemas = [batch.schema for batch, _ in pages]
    texts = {k.split(":", 1)[1] for _, counts in pages for k in counts
             if k.startswith("converted_to_text:")}
    specs = []
    for f in unify_schemas(schemas):
        kind = DECLARED.get(f.type)
        if pa.types.is_timestamp(f.type):
            kind = "datetime"
        elif pa.types.is_decimal(f.type):
            kind = "decimal"
        if is_mixed(f) or f.name in texts or all((s.field(f.name).metadata or {}) for s in schemas
                              if f.name in s.names):
            kind = None  # mixed, or all null on every page
        specs.append(ColumnSpec(fieldName=f.name, headerName=f.name, type=kind))
    return specs


def contract(bodies: list[bytes], fmt: str) -> DocumentConfig:
    """The doc listing every field as the contract writes columns."""
    names: dict = {}
    for b in bodies:
        for r in parse_body(0, b).rows:
            names.update(dict.fromkeys(r))
    cols = [ColumnSpec(fieldName=n, headerName=n) for n in names] or None
    return DocumentConfig(fileFormat=fmt, fileName="f", columns=cols)


def assert_same_files(exporter: Exporter, pages: list[str], fmt: str) -> None:
    """The three ways (module docstring) give the same file."""
    bodies = [body(p, i == len(pages) - 1) for i, p in enumerate(pages)]
    bare = DocumentConfig(fileFormat=fmt, fileName="f")
    listed = contract(bodies, fmt)
    for doc in (bare, listed):
        slow = exporter.export(bodies, doc, fast=False)
        assert exporter.export(bodies, doc, fast=True) == slow, (doc.columns, pages)
    typed = inferred_types(bodies, listed)
    if typed is not None:
        slow = exporter.export(bodies, listed, fast=False)
        doc = listed.model_copy(update={"columns": typed})
        assert exporter.export(bodies, doc, fast=True) == slow, (typed, pages)


@pytest.fixture
def exporter(tmp_path: Path) -> Exporter:
    return Exporter(tmp_path)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(CASES))
def test_untyped_typed_and_slow_files_are_the_same(exporter, case, fmt):
    assert_same_files(exporter, CASES[case], fmt)


@pytest.mark.parametrize("case", TAKEN_FIRST_PAGES)
def test_untyped_pages_take_the_fast_decode_until_a_column_stops_fitting(exporter, case):
    pages = CASES[case]
    bodies = [body(p, i == len(pages) - 1) for i, p in enumerate(pages)]
    for doc in (DocumentConfig(fileFormat="csv", fileName="f"), contract(bodies, "csv")):
        exporter.taken.clear()
        exporter.export(bodies, doc, fast=True)
        assert exporter.taken[0] >= 2, (case, doc.columns)


def test_rows_missing_a_declared_field_decline_only_with_columns(exporter):
    """Without columns a missing field is just absent; a declared column
    missing from a row is the exact path's to count (``missing_field``)."""
    pages = CASES["missing fields"]
    bodies = [body(p, i == len(pages) - 1) for i, p in enumerate(pages)]
    exporter.taken.clear()
    exporter.export(bodies, DocumentConfig(fileFormat="csv", fileName="f"), fast=True)
    assert exporter.taken[0] >= 2
    exporter.taken.clear()
    exporter.export(bodies, contract(bodies, "csv"), fast=True)
    assert exporter.taken[0] <= 1  # the two pages missing a declared field decline


#: Page 3 of "int then float" with ``0.10`` (a Decimal to the exact path, F11) for ``2.5``.
INT_THEN_DECIMAL = [*CASES["int then float"][:2], CASES["int then float"][2].replace("2.5", "0.10")]


@pytest.mark.parametrize("pages", [INT_THEN_DECIMAL, CASES["int then beyond 2**53"]])
def test_page_3_changing_a_column_type_falls_back_for_that_page_only(exporter, pages):
    bodies = [body(p, i == len(pages) - 1) for i, p in enumerate(pages)]
    for seq, b in enumerate(bodies):
        page = parse_body(seq, b, DocumentConfig(fileFormat="csv", fileName="f"))
        assert (page.batch is not None) == (seq < 2)


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=rows_st, split=st.integers(1, 4))
def test_generated_pages_give_the_same_files(tmp_path_factory, rows, split):
    src = sent(rows)
    pages = [dumps_rows(src[i::split])[0].decode() for i in range(split) if src[i::split]]
    exporter = Exporter(Path(tmp_path_factory.mktemp("untyped")))
    for fmt in FORMATS:
        assert_same_files(exporter, pages, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_int_pages_then_a_decimal_page_give_the_declared_decimal_file(exporter, fmt):
    """Integer pages then ``0.10`` (a Decimal, F11): without a type the column's decimal is as
    narrow as a declared ``decimal`` column's (each int page by its digits, not as any int64),
    so declaring the inferred types gives the same parquet file (decimal128(3, 2))."""
    assert_same_files(exporter, INT_THEN_DECIMAL, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("pages", [['[{"v": 0.10}]', '[{"v": 2.5}]'],
                                   ['[{"v": 2.5}]', '[{"v": 0.10}, {"v": -0.0}]'],
                                   ['[{"v": 1}, {"v": 0.10}]', '[{"v": 2.5}]']])
def test_decimals_a_double_holds_and_floats_on_other_pages_give_the_one_page_file(
        exporter, fmt, pages):
    """F11: ``0.10`` next to ``2.5`` is a float column; so it is when the page boundary falls
    between them (it was a mixed text column then: the file changed with the page size)."""
    split = [body(p, i == len(pages) - 1) for i, p in enumerate(pages)]
    rows = ", ".join(p.strip()[1:-1] for p in pages)
    whole = [body(f"[{rows}]", True)]
    doc = DocumentConfig(fileFormat=fmt, fileName="f")
    assert exporter.export(split, doc, fast=False) == exporter.export(whole, doc, fast=False)
