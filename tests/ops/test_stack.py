"""ops.stack.Stack: a start that fails leaves nothing running."""
from __future__ import annotations

import pytest

from ops.stack import Stack
from stack_env import drop_redis_keys, isolated_env


@pytest.mark.integration
def test_a_part_that_cannot_start_fails_start_and_everything_is_stopped(tmp_path):
    bad = tmp_path / "alerting.yaml"
    bad.write_text("receivers: 3\n")  # the API and the worker refuse it at start-up
    stack = Stack(tmp_path / "stack", isolated_env(PLAIT_ALERTING_CONFIG=str(bad)))
    try:
        with pytest.raises(RuntimeError, match=r"(api|worker-0) exited; see "):
            stack.start(workers=1)
    finally:
        drop_redis_keys(stack)
    assert stack.procs == {}
    assert stack.broker is not None and stack.broker.proc.poll() is not None


def test_alerting_workers_fetch_with_a_short_wait_unless_set(tmp_path, monkeypatch):
    """On Tansu an idle fetch is answered when its wait is over: the stack's
    alerting workers wait ALERTING_FETCH_WAIT_MS (docs/kafka-rules.md #11);
    a wait the caller set wins; export workers keep the setting's default."""
    import ops.stack as stack_mod

    envs: dict[str, dict] = {}

    class FakePopen:
        def __init__(self, args, env, **kw):
            envs[args[-1] if args[-2] == "--role" else "all"] = env

    monkeypatch.setattr(stack_mod.subprocess, "Popen", FakePopen)
    monkeypatch.delenv("PLAIT_FETCH_MAX_WAIT_MS", raising=False)
    (tmp_path / "logs").mkdir()
    stack = Stack(tmp_path)
    stack.spawn_worker("a", "alerting")
    stack.spawn_worker("e", "export")
    stack.spawn_worker("w", "all")
    assert envs["alerting"]["PLAIT_FETCH_MAX_WAIT_MS"] == str(stack_mod.ALERTING_FETCH_WAIT_MS) == "10"
    assert "PLAIT_FETCH_MAX_WAIT_MS" not in envs["export"] and "PLAIT_FETCH_MAX_WAIT_MS" not in envs["all"]
    stack.env["PLAIT_FETCH_MAX_WAIT_MS"] = "50"
    stack.spawn_worker("a2", "alerting")
    assert envs["alerting"]["PLAIT_FETCH_MAX_WAIT_MS"] == "50"


def test_the_redis_prefix_is_the_stacks_own_else_the_callers(tmp_path, monkeypatch):
    """`plait dev` prints the prefix its children use: with PLAIT_REDIS_PREFIX
    set by the caller the stack adds none of its own (it used to fail with
    KeyError after starting everything)."""
    from plait.settings import Settings

    monkeypatch.setenv("PLAIT_REDIS_PREFIX", "mine-x")
    assert Stack(tmp_path).redis_prefix == "mine-x"
    own = Stack(tmp_path, {"PLAIT_REDIS_PREFIX": "own-y"})
    own.env = {"PLAIT_REDIS_PREFIX": "own-y"}
    assert own.redis_prefix == "own-y"
    monkeypatch.delenv("PLAIT_REDIS_PREFIX")
    assert Stack(tmp_path).redis_prefix == Settings().redis_prefix


@pytest.mark.integration
def test_an_in_memory_broker_stops_at_once_while_a_producer_is_connected():
    """Tansu's SIGTERM waits for every client that produced to disconnect; an
    in-memory broker keeps nothing, so ``Broker.stop`` does not wait for that."""
    import time

    from confluent_kafka import Producer

    from ops.infra import start_broker
    from plait.kafka_admin import create_topics

    broker = start_broker()
    try:
        create_topics(broker.bootstrap, ["t-stop"], 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("t-stop", b"v")
        assert producer.flush(10) == 0
        started = time.monotonic()
        broker.stop()
        assert broker.proc.poll() is not None
        assert time.monotonic() - started < 2.5  # the terminate path's grace is 5 s
    finally:
        broker.stop()
