"""The live projection against the real Redis (no broker needed): what the
runtime writes through while sending reads the same as a replay of the
events it sent, once a task reads as ended."""
from __future__ import annotations

import asyncio
import uuid

import pytest
import redis

from plait import topics as T
from plait.events import Lifecycle
from plait.lifecycle import apply
from plait.settings import Settings
from streams.context import Emit, build_context
from streams.runtime import Runtime


class SentTopic:
    """A topic whose sends are acked at once; keeps what was sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, key: bytes, value: bytes):
        self.sent.append(value)
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


@pytest.fixture
async def ctx(tmp_path):
    prefix = f"plait-test-{uuid.uuid4().hex[:10]}"
    context = build_context(Settings(redis_prefix=prefix, storage_url=f"file://{tmp_path}"))
    yield context
    client = redis.Redis.from_url(context.settings.redis_url)
    for key in client.scan_iter(match=f"{prefix}:*"):
        client.delete(key)
    await context.http.aclose()


async def test_a_task_reads_as_ended_with_every_report_sent_before_its_end(ctx):
    # given a runtime whose sends are acked at once
    runtime = Runtime(app=None, ctx=ctx)
    topic = SentTopic()
    runtime.topic = lambda base: topic
    ident = {"taskId": "t1", "sysCode": "s", "userId": "u"}
    events = [Lifecycle(status="CREATED", **ident), Lifecycle(status="RUNNING", workerId="w", **ident),
              Lifecycle(status="PROGRESS", exportedRows=50, totalRows=50, seq=0, workerId="w", **ident),
              Lifecycle(status="SUCCESS", exportedRows=50, workerId="w", **ident)]
    # when the task's events are sent, the end right after its last report
    for event in events:
        await runtime.send([Emit(T.LIFECYCLE, "t1", event)])
    # then the ended task already reads as the replay of what was sent
    replayed = None
    for event in events:
        replayed = apply(replayed, event) or replayed
    live = await ctx.projection.get("t1")
    assert live["status"] == "SUCCESS" and live["totalRows"] == 50
    assert live == replayed and len(topic.sent) == 4
