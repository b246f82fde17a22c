"""Silences that would mute everything, and regexes that would stall the worker."""
from __future__ import annotations

import pytest

from alerting.matchers import Matcher, compile_regex, parse_matcher, regex_hit
from alerting.silence import SilenceRefused, create_silence


def test_all_negative_matchers_are_refused_as_broad_unless_allowed():
    # asset!="" does not match the empty string, yet mutes every alert with an asset
    with pytest.raises(SilenceRefused, match="matchers"):
        create_silence({"matchers": ['asset!=""'], "ends_at": 100, "author": "me", "comment": "maintenance"}, 0, "s1")
    allowed = create_silence({"matchers": ['asset!=""'], "ends_at": 100, "author": "me", "comment": "maintenance", "allow_broad": True},
                             0, "s2")
    assert allowed.matches({"asset": "h1", "rule": "Disk"}, 10)
    narrow = create_silence({"matchers": ['asset="h1"', 'env!="prod"'], "ends_at": 100, "author": "me", "comment": "maintenance"}, 0, "s3")
    assert narrow.matches({"asset": "h1"}, 10) and not narrow.matches({"asset": "h2"}, 10)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("pattern, value, hit", [
    ("(x+x+)+y", "x" * 5000, False),       # nested quantifiers, no y: exponential for a backtracking engine
    (r"(?:a|a)*\d", "a" * 30, False),      # alternation under a star (each a: two ways)
    (r"(?:a|a)*\d", "a" * 30 + "7", True),
])
def test_a_pathological_regex_gets_its_true_answer_in_linear_time(pattern, value, hit):
    # RE2 (Go's regexp, Alertmanager's engine) matches in time linear in the
    # value: the answer is the true one, not a timeout; a backtracking engine
    # takes longer than the timeout here
    assert regex_hit(compile_regex(pattern)[0], value) is hit
    assert Matcher("rule", "=~", pattern).matches({"rule": value}) is hit
    assert Matcher("rule", "!~", pattern).matches({"rule": value}) is not hit


@pytest.mark.parametrize("pattern", ["a++", r"(?P<x>a)\1", "(?=a)b", "(?<!a)b", "(", r"caf\C+",
                                     r"\Qa\E\C"])
def test_what_go_regexp_refuses_is_refused_naming_the_pattern_as_given(pattern):
    with pytest.raises(ValueError) as e:
        parse_matcher(f'rule=~"{pattern.replace(chr(92), chr(92) * 2)}"')
    assert repr(pattern) in str(e.value) and "^(?:" not in str(e.value)


def test_a_lone_surrogate_is_matched_as_u_fffd_and_refused_in_a_pattern():
    # the old engine matched str as it was; RE2 takes UTF-8, which a lone surrogate is not
    assert Matcher("msg", "=~", "cut .*").matches({"msg": "cut \ud83d"})
    assert Matcher("msg", "=~", "cut \ufffd").matches({"msg": "cut \ud83d"})
    with pytest.raises(ValueError, match="surrogate"):
        parse_matcher({"name": "msg", "value": "cut \ud83d", "isRegex": True})


def test_dot_does_not_match_a_newline_as_in_go_regexp():
    # Alertmanager (Go's regexp, no (?s)): a silence v=~"x.y" leaves v="x\ny" active
    assert not Matcher("v", "=~", "x.y").matches({"v": "x\ny"})
    assert not Matcher("v", "=~", ".*").matches({"v": "a\nb"})
    assert Matcher("v", "=~", "(?s)x.y").matches({"v": "x\ny"})
    assert Matcher("v", "!~", "x.y").matches({"v": "x\ny"})


def test_a_compiled_pattern_lives_as_long_as_the_matcher_that_holds_it():
    import gc

    import re2

    def compiled_alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is re2._Regexp)

    # given a matcher in use (a silence's, a route's): compiled once, when it was checked
    kept = parse_matcher('pod=~"api-.*"')
    rx = kept._rx
    assert rx is not None and kept.matches({"pod": "api-1"}) and not kept.matches({"pod": "web-1"})
    assert kept._rx is rx
    # when 300 filters with patterns of their own are made, used and dropped (a request's)
    alive, held_by_re2 = compiled_alive(), re2._Regexp._make.cache_info().currsize
    for i in range(300):
        m = parse_matcher({"name": "x", "value": f"[ab]*a[ab]{{4}}|z{i}", "isRegex": True})
        assert m.matches({"x": "abab" * 8 + "abbbb"}) and not m.matches({"x": "b" * 8})
    del m
    # then nothing kept their compiled patterns: not this module, not the binding's own cache
    # (re2.compile keeps the last 128; each compiled pattern's DFA may grow to 8 MiB)
    assert compiled_alive() <= alive
    assert re2._Regexp._make.cache_info().currsize == held_by_re2


def test_a_quoted_or_escaped_backslash_c_is_literal_text_as_in_go():
    # \Q...\E quotes (Go takes it); \\C is a backslash then C
    assert parse_matcher({"name": "p", "value": r"\Qa\C\E", "isRegex": True}).matches({"p": "a\\C"})
    assert parse_matcher({"name": "p", "value": r"a\\C", "isRegex": True}).matches({"p": "a\\C"})


def test_a_pattern_that_closes_the_anchoring_group_matches_as_in_alertmanager():
    # Alertmanager compiles "^(?:" + v + ")$" and searches: a)|(b is ^(?:a)|(b)$
    m = parse_matcher({"name": "x", "value": "a)|(b", "isRegex": True})
    assert m.matches({"x": "xb"}) and m.matches({"x": "ax"}) and not m.matches({"x": "xa"})


def test_a_silence_tries_its_equality_matchers_before_its_regexes():
    class Costly:  # a regex that must not be run: the equality matcher already fails
        def search(self, value):
            raise AssertionError("the regex ran before the failing equality matcher")

    regex = parse_matcher({"name": "v", "value": "[ab]*a[ab]{16}", "isRegex": True})
    object.__setattr__(regex, "_rx", Costly())
    s = create_silence({"matchers": [{"name": "v", "value": "[ab]*a[ab]{16}", "isRegex": True},
                                     {"name": "alertname", "value": "X", "isRegex": False}],
                        "author": "a", "comment": "c", "ends_at": 5000.0}, 1000.0, "s1")
    s = type(s)(s.id, (regex, s.matchers[1]), s.starts_at, s.ends_at, s.author, s.comment)
    assert not s.matches({"alertname": "Y", "v": "ab" * 2000}, 2000.0)
    assert [m.name for m in s.matchers] == ["v", "alertname"]  # as given, for the API
