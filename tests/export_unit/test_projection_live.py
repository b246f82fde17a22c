"""The live projection: what the runtime writes through while sending reads
the same as a replay of ``export.lifecycle`` (``plait.lifecycle.apply`` in
topic order), as soon as a task reads as ended."""
from __future__ import annotations

import asyncio

from plait import topics as T
from plait.events import Lifecycle
from plait.lifecycle import apply
from streams.context import Emit
from streams.runtime import Runtime


class AckedTopic:
    """A topic whose sends are acked at once; keeps what was sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, key: bytes, value: bytes):
        self.sent.append(value)
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


async def test_a_task_reads_as_ended_with_every_report_sent_before_its_end(make_ctx):
    # given the export runtime on a topic that acks at once
    ctx = make_ctx()
    runtime = Runtime(app=None, ctx=ctx)
    topic = AckedTopic()
    runtime.rt.topic = lambda base: topic
    ident = {"taskId": "t1", "sysCode": "s", "userId": "u"}
    events = [Lifecycle(status="CREATED", **ident), Lifecycle(status="RUNNING", workerId="w", **ident),
              Lifecycle(status="PROGRESS", exportedRows=50, totalRows=50, seq=0, workerId="w", **ident),
              Lifecycle(status="SUCCESS", exportedRows=50, workerId="w", **ident)]
    # when the task's events are sent, its end right after its last report
    for event in events:
        await runtime.rt.send([Emit(T.LIFECYCLE, "t1", event)])
    # then the ended task already reads as the replay of what was sent
    replayed = None
    for event in events:
        replayed = apply(replayed, event) or replayed
    live = await ctx.projection.get("t1")
    assert live["status"] == "SUCCESS" and live["totalRows"] == 50
    assert live == replayed and len(topic.sent) == 4
