"""Every change Plait makes to a third-party library's internals, one idempotent function each,
naming the version it was written for (:data:`WRITTEN_FOR`) and why.
``tests/kernel/test_patches.py`` fails when a version differs, a patched attribute moves, or a patch
stops doing what it says. Imports third-party code only, lazily (layer 1, docs/architecture.md)."""
from __future__ import annotations

from functools import partial
from typing import Any

#: Distribution -> the version its patches were written for (faust-streaming: the pyproject pin).
WRITTEN_FOR = {
    "aiokafka": "0.14.0",
    "faust-streaming": "0.15.3",
    "httpcore": "1.0.9",
    "mode-streaming": "0.7.1",
}


def aiokafka_prefetch_backoff(seconds: float) -> None:
    """aiokafka 0.14.0: every consumer's ``Fetcher`` gets ``prefetch_backoff=seconds``
    (docs/kafka-rules.md #15): its 0.1 s default, no consumer option, let one agent's unconsumed
    records hold back fetches for every partition of that broker."""
    from aiokafka.consumer import consumer
    from aiokafka.consumer.fetcher import Fetcher

    consumer.Fetcher = partial(Fetcher, prefetch_backoff=seconds)


def faust_fetch_max_wait(max_wait_ms: int) -> None:
    """faust-streaming 0.15.3: a worker's consumer long-polls at most ``max_wait_ms``
    (docs/kafka-rules.md #11), not Faust's hard-coded 1500 ms, which Tansu waits out on an empty
    fetch. Wraps ``AIOKafkaConsumerThread._create_worker_consumer``; the last call wins."""
    from faust.transport.drivers import aiokafka as driver

    original = driver.AIOKafkaConsumerThread._create_worker_consumer
    if getattr(original, "_plait_tuned", False):
        original._plait_wait[0] = max_wait_ms
        return
    wait = [max_wait_ms]

    def create(self, transport):
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = wait[0]
        return consumer

    create._plait_tuned = True
    create._plait_wait = wait
    driver.AIOKafkaConsumerThread._create_worker_consumer = create


def aiokafka_record_modules() -> list[Any]:
    """aiokafka 0.14.0's record-batch builder modules calling the global ``lz4_encode`` (compiled
    ones when built)."""
    from aiokafka.record import default_records, legacy_records

    modules = [default_records, legacy_records]
    try:
        from aiokafka.record._crecords import default_records as c_default
        from aiokafka.record._crecords import legacy_records as c_legacy
    except ImportError:  # a build without the compiled builders
        pass
    else:
        modules += [c_default, c_legacy]
    return modules


def aiokafka_lz4_level(level: int) -> None:
    """aiokafka 0.14.0: produced ``lz4`` batches at ``level`` (docs/kafka-rules.md #16), not the
    fixed level 9 (LZ4HC; aio-libs/aiokafka#1028). Replaces ``lz4_encode`` in
    :func:`aiokafka_record_modules`."""
    from aiokafka import codec

    fast = partial(codec.lz4_encode, level=level)
    for module in aiokafka_record_modules():
        module.lz4_encode = fast


def httpcore_read_bytes(read_bytes: int) -> None:
    """httpcore 1.0.9: read HTTP/1.1 responses at least ``read_bytes`` at a time (never lowers it):
    its fixed 64 KiB ``READ_NUM_BYTES`` splits asyncio's up-to-256 KiB hand-overs into extra trips
    through h11, httpcore, anyio and httpx."""
    from httpcore._async.http11 import AsyncHTTP11Connection

    if AsyncHTTP11Connection.READ_NUM_BYTES < read_bytes:
        AsyncHTTP11Connection.READ_NUM_BYTES = read_bytes


def faust_worker_without_spinner(worker: Any) -> Any:
    """faust-streaming 0.15.3: ``worker`` without its terminal spinner, for which
    ``Worker.on_setup_root_logger`` sets the root logger to DEBUG (every debug call then builds a
    record); returns ``worker``."""
    worker.spinner = None
    return worker


def faust_table_manager_wait(seconds: float) -> None:
    """faust-streaming 0.15.3: an app's ``TableManager`` waits ``seconds`` before it reads its
    tables' changelog topics and starts recovery, not its fixed 1 s. Plait declares every table
    while it builds the app (``alerting/agents.py``), before anything starts, so the second only
    delayed each app's group join (2 s of a worker's start with both apps). Idempotent; the last
    call wins."""
    from faust.tables.manager import TableManager

    async def on_start(self) -> None:
        await self.sleep(seconds)
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()

    TableManager.on_start = on_start


def faust_worker_quick_close(worker: Any, seconds: float = 0.05) -> Any:
    """mode-streaming 0.7.1: the last run of ``worker``'s event loop before it closes lasts
    ``seconds``, not ``Worker._sentinel_task``'s fixed 1 s. By then ``Worker._gather_all`` has
    waited for (or cancelled) every task, so that run only lets callbacks already scheduled (a
    transport's close) run; the fixed second was added to every worker stop and rolling restart.
    Returns ``worker``."""
    import asyncio

    async def sentinel() -> None:
        await asyncio.sleep(seconds)

    worker._sentinel_task = sentinel
    return worker


def mode_worker_starts_apps_together(worker: Any) -> Any:
    """mode-streaming 0.7.1: ``worker`` starts its services (a Faust worker's other apps, then its
    own app) at once, not one after the other. ``Service._actually_start`` awaits each child's
    start in turn, and a Faust app's start returns only after its consumer group join (~3 s on
    Tansu, a group's initial rebalance delay on Kafka), so a worker with both roles joined its two
    groups in series. Wraps ``worker.on_init_dependencies``: the worker gets one child that starts
    them together and stops them as mode would (its children, in reverse). A failed start still
    fails the worker's start. Returns ``worker``."""
    import asyncio

    from mode import Service

    class Together(Service):
        def __init__(self, services: list) -> None:
            self.members = services
            super().__init__(beacon=worker.beacon)

        def on_init_dependencies(self) -> list:
            return self.members

        async def on_start(self) -> None:
            await asyncio.gather(*(member.maybe_start() for member in self.members))

    original = worker.on_init_dependencies

    def on_init_dependencies() -> list:
        services = list(original())
        return [Together(services)] if len(services) > 1 else services

    worker.on_init_dependencies = on_init_dependencies
    return worker


def faust_set_current_event(event: Any) -> None:
    """faust-streaming 0.15.3: make ``event`` Faust's current event (``Stream.take_events`` leaves
    it unset), so table writes go to its partition's changelog. Sets
    ``faust.streams._current_event`` to a weak reference, as Faust's own iteration does."""
    import weakref

    from faust import streams

    streams._current_event.set(weakref.ref(event))
