"""``alerts.funnel`` records the consumer did not hand over are read back from the topic and applied
in offset order before the batch (docs/kafka-rules.md #18): a kill -9 of the alerting worker while
alerts arrive lost some of them when Faust committed past records it never delivered."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer

from alerting.agents import AlertingService
from alerting.config import parse_config
from alerting.runner import FunnelRunner, offset_hole
from alerting.wire import FUNNEL_TOPIC, RawAlert, command, parse_command, route_alert
from ops.infra import start_broker
from plait import topics as T
from plait.kafka_admin import create_topics, read_offsets

CONFIG = parse_config({
    "receivers": [{"name": "hook", "url": "http://127.0.0.1:9/hook"}],
    "route": {"receiver": "hook"},
    "grouping": {"group_by": ["rule"]},
})


@pytest.mark.parametrize("last, offsets, hole", [
    (-1, [5, 6], None),  # nothing applied yet: no hole can be told
    (4, [5, 6, 7], None),
    (4, [3, 4, 5], None),  # replays
    (4, [2, 4], None),
    (4, [6, 7], (5, 7)),
    (4, [5, 7], (5, 7)),
    (4, [4, 9], (5, 9)),
])
def test_a_hole_is_the_offsets_missing_after_the_last_applied(last, offsets, hole):
    assert offset_hole(last, offsets) == hole


@pytest.fixture(scope="module")
def broker():
    b = start_broker()
    yield b
    b.stop()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(20) == 0


def test_read_offsets_gives_the_range_asked_and_stops_at_the_partition_end(broker):
    topic = "read-offsets"
    create_topics(broker.bootstrap, [topic], 1)
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(10)])
    assert read_offsets(broker.bootstrap, topic, 0, 3, 7) == [
        (i, f"v{i}".encode()) for i in range(3, 7)]
    assert [o for o, _v in read_offsets(broker.bootstrap, topic, 0, 8, 20)] == [8, 9]


def six_alerts_two_applied(broker, prefix: str) -> tuple[T.Topics, list[bytes], FunnelRunner]:
    """Topics named with ``prefix``, the 6 alert commands sent to their ``alerts.funnel``
    partition 0 (offsets 0-5), and a runner that applied offsets 0 and 1."""
    names = T.Topics(prefix)
    topic = names.name(FUNNEL_TOPIC)
    create_topics(broker.bootstrap, [topic], 1)
    values = []
    for i in range(6):
        _r, cmd = route_alert(CONFIG, RawAlert(f"{prefix}{i}:0", {
            "rule": f"R{i}", "asset": "h", "severity": "warning", "status": "firing"}, 1000.0))
        cmd["src"] = [0, i, 0]
        values.append(command(**cmd))
    produce(broker.bootstrap, topic, values)
    runner = FunnelRunner(CONFIG, {}, lambda: 1000.0)
    runner.apply_batch(0, [(o, parse_command(values[o])) for o in (0, 1)])
    return names, values, runner


def test_a_batch_past_a_hole_gets_the_missing_commands_first_in_offset_order(broker):
    # given 6 alerts in alerts.funnel, of which the funnel applied offsets 0 and 1
    names, values, runner = six_alerts_two_applied(broker, "hole.")
    svc = SimpleNamespace(runner=runner, settings=SimpleNamespace(broker_url=broker.bootstrap),
                          names=names, rt=None)
    # when the consumer hands over offsets 3 and 5 only
    batch = [(o, parse_command(values[o])) for o in (3, 5)]
    got = asyncio.run(AlertingService._with_hole_filled(svc, 0, batch))
    # then 2 and 4 are read back and everything is applied in offset order: every alert is open
    assert got == [(o, parse_command(values[o])) for o in (2, 3, 4, 5)]
    runner.apply_batch(0, got)
    assert runner.open_alerts() == 6 and runner.state(0).offset == 5
    # and a batch without a hole is left as it came, with no read
    svc.settings.broker_url = "127.0.0.1:1"
    assert asyncio.run(AlertingService._with_hole_filled(svc, 0, [(6, {"kind": "tick"})])) == [
        (6, {"kind": "tick"})]


def test_one_event_after_a_hole_applies_the_read_back_first_and_gives_up_only_a_failing_one(
        broker):
    # given 6 alerts in alerts.funnel, the funnel at offset 1, and a command at offset 3 that
    # meets a bug when applied
    names, values, runner = six_alerts_two_applied(broker, "hole1.")
    real = runner.apply_batch

    def apply_batch(partition, commands):
        if any(o == 3 for o, _c in commands):
            raise KeyError("bug")
        return real(partition, commands)
    runner.apply_batch = apply_batch
    effects = []

    async def effects_all(results):
        effects.extend(fx for _p, fx in results)
    svc = SimpleNamespace(runner=runner, settings=SimpleNamespace(broker_url=broker.bootstrap),
                          names=names, rt=None, _effects_all=effects_all)
    # when the runtime hands over offset 5 alone (its fallback after a failed batch)
    got = asyncio.run(AlertingService._with_hole_filled(svc, 0, [(5, parse_command(values[5]))]))
    # then 2 and 4 were applied, with their effects, 3 given up, and offset 5 is left to apply
    assert got == [(5, parse_command(values[5]))]
    assert runner.state(0).offset == 4 and len(effects) == 2 and runner.open_alerts() == 4
    assert runner.given_up(0, after=2) == {3}
    real(0, got)
    assert runner.open_alerts() == 5
    # and once the funnel passed it, the given-up offset is forgotten
    assert runner.given_up(0, after=runner.state(0).offset) == set()
