"""Matchers in Alertmanager 0.25-0.28 syntax, UTF-8 label names included
(issue 11 item 2): silences, filters and config routes share one grammar."""
from __future__ import annotations

import pytest

from alerting.config import parse_config
from alerting.matchers import Matcher, parse_matcher, parse_matchers
from alerting.silence import SilenceRefused, create_silence
from alerting.wire import receiver_for
from alerting.model import Alert, Severity, Status


@pytest.mark.parametrize("text, expected", [
    ('{"cloud.account.name"="prod"}', ("cloud.account.name", "=", "prod")),
    ('"cloud.account.name"="prod"', ("cloud.account.name", "=", "prod")),
    ("cloud.account.name=prod", ("cloud.account.name", "=", "prod")),   # 0.28 bare UTF-8 name
    ("alertname=PodDown", ("alertname", "=", "PodDown")),               # amtool's bare value
    ('"région"!~"eu-.*"', ("région", "!~", "eu-.*")),
    ('"a b"=~"x|y"', ("a b", "=~", "x|y")),
    ('pod=~"api\\.1"', ("pod", "=~", "api\\.1")),                      # classic: \. kept
    ('msg="tab\\there"', ("msg", "=", "tab\\there")),                # classic: \t kept
    ('"msg"="tab\\there"', ("msg", "=", "tab\there")),               # UTF-8 (Go) escapes
    ('1env="x"', ("1env", "=", "x")),                                 # 0.27+ bare UTF-8 name
    ("env=", ("env", "=", "")),
    ('  team = "db"  ', ("team", "=", "db")),
])
def test_alertmanager_matcher_syntax(text, expected):
    m = parse_matcher(text)
    assert (m.name, m.op, m.value) == expected
    assert parse_matcher(str(m)) == m   # the canonical text reads back


def test_utf8_name_is_quoted_in_the_canonical_text():
    assert str(Matcher("cloud.account.name", "=", "prod")) == '"cloud.account.name"="prod"'
    assert str(Matcher("env", "=", "prod")) == 'env="prod"'


@pytest.mark.parametrize("text", ['"unclosed="x"', 'a="x"y', 'a="x', "a b=c", "=x", 'a=="x"',
                                  "", "{}"])
def test_bad_matcher_text_raises(text):
    with pytest.raises(ValueError):
        parse_matcher(text)


def test_selectors_split_outside_quotes_only():
    assert [str(m) for m in parse_matchers('{a="1", b=~"x,y",}')] == ['a="1"', 'b=~"x,y"']
    assert [str(m) for m in parse_matchers('{"cloud.account.name"="prod",team="db"}')] == [
        '"cloud.account.name"="prod"', 'team="db"']
    with pytest.raises(ValueError):
        parse_matchers('a="1",,b="2"')
    # pkg/labels ParseMatchers trims one { and one } on their own; ParseMatcher (one matcher,
    # as API filters and amtool read) does not
    assert [str(m) for m in parse_matchers('{a="1"')] == ['a="1"']
    with pytest.raises(ValueError):
        parse_matcher('{a="1"')


def test_silence_with_a_utf8_label_name_matches():
    s = create_silence({"matchers": ['{"cloud.account.name"="prod"}'], "author": "ops",
                        "comment": "x", "starts_at": 0, "ends_at": 100}, 10, "s1")
    assert s.matches({"cloud.account.name": "prod"}, 10)
    assert not s.matches({"cloud.account.name": "dev"}, 10)


def test_silence_selector_item_expands_to_every_matcher():
    s = create_silence({"matchers": ['{alertname="PodDown", pod="api-2"}'], "author": "ops",
                        "comment": "x", "starts_at": 0, "ends_at": 100}, 10, "s1")
    assert [str(m) for m in s.matchers] == ['alertname="PodDown"', 'pod="api-2"']


def test_config_route_accepts_utf8_matchers_and_routes_by_them():
    cfg = parse_config({
        "receivers": [{"name": "default", "url": "http://127.0.0.1:1/a"},
                      {"name": "prod", "url": "http://127.0.0.1:1/b"}],
        "route": {"receiver": "default", "routes": [
            {"matchers": ['{"cloud.account.name"="prod", severity=~"crit.*"}'],
             "receiver": "prod"}]}})
    assert cfg.route.routes[0].matchers == ['"cloud.account.name"="prod"', 'severity=~"crit.*"']
    alert = Alert("Disk", "h1", Severity.CRITICAL, Status.FIRING,
                  labels={"cloud.account.name": "prod"})
    assert receiver_for(cfg, alert) == "prod"
    other = Alert("Disk", "h1", Severity.CRITICAL, Status.FIRING,
                  labels={"cloud.account.name": "dev"})
    assert receiver_for(cfg, other) == "default"


@pytest.mark.parametrize("item", ["", "{}", " , "])
def test_a_silence_matcher_text_without_a_matcher_is_refused(item):
    with pytest.raises(SilenceRefused, match=r"matchers\.1"):
        create_silence({"matchers": ['a="1"', item], "author": "ops", "comment": "x",
                        "starts_at": 0, "ends_at": 100, "allow_broad": True}, 10, "s1")
