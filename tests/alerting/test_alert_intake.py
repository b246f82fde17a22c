"""Normalization: native and Alertmanager input into one vocabulary; bad
alerts rejected naming the field, never a crash."""
from __future__ import annotations

import pytest

from alerting.model import Alert, AlertRejected, Severity, Status
from alerting.intake import (ZERO_TIME, format_time, from_alertmanager, from_native, normalize,
                                parse_time)

NOW = 1_714_557_600.0  # 2024-05-01T10:00:00Z


def test_native_alert_gets_the_vocabulary():
    # given a native alert with an RFC3339 time and a severity alias
    raw = {"rule": "DiskFull", "asset": "h1", "severity": "CRIT", "status": "firing",
           "labels": {"env": "prod"}, "annotations": {"summary": "97%"}, "time": "2024-05-01T09:00:00Z"}
    # when normalized
    a = from_native(raw, NOW)
    # then every field is in the vocabulary
    assert (a.rule, a.asset, a.severity, a.status) == ("DiskFull", "h1", Severity.CRITICAL, Status.FIRING)
    assert a.time == NOW - 3600 and a.labels == {"env": "prod"}
    assert a.match_labels()["severity"] == "critical" and a.match_labels()["alertname"] == "DiskFull"


def test_native_time_defaults_to_now_and_alert_round_trips():
    a = from_native({"rule": "R", "asset": "a", "severity": "info"}, NOW)
    assert a.time == NOW and a.status is Status.FIRING
    assert Alert.from_dict(a.to_dict()) == a


@pytest.mark.parametrize("raw, field", [
    ({"asset": "h1", "severity": "warning"}, "rule"),
    ({"rule": "R", "severity": "warning"}, "asset"),
    ({"rule": "R", "asset": "h1"}, "severity"),
    ({"rule": "R", "asset": "h1", "severity": "urgent"}, "severity"),
    ({"rule": "R", "asset": "h1", "severity": "info", "status": "done"}, "status"),
    ({"rule": "R", "asset": "h1", "severity": "info", "time": "yesterday"}, "time"),
    ({"rule": "R", "asset": "h1", "severity": "info", "time": float("nan")}, "time"),
    ({"rule": "R", "asset": "h1", "severity": "info", "labels": ["x"]}, "labels"),
    ({"rule": "R", "asset": "h1", "severity": "info", "labels": {"k": {"nested": 1}}}, "labels.k"),
    ({"rule": ["R"], "asset": "h1", "severity": "info"}, "rule"),
    ("not an object", "(alert)"),
])
def test_bad_native_alert_is_rejected_naming_the_field(raw, field):
    # when a bad alert is normalized, then the error names the field
    with pytest.raises(AlertRejected) as err:
        normalize(raw, NOW)
    assert err.value.field == field and str(err.value).startswith(field)


def test_alertmanager_alert_firing_and_resolved():
    # given Prometheus alerts: one with a future endsAt, one with a past endsAt
    body = [
        {"labels": {"alertname": "HighLoad", "instance": "web1:9100", "severity": "warning"},
         "annotations": {"summary": "s"}, "startsAt": "2024-05-01T09:00:00.123456789Z",
         "endsAt": "2024-05-01T10:04:00Z", "generatorURL": "http://prom/graph"},
        {"labels": {"alertname": "HighLoad", "instance": "web2:9100"},
         "startsAt": "2024-05-01T09:00:00Z", "endsAt": "2024-05-01T09:59:00Z"},
    ]
    # when normalized at 10:00
    firing, resolved = from_alertmanager(body, now=NOW)
    # then endsAt in the future means firing (kept: it resolves then unless re-sent),
    # in the past resolved (Alertmanager's rule)
    assert (firing.rule, firing.asset, firing.status, firing.ends_at) == ("HighLoad", "web1:9100", Status.FIRING, NOW + 240)
    assert firing.starts_at == pytest.approx(NOW - 3600 + 0.123456) and firing.generator_url == "http://prom/graph"
    assert (resolved.status, resolved.ends_at, resolved.severity) == (Status.RESOLVED, NOW - 60, Severity.WARNING)


def test_alertmanager_zero_time_endsat_is_firing():
    [a] = from_alertmanager([{"labels": {"alertname": "X"}, "endsAt": ZERO_TIME}], now=NOW)
    assert a.status is Status.FIRING and a.asset == ""


@pytest.mark.parametrize("body, field", [
    ({"labels": {}}, "body"),
    ([{"labels": {"alertname": "A"}}, {"labels": {"instance": ""}}], "[1].labels"),
    ([{"annotations": {}}], "[0].labels"),
    ([{"labels": {"alertname": "A"}, "startsAt": "01/05/2024"}], "[0].startsAt"),
    ([42], "[0]"),
])
def test_bad_alertmanager_body_names_index_and_field(body, field):
    with pytest.raises(AlertRejected) as err:
        from_alertmanager(body, now=NOW)
    assert err.value.field == field


@pytest.mark.parametrize("value, severity", [("P1", Severity.WARNING), ("ticket", Severity.WARNING),
                                             ("page", Severity.CRITICAL), ("Info", Severity.INFO)])
def test_an_alertmanager_severity_label_is_any_value_as_in_alertmanager(value, severity):
    # a label is a label (Alertmanager takes any value): Plait's severity is the alias it names,
    # else the default, and matchers see the value sent
    [a] = from_alertmanager([{"labels": {"alertname": "A", "severity": value}}], now=NOW)
    assert a.severity is severity and a.labels["severity"] == value
    assert a.match_labels()["severity"] == value


def test_normalize_routes_by_shape_and_never_raises_other_errors():
    # given an Alertmanager-shaped dict and an Alert instance
    am = normalize({"labels": {"alertname": "A", "host": "h"}}, NOW)
    assert am.source == "alertmanager" and am.asset == "h"
    assert normalize(am, NOW) is am


def test_time_helpers():
    assert parse_time(None, "t") is None and parse_time(ZERO_TIME, "t") is None
    assert format_time(None) == ZERO_TIME
    assert format_time(NOW) == "2024-05-01T10:00:00Z" and format_time(NOW + 0.5) == "2024-05-01T10:00:00.500Z"
    assert parse_time(format_time(NOW), "t") == NOW


def test_native_snake_case_spellings_are_rejected_naming_the_accepted_one():
    with pytest.raises(AlertRejected) as err:
        from_native({"rule": "R", "asset": "a", "severity": "info", "starts_at": 5}, 10)
    assert err.value.field == "starts_at" and err.value.accepted == "startsAt"


# ------------------------------------------------------------------ bad input (issue 11, item 4)
def test_lone_surrogates_become_replacement_characters_and_are_counted():
    # given Prometheus-form and native alerts with lone surrogates in names and values
    am = {"labels": {"alertname": "Cut", "pod": "cut \ud83d", "k\udc00": "v"},
          "annotations": {"summary": "\ud83d end"}}
    native = {"rule": "R\ud800", "asset": "h1", "severity": "info", "labels": {"x": "\udfff"}}
    a, n = normalize(am, NOW), normalize(native, NOW)
    # then each such string holds U+FFFD instead, the repairs are counted, the
    # alert encodes as UTF-8 (the state store and the wire can take it)
    assert a.labels == {"alertname": "Cut", "pod": "cut \ufffd", "k\ufffd": "v"}
    assert a.annotations == {"summary": "\ufffd end"} and a.invalid_unicode == 3
    assert (n.rule, n.labels, n.invalid_unicode) == ("R\ufffd", {"x": "\ufffd"}, 2)
    import orjson
    orjson.dumps(a.to_dict()) and orjson.dumps(n.to_dict())
    # and a clean alert is untouched (pass-through keeps the object)
    clean = normalize({"labels": {"alertname": "Ok", "emoji": "\U0001F600"}}, NOW)
    assert clean.invalid_unicode == 0 and normalize(clean, NOW) is clean
    # and an Alert built elsewhere (a command read from Kafka) is repaired too
    forged = Alert.from_dict(dict(clean.to_dict(), labels={"alertname": "Ok", "p": "\ud83d"}))
    assert normalize(forged, NOW).labels["p"] == "\ufffd"


@pytest.mark.parametrize("raw, field, words", [
    ({"labels": {f"l{i}": "v" for i in range(129)} | {"alertname": "A"}}, "labels", "at most 128"),
    ({"labels": {"alertname": "A", "x" * 257: "v"}}, "labels", "256"),
    ({"labels": {"alertname": "A", "big": "v" * 8193}}, "labels.big", "8192"),
    ({"labels": {"alertname": "A"}, "annotations": {f"a{i}": "v" for i in range(129)}},
     "annotations", "at most 128"),
    ({"labels": {"alertname": "A", "n": [1]}}, "labels.n", "string"),
    ({"labels": {"alertname": "A", "n": True}}, "labels.n", "string"),
    ({"labels": "alertname=A"}, "labels", "object"),
    ({"rule": "R", "asset": "h", "severity": "info", "annotations": {"s": {"deep": "\ud83d"}}},
     "annotations.s", "string"),
])
def test_wrong_types_and_huge_label_sets_are_rejected_naming_the_field(raw, field, words):
    with pytest.raises(AlertRejected) as err:
        normalize(raw, NOW)
    assert err.value.field == field and words in str(err.value), str(err.value)


def test_the_funnel_counts_repaired_alerts_and_never_raises_on_junk():
    from alert_harness import case_config

    from alerting.funnel import Funnel
    f = Funnel(case_config())
    # given a repaired alert and a pile of junk, none raises
    assert f.ingest({"labels": {"alertname": "Cut", "pod": "cut \ud83d"}}, NOW) == []
    junk = [None, 42, "x", [], {}, {"labels": None}, {"labels": {"alertname": None}},
            {"labels": {"alertname": "A"}, "startsAt": {"x": 1}}, {"rule": {}, "labels": 5},
            {"labels": {"alertname": "A\ud800" * 5000}}, {"rule": "R", "asset": "a", "severity": 3},
            [[[[[[[["deep"]]]]]]]], {"labels": {"alertname": "A"}, "endsAt": float("inf")}]
    entries = [e for j in junk for e in f.ingest(j, NOW)]
    # then every junk alert is one rejected ledger entry, the repaired one is counted
    assert [e.outcome for e in entries] == ["rejected"] * len(junk)
    c = f.counters()
    assert c["invalid_unicode"] == 1 and c["rejected"] == len(junk) and c["balanced"]


def test_forged_normalized_alerts_are_rejected_not_raised():
    from alert_harness import case_config

    from alerting.funnel import Funnel
    f = Funnel(case_config())
    good = normalize({"labels": {"alertname": "A"}}, NOW)
    for forged in (dict(good.to_dict(), labels={"alertname": 5}),
                   dict(good.to_dict(), rule=None), dict(good.to_dict(), annotations=[1])):
        [e] = f.ingest(Alert.from_dict(forged) if not isinstance(forged["annotations"], list)
                       else Alert(**{**good.__dict__, "annotations": forged["annotations"]}), NOW)
        assert e.outcome == "rejected"
    assert f.counters()["balanced"]


def test_invalid_unicode_travels_through_the_wire_and_is_repaired_by_the_router():
    from alert_harness import case_config

    from alerting.wire import ordering_key, parse_raw, raw_envelope, route_alert
    raw = {"labels": {"alertname": "Cut\ud83d", "pod": "cut \ud83d"}}
    # the Kafka key and the raw event encode (no 500 at the edge)
    assert ordering_key(raw).encode() == "Cut\ufffd|".encode()
    _eid, value = raw_envelope([raw])
    [ra] = parse_raw(value, 0, 0, NOW)
    # and the router's intake repairs and marks it
    _receiver, cmd = route_alert(case_config(), ra)
    assert cmd["alert"]["labels"] == {"alertname": "Cut\ufffd", "pod": "cut \ufffd"}
    assert cmd["alert"]["invalid_unicode"] == 2


def test_repair_alert_returns_a_clean_alert_itself_and_repairs_a_lone_surrogate():
    from alerting.intake import repair_alert
    from alerting.model import Alert

    # given an alert from a funnel command, clean, and one with a lone surrogate in a label value
    clean = Alert.from_dict({"rule": "R", "asset": "h1", "severity": "warning", "status": "firing",
                             "labels": {"k": "vé"}, "annotations": {"a": "b"}, "time": 1.0})
    dirty = Alert.from_dict({**clean.to_dict(), "labels": {"k": "x\ud800"}})
    # when they are checked, then the clean one is the same object, the other repaired
    assert repair_alert(clean) is clean
    fixed = repair_alert(dirty)
    assert fixed.labels == {"k": "x\ufffd"} and fixed.invalid_unicode == dirty.invalid_unicode + 1


def test_alertmanager_alert_without_alertname_is_an_alert():
    """Any non-empty label set is an alert (Alertmanager's Alert.Validate);
    nothing invents an alertname for it."""
    [a] = from_alertmanager([{"labels": {"foo": "bar"}}], now=NOW)
    assert (a.rule, a.labels, a.status) == ("", {"foo": "bar"}, Status.FIRING)
    assert "alertname" not in a.match_labels()
