"""Shared fixtures: a real stack (Tansu broker, Redis, workers, API, demo data
API) per test module that needs one, each with its own topic names, consumer
group and Redis key prefix, cleaned up afterwards."""
from __future__ import annotations

from pathlib import Path

import pytest

from ops.stack import Stack
from stack_env import drop_redis_keys, isolated_env


def _stack_factory(tmp_path_factory):
    """``make(workers=1, broker_storage=..., api_replicas=1, **PLAIT_overrides)
    -> started Stack`` and the list of stacks it made."""
    made: list[Stack] = []

    def make(workers: int = 1, broker_storage: str = "memory://tansu/", api_replicas: int = 1,
             **extra: str) -> Stack:
        data_dir = Path(tmp_path_factory.mktemp("stack"))
        stack = Stack(data_dir, isolated_env(**extra), broker_storage, api_replicas=api_replicas)
        made.append(stack)
        return stack.start(workers=workers)

    return make, made


def _stop_all(made: list[Stack]) -> None:
    for stack in made:
        stack.stop()
        drop_redis_keys(stack)


@pytest.fixture
def make_stack(tmp_path_factory):
    """Factory: ``make_stack(workers=1, **PLAIT_overrides) -> started Stack``
    (``api_replicas``: API processes, ``Stack.api_urls``); every stack made
    is stopped and its Redis keys dropped at teardown."""
    make, made = _stack_factory(tmp_path_factory)
    yield make
    _stop_all(made)


@pytest.fixture(scope="module")
def make_module_stack(tmp_path_factory):
    """:func:`make_stack` for a stack the tests of a module share (a
    module-scoped fixture of the test file makes it): stopped after the
    module's last test."""
    make, made = _stack_factory(tmp_path_factory)
    yield make
    _stop_all(made)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """One started stack shared by the tests of a module."""
    s = Stack(Path(tmp_path_factory.mktemp("stack")), isolated_env())
    try:
        yield s.start(workers=1)
    finally:
        s.stop()
        drop_redis_keys(s)


@pytest.fixture
def sent(monkeypatch):
    """What the alerting routes (``api.ingest.AlertIngest``) send to Kafka
    (records), recorded instead of sent, with 2 funnel partitions; Redis stays real."""
    from api.ingest import AlertIngest

    records: list[tuple] = []

    async def send(self, batch):
        records.extend(batch)

    async def partitions(self):
        return 2

    monkeypatch.setattr(AlertIngest, "send", send)
    monkeypatch.setattr(AlertIngest, "funnel_partitions", partitions)
    return records
