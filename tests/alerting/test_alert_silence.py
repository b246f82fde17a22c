"""Silences: Alertmanager matcher semantics, validity, recurring windows in
an IANA zone, the broad-silence refusal, and silences inside the funnel."""
from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from alert_harness import case_config, ev, run

from alerting.matchers import parse_matcher
from alerting.silence import Silence, SilenceRefused, TimeInterval, create_silence, is_broad

BASE = {"author": "ops", "comment": "why", "starts_at": 0, "ends_at": 1000}


@pytest.mark.parametrize("text, labels, hit", [
    ('env="prod"', {"env": "prod"}, True),
    ('env="prod"', {"env": "production"}, False),
    ('env!="prod"', {}, True),
    ('env=~"prod"', {"env": "production"}, False),   # anchored: not a substring search
    ('env=~"prod.*"', {"env": "production"}, True),
    ('env=~"a|b"', {"env": "b"}, True),               # anchoring wraps the alternation
    ('env=~"a|b"', {"env": "ab"}, False),
    ('env!~"prod.*"', {}, True),                      # absent label = ""
    ('env!~"prod.*"', {"env": "prod-eu"}, False),
    ("team = 'db'", {"team": "'db'"}, True),         # Alertmanager: ' is not a quote
    ("team = 'db'", {"team": "db"}, False),
    ('1env="x"', {"1env": "x"}, True),                # 0.27+: a bare name may start with 0-9
    ('msg="say \\"hi\\""', {"msg": 'say "hi"'}, True),
])
def test_matcher_semantics(text, labels, hit):
    assert parse_matcher(text).matches(labels) is hit


@pytest.mark.parametrize("spec", ['env', 'env=="x"', 'env=~"("', 42])
def test_bad_matchers_raise(spec):
    with pytest.raises(ValueError):
        parse_matcher(spec)


def test_alertmanager_api_matcher_objects():
    m = parse_matcher({"name": "env", "value": "prod.*", "isRegex": True, "isEqual": False})
    assert (m.name, m.op, m.value) == ("env", "!~", "prod.*")


@pytest.mark.parametrize("matchers, broad", [
    (['env!~"prod.*"'], True), (['env=~".*"'], True), (['env=""'], True), (['env!="x"'], True),
    (['env="prod"'], False), (['env!~"prod.*"', 'asset="h1"'], False), (['env=~".+"'], False),
])
def test_broad_means_every_matcher_matches_the_empty_string(matchers, broad):
    assert is_broad([parse_matcher(m) for m in matchers]) is broad


@pytest.mark.parametrize("change, field", [
    ({"matchers": []}, "matchers"),
    ({"matchers": ['env!~"prod.*"']}, "matchers"),
    ({"matchers": ["bad"]}, "matchers.0"),
    ({"author": None}, "author"),
    ({"comment": None}, "comment"),
    ({"ends_at": 0}, "ends_at"),
    ({"ends_at": None}, "ends_at"),
    ({"time_intervals": [{"weekdays": ["funday"]}]}, "time_intervals.0.weekdays"),
    ({"time_intervals": [{"location": "Mars/Olympus"}]}, "time_intervals.0.location"),
    ({"time_intervals": [{"times": [{"start_time": "23:00", "end_time": "22:00"}]}]}, "time_intervals.0.times.0"),
])
def test_refused_silences_name_the_key(change, field):
    spec = dict(BASE, matchers=['asset="h1"']) | change
    with pytest.raises(SilenceRefused) as err:
        create_silence(spec, 0, "s1")
    assert err.value.field == field


def test_validity_is_half_open_and_round_trips():
    s = create_silence(dict(BASE, matchers=['asset="h1"'], starts_at=100, ends_at=200), 0, "s1")
    assert [s.active(t) for t in (99, 100, 199, 200)] == [False, True, True, False]
    assert Silence.from_dict(s.to_dict()) == s


def test_recurring_weekday_window_in_iana_zone():
    # given weeknights 22:00-24:00 Paris time, open-ended
    s = create_silence({"matchers": ['asset="db1"'], "author": "ops", "comment": "backup",
                        "time_intervals": [{"weekdays": ["monday:friday"],
                                            "times": [{"start_time": "22:00", "end_time": "24:00"}],
                                            "location": "Europe/Paris"}]}, 0, "s1")
    paris = ZoneInfo("Europe/Paris")
    at = lambda *a: datetime(*a, tzinfo=paris).timestamp()  # noqa: E731
    # then Wednesday 22:30 Paris is inside (20:30 UTC in summer), 21:59 and Saturday are not
    assert s.matches({"asset": "db1"}, at(2024, 7, 3, 22, 30))
    assert not s.matches({"asset": "db1"}, at(2024, 7, 3, 21, 59))
    assert not s.matches({"asset": "db1"}, at(2024, 7, 6, 22, 30))
    assert not s.matches({"asset": "db2"}, at(2024, 7, 3, 22, 30))
    assert TimeInterval.parse(s.time_intervals[0].to_dict(), "t") == s.time_intervals[0]


def test_silence_created_mid_episode_mutes_reminders_and_swallows_resolve():
    # given Disk on h1 notified at 30; a silence from 100 to 1000; resolve at 500 (silenced)
    def setup(f):
        f.add_silence(dict(BASE, matchers=['asset="h1"'], starts_at=100), 0)
    events = [(0, ev("Disk", "h1")), (500, ev("Disk", "h1", status="resolved"))]
    # when the funnel runs past the repeat interval
    r = run(case_config(), events, 1100, setup=setup)
    # then only the first message: no reminder at 330, no resolve at 500 or after the silence
    assert [t for t, _ in r.messages()] == [30]
    assert r.outcomes() == {"delivered": 1, "silenced": 1}
    assert r.funnel.state["groups"] == {} and r.funnel.state["episodes"] == {}


def test_expired_silence_releases_a_still_firing_alert():
    ids = []
    events = [(0, ev("Disk", "h1"))]
    r = run(case_config(), events, 50, setup=lambda f: ids.append(
        f.add_silence(dict(BASE, matchers=['asset="h1"']), 0).id))
    assert r.messages() == []
    # when the silence is expired by hand at 50.5, then the next tick releases
    # the alert into its group, whose timer has run since the alert arrived at
    # 0 (flushes at 30, 60...: Alertmanager groups a silenced alert on
    # receipt), so it is told at the flush at 60
    r.funnel.expire_silence(ids[0], 50.5)
    for t in range(51, 90):
        r.tick(float(t))
    assert [t for t, _ in r.messages()] == [60]
    assert r.funnel.expire_silence("nope", 90) is False


def test_expiring_a_pending_silence_ends_it_now_not_at_its_start():
    from alerting.silence import end_now

    # a silence starting tomorrow, expired today: it starts and ends now (Alertmanager's expire)
    d = {"starts_at": 2000.0, "ends_at": 3000.0}
    assert end_now(d, 1000.0) and d == {"starts_at": 1000.0, "ends_at": 1000.0}
    # an active one ends now and keeps its start; an ended one is left as it is
    d = {"starts_at": 500.0, "ends_at": 3000.0}
    assert end_now(d, 1000.0) and d == {"starts_at": 500.0, "ends_at": 1000.0}
    assert not end_now(d, 1500.0) and d == {"starts_at": 500.0, "ends_at": 1000.0}
