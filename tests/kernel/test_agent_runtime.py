"""The kernel's agent runtime (plait.agent) without a broker: a fake Faust app
records what is sent. Nothing escapes ``process``; poison and unexpected
failures are dead-lettered; expected failures are not; hooks run in order."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest

from plait import topics as T
from plait.agent import Agent, AgentRuntime, Emit, Hooks, spread_partition
from plait.errors import PermanentError
from plait.events import DeadLetter, Lifecycle, decode, encode


class FakeTopic:
    def __init__(self, name: str, app: "FakeApp") -> None:
        self.name, self.app = name, app

    async def send(self, key: bytes, value: bytes, partition: int | None = None,
                   headers: dict | None = None):
        if self.app.broken:
            raise ConnectionError("broker gone")
        self.app.sent.append((self.name, key, value))
        self.app.placed.append(partition)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


class FakeProducer:
    """Faust's producer as far as the runtime reads it: the aiokafka metadata."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    def _ensure_producer(self):
        return self

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.partitions))


class FakeApp:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.placed: list[int | None] = []  # each send's explicit partition
        self.producer = FakeProducer(4)
        self.agents: dict[str, tuple] = {}
        self.broken = False

    def topic(self, name: str, **kw) -> FakeTopic:
        return FakeTopic(name, self)

    def agent(self, topic, name: str, concurrency: int):
        def register(fn):
            self.agents[name] = (topic, fn, concurrency)
            return fn
        return register

    def letters(self) -> list[DeadLetter]:
        return [decode(v)[1] for name, _, v in self.sent if name.endswith(T.DLQ)]


@dataclass
class Msg:
    topic: str
    partition: int
    offset: int


@dataclass
class Event:
    key: bytes | None
    value: bytes
    message: Msg


def event(value: bytes, key: bytes | None = b"t1") -> Event:
    return Event(key, value, Msg("p.export.requests", 3, 41))


def lifecycle_bytes(task_id: str = "t1") -> bytes:
    return encode(Lifecycle(taskId=task_id, status="RUNNING"), task_id)


class Recorder(Hooks):
    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def dispatch(self, rt, agent, payload, run):
        self.log.append((self.name, "dispatch"))
        return run()

    def before_handle(self, rt, agent, payload):
        self.log.append((self.name, "before"))

    def after_handle(self, rt, agent, payload):
        self.log.append((self.name, "after"))

    async def before_send(self, rt, emits):
        self.log.append((self.name, "send", [e.topic for e in emits]))

    async def after_failure(self, rt, agent, event, payload, exc):
        self.log.append((self.name, "failed", type(exc).__name__))


def runtime(app: FakeApp, hooks=(), exit_when_lost: bool = True) -> AgentRuntime:
    return AgentRuntime(app, T.Topics("p."), 4, "w1", hooks, exit_when_lost)


async def test_poison_is_dead_lettered_and_the_handler_never_runs():
    app, calls = FakeApp(), []

    async def handle(ev, payload, attrs):
        calls.append(payload)

    rt = runtime(app)
    await rt.process(Agent(T.REQUESTS, "plait.x", handle, lambda ev: decode(ev.value)),
                     event(b"not json"))
    assert calls == []
    [letter] = app.letters()
    assert (letter.errorClass, letter.payload, letter.partition, letter.offset, letter.key) == (
        "PoisonError", "not json", 3, 41, "t1")
    assert app.sent[0][0] == "p.export.dlq"


async def test_poison_of_an_agent_that_keeps_nothing_is_dropped():
    app = FakeApp()
    rt = runtime(app)
    await rt.process(Agent(T.LIFECYCLE, "plait.x", None, lambda ev: decode(ev.value), keep=False),
                     event(b"{}"))
    assert app.sent == []


async def test_an_unexpected_failure_is_dead_lettered_with_its_traceback_and_reported():
    app, log = FakeApp(), []

    async def handle(ev, payload, attrs):
        raise ValueError("boom")

    rt = runtime(app, [Recorder("a", log)])
    await rt.process(Agent(T.REQUESTS, "plait.x", handle, lambda ev: decode(ev.value)),
                     event(lifecycle_bytes()))
    [letter] = app.letters()
    assert letter.errorClass == "ValueError"
    assert "Traceback" in letter.error and "boom" in letter.error
    assert ("a", "failed", "ValueError") in log
    assert log[-1] == ("a", "after")  # after_handle runs whatever happened


async def test_an_expected_failure_is_not_dead_lettered_but_hooks_see_it():
    app, log = FakeApp(), []

    async def handle(ev, payload, attrs):
        raise PermanentError("spec broken")

    rt = runtime(app, [Recorder("a", log)])
    agent = Agent(T.REQUESTS, "plait.x", handle, lambda ev: decode(ev.value),
                  expected=(PermanentError,))
    await rt.process(agent, event(lifecycle_bytes()))
    assert app.letters() == []
    assert ("a", "failed", "PermanentError") in log


async def test_hooks_wrap_in_order_and_see_every_send():
    app, log = FakeApp(), []

    async def handle(ev, payload, attrs):
        log.append(("handler", payload.taskId))
        await rt.send([Emit(T.LIFECYCLE, "t1", payload)], attrs.get("traceparent"))

    rt = runtime(app, [Recorder("a", log), Recorder("b", log)])
    await rt.process(Agent(T.REQUESTS, "plait.x", handle, lambda ev: decode(ev.value)),
                     event(lifecycle_bytes()))
    assert log == [("a", "dispatch"), ("b", "dispatch"), ("a", "before"), ("b", "before"),
                   ("handler", "t1"), ("a", "send", [T.LIFECYCLE]), ("b", "send", [T.LIFECYCLE]),
                   ("a", "after"), ("b", "after")]
    name, key, value = app.sent[-1]
    assert (name, key) == ("p.export.lifecycle", b"t1")
    assert json.loads(value)["source"] == "w1"


async def test_a_failure_that_cannot_be_reported_exits_or_moves_on(monkeypatch):
    exits = []
    monkeypatch.setattr(AgentRuntime, "fatal", staticmethod(lambda: exits.append(70)))

    async def handle(ev, payload, attrs):
        raise ValueError("boom")

    agent = Agent(T.REQUESTS, "plait.x", handle, lambda ev: decode(ev.value))
    for exit_when_lost, expected in ((False, []), (True, [70])):
        app = FakeApp()
        app.broken = True  # the dead letter cannot be sent either
        await runtime(app, exit_when_lost=exit_when_lost).process(agent, event(lifecycle_bytes()))
        assert exits == expected


async def test_register_adds_one_agent_at_concurrency_one_on_the_prefixed_topic():
    app = FakeApp()
    rt = runtime(app)
    rt.register(Agent(T.ALERTS_RAW, "plait.alerts.router", None))
    topic, fn, concurrency = app.agents["plait.alerts.router"]
    assert (topic.name, concurrency, fn.__name__) == ("p.alerts.raw", 1, "plait_alerts_router")
    assert rt.topic(T.ALERTS_RAW) is topic  # one Faust topic per name


async def test_an_agent_without_decode_gets_the_raw_value():
    app, seen = FakeApp(), []

    async def handle(ev, payload, attrs):
        seen.append((payload, attrs))

    await runtime(app).process(Agent(T.DLQ, "plait.x", handle), event(b"\x00raw"))
    assert seen == [(b"\x00raw", {})]


@pytest.fixture(autouse=True)
def _no_exit(monkeypatch):
    """A test that reaches fatal unexpectedly fails instead of killing pytest."""
    def fatal():
        raise AssertionError("AgentRuntime.fatal called")
    monkeypatch.setattr(AgentRuntime, "fatal", staticmethod(fatal))


@pytest.mark.parametrize("topic_partitions, expected", [(4, [3, 0, 1, 2, 3]), (3, [1, 2, 0, 1, 2]),
                                                        (12, [3, 0, 1, 2, 3])])
async def test_a_spread_emit_goes_to_its_partition_of_as_many_as_set_or_the_topic_has(
        topic_partitions, expected):
    # given a runtime set to 4 partitions on a topic of 4, 3 or 12
    app = FakeApp()
    app.producer = FakeProducer(topic_partitions)
    rt = runtime(app)
    # when a group's members 0..4 and a keyed event are sent
    payload = Lifecycle(taskId="t1", status="RUNNING")
    await rt.send([Emit(T.FETCH, f"t1#{p}", payload, ("t1", p)) for p in range(5)]
                  + [Emit(T.FETCH, "t1", payload)])
    # then the members take consecutive partitions from the group's own, over
    # min(4, the topic's count); the keyed event is left to the key's hash
    assert spread_partition("t1", 0, 4) == 3 and spread_partition("t1", 0, 3) == 1
    assert app.placed == expected + [None]
    assert [key for _t, key, _v in app.sent] == [f"t1#{p}".encode() for p in range(5)] + [b"t1"]
