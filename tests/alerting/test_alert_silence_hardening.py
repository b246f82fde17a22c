"""Silences that would mute everything, and regexes that would stall the worker."""
from __future__ import annotations

import time

import pytest

from alerting.silence import Matcher, SilenceRefused, create_silence, regex_hit


def test_all_negative_matchers_are_refused_as_broad_unless_allowed():
    # asset!="" does not match the empty string, yet mutes every alert with an asset
    with pytest.raises(SilenceRefused, match="matchers"):
        create_silence({"matchers": ['asset!=""'], "ends_at": 100, "author": "me", "comment": "maintenance"}, 0, "s1")
    allowed = create_silence({"matchers": ['asset!=""'], "ends_at": 100, "author": "me", "comment": "maintenance", "allow_broad": True},
                             0, "s2")
    assert allowed.matches({"asset": "h1", "rule": "Disk"}, 10)
    narrow = create_silence({"matchers": ['asset="h1"', 'env!="prod"'], "ends_at": 100, "author": "me", "comment": "maintenance"}, 0, "s3")
    assert narrow.matches({"asset": "h1"}, 10) and not narrow.matches({"asset": "h2"}, 10)


def test_a_catastrophic_regex_fails_closed_quickly():
    # given a pattern with nested quantifiers and a long hostile value
    pattern, value = "(x+x+)+y", "x" * 5000
    # when it is matched, it returns within a bounded time
    t0 = time.monotonic()
    hit = regex_hit(pattern, value)
    assert time.monotonic() - t0 < 2
    # and a matcher that cannot decide matches nothing (=~ and !~ alike)
    assert hit in (False, None)
    assert not Matcher("rule", "=~", pattern).matches({"rule": value}) or hit is False
