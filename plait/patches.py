"""Every change Plait makes to a third-party library's internals, in one
place: each is a function that applies one patch (idempotent: calling it
again re-applies it with the new value), names the library and the exact
version it was written for (:data:`WRITTEN_FOR`) and says why it exists.
``tests/kernel/test_patches.py`` fails when an installed version differs from
the one named here, when a patched attribute moves or changes its signature,
and when applying a patch no longer does what it says.

Call sites (applied from there, as the process needs them):
``streams.app.tune_fetch_wait`` (:func:`aiokafka_prefetch_backoff`,
:func:`faust_fetch_max_wait`), ``streams.app.fast_lz4``
(:func:`aiokafka_lz4_level`), ``streams.datasource.tune_http_reads``
(:func:`httpcore_read_bytes`), ``ops.cli.faust_worker``
(:func:`faust_worker_without_spinner`) and ``plait.agent.set_current_event``
(:func:`faust_set_current_event`).

Imports only third-party code, lazily (layer 1, docs/architecture.md).
"""
from __future__ import annotations

from functools import partial
from typing import Any

#: Distribution -> the version every patch of it was written for (the
#: ``faust-streaming`` pin of pyproject.toml; the others as installed with it).
WRITTEN_FOR = {
    "aiokafka": "0.14.0",
    "faust-streaming": "0.15.3",
    "httpcore": "1.0.9",
}


def aiokafka_prefetch_backoff(seconds: float) -> None:
    """aiokafka 0.14.0: build every consumer's ``Fetcher`` with
    ``prefetch_backoff=seconds`` (docs/kafka-rules.md #15).

    aiokafka sends no fetch to a broker while records it fetched from any
    partition led by that broker wait to be consumed, for up to its
    ``prefetch_backoff`` (0.1 s, not a consumer option): one agent's
    unconsumed records held every other agent's partitions on that broker.
    Replaces ``aiokafka.consumer.consumer.Fetcher`` (the name
    ``AIOKafkaConsumer.start`` builds its fetcher with) by
    ``partial(Fetcher, prefetch_backoff=seconds)``.
    """
    from aiokafka.consumer import consumer
    from aiokafka.consumer.fetcher import Fetcher

    consumer.Fetcher = partial(Fetcher, prefetch_backoff=seconds)


def faust_fetch_max_wait(max_wait_ms: int) -> None:
    """faust-streaming 0.15.3: a worker's consumer long-polls at most
    ``max_wait_ms`` (docs/kafka-rules.md #11).

    Faust hard-codes ``fetch_max_wait_ms=1500``. Kafka answers a long-poll as
    soon as data arrives, but Tansu (the embedded broker) waits the whole time
    when a fetch finds nothing, which turned every hop of the page loop into
    ~1 s. Wraps ``faust.transport.drivers.aiokafka.AIOKafkaConsumerThread.
    _create_worker_consumer(self, transport)`` so the aiokafka consumer it
    returns has ``_fetch_max_wait_ms = max_wait_ms``; a second call changes
    the wait of the wrapper already in place (the last call wins).
    """
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
    """aiokafka 0.14.0's record-batch builder modules that call the module
    global ``lz4_encode``: the pure-Python ones and, when built, the compiled ones."""
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
    """aiokafka 0.14.0: compress produced ``lz4`` record batches at ``level``
    (docs/kafka-rules.md #16).

    aiokafka 0.11+ compresses every ``lz4`` batch at level 9 (LZ4HC, its
    ``codec.lz4_encode`` default) and has no option for it
    (aio-libs/aiokafka#1028, fix pending in #1121). Replaces the global
    ``lz4_encode`` of every module of :func:`aiokafka_record_modules` by
    ``partial(codec.lz4_encode, level=level)``. The output is standard LZ4
    frames: any consumer reads them.
    """
    from aiokafka import codec

    fast = partial(codec.lz4_encode, level=level)
    for module in aiokafka_record_modules():
        module.lz4_encode = fast


def httpcore_read_bytes(read_bytes: int) -> None:
    """httpcore 1.0.9: read HTTP/1.1 responses at least ``read_bytes`` at a
    time in this process (never lowers it).

    httpcore asks its socket stream for ``AsyncHTTP11Connection.READ_NUM_BYTES``
    (64 KiB) per read and has no option for it; asyncio hands over up to
    256 KiB at a time, so smaller reads split each into several trips through
    h11, httpcore, anyio and httpx (``streams.datasource.HTTP_READ_BYTES``
    gives the cost). Raises that class attribute.
    """
    from httpcore._async.http11 import AsyncHTTP11Connection

    if AsyncHTTP11Connection.READ_NUM_BYTES < read_bytes:
        AsyncHTTP11Connection.READ_NUM_BYTES = read_bytes


def faust_worker_without_spinner(worker: Any) -> Any:
    """faust-streaming 0.15.3: ``worker`` (a ``faust.Worker``) without its
    terminal spinner; returns ``worker``.

    At WARNING and above, ``faust.Worker.on_setup_root_logger`` keeps the
    spinner and sets the root logger to DEBUG for it, so every aiokafka/Faust
    debug call built a log record (~3.5% of an alerting worker's CPU,
    py-spy); a worker has no terminal to spin on. Sets the instance
    attribute ``spinner`` (which ``Worker.__init__`` fills) to None.
    """
    worker.spinner = None
    return worker


def faust_set_current_event(event: Any) -> None:
    """faust-streaming 0.15.3: make ``event`` Faust's current event in this
    task, so table writes made while handling a batch go to the changelog
    partition of ``event``'s partition (Faust derives it from the current
    event, which ``Stream.take_events`` leaves unset). Sets the private
    context variable ``faust.streams._current_event`` to a weak reference to
    ``event``, as Faust's own stream iteration does."""
    import weakref

    from faust import streams

    streams._current_event.set(weakref.ref(event))
