"""Declared columns missing from rows (sinks.values, sinks.fastpage): a
column in no row of the first page fails naming it and the fields the rows
have, unless ``allowMissingColumns``; a field missing from some rows is
counted (``missing_field``), and the fast decode answers only when it can
prove every row has every declared field."""
from __future__ import annotations

import orjson
import pytest

from plait.errors import PermanentError
from plait.spec import DocumentConfig
from sinks.fastpage import decode_page
from sinks.values import rows_to_batch

COLUMNS = [{"fieldName": "id", "type": "int"}, {"fieldName": "label", "type": "string"}]


def doc(**over) -> DocumentConfig:
    return DocumentConfig(fileFormat="csv", columns=COLUMNS, **over)


def body(rows: list) -> bytes:
    return orjson.dumps({"code": 200, "data": {"status": "finish", "rows": rows,
                                               "runtimeContext": {}}})


def test_a_column_in_no_row_of_the_first_page_fails_naming_it_and_the_fields():
    rows = [{"id": 1, "lable": "a"}, {"id": 2, "lable": "b", "extra": 0}]
    with pytest.raises(PermanentError) as err:
        rows_to_batch(rows, doc(), page=0)
    msg = str(err.value)
    assert "'label'" in msg and "'id', 'lable', 'extra'" in msg and "'id' is" not in msg


def test_allowed_or_later_pages_give_an_empty_column_counted():
    """Only the file's first page (page 0 of partition 0) must show every declared column: page
    0 of a later partition follows the rows before it, as page 3 of one partition does."""
    rows = [{"id": 1}, {"id": 2}]
    for d, page, partition in ((doc(allowMissingColumns=True), 0, 0), (doc(), 3, 0),
                               (doc(), 0, 1)):
        batch, quality = rows_to_batch(rows, d, page=page, partition=partition)
        assert batch.column(1).null_count == 2
        assert quality == {"missing_field": 2, "missing_field:label": 2}


def test_a_field_missing_in_some_rows_is_counted_and_a_null_is_not():
    rows = [{"id": 1, "label": None}, {"id": None}, {"label": "x"}]
    _, quality = rows_to_batch(rows, doc(), page=0)
    assert quality == {"missing_field": 2, "missing_field:id": 1, "missing_field:label": 1}
    assert rows_to_batch(rows, DocumentConfig(fileFormat="csv"), page=0)[1] == {}


@pytest.mark.parametrize("rows, fast", [
    ([{"id": 1, "label": "a"}, {"id": None, "label": None}], True),  # nulls, every key there
    ([{"id": 1, "label": "a"}, {"id": 2}], False),                   # a key missing
    ([{"id": 1, "label": "id"}, {"label": "x, \"id\": 3"}], False),  # "id" only in values
    ([{"id": 1, "label": None}, {"id": 2, "label": None}], True),
])
def test_fast_decode_answers_only_when_every_row_has_every_declared_field(rows, fast):
    got = decode_page(body(rows), doc())
    assert (got is not None) == fast
    exact, quality = rows_to_batch(rows, doc(), page=1)
    if got is not None:
        assert got[1].equals(exact) and quality == {}
