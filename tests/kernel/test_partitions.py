"""``dataConfig.partitions`` and ``dataConfig.split``: the windows a split
gives, what the spec refuses (naming the field), the fingerprint."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from plait.partitions import split_windows, window_keys
from plait.spec import ExportSpec


def spec(**data) -> ExportSpec:
    return ExportSpec.model_validate({
        "sysCode": "s", "bizType": "b", "userId": "u",
        "dataConfig": {"dataApiUrl": "http://data.test/rows", "queryConditions": {"q": 1},
                       **data}})


def test_an_integer_split_gives_contiguous_windows_differing_by_at_most_one():
    windows = split_windows("id", 0, 10, 3)
    assert windows == [{"fromId": 0, "toId": 3}, {"fromId": 3, "toId": 6},
                       {"fromId": 6, "toId": 10}]
    assert window_keys("createdAt") == ("fromCreatedAt", "toCreatedAt")


def test_a_time_split_gives_windows_of_whole_seconds_in_the_given_spelling():
    windows = split_windows("ts", "2024-01-01T00:00:00Z", "2024-01-01T00:00:10Z", 3)
    assert windows == [{"fromTs": "2024-01-01T00:00:00Z", "toTs": "2024-01-01T00:00:03Z"},
                       {"fromTs": "2024-01-01T00:00:03Z", "toTs": "2024-01-01T00:00:06Z"},
                       {"fromTs": "2024-01-01T00:00:06Z", "toTs": "2024-01-01T00:00:10Z"}]
    offset = split_windows("ts", "2024-01-01T00:00:00+08:00", "2024-01-02T00:00:00+08:00", 2)
    assert offset[1]["fromTs"] == "2024-01-01T12:00:00+08:00"


@pytest.mark.parametrize("start, stop, parts, why", [
    (5, 5, 1, "is not after from"),
    (0, 2, 3, "fewer than parts"),
    (0, "2024-01-01T00:00:00Z", 1, "both integers or both date-times"),
    ("2024-01-01T00:00:00", "2024-01-02T00:00:00Z", 1, "with an offset"),
    ("soon", 5, 1, "integer nor an ISO 8601"),
])
def test_a_bad_split_is_refused_naming_the_rule(start, stop, parts, why):
    with pytest.raises(ValidationError) as err:
        spec(split={"field": "id", "from": start, "to": stop, "parts": parts})
    assert err.value.errors()[0]["loc"][:2] == ("dataConfig", "split")
    assert why in str(err.value)


@pytest.mark.parametrize("data, loc, why", [
    ({"partitions": []}, ("dataConfig", "partitions"), "at least 1 item"),
    ({"partitions": [{"a": 1}, {}]}, ("dataConfig", "partitions"), "item 1: must be a non-empty"),
    ({"partitions": [{"a": 1}, {"a": 1}]}, ("dataConfig", "partitions"), "item 1 repeats item 0"),
    ({"partitions": [{"a": 1, "b": [2]}, {"c": 3}, {"b": [2], "a": 1}]}, ("dataConfig", "partitions"),
     "item 2 repeats item 0"),
    ({"partitions": [{"a": 1}, 7]}, ("dataConfig", "partitions", 1), "dictionary"),
    ({"partitions": [{"a": 1}], "split": {"field": "id", "from": 0, "to": 9, "parts": 3}},
     ("dataConfig",), "give partitions or split, not both"),
    ({"split": {"field": "id", "from": 0, "to": 9, "parts": 257}},
     ("dataConfig", "split", "parts"), "256"),
])
def test_a_bad_partition_spec_is_refused_naming_it(data, loc, why):
    with pytest.raises(ValidationError) as err:
        spec(**data)
    first = err.value.errors()[0]
    assert first["loc"] == loc and why in first["msg"], err.value.errors()


def test_fragments_that_differ_as_json_are_not_repeats():
    # equal in Python (1 == True == 1.0), different to the data API that reads the JSON
    s = spec(partitions=[{"a": 1}, {"a": True}, {"a": 1.5}, {"a": "1"}])
    assert len(s.dataConfig.partitions) == 4


def test_partitions_are_for_pull_mode_only():
    with pytest.raises(ValidationError, match="pull mode"):
        ExportSpec.model_validate({"sysCode": "s", "bizType": "b", "userId": "u",
                                   "dataConfig": {"mode": "push", "partitions": [{"a": 1}]}})


def test_each_partition_pulls_its_fragment_merged_over_the_query_conditions():
    s = spec(partitions=[{"tenant": "a"}, {"tenant": "b", "q": 2}])
    assert [s.dataConfig.conditions(p) for p in range(2)] == [
        {"q": 1, "tenant": "a"}, {"q": 2, "tenant": "b"}]
    assert spec().dataConfig.fragments() == [{}]


def test_the_split_travels_as_the_caller_spelt_it():
    s = spec(split={"field": "id", "from": 0, "to": 9, "parts": 3})
    dumped = s.model_dump(mode="json", exclude_none=True)["dataConfig"]["split"]
    assert dumped == {"field": "id", "from": 0, "to": 9, "parts": 3}
    assert ExportSpec.model_validate_json(s.model_dump_json()) == s


def test_the_fingerprint_covers_the_partitions_and_keeps_unpartitioned_ones():
    whole = spec()
    split = spec(split={"field": "id", "from": 0, "to": 9, "parts": 3})
    listed = spec(partitions=split.dataConfig.fragments())
    other = spec(split={"field": "id", "from": 0, "to": 9, "parts": 2})
    assert len({whole.fingerprint(), split.fingerprint(), other.fingerprint()}) == 3
    assert split.fingerprint() == listed.fingerprint()  # the same windows: the same file
