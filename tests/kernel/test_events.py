"""Event envelopes: CloudEvents attributes, round trip, poison classification."""
from __future__ import annotations

import json

import pytest

from plait.errors import PoisonError
from plait.events import CancelRequested, FetchPage, decode, encode
from plait.spec import ExportSpec

SPEC = ExportSpec.model_validate({"sysCode": "s", "bizType": "b", "userId": "u",
                                  "dataConfig": {"dataApiUrl": "http://127.0.0.1:1/data"}})


def test_round_trip_keeps_payload_and_cloudevents_attributes():
    raw = encode(FetchPage(taskId="t1", seq=3, runtimeContext={"lastId": 9}, spec=SPEC), "t1")
    attrs, payload = decode(raw)
    assert attrs["specversion"] == "1.0" and attrs["subject"] == "t1"
    assert attrs["type"] == "plait.export.FetchPage.v1" and attrs["id"] and attrs["time"]
    assert attrs["traceparent"].startswith("00-")
    assert isinstance(payload, FetchPage) and payload.seq == 3
    assert payload.runtimeContext == {"lastId": 9}


def test_unknown_fields_are_ignored_so_old_readers_survive_new_writers():
    env = json.loads(encode(CancelRequested(taskId="t1"), "t1"))
    env["data"]["addedLater"] = {"x": 1}
    _, payload = decode(json.dumps(env))
    assert payload.taskId == "t1"


@pytest.mark.parametrize("raw, words", [
    (b"\xff\xfe not json", "not JSON"),
    (b"[1, 2]", "envelope"),
    (b'{"a":' * 50_000, "RecursionError"),  # nesting bombs must not crash a worker
    (json.dumps({"type": "nope.v1", "data": {}}).encode(), "unknown event type"),
    (json.dumps({"type": "plait.export.FetchPage.v1", "data": {"taskId": "t", "seq": -1}}).encode(),
     "field seq"),
])
def test_undecodable_events_are_poison_with_a_reason(raw, words):
    with pytest.raises(PoisonError, match=words):
        decode(raw)


def test_infinities_and_nan_in_rows_survive_the_envelope():
    from plait.events import PageBatch

    page = PageBatch(taskId="t", seq=0, rows=[{"x": float("inf"), "y": float("-inf"),
                                               "z": float("nan")}], rowCount=1, spec=SPEC)
    _, back = decode(encode(page, "t"))
    row = back.rows[0]
    assert row["x"] == float("inf") and row["y"] == float("-inf") and row["z"] != row["z"]
