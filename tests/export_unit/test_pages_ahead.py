"""Pages prepared ahead (``streams.handlers.prepare``): bounded decoding and
nothing left behind, however a fetch chain ends (a review of 25c60c9 found
both broken: a page cancelled mid-decode gave its slot away while its thread
still decoded; a chain ended by a failed send left its prepared page, batch
and shard, in ``Context.ahead`` for the life of the worker)."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from export_harness import running, spec
from plait import topics as T
from plait.events import FetchPage
from streams import handlers
from streams.context import DECODE_SLOTS
from streams.handlers import after_fetch, fetch, forget_ahead
from streams.layout import cleanup, shard_key
from streams.runtime import Route, Runtime

pytestmark = pytest.mark.timeout(30)


class FakeApp:
    def topic(self, *a, **k):
        return object()

    def agent(self, *a, **k):
        return lambda fn: fn


def ids(seq: int, n: int = 10) -> list[dict]:
    return [{"id": seq * n + i, "name": f"n{seq * n + i}"} for i in range(n)]


def typed_spec():
    from plait.spec import ExportSpec

    return ExportSpec.model_validate(spec(fmt="parquet").model_dump() | {"documentConfig": {
        "fileName": "out", "fileFormat": "parquet",
        "columns": [{"fieldName": "id", "type": "int"}, {"fieldName": "name", "type": "string"}]}})


def slow_decodes(monkeypatch, seconds) -> dict[str, int]:
    """Make each page's decode take ``seconds(seq)`` in its thread; count the
    decodes running at once (``now``; their pages: ``seqs``) and the most
    ever (``max``)."""
    state = {"now": 0, "max": 0, "seqs": set()}
    lock = threading.Lock()
    real = handlers._take_page

    def take(answer, spec, seq, rows_before, partition=0):
        with lock:
            state["now"] += 1
            state["seqs"].add(seq)
            state["max"] = max(state["max"], state["now"])
        try:
            time.sleep(seconds(seq))
            return real(answer, spec, seq, rows_before, partition)
        finally:
            with lock:
                state["now"] -= 1
                state["seqs"].discard(seq)

    monkeypatch.setattr(handlers, "_take_page", take)
    return state


def chain_agent(ctx, send):
    runtime = Runtime(FakeApp(), ctx, [])
    runtime.rt.send = send
    return runtime.agent(Route(T.FETCH, fetch, after_fetch, timeout=10, attempts=2, follow=True))


def pending() -> list[asyncio.Task]:
    me = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not me and not t.done()]


async def still_running(timeout: float = 5.0) -> list[asyncio.Task]:
    """The other asyncio tasks still running once they all ended or
    ``timeout`` seconds passed (a cancelled page ends only when its decode
    thread does)."""
    deadline = time.monotonic() + timeout
    while pending() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return pending()


async def test_a_page_forgotten_mid_decode_keeps_its_slot_until_its_thread_ends(
        make_ctx, data_api, monkeypatch):
    s = spec()
    ctx = make_ctx()
    for t in ("t1", "t2", "t3"):
        await running(ctx, t, s)
    for seq in range(3):
        data_api.pages[seq] = (ids(seq), seq == 2)
    state = slow_decodes(monkeypatch, lambda seq: 0.6 if seq == 1 else 0.05)

    def first(task):
        return FetchPage(taskId=task, seq=0, spec=s, runtimeContext={"page": 0})
    emits = await fetch(ctx, first("t1"))  # t1's page 1 is prepared: decoding for 0.6 s
    for _ in range(50):
        await asyncio.sleep(0.01)
        if 1 in state["seqs"]:
            break
    assert 1 in state["seqs"]
    await after_fetch(ctx, first("t1"), emits)
    assert await fetch(ctx, first("t1")) == []  # page 0 redelivered: absorbed, page 1 forgotten
    # when other tasks decode meanwhile
    await asyncio.gather(fetch(ctx, first("t2")), fetch(ctx, first("t3")))

    def settled() -> bool:  # every page prepared has been decoded, t1's forgotten one too
        return state["now"] == 0 and all(
            entry.future.done() for chain in ctx.ahead.values() for entry in chain)
    for _ in range(1000):
        if settled():
            break
        await asyncio.sleep(0.01)
    assert settled(), state
    forget_ahead(ctx, "t2")
    forget_ahead(ctx, "t3")
    assert state["max"] <= DECODE_SLOTS, state


async def test_a_failed_send_leaves_no_page_prepared(make_ctx, data_api):
    """The runtime cancels the next step (created, not started) when sending
    page n fails, then the task's cleanup runs (FAILED)."""
    s = typed_spec()
    ctx = make_ctx()
    await running(ctx, "t1", s)
    for seq in range(4):
        data_api.pages[seq] = (ids(seq), seq == 3)

    async def send(emits, tp=None):
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        await chain_agent(ctx, send).handle(
            None, FetchPage(taskId="t1", seq=0, spec=s, runtimeContext={"page": 0}), {})
    await cleanup(ctx, "t1")  # as ExportHooks.after_failure does
    assert not ctx.ahead.get("t1")
    assert await still_running() == []


async def test_a_next_step_cancelled_on_its_checkpoint_read_forgets_its_page(
        make_ctx, data_api, monkeypatch):
    """The next step is waiting for its checkpoint (Redis) when sending page
    n fails and the runtime cancels it."""
    s = typed_spec()
    ctx = make_ctx()
    await running(ctx, "t1", s)
    for seq in range(4):
        data_api.pages[seq] = (ids(seq), seq == 3)
    real = ctx.checkpoints.fetched_seq

    async def fetched_seq(task):
        await asyncio.sleep(0.01)  # a Redis round trip
        return await real(task)

    monkeypatch.setattr(ctx.checkpoints, "fetched_seq", fetched_seq)

    async def send(emits, tp=None):
        await asyncio.sleep(0.001)
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        await chain_agent(ctx, send).handle(
            None, FetchPage(taskId="t1", seq=0, spec=s, runtimeContext={"page": 0}), {})
    assert not ctx.ahead.get("t1")
    assert await still_running() == []


@pytest.mark.parametrize("typed", [True, False])
async def test_many_tasks_chained_at_once(make_ctx, data_api, monkeypatch, typed):
    """Five exports at once through the runtime's chain with slow decodes:
    every page once and in order per task, never more than DECODE_SLOTS
    decodes at a time, nothing prepared or running at the end."""
    s = typed_spec() if typed else spec()
    ctx = make_ctx()
    tasks = [f"t{i}" for i in range(5)]
    for t in tasks:
        await running(ctx, t, s)
    for seq in range(6):
        data_api.pages[seq] = (ids(seq), seq == 5)
    state = slow_decodes(monkeypatch, lambda seq: 0.02)
    sent: dict[str, list[int]] = {t: [] for t in tasks}

    async def send(emits, tp=None):
        await asyncio.sleep(0.005)
        for e in emits:
            sent[e.payload.taskId].append(e.payload.seq)

    agent = chain_agent(ctx, send)
    await asyncio.wait_for(asyncio.gather(*[
        agent.handle(None, FetchPage(taskId=t, seq=0, spec=s, runtimeContext={"page": 0}), {})
        for t in tasks]), 20)
    assert sent == {t: list(range(6)) for t in tasks}
    assert len(data_api.requests) == 30
    assert state["max"] <= DECODE_SLOTS
    assert ctx.ahead == {}
    assert await still_running() == []


async def test_a_step_cancelled_while_its_shard_is_stored_leaves_no_shard_behind(
        make_ctx, data_api, monkeypatch):
    """Sending page 0 fails while the next step is storing page 1's shard
    (an upload, in a thread): the runtime cancels that step, then the task
    fails and its cleanup deletes the task's shards (ExportHooks.after_failure).
    The shard must not land after that cleanup: nothing else would ever
    delete it."""
    import threading

    s = typed_spec()
    ctx = make_ctx()
    await running(ctx, "t1", s)
    for seq in range(4):
        data_api.pages[seq] = (ids(seq), seq == 3)
    started, release, landed = threading.Event(), threading.Event(), threading.Event()
    real = ctx.store.put_bytes

    def put_bytes(key, data):
        if key == shard_key("t1", 1):  # page 1's shard: a slow upload
            started.set()
            release.wait(10)
            real(key, data)
            landed.set()
        else:
            real(key, data)

    monkeypatch.setattr(ctx.store, "put_bytes", put_bytes)

    async def send(emits, tp=None):
        for _ in range(2000):  # page 1's step is storing its shard
            if started.is_set():
                break
            await asyncio.sleep(0.005)
        raise ConnectionError("broker down")

    handled = asyncio.ensure_future(chain_agent(ctx, send).handle(
        None, FetchPage(taskId="t1", seq=0, spec=s, runtimeContext={"page": 0}), {}))
    done, _ = await asyncio.wait([handled], timeout=0.5)
    if not done:  # the cancelled step waits for its upload: let the upload end
        release.set()
    with pytest.raises(ConnectionError):
        await handled
    assert started.is_set()
    await cleanup(ctx, "t1")  # as ExportHooks.after_failure does once the chain ended
    release.set()
    for _ in range(2000):
        if landed.is_set():
            break
        await asyncio.sleep(0.005)
    assert landed.is_set()
    assert ctx.store.list("shards/t1/") == [] and not ctx.ahead.get("t1")
