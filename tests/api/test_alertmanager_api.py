"""Alertmanager's API v2 as clients use it (issue 11 items 2 and 4): paths,
bodies and status codes of Alertmanager's OpenAPI; alerts read from the read
model the funnel publishes (``alerting.view``); one silence store with
``/silences``; bad input never a 500 (surrogates, wrong types, huge label
sets, empty bodies, one bad alert in a batch)."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
import redis.asyncio as aioredis
import yaml

from alerting.config import load_config
from alerting.funnel import Funnel
from alerting.dedupe import labelset_fingerprint as am_fingerprint
from alerting.view import ViewPublisher

REDIS_URL = "redis://127.0.0.1:6379/0"  # as conftest's client
ALERTING_YAML = Path(__file__).resolve().parents[2] / "examples" / "alerting.yaml"


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


NOW = datetime.now(timezone.utc)
LATER = _iso(NOW + timedelta(hours=1))


def am_alert(name: str = "PodDown", **labels: str) -> dict:
    return {"labels": {"alertname": name, **labels}, "annotations": {"summary": "s"},
            "startsAt": _iso(NOW - timedelta(minutes=1)), "generatorURL": "http://prom/graph"}


def sent_alerts(sent) -> list[dict]:
    """The alerts (normalized, first route's copy) carried by the alerts.funnel
    ``alerts`` records the routes sent."""
    out = []
    for topic, _key, value, _p in sent:
        doc = json.loads(value)
        if topic.endswith("alerts.funnel") and doc["kind"] == "alerts":
            out.extend(item["alert"] for item in doc["items"] if not item.get("copy"))
    return out


def prefix_of(client) -> str:
    return client.app.state.services.settings.redis_prefix


def publish_view(client, alerts: list[dict], partition: int = 0, mutate=None, config=None) -> dict:
    """Run the funnel on ``alerts`` (Alertmanager format) and publish its view
    as a worker would (``config``: default the example's); returns the funnel state."""
    config = config or load_config(ALERTING_YAML)
    funnel = Funnel(config)
    now = NOW.timestamp()
    for a in alerts:
        funnel.ingest(a, now)
    if mutate:
        mutate(funnel.state)

    async def go():
        r = aioredis.Redis.from_url(REDIS_URL)
        try:
            await ViewPublisher(r, prefix_of(client), config).publish(partition, funnel.state,
                                                                     force=True)
        finally:
            await r.aclose()

    asyncio.run(go())
    return funnel.state


SILENCE = {"matchers": [{"name": "alertname", "value": "PodDown", "isRegex": False,
                         "isEqual": True},
                        {"name": "instance", "value": "api-2", "isRegex": False}],
           "startsAt": _iso(NOW), "endsAt": LATER, "createdBy": "ops", "comment": "x"}


# -- POST /api/v2/alerts: item 4 -------------------------------------------------------------

def test_one_bad_alert_in_a_batch_of_50_is_refused_alone(client, sent):
    batch = [am_alert(instance=f"h{i}") for i in range(50)]
    batch[17] = {"labels": {"instance": "h17"}, "startsAt": "yesterday"}  # no such time
    resp = client.post("/api/v2/alerts", json=batch)
    assert resp.status_code == 400
    text = resp.json()
    assert isinstance(text, str) and "[17].startsAt" in text
    assert "1 of 50 alerts refused, 49 accepted" in text
    assert len(sent_alerts(sent)) == 49
    assert {a["labels"]["instance"] for a in sent_alerts(sent)} == {
        f"h{i}" for i in range(50) if i != 17}


def test_a_lone_surrogate_becomes_u_fffd_and_is_counted(client, sent):
    raw = b'[{"labels": {"alertname": "A", "msg": "cut \\ud83d"}}]'
    resp = client.post("/api/v2/alerts", content=raw, headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Plait-Replaced-Characters"] == "1"
    assert sent_alerts(sent)[0]["labels"]["msg"] == "cut \ufffd"
    native = b'{"rule": "Disk", "asset": "h\\udc00", "severity": "critical"}'
    resp = client.post("/alerts", content=native, headers={"Content-Type": "application/json"})
    assert resp.status_code == 202, resp.text
    assert resp.json()["data"]["replacedCharacters"] == 1
    silence = json.dumps(SILENCE | {"comment": "x"}).replace('"x"', '"x \\ud83d"').encode()
    resp = client.post("/api/v2/silences", content=silence,
                       headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
    metrics = client.get("/metrics").text
    assert "plait_alert_edge_replaced_characters_total" in metrics


#: api/v2/api_test.go TestCheckSilenceMatchesFilterLabels: (silence matchers, filter, listed)
_SILENCE_FILTER_CASES = [
    (['label="value"'], 'label="value"', True),
    (['label="value"'], 'label="novalue"', False),
    (['label=~"(foo|bar)"'], 'label=~"(foo|bar)"', True),
    (['label=~"foo"'], 'label=~"(foo|bar)"', False),
    (['label="value"'], 'label=~"value"', False),
    (['label=~"value"'], 'label="value"', False),
    (['label!="value"'], 'label!="value"', True),
    (['label!~"value"'], 'label!~"value"', True),
    (['label="value"'], 'label!="value"', False),
    (['label=~"value"'], 'label!~"value"', False),
    (['label!="value"'], 'label!~"value"', False),
    (['label!~"value"'], 'label!="value"', False),
    (['label=~"(foo|bar)"', 'label="value"'], 'label=~"(foo|bar)"', True),
]


@pytest.mark.parametrize("have,flt,listed", _SILENCE_FILTER_CASES)
def test_a_silence_filter_finds_silences_by_their_matchers_as_alertmanager(have, flt, listed):
    from alerting.matchers import parse_matcher
    from api.alertmanager import silence_matches_filter

    stored = [{"name": m.name, "op": m.op.value, "value": m.value}
              for m in map(parse_matcher, have)]
    assert silence_matches_filter([parse_matcher(flt)], stored) is listed


def test_a_silence_with_an_empty_comment_and_author_is_taken_as_alertmanager_takes_it(client):
    # given amtool silence add --no-require-comment from a user Alertmanager knows as ""
    resp = client.post("/api/v2/silences", json=dict(SILENCE, comment="", createdBy=""))
    # then it is created, and reads back as sent
    assert resp.status_code == 200, resp.text
    got = client.get(f"/api/v2/silence/{resp.json()['silenceID']}").json()
    assert (got["comment"], got["createdBy"]) == ("", "")


def test_get_silences_filters_by_matcher_not_by_labels(client):
    # given silences svcq="api", svcq=~"ap.*" and svcq!="web",zz="1"
    ids = {}
    for name, matchers in [("eq", [("svcq", "api", False, True)]),
                           ("rx", [("svcq", "ap.*", True, True)]),
                           ("ne", [("svcq", "web", False, False), ("zz", "1", False, True)])]:
        body = dict(SILENCE, matchers=[{"name": n, "value": v, "isRegex": r, "isEqual": e}
                                       for n, v, r, e in matchers])
        resp = client.post("/api/v2/silences", json=body)
        assert resp.status_code == 200, resp.text
        ids[resp.json()["silenceID"]] = name

    def listed(flt: str) -> set[str]:
        got = client.get("/api/v2/silences", params={"filter": flt}).json()
        return {ids[x["id"]] for x in got if x["id"] in ids}

    # then a filter lists the silences holding that very matcher (amtool silence query)
    assert listed('svcq=~"ap.*"') == {"rx"}
    assert listed('svcq="api"') == {"eq"}
    assert listed("svcq=web") == set()
    assert listed('svcq!="web"') == {"ne"}
    assert listed('svcq!="nomatch"') == set()


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.text(alphabet=st.characters() | st.integers(0xD800, 0xDFFF).map(chr))
                    | st.integers(),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=3), kids, max_size=3), max_leaves=8),
       st.booleans(), st.booleans())
def test_scrubbing_from_the_raw_body_equals_walking_every_string(doc, ascii_only, upper):
    import re

    from api.alerting_edge import scrub_text

    # given any JSON document, lone surrogates included, escaped as a client may or may not
    # escape, in lower or upper case hex
    text = json.dumps(doc, ensure_ascii=ascii_only)
    if not ascii_only and any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        text = json.dumps(doc)  # raw UTF-8 cannot carry a surrogate: escaped
    if upper:
        text = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m[1].upper(), text)
    raw = text.encode()
    parsed = json.loads(raw)
    # then the shortcut (no surrogate escape in the bytes: no walk) gives the walk's answer
    assert scrub_text(parsed, raw) == scrub_text(parsed)


def test_bytes_that_are_not_utf8_become_u_fffd_each_as_alertmanager_reads_them(client, sent):
    # given a label holding bytes that are not UTF-8: a cut sequence, an encoded surrogate and
    # an overlong form
    raw = b'[{"labels": {"alertname": "T\xe2\x82A\xed\xa0\x80\xc0\xafZ"}}]'
    resp = client.post("/api/v2/alerts", content=raw, headers={"Content-Type": "application/json"})
    # then the alert is taken with one U+FFFD per byte, as Go's encoding/json reads a string
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Plait-Replaced-Characters"] == "7"
    [item] = [i for _t, _k, v, _p in sent for i in json.loads(v)["items"]]
    assert item["alert"]["labels"] == {"alertname": "T\ufffd\ufffdA" + "\ufffd" * 5 + "Z"}
    # and with Alertmanager's fingerprint: 0.25, given these bytes, listed it as 9793cd0f46ba9f40
    assert item["fp"] == "9793cd0f46ba9f40"
    # outside a string such a byte is still no JSON
    resp = client.post("/api/v2/alerts", content=b"[\xff]", headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and "body" in resp.text


@pytest.mark.parametrize("body, field", [
    ([{"labels": ["alertname", "A"]}], "[0].labels"),
    ([{"labels": {"alertname": "A", "x": {"nested": 1}}}], "[0].labels.x"),
    ([{"labels": {"alertname": "A"}, "annotations": "text"}], "[0].annotations"),
    ([{"labels": {"alertname": "A"}, "startsAt": "yesterday"}], "[0].startsAt"),
    ([{"labels": {"alertname": "A"}, "startsAt": True}], "[0].startsAt"),
    (["not an alert"], "[0]"),
    ([{"labels": {"alertname": "A", **{f"l{i}": "v" for i in range(300)}}}], "[0].labels"),
    ({"labels": {"alertname": "A"}}, "body"),
    ([{"labels": {"alertname": "A" * 10_000}}], "[0].labels.alertname"),
])
def test_wrong_types_and_huge_label_sets_are_400_naming_the_field(client, sent, body, field):
    resp = client.post("/api/v2/alerts", json=body)
    assert resp.status_code == 400, resp.text
    assert field in resp.json() and sent == []


@pytest.mark.parametrize("times, field", [
    # Alertmanager: a missing endsAt is now + resolve_timeout, then "start time must be before end time"
    ({"startsAt": _iso(NOW + timedelta(days=365))}, "[0].startsAt"),
    ({"startsAt": _iso(NOW), "endsAt": _iso(NOW - timedelta(minutes=5))}, "[0].endsAt"),
])
def test_an_alert_ending_before_it_starts_is_refused_as_alertmanager_does(client, sent, times, field):
    resp = client.post("/api/v2/alerts", json=[am_alert() | times, am_alert(instance="ok")])
    assert resp.status_code == 400, resp.text
    assert resp.json().startswith("1 of 2 alerts refused, 1 accepted") and field in resp.json()
    assert "start time must be before end time" in resp.json()
    assert [a["labels"].get("instance") for a in sent_alerts(sent)] == ["ok"]


def test_an_alert_with_only_an_end_starts_at_its_end_when_over_else_when_first_seen(client):
    from alerting.intake import from_alertmanager_alert

    now = NOW.timestamp()
    labels = {"alertname": "PodDown", "instance": "api-9"}
    # over: it starts at its end (Alertmanager's postAlerts)
    past = from_alertmanager_alert({"labels": labels, "endsAt": _iso(NOW - timedelta(minutes=1))}, now)
    assert past.status.value == "resolved" and past.starts_at == past.ends_at
    # firing: it starts when first seen, never after an end a later re-send may bring forward
    ends = _iso(NOW + timedelta(hours=1))
    assert from_alertmanager_alert({"labels": labels, "endsAt": ends}, now).starts_at is None
    publish_view(client, [{"labels": labels, "endsAt": ends}])
    [got] = client.get("/api/v2/alerts").json()
    assert got["startsAt"] < got["endsAt"] == ends, got


def test_a_label_sent_as_null_is_dropped_as_alertmanager_drops_empty_labels(client, sent):
    from alerting.intake import from_alertmanager_alert

    with_null = am_alert(instance="api-1") | {"labels": {"alertname": "PodDown", "instance": "api-1",
                                                         "team": None, "zone": ""}}
    resp = client.post("/api/v2/alerts", json=[with_null])
    assert resp.status_code == 200, resp.text
    assert sent_alerts(sent)[0]["labels"] == {"alertname": "PodDown", "instance": "api-1"}
    # the same on the Kafka path: the alert is the one without those labels
    a = from_alertmanager_alert(with_null, NOW.timestamp())
    assert a.labels == {"alertname": "PodDown", "instance": "api-1"}


def test_errors_say_what_would_be_accepted_for_the_field_at_fault(client, sent):
    resp = client.post("/api/v2/alerts", content=b"[{", headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and "a list of Alertmanager postableAlert objects" in resp.json()
    bad_name = SILENCE | {"matchers": [{"name": "", "value": "x", "isRegex": False}]}
    resp = client.post("/api/v2/silences", json=bad_name)
    assert resp.status_code == 400 and resp.json().startswith("matchers.0")
    assert "non-empty string name" in resp.json() and "regex" not in resp.json(), resp.json()


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_not_sent_as_json_is_refused_by_its_content_type(client, sent, ctype):
    body = json.dumps([am_alert()]).encode()
    resp = client.post("/api/v2/alerts", content=body, headers={"Content-Type": ctype})
    assert resp.status_code == 415 and resp.json().startswith("body") and ctype in resp.json()
    native = json.dumps({"rule": "Disk", "asset": "h1", "severity": "info"}).encode()
    resp = client.post("/alerts", content=native, headers={"Content-Type": ctype})
    err = resp.json()["data"]["errors"][0]
    assert resp.status_code == 422 and (err["field"], err["code"]) == ("body", "content_type")
    assert sent == []
    # no Content-Type at all is read as JSON, as before; a JSON suffix type is JSON
    assert client.post("/api/v2/alerts", content=body).status_code == 200
    assert client.post("/api/v2/alerts", content=body,
                       headers={"Content-Type": "application/vnd.x+json; charset=utf-8"}).status_code == 200


def test_a_null_body_is_no_alerts_to_alertmanagers_route_and_refused_elsewhere(client, sent):
    # Alertmanager's go-swagger binds null to an empty list: 200, nothing taken
    resp = client.post("/api/v2/alerts", content=b"null",
                       headers={"Content-Type": "application/json"})
    assert resp.status_code == 200 and sent == []
    resp = client.post("/api/v2/silences", content=b"null",
                       headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and "deep" not in resp.text
    resp = client.post("/alerts", content=b"null", headers={"Content-Type": "application/json"})
    err = resp.json()["data"]["errors"][0]
    assert resp.status_code == 422 and err["field"] == "body" and "deep" not in err["rule"]


@pytest.mark.parametrize("raw", [b"", b"   ", b"[{", b"\xff\xfe"])
def test_empty_or_broken_bodies_are_400_naming_the_body(client, sent, raw):
    resp = client.post("/api/v2/alerts", content=raw, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and "body" in resp.json() and sent == []
    resp = client.post("/alerts", content=raw, headers={"Content-Type": "application/json"})
    assert resp.status_code == 422 and resp.json()["data"]["errors"][0]["field"] == "body"
    resp = client.post("/api/v2/silences", content=raw, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and "body" in resp.json()


@pytest.mark.parametrize("path, status", [("/alerts", 422), ("/silences", 422)])
def test_impossible_dates_are_refused_not_500(client, path, status):
    body = ({"rule": "Disk", "asset": "h1", "severity": "info", "time": "2026-99-01T00:00:00Z"}
            if path == "/alerts" else
            {"matchers": ['a="b"'], "endsAt": "2026-02-30T25:00:00Z", "createdBy": "o",
             "comment": "c"})
    resp = client.post(path, json=body)
    assert resp.status_code == status, resp.text
    assert resp.json()["data"]["errors"][0]["field"] in ("time", "endsAt")


def test_native_batch_with_one_bad_alert_takes_the_others(client, sent):
    alerts = [{"rule": "Disk", "asset": f"h{i}", "severity": "critical"} for i in range(50)]
    alerts[3]["severity"] = "loud"
    resp = client.post("/alerts", json=alerts)
    assert resp.status_code == 202, resp.text
    data = resp.json()["data"]
    assert data["accepted"] == 49 and len(data["ids"]) == 49
    assert data["rejected"] == [{"index": 3, "field": "[3].severity", "code": "literal",
                                 "rule": "unknown severity 'loud'",
                                 "accepted": data["rejected"][0]["accepted"]}]
    assert len(sent_alerts(sent)) == 49
    # every alert bad: 422 naming each
    resp = client.post("/alerts", json=[{"rule": "X"}, {"asset": "y"}])
    assert resp.status_code == 422
    assert [e["field"] for e in resp.json()["data"]["errors"]] == ["[0].asset", "[1].rule"]


# -- GET /api/v2/alerts and /alerts/groups ---------------------------------------------------

def test_get_alerts_reads_the_published_view_with_status(client, sent):
    publish_view(client, [am_alert(instance="api-1", team="web"),
                          am_alert(instance="api-2", team="web"),
                          am_alert("DiskFull", instance="db-1", team="db",
                                   **{"cloud.account.name": "prod"})])
    alerts = client.get("/api/v2/alerts").json()
    assert len(alerts) == 3
    assert [a["fingerprint"] for a in alerts] == sorted(a["fingerprint"] for a in alerts)
    by_instance = {a["labels"]["instance"]: a for a in alerts}
    a1 = by_instance["api-1"]
    assert a1["fingerprint"] == am_fingerprint(a1["labels"])
    assert a1["status"] == {"state": "active", "silencedBy": [], "inhibitedBy": []}
    assert a1["receivers"] == [{"name": "oncall"}]
    assert by_instance["db-1"]["receivers"] == [{"name": "dba"}]
    assert {"startsAt", "endsAt", "updatedAt", "annotations", "labels", "generatorURL"} <= set(a1)
    assert not any(k.startswith("_") for a in alerts for k in a)
    # filters: Alertmanager matchers, UTF-8 names included; receiver regex
    got = client.get("/api/v2/alerts", params={"filter": ['instance=~"api-.*"', "team=web"]}).json()
    assert sorted(a["labels"]["instance"] for a in got) == ["api-1", "api-2"]
    got = client.get("/api/v2/alerts", params={"filter": '{"cloud.account.name"="prod"}'}).json()
    assert [a["labels"]["instance"] for a in got] == ["db-1"]
    got = client.get("/api/v2/alerts", params={"receiver": "db."}).json()
    assert [a["labels"]["instance"] for a in got] == ["db-1"]
    assert len(client.get("/api/v2/alerts", params={"receiver": ""}).json()) == 3  # as absent
    assert client.get("/api/v2/alerts", params={"active": "false"}).json() == []
    # a silence created on the API mutes at once (computed at query time, as Alertmanager)
    sid = client.post("/api/v2/silences", json=SILENCE).json()["silenceID"]
    got = {a["labels"]["instance"]: a for a in client.get("/api/v2/alerts").json()}
    assert got["api-2"]["status"] == {"state": "suppressed", "silencedBy": [sid], "inhibitedBy": []}
    hidden = client.get("/api/v2/alerts", params={"silenced": "false"}).json()
    assert sorted(a["labels"]["instance"] for a in hidden) == ["api-1", "db-1"]
    # groups: by receiver and the config's group_by ([rule]), labelled as the webhook's
    # groupLabels are (Plait's rule is Alertmanager's alertname)
    groups = client.get("/api/v2/alerts/groups").json()
    assert all(set(g["labels"]) == {"alertname"} for g in groups), groups
    assert sorted((g["receiver"]["name"], g["labels"]["alertname"], len(g["alerts"])) for g in groups) == [
        ("dba", "DiskFull", 1), ("oncall", "PodDown", 2)]
    groups = client.get("/api/v2/alerts/groups", params={"silenced": "false",
                                                         "filter": "alertname=PodDown"}).json()
    assert [len(g["alerts"]) for g in groups] == [1]


def test_groups_are_per_route_and_leave_out_group_by_labels_the_alerts_lack(client):
    from alerting.config import parse_config

    # given two routes to one receiver that group alike, and a group_by label no alert has
    config = parse_config({
        "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook"}],
        "route": {"receiver": "oncall", "routes": [
            {"matchers": ['team="a"'], "receiver": "oncall", "group_by": ["env", "cluster"]},
            {"matchers": ['team="b"'], "receiver": "oncall", "group_by": ["env", "cluster"]}]}})
    publish_view(client, [am_alert("A1", team="a", env="e"), am_alert("B1", team="b", env="e")],
                 config=config)
    groups = client.get("/api/v2/alerts/groups").json()
    # then Alertmanager's answer: a group per route, labelled without cluster
    assert sorted((g["labels"]["env"], g["alerts"][0]["labels"]["alertname"]) for g in groups) == [
        ("e", "A1"), ("e", "B1")], groups
    assert all(g["labels"] == {"env": "e"} and len(g["alerts"]) == 1 for g in groups), groups
    assert all("_route" not in a for a in client.get("/api/v2/alerts").json())


def test_an_alert_continue_sends_to_two_receivers_is_listed_once_with_both(client):
    from alerting.config import parse_config

    config = parse_config({
        "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook"},
                      {"name": "audit", "url": "http://127.0.0.1:9/audit"}],
        "route": {"receiver": "oncall", "routes": [
            {"matchers": ['team="a"'], "receiver": "audit", "continue": True},
            {"matchers": ['team="a"'], "receiver": "oncall"}]}})
    publish_view(client, [am_alert("A1", team="a")], config=config)
    # Alertmanager: one alert, receivers [audit, oncall]; the receiver filter sees them all
    for params in ({}, {"receiver": "oncall"}, {"receiver": "audit"}):
        got = client.get("/api/v2/alerts", params=params).json()
        assert [sorted(r["name"] for r in a["receivers"]) for a in got] == [["audit", "oncall"]], params
    # and a group per route
    groups = client.get("/api/v2/alerts/groups").json()
    assert sorted(g["receiver"]["name"] for g in groups) == ["audit", "oncall"]


def test_groups_and_receivers_come_in_alertmanagers_order(client):
    from alerting.config import parse_config

    # given a continue route to zeta grouping by [alertname, cluster], then alpha by [alertname]
    config = parse_config({
        "receivers": [{"name": n, "url": f"http://127.0.0.1:9/{n}"}
                      for n in ("oncall", "alpha", "zeta")],
        "grouping": {"group_by": ["alertname"]},
        "route": {"receiver": "oncall", "routes": [
            {"matchers": ['team="a"'], "receiver": "zeta", "continue": True,
             "group_by": ["alertname", "cluster"]},
            {"matchers": ['team="a"'], "receiver": "alpha"}]}})
    hosts = ["h3", "h1", "h4", "h2"]
    publish_view(client, [am_alert("A1", team="a", cluster="c1", job="node", instance=h)
                          for h in hosts] + [am_alert("B1", team="b")], config=config)
    # then GET /alerts lists an alert's receivers in route order (route.Match)
    got = client.get("/api/v2/alerts", params={"filter": "team=a"}).json()
    assert {tuple(r["name"] for r in a["receivers"]) for a in got} == {("zeta", "alpha")}
    # and the groups: fewer group labels first, then by their values (AlertGroups.Less); alerts
    # by job, instance (AlertSlice.Less); every receiver an alert reached, by name (Groups)
    groups = client.get("/api/v2/alerts/groups").json()
    assert [(g["receiver"]["name"], g["labels"]) for g in groups] == [
        ("alpha", {"alertname": "A1"}), ("oncall", {"alertname": "B1"}),
        ("zeta", {"alertname": "A1", "cluster": "c1"})]
    for g in (groups[0], groups[2]):
        assert [a["labels"]["instance"] for a in g["alerts"]] == sorted(hosts)
        assert {tuple(r["name"] for r in a["receivers"]) for a in g["alerts"]} == {
            ("alpha", "zeta")}


def test_a_regex_silence_is_compiled_once_not_on_every_get(client, sent, monkeypatch):
    from alerting import matchers

    compiles = []
    real = matchers._anchored
    monkeypatch.setattr(matchers, "_anchored", lambda p: compiles.append(p) or real(p))
    body = SILENCE | {"matchers": [{"name": "instance", "value": "api-.*", "isRegex": True},
                                   {"name": "alertname", "value": "PodDown", "isRegex": False}]}
    assert client.post("/api/v2/silences", json=body).status_code == 200
    publish_view(client, [am_alert(instance="api-1"), am_alert(instance="api-2")])
    first = client.get("/api/v2/alerts").json()
    assert {a["status"]["state"] for a in first} == {"suppressed"}
    n = len(compiles)
    for _ in range(3):
        assert client.get("/api/v2/alerts").json() == first
    assert len(compiles) == n, compiles[n:]


def test_inhibited_alerts_are_shown_and_filtered(client, sent):
    def inhibit(state):
        for ep in state["episodes"].values():
            if ep["alert"]["labels"].get("instance") == "api-2":
                ep["inhibited_by"] = ["0123456789abcdef"]

    publish_view(client, [am_alert(instance="api-1"), am_alert(instance="api-2")], mutate=inhibit)
    got = {a["labels"]["instance"]: a for a in client.get("/api/v2/alerts").json()}
    assert got["api-2"]["status"] == {"state": "suppressed", "silencedBy": [],
                                      "inhibitedBy": ["0123456789abcdef"]}
    shown = client.get("/api/v2/alerts", params={"inhibited": "false"}).json()
    assert [a["labels"]["instance"] for a in shown] == ["api-1"]


@pytest.mark.parametrize("params, field", [({"filter": '{a="1",b="2"}'}, "filter"),
                                           ({"filter": 'a="unclosed'}, "filter"),
                                           ({"receiver": "("}, "receiver"),
                                           ({"receiver": "a++"}, "receiver"),
                                           ({"filter": 'a=~"(?=x)"'}, "filter"),
                                           ({"active": "maybe"}, "active")])
def test_bad_query_parameters_are_400_naming_them(client, params, field):
    resp = client.get("/api/v2/alerts", params=params)
    assert resp.status_code == 400 and resp.json().startswith(field), resp.text


# -- silences: one store ---------------------------------------------------------------------

def test_is_equal_null_is_the_default_true_as_alertmanager_reads_it(client, sent):
    body = SILENCE | {"matchers": [{"name": "alertname", "value": "PodDown", "isRegex": False,
                                    "isEqual": None}]}
    resp = client.post("/api/v2/silences", json=body)
    assert resp.status_code == 200, resp.text
    s = client.get(f"/api/v2/silence/{resp.json()['silenceID']}").json()
    assert s["matchers"] == [{"name": "alertname", "value": "PodDown", "isRegex": False,
                              "isEqual": True}]


def test_silences_round_trip_and_share_the_native_store(client, sent):
    resp = client.post("/api/v2/silences", json=SILENCE)
    assert resp.status_code == 200, resp.text
    sid = resp.json()["silenceID"]
    assert len(sid) == 36  # a UUID, as Alertmanager's
    # every funnel partition got the command
    assert [r[3] for r in sent if r[0].endswith("alerts.funnel")] == [0, 1]
    s = client.get(f"/api/v2/silence/{sid}").json()
    assert s["status"] == {"state": "active"} and s["createdBy"] == "ops"
    assert s["matchers"] == [
        {"name": "alertname", "value": "PodDown", "isRegex": False, "isEqual": True},
        {"name": "instance", "value": "api-2", "isRegex": False, "isEqual": True}]
    assert {"id", "updatedAt", "startsAt", "endsAt", "comment"} <= set(s)
    # the native route lists the same silence, and its silences show on /api/v2
    assert sid in [x["id"] for x in client.get("/silences").json()["data"]["silences"]]
    native = client.post("/silences", json={"matchers": ['"cloud.account.name"="prod"'],
                                            "endsAt": LATER, "createdBy": "ops", "comment": "y"})
    assert native.status_code == 201, native.text
    nid = native.json()["data"]["silenceId"]
    listed = client.get("/api/v2/silences").json()
    assert {x["id"] for x in listed} == {sid, nid}
    got = client.get("/api/v2/silences", params={"filter": 'instance="api-2"'}).json()
    assert [x["id"] for x in got] == [sid]
    # expire: 200 with no body; then expired, listed last
    resp = client.delete(f"/api/v2/silence/{sid}")
    assert resp.status_code == 200 and resp.content == b""
    assert client.get(f"/api/v2/silence/{sid}").json()["status"]["state"] == "expired"
    assert [x["id"] for x in client.get("/api/v2/silences").json()] == [nid, sid]
    assert client.delete(f"/api/v2/silence/{sid}").status_code == 200  # expiring again: no-op
    # expire through the native route works on the same id
    assert client.delete(f"/silences/{nid}").status_code == 200
    assert client.get(f"/api/v2/silence/{nid}").json()["status"]["state"] == "expired"


def test_a_silence_with_bytes_that_are_not_utf8_is_taken_as_alertmanager_takes_it(client, sent):
    # given a silence whose matcher value and comment hold bytes that are not UTF-8
    body = json.dumps(SILENCE | {"comment": "CMT"}).replace("api-2", "VAL").encode()
    body = body.replace(b"VAL", b"api\xff2").replace(b"CMT", b"cut \xe2\x82")
    resp = client.post("/api/v2/silences", content=body, headers={"Content-Type": "application/json"})
    # then it is created with one U+FFFD per byte, as Alertmanager (Go's encoding/json) reads it
    assert resp.status_code == 200, resp.text
    s = client.get(f"/api/v2/silence/{resp.json()['silenceID']}").json()
    assert s["matchers"][1]["value"] == "api\ufffd2" and s["comment"] == "cut \ufffd\ufffd"


def test_unknown_silences_are_404(client):
    unknown = "7d0d0c36-7a1d-4d8e-9a53-2f1d3c1b0a00"
    resp = client.get(f"/api/v2/silence/{unknown}")
    assert resp.status_code == 404 and unknown in resp.json()
    assert client.delete(f"/api/v2/silence/{unknown}").status_code == 404
    resp = client.post("/api/v2/silences", json=SILENCE | {"id": unknown})
    assert resp.status_code == 404 and unknown in resp.json()


def test_updating_a_silence_keeps_or_replaces_it_as_alertmanager(client, sent):
    sid = client.post("/api/v2/silences", json=SILENCE).json()["silenceID"]
    first = client.get(f"/api/v2/silence/{sid}").json()
    # same matchers, same start, later end: updated in place
    longer = SILENCE | {"id": sid, "startsAt": first["startsAt"],
                        "endsAt": _iso(NOW + timedelta(hours=3))}
    assert client.post("/api/v2/silences", json=longer).json()["silenceID"] == sid
    assert client.get(f"/api/v2/silence/{sid}").json()["endsAt"] == longer["endsAt"]
    # other matchers: a new silence, the old one expired
    other = SILENCE | {"id": sid, "matchers": [{"name": "instance", "value": "api-3",
                                                "isRegex": False}]}
    new = client.post("/api/v2/silences", json=other).json()["silenceID"]
    assert new != sid
    assert client.get(f"/api/v2/silence/{sid}").json()["status"]["state"] == "expired"


@pytest.mark.parametrize("change, field", [
    ({"endsAt": _iso(NOW - timedelta(hours=1))}, "endsAt"),
    ({"matchers": []}, "matchers"),
    ({"matchers": [{"name": "a", "value": "x"}]}, "matchers.0.isRegex"),
    ({"matchers": [{"name": "a", "value": "(", "isRegex": True}]}, "matchers.0"),
    # valid for Python's engines, refused by Go's regexp (RE2), as Alertmanager refuses them
    ({"matchers": [{"name": "a", "value": "a++", "isRegex": True}]}, "matchers.0"),
    ({"matchers": [{"name": "a", "value": r"(?P<x>a)\1", "isRegex": True}]}, "matchers.0"),
    ({"matchers": [{"name": "a", "value": "(?=a)b", "isRegex": True}]}, "matchers.0"),
    # valid anchored (^(?:a)|(b)$, so a filter takes it) but not as written, as Alertmanager
    # validates a silence's regex
    ({"matchers": [{"name": "a", "value": "a)|(b", "isRegex": True}]}, "matchers.0"),
    ({"matchers": [{"name": "a", "value": "x", "isRegex": "yes"}]}, "matchers.0.isRegex"),
    ({"matchers": [{"name": "a", "value": "x", "isRegex": 1}]}, "matchers.0.isRegex"),
    ({"matchers": [{"name": "a", "value": "x", "isRegex": False, "isEqual": "false"}]},
     "matchers.0.isEqual"),
    ({"matchers": [{"name": "a", "value": ".*", "isRegex": True}]}, "matchers"),
    ({"createdBy": None}, "createdBy"),
    ({"comment": 42}, "comment"),
    ({"startsAt": "tomorrow"}, "startsAt"),
])
def test_bad_silences_are_400_naming_the_field(client, sent, change, field):
    resp = client.post("/api/v2/silences", json=SILENCE | change)
    assert resp.status_code == 400, resp.text
    assert resp.json().startswith(field) and sent == []


@pytest.mark.parametrize("matcher", [
    {"name": "foo", "value": "", "isRegex": False, "isEqual": False},  # foo!=""
    {"name": "alertname", "value": "x", "isRegex": False, "isEqual": False},
    {"name": "foo", "value": "", "isRegex": True, "isEqual": False},  # foo!~""
])
def test_silences_of_negative_matchers_are_taken_as_alertmanager_takes_them(client, sent, matcher):
    # when amtool adds a silence whose only matcher is negative (Alertmanager's matchesEmpty
    # counts no negative matcher as matching the empty string)
    resp = client.post("/api/v2/silences", json=SILENCE | {"matchers": [matcher]})
    # then it is created and sent to the funnel, which takes it too (allowBroad kept with it)
    assert resp.status_code == 200, resp.text
    sid = resp.json()["silenceID"]
    assert client.get(f"/api/v2/silence/{sid}").json()["status"]["state"] == "active"
    native = {x["id"]: x for x in client.get("/silences").json()["data"]["silences"]}
    assert native[sid]["allowBroad"] is True
    # while Plait's own route still asks for allowBroad, saying why
    text = f'{matcher["name"]}{"!~" if matcher["isRegex"] else "!="}"{matcher["value"]}"'
    own = client.post("/silences", json={"matchers": [text], "endsAt": LATER,
                                         "createdBy": "ops", "comment": "y"})
    assert own.status_code == 422 and "or is negative" in own.text, own.text


def test_expiring_a_pending_silence_ends_it_now_as_alertmanager(client, sent):
    # given a silence that starts tomorrow
    pending = SILENCE | {"startsAt": _iso(NOW + timedelta(days=1)),
                         "endsAt": _iso(NOW + timedelta(days=2))}
    sid = client.post("/api/v2/silences", json=pending).json()["silenceID"]
    assert client.get(f"/api/v2/silence/{sid}").json()["status"]["state"] == "pending"
    # when it is expired, then it is expired, starting and ending now
    assert client.delete(f"/api/v2/silence/{sid}").status_code == 200
    got = client.get(f"/api/v2/silence/{sid}").json()
    assert got["status"]["state"] == "expired" and got["startsAt"] == got["endsAt"], got
    assert got["endsAt"] < pending["startsAt"]


@pytest.mark.parametrize("path, status", [("/api/v2/alerts", 400), ("/alerts", 422),
                                          ("/api/v2/silences", 400), ("/silences", 422)])
@pytest.mark.parametrize("depth", [65, 500, 100_000])
def test_a_body_nested_too_deep_is_refused_not_500(client, sent, path, status, depth):
    raw = ("[" * depth + "]" * depth).encode()
    resp = client.post(path, content=raw, headers={"Content-Type": "application/json"})
    assert resp.status_code == status, resp.text
    assert "body" in resp.text and sent == []


# -- status and receivers ----------------------------------------------------------------------

def test_status_and_receivers(client):
    st = client.get("/api/v2/status").json()
    # no cluster: status disabled, no name, no peers (amtool cluster show: an empty Node Name)
    assert st["cluster"] == {"status": "disabled", "peers": []}
    assert set(st["versionInfo"]) == {"version", "revision", "branch", "buildUser", "buildDate",
                                      "goVersion"}
    assert "change-me" not in st["config"]["original"] and "<secret>" in st["config"]["original"]
    assert st["uptime"].endswith("Z")
    assert client.get("/api/v2/receivers").json() == [{"name": "oncall"}, {"name": "dba"}]


AMTOOL = shutil.which("amtool")
EVERY_KIND = {
    "receivers": [
        {"name": "hook", "url": "https://user:pw@hooks.example.com/T0/secret-path?token=t1",
         "secret": "hmac-key-1", "headers": {"X-Key": "header-secret"}, "max_alerts": 5},
        {"name": "chat", "type": "slack", "url": "https://hooks.slack.com/services/T/B/slack-secret"},
        {"name": "teams", "type": "teams", "url": "https://teams.example.com/wf/teams-secret"},
        {"name": "pager", "type": "pagerduty", "routing_key": "pd-routing-key-secret"},
        {"name": "genie", "type": "opsgenie", "api_key": "genie-key-secret",
         "url": "https://api.eu.opsgenie.com/v2/alerts"},
        {"name": "mail", "type": "email", "email": {"to": "a@example.com, b@example.com",
                                                      "from": "plait@example.com",
                                                      "smarthost": "smtp.example.com:587",
                                                      "auth_username": "u", "auth_password": "smtp-secret"}}],
    "route": {"receiver": "hook", "routes": [
        {"matchers": ['rule=~"Disk.*"'], "receiver": "pager", "continue": True, "group_wait": "1500ms",
         "routes": [{"matchers": ['team="db"'], "receiver": "mail", "mute_time_intervals": ["nights"]}]},
        {"matchers": ["severity=info"], "receiver": "chat", "group_by": ["rule", "asset"]}]},
    "grouping": {"group_by": ["rule"]},
    "timing": {"group_wait": 0, "group_interval": "5m", "repeat_interval": "4h", "resolve_timeout": "90s"},
    "inhibit_rules": [{"source_matchers": ['rule="NodeDown"'], "target_matchers": ['severity!="critical"'],
                       "equal": ["rule", "asset"]}],
    "time_intervals": [{"name": "nights", "time_intervals": [
        {"times": [{"start_time": "22:00", "end_time": "24:00"}], "weekdays": ["monday:friday"]}]}],
}


def test_the_status_config_is_an_alertmanager_config_without_secrets(tmp_path):
    from alerting.config import parse_config
    from api.alertmanager import alertmanager_config

    text = alertmanager_config(parse_config(EVERY_KIND))
    for secret in ("pw", "secret-path", "t1", "hmac-key-1", "header-secret", "slack-secret",
                   "teams-secret", "pd-routing-key-secret", "genie-key-secret", "smtp-secret"):
        assert secret not in text, secret
    doc = yaml.safe_load(text)
    assert doc["global"] == {"resolve_timeout": "90s"}
    route = doc["route"]
    assert (route["receiver"], route["group_by"], route["group_wait"], route["repeat_interval"]) == (
        "hook", ["alertname"], "0s", "4h")
    disk, info = route["routes"]
    assert disk == {"receiver": "pager", "group_wait": "1500ms", "matchers": ['alertname=~"Disk.*"'],
                    "continue": True, "routes": [{"receiver": "mail", "matchers": ['team="db"'],
                                                  "mute_time_intervals": ["nights"]}]}
    assert info["group_by"] == ["alertname", "asset"]
    kinds = {r["name"]: next(k for k in r if k.endswith("_configs")) for r in doc["receivers"]}
    assert kinds == {"hook": "webhook_configs", "chat": "slack_configs", "teams": "webhook_configs",
                     "pager": "pagerduty_configs", "genie": "opsgenie_configs", "mail": "email_configs"}
    by_name = {r["name"]: r for r in doc["receivers"]}
    assert "url" not in by_name["pager"]["pagerduty_configs"][0]  # the default endpoint
    assert by_name["genie"]["opsgenie_configs"][0]["api_url"] == "https://api.eu.opsgenie.com/<secret>"
    hook = doc["receivers"][0]["webhook_configs"][0]
    assert hook == {"url": "https://hooks.example.com/<secret>", "send_resolved": True, "max_alerts": 5}
    assert doc["inhibit_rules"][0]["equal"] == ["alertname", "asset"]
    if AMTOOL is None:
        pytest.skip("amtool is absent (apt-get install prometheus-alertmanager): the rendered config "
                    "was checked for shape, not by Alertmanager's own loader")
    path = tmp_path / "alertmanager.yml"
    path.write_text(text)
    out = subprocess.run([AMTOOL, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_the_routes_are_described_in_openapi(client):
    paths = client.get("/openapi.json").json()["paths"]
    for path, methods in {"/api/v2/alerts": {"get", "post"}, "/api/v2/alerts/groups": {"get"},
                          "/api/v2/silences": {"get", "post"},
                          "/api/v2/silence/{silenceID}": {"get", "delete"},
                          "/api/v2/status": {"get"}, "/api/v2/receivers": {"get"}}.items():
        assert methods <= set(paths[path]), path
    assert "requestBody" in paths["/api/v2/alerts"]["post"]
    assert paths["/api/v2/alerts"]["post"]["responses"]["400"]["content"]["application/json"][
        "schema"]["type"] == "string"


# -- times an RFC 3339 timestamp cannot name in UTC -------------------------------------------

FAR = "9999-12-31T23:59:59-14:00"  # a valid RFC 3339 text whose instant lies in year 10000


@pytest.mark.parametrize("times, field", [
    ({"endsAt": FAR}, "[0].endsAt"),
    ({"startsAt": 10 ** 400}, "[0].startsAt"),
    ({"startsAt": 1e20}, "[0].startsAt"),
])
def test_a_time_past_year_9999_in_utc_is_refused_and_the_listing_stays_up(client, sent, times,
                                                                         field):
    raw = json.dumps([am_alert() | times]).encode()  # 10 ** 400 as JSON digits
    resp = client.post("/api/v2/alerts", content=raw, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert field in resp.json() and "0001-9999" in resp.json() and sent == []
    assert client.get("/api/v2/alerts").status_code == 200


def test_a_silence_past_year_9999_in_utc_is_refused_before_it_is_saved(client):
    before = client.get("/api/v2/silences").json()
    resp = client.post("/api/v2/silences", json=SILENCE | {"endsAt": FAR})
    assert resp.status_code == 400 and "endsAt" in resp.text, resp.text
    native = {"matchers": ['alertname="Far"'], "endsAt": FAR, "createdBy": "me", "comment": "c"}
    resp = client.post("/silences", json=native)
    assert resp.status_code == 422 and resp.json()["data"]["errors"][0]["field"] == "endsAt"
    assert client.get("/api/v2/silences").json() == before
    assert client.get("/silences").status_code == 200


def test_a_stored_time_past_the_range_lists_as_the_last_millisecond_rfc_3339_names():
    from alerting.intake import format_time, go_time, parse_time

    assert format_time(1e15) == "9999-12-31T23:59:59.999Z" and go_time(1e15).startswith(
        "9999-12-31T23:59:59.999")
    assert format_time(-1e15) == "0001-01-01T00:00:00Z"
    # the last second of year 9999 is in range to its end
    assert format_time(parse_time("9999-12-31T23:59:59.5Z", "endsAt")) == "9999-12-31T23:59:59.500Z"
