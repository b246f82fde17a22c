"""SilenceStore: Alertmanager's update rules (silence/silence.go ``Set``,
``Expire``) and the broadcast that must reach every funnel partition."""
from __future__ import annotations

import json

import pytest

from alerting.matchers import parse_matcher
from alerting.silence import SilenceRefused
from alerting.silence_store import SilenceStore
from plait.errors import NotFound, Unavailable

NOW = 1_800_000_000.0


class FakeRedis:
    """The four hash commands the store uses, in memory."""

    def __init__(self) -> None:
        self.h: dict[str, bytes] = {}

    async def hget(self, _key, field):
        return self.h.get(field)

    async def hset(self, _key, field, value):
        self.h[field] = value.encode() if isinstance(value, str) else value

    async def hdel(self, _key, field):
        self.h.pop(field, None)

    async def hgetall(self, _key):
        return dict(self.h)


def store(sent: list, fail: bool = False) -> tuple[SilenceStore, FakeRedis]:
    redis = FakeRedis()

    async def broadcast(value: bytes) -> None:
        if fail:
            raise Unavailable("Kafka did not take the events")
        sent.append(json.loads(value))

    return SilenceStore(lambda: redis, "k", broadcast), redis


async def new(s: SilenceStore, text: str = 'job="api"', starts: float = NOW - 60,
              ends: float = NOW + 3600):
    return await s.set(None, [parse_matcher(text)], starts, ends, "me", "deploy", NOW)


async def test_an_update_with_the_same_matchers_keeps_the_id():
    sent: list = []
    s, _ = store(sent)
    first = await new(s)
    again = await s.set(first.id, [parse_matcher('job="api"')], first.starts_at, NOW + 7200,
                        "me", "longer", NOW)
    assert again.id == first.id
    assert (await s.get(first.id))["ends_at"] == NOW + 7200
    assert [c["kind"] for c in sent] == ["silence", "silence"]


@pytest.mark.parametrize("shift, same_id", [(0.4, True), (0.99, True), (-0.01, False),
                                            (1.0, False)])
async def test_an_active_silence_keeps_its_id_for_a_start_in_the_same_second(shift, same_id):
    # Alertmanager's canUpdate (silence/silence.go) compares StartsAt.Unix(): whole seconds
    sent: list = []
    s, _ = store(sent)
    first = await new(s)  # started in the past: starts now, a whole second
    again = await s.set(first.id, [parse_matcher('job="api"')], first.starts_at + shift,
                        NOW + 7200, "me", "new comment", NOW)
    assert (again.id == first.id) == same_id


async def test_changed_matchers_expire_the_old_silence_and_make_a_new_id():
    sent: list = []
    s, _ = store(sent)
    first = await new(s)
    second = await s.set(first.id, [parse_matcher('job="db"')], NOW, NOW + 60, "me", "x", NOW)
    assert second.id != first.id
    assert (await s.get(first.id))["ends_at"] == NOW  # expired now
    assert set(await s.active(NOW)) == {second.id}
    assert [c["kind"] for c in sent] == ["silence", "silence", "expire"]  # new one first


async def test_a_new_silence_starting_in_the_past_starts_now_and_one_ending_in_the_past_is_refused():
    s, _ = store([])
    assert (await new(s, starts=NOW - 600)).starts_at == NOW
    with pytest.raises(SilenceRefused) as e:
        await new(s, ends=NOW - 1)
    assert e.value.field == "ends_at"


async def test_updating_an_unknown_id_is_not_found_and_expiring_twice_is_a_no_op():
    s, _ = store([])
    with pytest.raises(NotFound):
        await s.set("nope", [parse_matcher('a="b"')], NOW, NOW + 60, "me", "x", NOW)
    first = await new(s)
    await s.expire(first.id, NOW)
    assert (await s.expire(first.id, NOW + 100))["ends_at"] == NOW


async def test_a_broadcast_kafka_refuses_rolls_the_store_back():
    s, redis = store([], fail=True)
    with pytest.raises(Unavailable):
        await new(s)
    assert redis.h == {}


async def test_a_refused_replacement_leaves_the_old_silence_active():
    sent: list = []
    s, redis = store(sent)
    first = await new(s)

    async def refuse(_value: bytes) -> None:
        raise Unavailable("Kafka did not take the events")

    s.broadcast = refuse
    with pytest.raises(Unavailable):
        await s.set(first.id, [parse_matcher('job="web"')], NOW - 60, NOW + 3600, "me", "x", NOW)
    assert set(redis.h) == {first.id}
    assert set(await s.active(NOW)) == {first.id}
