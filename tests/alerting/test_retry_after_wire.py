"""Break-review: a receiver's Retry-After survives the funnel's ``result``
command with the value the stdlib wrote (orjson spells inf as null)."""
import json

from alerting.webhook import parse_retry_after
from alerting.wire import _json_bytes, command, parse_command


def test_huge_retry_after_is_finite_and_same_on_the_wire():
    r = parse_retry_after("9" * 400, 0.0)
    assert r is not None and r > 3600
    got = parse_command(command("result", retry_after=r))["retry_after"]
    old = json.loads(_json_bytes({"v": 1, "kind": "result", "retry_after": r}))["retry_after"]
    assert got == old  # was: None (orjson) vs inf (stdlib)


def test_non_ascii_digit_retry_after_is_unreadable_not_an_error():
    assert parse_retry_after("\u00b2", 0.0) is None  # was: ValueError out of send()
    assert parse_retry_after("\u0663", 0.0) is None  # Arabic-Indic 3: not RFC 9110 delay-seconds
