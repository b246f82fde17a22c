"""Every 4xx names the field as the caller spelt it and says what would be
accepted (issue 10.5), and public JSON is camelCase with RFC 3339 times
(issue 9.6). One test per error path; all answers come from the one handler
(``api.envelope.install_error_handlers``)."""
from __future__ import annotations

import json
import re

import pytest

from plait.spec import ExportSpec

SPEC = {"sysCode": "crm", "bizType": "orders", "userId": "alice",
        "dataConfig": {"dataApiUrl": "http://data.example/export"}}
SILENCE = {"matchers": ['asset="h1"'], "endsAt": "2999-01-01T00:00:00Z",
           "createdBy": "ops", "comment": "maintenance"}
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$")


def error(resp, field: str, status: int = 422) -> dict:
    """The error entry naming ``field``; checks the envelope on the way."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["code"] == status and "Value error" not in body["message"]
    entries = {e["field"]: e for e in body["data"]["errors"]}
    assert field in entries, entries
    assert field in body["message"]
    return entries[field]


# -- the export spec --------------------------------------------------------------

def test_malformed_json_names_the_body_and_the_position(client):
    resp = client.post("/export/tasks", content=b'{"sysCode": "crm",, }',
                       headers={"Content-Type": "application/json"})
    e = error(resp, "body")
    assert "is not valid JSON at character 18" in e["rule"]
    assert "application/json" in e["accepted"]


def test_json_without_a_content_type_says_so(client):
    resp = client.post("/export/tasks", content=json.dumps(SPEC).encode())
    e = error(resp, "body")
    assert e["rule"] == "was not read as JSON: the request has no Content-Type"
    assert "Content-Type: application/json" in e["accepted"]
    assert "valid dictionary" not in resp.text


def test_a_body_that_is_not_an_object(client):
    e = error(client.post("/export/tasks", json=[SPEC]), "body")
    assert e["rule"] == "must be a JSON object"


def test_an_empty_body(client):
    resp = client.post("/export/tasks", content=b"", headers={"Content-Type": "application/json"})
    e = error(resp, "body")
    assert e["rule"] == "is required" and "JSON object" in e["accepted"]


def test_a_missing_field_is_required(client):
    spec = {k: v for k, v in SPEC.items() if k != "userId"}
    e = error(client.post("/export/tasks", json=spec), "userId")
    assert e["rule"] == "is required" and e["code"] == "required"


def test_a_snake_case_key_is_answered_with_the_camel_case_spelling(client):
    spec = {k: v for k, v in SPEC.items() if k != "userId"} | {"user_id": "alice"}
    e = error(client.post("/export/tasks", json=spec), "user_id")
    assert e["accepted"] == "userId" and e["code"] == "spelling"


def test_a_nested_snake_case_key_gets_the_dotted_path(client):
    spec = SPEC | {"documentConfig": {"file_name": "orders"}}
    e = error(client.post("/export/tasks", json=spec), "documentConfig.file_name")
    assert e["accepted"] == "fileName"


def test_max_rows_with_push_mode_is_refused_naming_it(client):
    # a push export holds what its producers send: no grant cuts it
    spec = SPEC | {"dataConfig": {"mode": "push"}, "jobConfig": {"maxRows": 12}}
    e = error(client.post("/export/tasks", json=spec), "jobConfig.maxRows")
    assert e["rule"].startswith("is for pull mode")
    # and the spec itself stays valid: a push task created before this rule keeps its events
    assert ExportSpec.model_validate(spec).jobConfig.maxRows == 12


def test_an_unknown_key_lists_the_known_ones(client):
    spec = SPEC | {"jobConfig": {"retries": 3}}
    e = error(client.post("/export/tasks", json=spec), "jobConfig.retries")
    assert e["rule"] == "is not a known field"
    assert set(e["accepted"].replace(" or ", ", ").split(", ")) >= {"maxRows", "timeout"}


def test_a_value_outside_a_literal_lists_the_allowed_ones(client):
    spec = SPEC | {"documentConfig": {"fileFormat": "xls"}}
    e = error(client.post("/export/tasks", json=spec), "documentConfig.fileFormat")
    assert e["accepted"] == "'csv', 'xlsx', 'parquet', 'jsonl', 'pdf' or 'docx'"


def test_a_number_out_of_range_says_the_limit(client):
    spec = SPEC | {"dataConfig": {**SPEC["dataConfig"], "pageSize": 0}}
    e = error(client.post("/export/tasks", json=spec), "dataConfig.pageSize")
    assert e["accepted"] == ">= 1"


def test_a_model_rule_names_its_field_without_the_value_error_prefix(client):
    spec = SPEC | {"documentConfig": {"timeZone": "Mars/Olympus"}}
    e = error(client.post("/export/tasks", json=spec), "documentConfig.timeZone")
    assert e["rule"].startswith("unknown IANA time zone")


def test_a_rule_across_fields_names_the_missing_one(client):
    spec = SPEC | {"dataConfig": {"mode": "pull"}}
    e = error(client.post("/export/tasks", json=spec), "dataConfig.dataApiUrl")
    assert e["rule"] == "is required when mode is 'pull'"


@pytest.mark.parametrize("body, field, rule", [
    # a key that is half a UTF-16 pair, anywhere free-form JSON goes (was a 500)
    ('{"queryConditions": {"\\udc00": 1}}', "dataConfig.queryConditions.\\udc00",
     "is a key with a lone surrogate"),
    ('{"partitions": [{"a": 1}, {"\\udc00": 1}]}', "dataConfig.partitions.1.\\udc00",
     "is a key with a lone surrogate"),
    ('{"runtimeContext": {"c": "x\\ud800"}}', "dataConfig.runtimeContext.c",
     "contains a lone surrogate"),
    # NaN, Infinity and numbers past a double's range (accepted, then the task failed)
    ('{"queryConditions": {"x": NaN}}', "dataConfig.queryConditions.x", "is nan"),
    ('{"queryConditions": {"x": 1e400}}', "dataConfig.queryConditions.x", "is inf"),
    ('{"runtimeContext": {"a": [1, -Infinity]}}', "dataConfig.runtimeContext.a.1", "is -inf"),
    ('{"partitions": [{"a": NaN}, {"a": 1}]}', "dataConfig.partitions.0.a", "is nan"),
])
def test_what_json_text_cannot_carry_is_a_422_naming_where_it_is(client, body, field, rule):
    data = ('{"dataApiUrl": "http://data.example/export", '
            + body.strip()[1:-1] + "}")
    raw = ('{"sysCode": "crm", "bizType": "orders", "userId": "alice", "dataConfig": '
           + data + "}")
    resp = client.post("/export/tasks", content=raw.encode(),
                       headers={"Content-Type": "application/json"})
    e = error(resp, field)
    assert e["rule"].startswith(rule), e


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"1e400"])
def test_a_timeout_that_is_no_finite_number_is_named_so(client, value):
    raw = (b'{"sysCode": "crm", "bizType": "orders", "userId": "alice", "dataConfig": '
           b'{"dataApiUrl": "http://data.example/export"}, "jobConfig": {"timeout": '
           + value + b'}}')
    e = error(client.post("/export/tasks", content=raw,
                          headers={"Content-Type": "application/json"}), "jobConfig.timeout")
    assert "finite number" in e["rule"], e


def test_a_lone_surrogate_in_a_key_of_a_column_dictionary_is_a_422(client):
    raw = (b'{"sysCode": "crm", "bizType": "orders", "userId": "alice", "dataConfig": '
           b'{"dataApiUrl": "http://data.example/export"}, "documentConfig": {"columns": '
           b'[{"fieldName": "s", "dictionary": {"\\udc00": "x"}}]}}')
    e = error(client.post("/export/tasks", content=raw,
                          headers={"Content-Type": "application/json"}),
              "documentConfig.columns.0.dictionary.\\udc00")
    assert e["rule"].startswith("is a key with a lone surrogate")


@pytest.mark.parametrize("where, value", [
    (("jobConfig", "maxRows"), True), (("jobConfig", "maxRows"), "7"),
    (("jobConfig", "maxRows"), 5.0), (("jobConfig", "timeout"), True),
    (("documentConfig", "maxRowsPerFile"), True),
])
def test_a_boolean_or_a_string_is_not_taken_for_a_number(client, where, value):
    spec = SPEC | {where[0]: {where[1]: value}}
    e = error(client.post("/export/tasks", json=spec), ".".join(where))
    assert e["rule"].startswith("Input should be a valid"), e


@pytest.mark.parametrize("split, field, rule", [
    ({"from": True, "to": 10}, "dataConfig.split.from", "must be an integer or an ISO 8601"),
    ({"from": 0, "to": 0.5}, "dataConfig.split.to", "0.5 is neither an integer"),
])
def test_a_split_bound_names_itself_as_from_or_to(client, split, field, rule):
    spec = SPEC | {"dataConfig": {**SPEC["dataConfig"],
                                  "split": {"field": "id", "parts": 2, **split}}}
    e = error(client.post("/export/tasks", json=spec), field)
    assert e["rule"].startswith(rule), e
    assert ".int" not in json.dumps(e) and ".str" not in json.dumps(e)


def test_the_split_takes_from_and_to_only_and_says_so(client):
    spec = SPEC | {"dataConfig": {**SPEC["dataConfig"], "split": {
        "field": "id", "from": 0, "to": 10, "parts": 2, "start": 5}}}
    e = error(client.post("/export/tasks", json=spec), "dataConfig.split.start")
    assert e["rule"] == "is not a known field"
    assert set(e["accepted"].replace(" or ", ", ").split(", ")) == {"field", "from", "to", "parts"}


@pytest.mark.parametrize("data, field, rule", [
    ({"partitions": [{"a": 1}], "split": {"field": "id", "from": 0, "to": 9, "parts": 3}},
     "dataConfig.split", "give partitions or split, not both"),
    ({"mode": "push", "partitions": [{"a": 1}]}, "dataConfig.partitions", "is for pull mode"),
    ({"mode": "push", "split": {"field": "id", "from": 0, "to": 9, "parts": 3}},
     "dataConfig.split", "is for pull mode"),
])
def test_a_partitioning_rule_names_the_field_it_is_about(client, data, field, rule):
    spec = SPEC | {"dataConfig": {**SPEC["dataConfig"], **data}}
    e = error(client.post("/export/tasks", json=spec), field)
    assert e["rule"].startswith(rule), e


def test_a_bad_query_parameter_is_named(client):
    e = error(client.get("/export/tasks", params={"sysCode": "crm", "limit": 0}), "limit")
    assert e["accepted"] == ">= 1"


def test_a_snake_case_query_parameter_is_answered_with_the_spelling(client):
    e = error(client.get("/export/tasks", params={"sysCode": "crm", "user_id": "alice"}),
              "user_id")
    assert e["accepted"] == "userId" and e["code"] == "spelling"
    e = error(client.get("/export/tasks/t-1", params={"user_id": "alice"}), "user_id")
    assert e["accepted"] == "userId"


def test_a_missing_query_parameter_says_how_to_send_it(client):
    e = error(client.get("/export/tasks"), "sysCode")
    assert "sysCode=" in e["accepted"]
    e = error(client.get("/audit"), "sysCode")
    assert "sysCode=" in e["accepted"]


def test_unknown_tasks_and_routes_are_404_in_the_envelope(client):
    resp = client.get("/export/tasks/t-nope")
    assert resp.status_code == 404 and resp.json()["message"] == "task t-nope not found"
    resp = client.post("/export/tasks/t-nope/cancel")
    assert resp.status_code == 404 and resp.json()["code"] == 404
    resp = client.get("/no/such/route")
    assert resp.status_code == 404 and resp.json()["code"] == 404


# -- alerts -------------------------------------------------------------------------

def test_alerts_malformed_json_names_the_body(client, sent):
    resp = client.post("/alerts", content=b"{bad", headers={"Content-Type": "application/json"})
    e = error(resp, "body")
    assert e["rule"].startswith("is not valid JSON at line 1 column 2") and sent == []


def test_alerts_empty_list_is_refused(client, sent):
    e = error(client.post("/alerts", json=[]), "body")
    assert e["rule"] == "has no alerts"


def test_alerts_snake_case_key_gets_the_camel_case_spelling(client, sent):
    alert = {"rule": "Disk", "asset": "h1", "severity": "critical",
             "starts_at": "2026-11-30T16:00:00Z"}
    e = error(client.post("/alerts", json=[alert]), "[0].starts_at")
    assert e["accepted"] == "startsAt" and sent == []


def test_alerts_unknown_key_lists_the_known_ones(client):
    alert = {"rule": "Disk", "asset": "h1", "severity": "critical", "host": "x"}
    e = error(client.post("/alerts", json=alert), "host")
    assert "generatorURL" in e["accepted"] and "severity" in e["accepted"]


def test_alerts_epoch_time_is_refused_for_rfc3339(client):
    alert = {"rule": "Disk", "asset": "h1", "severity": "critical", "time": 1_700_000_000}
    e = error(client.post("/alerts", json=alert), "time")
    assert "RFC 3339" in e["rule"] and "2026-11-30T17:00:00Z" in e["accepted"]


def test_alerts_bad_severity_lists_the_accepted_ones(client):
    alert = {"rule": "Disk", "asset": "h1", "severity": "loud"}
    e = error(client.post("/alerts", json=[alert]), "[0].severity")
    assert e["accepted"].startswith("info, warning or critical")


def test_alertmanager_route_keeps_alertmanager_names_and_error_shape(client, sent):
    # Alertmanager answers bad input with 400 and a JSON string (its OpenAPI's BadRequest)
    resp = client.post("/api/v2/alerts", json={"labels": {}})
    assert resp.status_code == 400 and "body: must be a JSON list" in resp.json()
    resp = client.post("/api/v2/alerts", json=[{"labels": {"instance": ""}}])
    assert resp.status_code == 400 and "[0].labels: is required" in resp.json() and sent == []
    ok = client.post("/api/v2/alerts", json=[{"labels": {"alertname": "A"},
                                              "startsAt": "2026-11-30T16:00:00Z"}])
    assert ok.status_code == 200 and len(sent) == 1


# -- silences ---------------------------------------------------------------------------

def test_silence_answer_is_camel_case_with_rfc3339_times(client, sent):
    resp = client.post("/silences", json=SILENCE | {"startsAt": "2026-11-30T16:00:00+01:00"})
    assert resp.status_code == 201, resp.text
    s = resp.json()["data"]["silence"]
    assert s["startsAt"] == "2026-11-30T15:00:00Z" and s["endsAt"] == "2999-01-01T00:00:00Z"
    assert {"createdBy", "allowBroad", "timeIntervals", "activeNow"} <= set(s)
    assert not any("_" in k for k in s)
    listed = client.get("/silences").json()["data"]["silences"]
    assert all(RFC3339.match(x["startsAt"]) for x in listed)


@pytest.mark.parametrize("key, accepted", [("allow_broad", "allowBroad"), ("ends_at", "endsAt"),
                                           ("starts_at", "startsAt"),
                                           ("time_intervals", "timeIntervals")])
def test_silence_snake_case_keys_are_refused_with_the_spelling(client, key, accepted):
    e = error(client.post("/silences", json=SILENCE | {key: True}), key)
    assert e["accepted"] == accepted


def test_silence_unknown_key_lists_the_known_ones(client):
    e = error(client.post("/silences", json=SILENCE | {"author": "x"}), "author")
    assert "createdBy" in e["accepted"]


def test_silence_epoch_time_is_refused_for_rfc3339(client):
    e = error(client.post("/silences", json=SILENCE | {"endsAt": 4_000_000_000}), "endsAt")
    assert "RFC 3339" in e["rule"]


def test_silence_errors_name_camel_case_fields(client):
    e = error(client.post("/silences", json=SILENCE | {"startsAt": "2999-06-01T00:00:00Z"}),
              "endsAt")
    assert e["rule"] == "must be after startsAt"
    e = error(client.post("/silences", json={k: v for k, v in SILENCE.items()
                                             if k != "createdBy"}), "createdBy")
    assert e["rule"] == "is required"


def test_silence_broad_matchers_say_allow_broad_in_camel_case(client):
    e = error(client.post("/silences", json=SILENCE | {"matchers": ['env!~"prod.*"']}),
              "matchers")
    assert "allowBroad: true" in e["accepted"] and "allow_broad" not in json.dumps(e)
    ok = client.post("/silences", json=SILENCE | {"matchers": ['env!~"prod.*"'],
                                                  "allowBroad": True})
    assert ok.status_code == 201


def test_silence_bad_matcher_is_named_by_index(client):
    e = error(client.post("/silences", json=SILENCE | {"matchers": ["asset"]}), "matchers.0")
    assert 'name="value"' in e["accepted"]


def test_silence_time_interval_keys_are_camel_case(client):
    window = {"weekdays": ["monday:friday"], "times": [{"start_time": "22:00"}]}
    e = error(client.post("/silences", json=SILENCE | {"timeIntervals": [window]}),
              "timeIntervals.0.times.0.start_time")
    assert e["accepted"] == "startTime"
    window = {"weekdays": ["monday:friday"], "times": [{"startTime": "22:00", "endTime": "24:00"}],
              "location": "Europe/Paris"}
    resp = client.post("/silences", json=SILENCE | {"timeIntervals": [window]})
    assert resp.status_code == 201, resp.text
    assert resp.json()["data"]["silence"]["timeIntervals"] == [
        {"weekdays": ["monday", "tuesday", "wednesday", "thursday", "friday"],
         "times": [{"startTime": "22:00", "endTime": "24:00"}], "location": "Europe/Paris"}]


def test_expiring_an_unknown_silence_is_404(client):
    resp = client.delete("/silences/s-nope")
    assert resp.status_code == 404 and resp.json()["message"] == "silence s-nope not found"


def test_counters_are_camel_case(client):
    data = client.get("/alerts/counters").json()["data"]
    assert {"silencedBy", "dedupeReasons", "received", "balanced"} <= set(data)
    assert not any("_" in k for k in data)


def test_a_body_that_is_not_utf8_is_a_422_naming_the_body(client):
    # found by schemathesis: bytes that are not UTF-8 were a bare 400
    resp = client.post("/export/tasks", content=b"\x80\x81", headers={"Content-Type": "application/json"})
    e = error(resp, "body")
    assert "UTF-8" in e["rule"] and "application/json" in e["accepted"]


@pytest.mark.parametrize("route,body,field", [
    ("/silences", {**SILENCE, "startsAt": "2024-01-01T12:99:00Z"}, "startsAt"),
    ("/alerts", {"rule": "r", "asset": "a", "severity": "info", "time": "2024-02-30T00:00:00Z"},
     "time"),
])
def test_a_well_formed_time_that_does_not_exist_is_a_422_not_a_500(client, route, body, field):
    # found by schemathesis: minute 99 / February 30 passed the form check and crashed
    e = error(client.post(route, json=body), field)
    assert "date and time" in e["rule"] and "RFC 3339" in e["accepted"]


@pytest.mark.parametrize("interval,field", [
    ({"location": [None, None]}, "timeIntervals.0.location"),
    ({"location": "Mars/Olympus"}, "timeIntervals.0.location"),
    ({"weekdays": 5}, "timeIntervals.0.weekdays"),
    ({"weekdays": [1]}, "timeIntervals.0.weekdays"),
])
def test_a_bad_time_interval_is_a_422_naming_the_key_not_a_500(client, interval, field):
    # found by schemathesis: a location that is not a string crashed ZoneInfo
    body = {**SILENCE, "timeIntervals": [{"times": [], **interval}]}
    e = error(client.post("/silences", json=body), field)
    assert e["accepted"]


def test_times_before_year_1000_are_answered_in_rfc3339(client):
    # found by schemathesis: a silence from year 17 was listed as "17-01-01T00:01:01Z"
    body = {**SILENCE, "startsAt": "0017-01-01T00:01:01Z"}
    resp = client.post("/silences", json=body)
    assert resp.status_code == 201, resp.text
    assert resp.json()["data"]["silence"]["startsAt"] == "0017-01-01T00:01:01Z"


@pytest.mark.parametrize("field", ["queryConditions", "runtimeContext"])
def test_conditions_nested_too_deep_name_the_field(client, field):
    deep: object = 1
    for _ in range(300):  # past pydantic's serialization depth (255)
        deep = {"a": deep}
    spec = SPEC | {"dataConfig": SPEC["dataConfig"] | {field: deep}}
    e = error(client.post("/export/tasks", json=spec), f"dataConfig.{field}")
    assert "deeper than the 255 levels" in e["rule"]
