"""The orjson fast paths of the alert wire write what the stdlib wrote:
webhook bodies byte for byte (``alerting.delivery.sorted_json``), funnel
commands value for value (``alerting.wire.command``), and an ``alerts.raw``
event's ``receivedAt`` is a finite number or the worker's clock."""
from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from alerting.counters import DECISION_BUCKETS_MS, observe_decision
from alerting.delivery import sorted_json
from alerting.wire import command, parse_command, parse_raw

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["\x00", "\x1f", "\x7f", "\u2028", "\ufeff", "\U0001f600", '"\\', "é", "\ud800cut"])
exact = text | st.integers(-2**70, 2**70) | st.booleans() | st.none()
leaf = exact | st.floats(allow_nan=True, allow_infinity=True)


def nested(leaves):
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=4)
                        | st.dictionaries(text, kids, max_size=4), max_leaves=25)


docs = nested(leaf)


def stdlib(payload) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        errors="surrogatepass")


@settings(max_examples=400, deadline=None)
@given(nested(exact))
def test_sorted_json_writes_the_stdlib_bytes(payload):
    assert sorted_json_bytes(payload) == stdlib(payload)


@settings(max_examples=400, deadline=None)
@given(docs)
def test_sorted_json_writes_the_stdlib_values(payload):
    """Floats may be spelt otherwise (``5.96e-8`` for ``5.96e-08``), never
    valued otherwise; NaN and infinities as the stdlib writes them."""
    got = sorted_json_bytes(payload)
    assert repr(json.loads(got)) == repr(json.loads(stdlib(payload)))
    if _nonfinite(payload):
        assert got == stdlib(payload)


def sorted_json_bytes(payload) -> bytes:
    try:
        return sorted_json(payload)
    except UnicodeEncodeError:  # a lone surrogate: the stdlib path cannot encode it either
        return stdlib(payload)


def test_sorted_json_keeps_nan_and_infinity_as_the_stdlib_spells_them():
    body = sorted_json({"b": [float("nan"), float("inf")], "a": None})
    assert body == b'{"a":null,"b":[NaN,Infinity]}'


#: what commands hold: text, 64-bit integers (orjson reads a wider one back
#: as a float, whoever wrote it), finite floats
command_values = nested(text | st.integers(-2**63, 2**63 - 1) | st.booleans() | st.none()
                        | st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["id", "alert", "receiver", "fp", "received_at", "tp"]),
                       command_values, max_size=6))
def test_command_round_trips(fields):
    got = parse_command(command("alert", **fields))
    want = json.loads(json.dumps({"v": 1, "kind": "alert", **fields}))
    assert got == want


def _nonfinite(value) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_nonfinite(v) for v in value.values())
    if isinstance(value, list):
        return any(_nonfinite(v) for v in value)
    return False


def test_command_with_a_lone_surrogate_falls_back_to_the_stdlib():
    got = parse_command(command("alert", reason="cut \ud83d"))
    assert got["reason"] == "cut \ud83d"


def test_non_finite_received_at_is_the_workers_clock():
    for spelled in ("NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400):
        raw = ('{"specversion":"1.0","id":"e","type":"plait.alert.Raw.v1","data":'
               '{"alerts":[{"rule":"r","asset":"a"}],"receivedAt":%s}}' % spelled)
        (alert,) = parse_raw(raw.encode(), 0, 0, now=1234.5)
        assert alert.received_at == 1234.5, spelled
    raw = b'{"specversion":"1.0","id":"e","type":"t","data":{"alerts":[{}],"receivedAt":99.5}}'
    assert parse_raw(raw, 0, 0, now=1.0)[0].received_at == 99.5


def test_decision_buckets_take_the_upper_bound_inclusive():
    counters: dict = {}
    for seconds in (0.0, 0.005, 0.0051, 0.04, 0.0401, 10.0, 10.001, 99.0):
        observe_decision(counters, seconds)
    assert counters["decision_ms"] == {"5": 2, "10": 1, "40": 1, "50": 1, "10000": 1, "inf": 2}
    assert str(DECISION_BUCKETS_MS[-1]) in counters["decision_ms"]
