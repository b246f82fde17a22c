"""The fast page decode (``sinks.fastpage``; docs/fidelity-rules.md,
"Fast page decode") gives exactly what the exact path gives (``loads_exact`` +
``rows_to_batch``: batch, schema with metadata, counts, envelope) or declines.
The whole sink corpus is also checked page by page (``fast_compare``, wired
in conftest); here: generated answer bodies, hand-picked nasty ones, the
flights demo pages, and that the check fails when the fast decode is wrong."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from fast_compare import check_body
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sinks.fastpage as F
from plait.spec import DocumentConfig

UTC_TEXTS = ["2013-01-01T10:00:00Z", "2024-02-29T23:59:59Z", "1000-01-01T00:00:00Z",
             "9998-12-31T23:59:59Z"]
BAD_TIMES = ["2013-02-30T10:00:00Z", "2013-01-01T24:00:00Z", "2013-01-01T10:00:60Z",
             "0999-12-31T23:00:00Z", "9999-12-31T23:00:00Z", "2013-01-01T10:00:00+01:00",
             "2013-01-01 10:00:00", "2013-01-01T10:00:00.5Z", "0000-00-00", "",
             "2013-01-01t10:00:00z", "2013-01-01T10:00:00Z\\n"]
#: JSON literals, spelled as a data API may spell them.
LITERALS = ["0", "-0", "1", "-1", "9007199254740992", "9007199254740993", "-9007199254740993",
            "9223372036854775807", "9223372036854775808", "-9223372036854775808",
            "-9223372036854775809", "18446744073709551616", "1.0", "1.5", "0.10", "1e2", "1E+5",
            "-0.0", "1e400", "NaN", "Infinity", "-Infinity", "true", "false", "null", "{}",
            "[]", "[1]", '{"k":1}', '"x]y"', '"a\\u0000b"', '"\\ud800"', '"\\udc00x"',
            '"\\ud83d\\ude00"', '"\\/\\"\\\\\\b\\f\\n\\r\\t"', '"\\u00e9"', '"é"', '"\\u2028"',
            '"12"', '" "', '""', '"N/A"', '"=1+2"']
#: Number literals around the doubles' fast decode (``sinks.fastpage._plain_doubles``).
FLOAT_LITERALS = ["1.0", "-0.0", "0.0", "-0", "0.5", "2.50", "0.10", "1.00", "1e2", "1E-7",
                  "2.5e+3", "0.30000000000000004", "0.1", "123456789012345.0", "1234567890123456.0",
                  "12345678.12345678", "9007199254740993", "9007199254740992", "17", "-3",
                  "1.7976931348623157e308", "5e-324", "NaN", "-Infinity", "100.0", "0.000001"]
KEYS = ['"a"', '"b"', '"c"', '"\\u0061"', '"d"', '"A"']


def doc_of(columns: list[tuple[str, str]], tz: str = "UTC", fmt: str = "csv") -> DocumentConfig:
    return DocumentConfig.model_validate({
        "fileName": "f", "fileFormat": fmt, "timeZone": tz,
        "columns": [{"fieldName": n, "type": t} for n, t in columns]})


def envelope(rows_text: str, tail: str = ',"total":12') -> bytes:
    return ('{"code":200,"message":"ok","data":{"status":"continue","runtimeContext":'
            '{"lastId":7,"x":0.10},"rows":%s%s}}' % (rows_text, tail)).encode()


EDGE_INTS = [2**53, -(2**53), 2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), 2**63, 2**64]
STRING_LITERALS = ['"x]y"', '"a\\u0000b"', '"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"',
                   '"\\/\\"\\\\\\b\\f\\n\\r\\t"', '"\\u00e9"', '"\\u2028"', '""', '" "']
#: Per declared type: values of that type, edges of what the fast decode takes.
GOOD = {"int": st.one_of(st.integers(-(2**53), 2**53).map(str),
                         st.sampled_from(EDGE_INTS).map(str), st.just("null")),
        "string": st.one_of(st.text(max_size=8).map(json.dumps),
                            st.text(max_size=8).map(lambda s: json.dumps(s, ensure_ascii=False)),
                            st.sampled_from(STRING_LITERALS), st.just("null")),
        "datetime": st.sampled_from([json.dumps(t) for t in UTC_TEXTS + UTC_TEXTS + BAD_TIMES]
                                    + ["null"]),
        "bool": st.sampled_from(["true", "false", "null"]),
        # untyped doubles: what json.dumps writes, and spellings the exact path reads otherwise
        "float": st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
                           st.sampled_from(FLOAT_LITERALS), st.just("null"))}
ANY = st.one_of(st.sampled_from(LITERALS), st.sampled_from([json.dumps(t) for t in BAD_TIMES]),
                st.integers(-(2**64), 2**64).map(str),
                st.floats(allow_nan=False, allow_infinity=False).map(json.dumps))


@st.composite
def pages(draw):
    """(body, doc): columns a, b, c declared int/string/datetime or without
    a type (some left out, or no columns at all), rows mostly of values
    fitting their column (an untyped one: of one kind, bool too), the rest
    anything: missing, extra and repeated keys, escaped keys, non-object
    rows."""
    types = {k: draw(st.sampled_from(["int", "string", "datetime", "bool", "float"]))
             for k in "abc"}
    columns = [(k, None if t in ("bool", "float") or not draw(st.integers(0, 2)) else t)
               for k, t in types.items() if draw(st.integers(0, 5))]
    if not draw(st.integers(0, 4)):
        columns = []
    rows = []
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.integers(0, 30)) == 0:
            rows.append(draw(st.sampled_from(["null", "1", "[]", '"x"'])))
            continue
        members = []
        for k in "abc":
            if draw(st.integers(0, 9)):
                value = draw(GOOD[types[k]] if draw(st.integers(0, 5)) else ANY)
                members.append(f'"{k}":{value}')
        if not draw(st.integers(0, 6)):
            members.insert(draw(st.integers(0, len(members))),
                           f"{draw(st.sampled_from(KEYS))}:{draw(ANY)}")
        sep = draw(st.sampled_from([",", ", "]))
        rows.append("{" + sep.join(members) + "}")
    rows_text = "[" + draw(st.sampled_from([",", ", "])).join(rows) + "]"
    tail = draw(st.sampled_from([',"total":12', "", ',"total":null', ',"x":[1],"total":3']))
    tz = draw(st.sampled_from(["UTC", "America/New_York", "Asia/Kolkata"]))
    fmt = draw(st.sampled_from(["csv", "parquet", "xlsx"]))
    return envelope(rows_text, tail), doc_of(columns, tz, fmt)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages())
def test_generated_pages_decode_fast_to_the_exact_batch_or_decline(page):
    # given an answer body and a doc; when decoded both ways, then the same or declined
    body, doc = page
    check_body(body, doc)


NASTY = [
    ('[{"a":1,"a":2}]', [("a", "int")]),  # repeated key: the last wins in the exact path
    ('[{"a":"x","a":"2013-01-01T10:00:00Z"}]', [("a", "datetime")]),
    ('[{"a":1.0}]', [("a", "int")]),  # F8: 1.0 is a float in the source
    ('[{"a":1e2}]', [("a", "int")]),
    ('[{"a":9007199254740993}]', [("a", "int")]),  # E8: beyond 2**53 -> text
    ('[{"a":9223372036854775808}]', [("a", "int")]),  # beyond int64
    ('[{"a":NaN}]', [("a", "int")]),
    ('[{"a":"\\ud800"}]', [("a", "string")]),  # F1: lone surrogate, counted
    ('[{"a":"x\\u0000y","\\u0061":"z"}]', [("a", "string")]),  # escaped key is "a" too
    ('[{"a":true}]', [("a", "int")]),
    ('[{"a":1}]', [("a", "string")]),
    ('[{"a":"1"}]', [("a", "int")]),
    ('[null]', [("a", "int")]),  # a non-object row: PermanentError in the exact path
    ('[1]', [("a", "int")]),
    ('[{"a":1},]', [("a", "int")]),  # not JSON
    ('[{"a":01}]', [("a", "int")]),
    ('[{"a":"2013-02-30T10:00:00Z"}]', [("a", "datetime")]),  # F5: invalid date, counted
    ('[{"a":null}]', [("a", "datetime")]),
    ('[{"a":"x]"}]', [("a", "string")]),
    ('[{"a":"\x01"}]', [("a", "string")]),  # a raw control character: not JSON
    ('[{"a":1}]', [("a", "float")]),  # a type the fast decode does not read
    ('[]', [("a", "int"), ("b", "datetime")]),
    ('[{"b":1,"a":2,"z":[1,{"q":null}]}]', [("a", "int"), ("b", "int")]),
    # columns without a type: the first row's type, checked on every row
    ('[{"a":1},{"a":2.5}]', [("a", None)]),
    ('[{"a":1},{"a":"x"}]', [("a", None)]),
    ('[{"a":true},{"a":"yes"}]', [("a", None)]),
    ('[{"a":"2013-01-01T10:00:00Z"},{"a":"soon"}]', [("a", None)]),
    ('[{"a":"soon"},{"a":"2013-01-01T10:00:00Z"}]', [("a", None)]),
    ('[{"a":"2013-01-01T10:00:00+05:30"}]', [("a", None)]),
    ('[{"a":"2013-01-01 10:00:00"},{"a":"2013-01-02"}]', [("a", None)]),
    ('[{"a":"\u0662\u0660\u0661\u0663-01-01T10:00:00Z"}]', [("a", None)]),  # Unicode digits
    ('[{"a":null},{"a":"2013-01-01"}]', [("a", None)]),  # Arrow infers a timestamp
    ('[{"a":null},{"a":1.5}]', [("a", None)]),
    ('[{"a":null},{"a":[1]}]', [("a", None)]),
    ('[{"b":1},{"a":2,"b":3},{"c":"x","a":4}]', [("a", None), ("b", None)]),
    ('[{"a":{"q":1}}]', [("a", None)]),
    ('[{"a":"}"},{"a":"x"}]', [("a", None)]),  # the first row holds a "}"
    ('[{"a":1,"b":null},{"b":true,"a":2}]', [("b", None), ("a", None)]),
    ('[{"a":1},{"z":-Inf}]', [("a", None)]),
    ('[{"a":1},{"z":"x"},{"z":2}]', [("a", None)]),
    ('[{"a":1}]', [("a", None), ("b", None)]),
    ('[{"a":9007199254740993}]', [("a", None)]),
    # untyped doubles: taken only when every literal is a float to the exact path
    ('[{"a":1.5},{"a":2}]', [("a", None)]),
    ('[{"a":1.0},{"a":-0.0},{"a":null}]', [("a", None)]),
    ('[{"a":1.5},{"a":-0}]', [("a", None)]),
    ('[{"a":1.5},{"a":0.10}]', [("a", None)]),
    ('[{"a":2.50}]', [("a", None)]),
    ('[{"a":1.5},{"a":1e2}]', [("a", None)]),
    ('[{"a":0.5},{"a":9007199254740993}]', [("a", None)]),
    ('[{"a":0.30000000000000004}]', [("a", None)]),
    ('[{"a":1.5},{"a":NaN}]', [("a", None)]),
    ('[{"a":1.5},{"a":"x"}]', [("a", None)]),
    ('[{"a":1.5},{"a":true}]', [("a", None)]),
    ('[{"a":null},{"a":1.5},{"a":2}]', [("a", None)]),
    ('[{"a":1.5,"b":"-0x"}]', [("a", None), ("b", None)]),
    ('[{"a":1,"z":0.10}]', [("a", "int")]),  # an undeclared Decimal: not written
    # a declared column with nulls: each null must stand as an explicit key
    ('[{"a":null,"b":1},{"b":2}]', [("a", "int"), ("b", "int")]),
    ('[{"a":1,"b":"x\\",\\"a\\":null"},{"b":"y"}]', [("a", "int"), ("b", "string")]),
    ('[{"a":1},{"x\\"a":null}]', [("a", "int")]),  # a key ending in the declared one
    ('[{"a" : null,"b":1},{"a":2,"b":null}]', [("a", "int"), ("b", "int")]),
    ('[{"b":null,"a":null},{"a":3,"b" :null}]', [("a", "int"), ("b", "int")]),
]


@pytest.mark.parametrize("rows_text,columns", NASTY)
def test_nasty_pages_decode_fast_to_the_exact_batch_or_decline(rows_text, columns):
    for tail in (',"total":12', ',"rows":[{"a":5}]', ',"runtimeContext":{"lastId":9}',
                 ',"runtimeContext":{"lastId":9},"y":[2]'):  # the last "]" is not the rows
        for cols in (columns, [(n, None) for n, _ in columns], []):  # typed, untyped, none
            check_body(envelope(rows_text, tail), doc_of(cols))


def test_envelopes_the_exact_path_reads_otherwise_are_declined():
    doc = doc_of([("a", "int")])
    rows = '[{"a":1}]'
    bodies = [
        envelope(rows).replace(b'"code":200', b'"code":200.0'),
        envelope(rows).replace(b'"rows":', b'"rows":\n'),
        b"\xef\xbb\xbf" + envelope(rows),  # BOM
        envelope(rows, ',"note":"-918273645546372819"'),  # the marker's digits
        envelope(rows).replace(b'"data":{', b'"data":{"rows":[{"a":3}],'),  # rows twice
        b'{"code":200,"data":{"status":"finish","rows":[{"a":1}]},"data":{"status":"finish",'
        b'"rows":[{"a":2}]}}',
        envelope(rows).replace(b'"status":"continue"', b'"status":"done"'),
        envelope(rows).replace(b'{"code"', b'[{"code"') + b"]",
    ]
    for body in bodies:
        check_body(body, doc)


def test_a_last_page_whose_cursor_no_json_can_hold_is_compared_too():
    # given a finish page whose cursor holds NaN (dropped: it is never sent back)
    body = b'{"code":200,"data":{"status":"finish","runtimeContext":{"c":NaN},"rows":[{"a":"x"}]}}'
    # then both decodes agree (the comparison raised ValueError on the cursor)
    assert check_body(body, doc_of([("a", "string")]))


def test_flights_pages_take_the_fast_decode():
    from ops.demo import FLIGHT_COLUMNS
    from producers.demo_api import answer, flights

    flights()
    doc = doc_of(FLIGHT_COLUMNS, "UTC")
    for last in (0, 5_000, 330_000):
        assert check_body(answer({}, last, 5_000), doc), last


def test_the_check_fails_when_the_fast_decode_is_wrong(monkeypatch):
    # given a fast decode that gets one cell wrong
    real = F._typed

    def off_by_one(structs, doc, first):
        batch = real(structs, doc, first)
        return pa.RecordBatch.from_arrays(
            [pa.compute.add(batch.column(0), 1)], schema=batch.schema)

    monkeypatch.setattr(F, "_typed", off_by_one)
    # then the comparison catches it
    with pytest.raises(AssertionError):
        check_body(envelope('[{"a":1}]'), doc_of([("a", "int")]))


#: Bodies Arrow's reader took and the exact path refuses or reads otherwise
#: (found by trying to break the fast decode): invalid UTF-8, CESU-8 surrogate
#: bytes (F1, counted in the exact path), non-finite numbers spelled Arrow's
#: way, invalid UTF-8 in an ignored key, and objects nested in an ignored field.
BROKEN_ONCE = [
    (b'[{"a":"x\xffy"}]', "string"),
    (b'[{"a":"x\xc0\xafy"}]', "string"),
    (b'[{"a":"x\xe2\x82"}]', "string"),
    (b'[{"a":"x\xf4\x90\x80\x80"}]', "string"),
    (b'[{"a":"x\xed\xa0\x80y"}]', "string"),
    (b'[{"a":"x","z\xff":1}]', "string"),
    (b'[{"a":1,"z":-NaN}]', "int"),
    (b'[{"a":1,"z":Inf}]', "int"),
    (b'[{"a":1,"z":-Inf}]', "int"),
    (b'[{"a":1,"z":NaN}]', "int"),
    (b'[{"a":1,"z":' + b'{"z":' * 600 + b"1" + b"}" * 600 + b"}]", "int"),
    (b'[{"a":1,"z":{"q":2}}]', "int"),
]


@pytest.mark.parametrize("rows,kind", BROKEN_ONCE)
def test_bodies_arrow_reads_and_python_does_not_are_declined(rows, kind):
    body = b'{"code":200,"data":{"status":"finish","rows":' + rows + b"}}"
    for doc in (doc_of([("a", kind)]), doc_of([("a", None)]), doc_of([])):
        assert F.decode_page(body, doc) is None
        check_body(body, doc)


def test_a_page_nested_too_deeply_is_a_permanent_error_naming_the_page():
    from plait.errors import PermanentError
    from streams.datasource import parse_body

    body = (b'{"code":200,"data":{"status":"finish","rows":[{"a":1,"z":' + b'{"z":' * 5000
            + b"1" + b"}" * 5000 + b"}]}}")
    with pytest.raises(PermanentError, match="page 3: .*too deeply"):
        parse_body(3, body)


def test_the_envelope_is_read_apart_from_the_rows_and_reused():
    """``read_envelope`` gives the exact envelope without decoding a row (the
    fetcher asks for the next page with its cursor), also for rows the fast
    decode then declines; ``decode_page`` takes it instead of reading it again."""
    doc = doc_of([("a", "int")])
    body = envelope('[{"a":1},{"a":2}]')
    env, start, end = F.read_envelope(body)
    assert body[start:end] == b'{"a":1},{"a":2}'
    assert env == {"code": 200, "message": "ok", "data": {
        "status": "continue", "runtimeContext": {"lastId": 7, "x": F.loads_exact(b"0.10")},
        "rows": [F._MARK], "total": 12}}
    got = F.decode_page(body, doc, (env, start, end))
    assert got is not None and got[0] is env and got[1].column(0).to_pylist() == [1, 2]
    assert got[0]["data"]["rows"] == []
    declined = envelope('[{"a":1.5}]')
    assert F.read_envelope(declined)[0]["data"]["runtimeContext"]["lastId"] == 7
    assert F.decode_page(declined, doc, F.read_envelope(declined)) is None
    for bad in (b'{"code":200,"data":{"rows":[1]}, "x":[2]}', b'{"code":200,\n"data":{"rows":[]}}',
                b'{"code":200,"data":{"rows":[1]]}}', b'not json "rows":[]'):
        assert F.read_envelope(bad) is None, bad


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([":", ",", "[", " ", "\t", "\n", "\r", "\f", "\v", "-", "NaN",
                                 "Inf", "Infinity", "N", "a", "I", "n", "f", '"', "{", "}",
                                 "1", "x"]), max_size=12))
def test_the_non_finite_scan_off_the_gil_finds_what_pythons_regex_finds(parts):
    """``_finite`` scans for ``NaN``/``Inf`` numbers with Arrow's regex
    kernel (the GIL released): it declines exactly where ``_NON_FINITE`` finds one."""
    text = "".join(parts).encode()
    assert F._finite(text) is (F._NON_FINITE.search(text) is None), text


@pytest.mark.parametrize("value", [b"NaN", b"-NaN", b"Inf", b"-Inf", b"Infinity", b"-Infinity"])
@pytest.mark.parametrize("kind", ["int", "string", "datetime"])
def test_non_finite_numbers_in_declared_columns_decline_without_the_scan(monkeypatch, value,
                                                                         kind):
    """A page whose rows hold only declared fields is taken without the
    non-finite scan (Arrow refuses those spellings in an ``int64`` or
    ``string`` column itself); one with an undeclared field is scanned; a
    non-finite number declines either way."""
    scanned = []
    real = F._finite
    monkeypatch.setattr(F, "_finite", lambda text: scanned.append(text) or real(text))
    doc = doc_of([("a", kind), ("b", "int")])
    ok = b'{"code":200,"data":{"status":"finish","rows":[{"a":%s,"b":1}]}}'
    good = {"int": b"1", "string": b'"x"', "datetime": b'"2013-01-01T10:00:00Z"'}[kind]
    assert F.decode_page(ok % good, doc) is not None
    assert scanned == []
    extra = b'{"code":200,"data":{"status":"finish","rows":[{"a":%s,"b":1,"z":%s}]}}'
    assert F.decode_page(extra % (good, b"2"), doc) is not None
    assert len(scanned) == 1
    for body in (ok % value, extra % (good, value), extra % (value, b"2")):
        assert F.decode_page(body, doc) is None, body
        check_body(body, doc)


@pytest.mark.parametrize("rows_text", [
    '[{"a":1.5},{"a":2}]', '[{"a":1.0},{"a":-0.0},{"a":null}]', '[{"a":null},{"a":0.25}]',
    '[{"id":1,"value":0.5,"ts":"2024-01-02T01:00:00Z"},{"id":2,"value":1.0,'
    '"ts":"2024-01-03T02:00:00Z"}]'])
def test_plain_doubles_of_untyped_columns_decode_fast(rows_text):
    # given doubles each spelt as its shortest repr (what orjson and json.dumps write)
    # when decoded with untyped columns or none, then the fast decode takes the page
    columns = [(k, None) for k in json.loads(rows_text)[-1]]
    assert check_body(envelope(rows_text), doc_of(columns))
    assert check_body(envelope(rows_text), doc_of([]))


@pytest.mark.parametrize("limit", [0, 1, 2, 3])
def test_nulls_past_the_scan_limit_are_proven_by_counting_keys(monkeypatch, limit):
    # given explicit nulls beyond the scan's limit; when decoded, then still taken and exact
    monkeypatch.setattr(F, "NULL_SCAN_LIMIT", limit)
    body = envelope('[{"a":null,"b":null},{"a":1,"b":null},{"a":null,"b":"x"}]')
    assert check_body(body, doc_of([("a", "int"), ("b", "string")]))
    assert not check_body(envelope('[{"a":null},{"b":null},{"a":null,"b":"x"}]'),
                          doc_of([("a", "int"), ("b", "string")]))


@pytest.mark.parametrize("total,read", [(336_776, 336_776), (0, 0), (-5, None), (True, None),
                                        (2.5, None), ("7", None), (None, None)])
def test_a_pages_total_is_a_count_or_not_given(total, read):
    # the contract's optional data.total feeds progress and ETA: only a count is one
    import json

    from streams.datasource import parse_body

    body = json.dumps({"code": 200, "data": {"status": "finish", "rows": [{"a": 1}],
                                             "total": total}}).encode()
    assert parse_body(0, body).total == read
