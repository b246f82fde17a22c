"""Smoke tests of ``plait/patches.py``: per patch, the third-party internal it
replaces is still where and what the patch expects, applying it does what it
says, and the installed library is the version the patch was written for.
Each test restores what it patched. The effects on a real broker are
tested in tests/ops/test_consumer_tuning.py and tests/ops/test_producer_lz4.py."""
from __future__ import annotations

import ast
import contextvars
import importlib.metadata
import inspect
import logging
from functools import partial
from pathlib import Path

import pytest

from plait import patches

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("plait", "sinks", "alerting", "schedules", "streams", "producers", "api", "ops")


@pytest.mark.parametrize("dist", sorted(patches.WRITTEN_FOR))
def test_installed_version_is_the_one_the_patches_were_written_for(dist):
    installed = importlib.metadata.version(dist)
    assert installed == patches.WRITTEN_FOR[dist], (
        f"{dist} {installed} is installed, plait/patches.py was written for "
        f"{patches.WRITTEN_FOR[dist]}: check its patches against {installed}, then update WRITTEN_FOR")


def test_aiokafka_prefetch_backoff(monkeypatch):
    from aiokafka.consumer import consumer
    from aiokafka.consumer.fetcher import Fetcher

    param = inspect.signature(Fetcher.__init__).parameters["prefetch_backoff"]
    assert param.kind is param.KEYWORD_ONLY and param.default == 0.1
    assert "Fetcher(" in inspect.getsource(consumer.AIOKafkaConsumer.start)
    monkeypatch.setattr(consumer, "Fetcher", consumer.Fetcher)
    patches.aiokafka_prefetch_backoff(0.007)
    assert isinstance(consumer.Fetcher, partial) and consumer.Fetcher.func is Fetcher
    assert consumer.Fetcher.keywords == {"prefetch_backoff": 0.007}


def test_faust_fetch_max_wait(monkeypatch):
    from aiokafka import AIOKafkaConsumer
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    assert list(inspect.signature(AIOKafkaConsumerThread._create_worker_consumer).parameters) == [
        "self", "transport"]
    assert "fetch_max_wait_ms=self._fetch_max_wait_ms" in inspect.getsource(AIOKafkaConsumer.start)
    made = []

    def original(self, transport):
        made.append(type("Consumer", (), {"_fetch_max_wait_ms": 1500})())
        return made[-1]

    monkeypatch.setattr(AIOKafkaConsumerThread, "_create_worker_consumer", original)
    patches.faust_fetch_max_wait(50)
    assert AIOKafkaConsumerThread._create_worker_consumer(None, None)._fetch_max_wait_ms == 50
    wrapper = AIOKafkaConsumerThread._create_worker_consumer
    patches.faust_fetch_max_wait(70)  # the wrapper in place takes the new wait
    assert AIOKafkaConsumerThread._create_worker_consumer is wrapper
    assert AIOKafkaConsumerThread._create_worker_consumer(None, None)._fetch_max_wait_ms == 70
    assert len(made) == 2


def test_aiokafka_lz4_level(monkeypatch):
    from aiokafka import codec

    assert inspect.signature(codec.lz4_encode).parameters["level"].default == 9
    modules = patches.aiokafka_record_modules()
    assert [m.__name__ for m in modules] == [
        "aiokafka.record.default_records", "aiokafka.record.legacy_records",
        "aiokafka.record._crecords.default_records", "aiokafka.record._crecords.legacy_records"]
    for module in modules:
        monkeypatch.setattr(module, "lz4_encode", module.lz4_encode)
    data = b"plait " * 5000
    patches.aiokafka_lz4_level(1)
    for module in modules:
        assert module.lz4_encode.func is codec.lz4_encode
        assert module.lz4_encode.keywords == {"level": 1}
        assert codec.lz4_decode(module.lz4_encode(data)) == data


def test_httpcore_read_bytes(monkeypatch):
    from httpcore._async.http11 import AsyncHTTP11Connection

    assert "self.READ_NUM_BYTES" in inspect.getsource(AsyncHTTP11Connection._receive_event)
    monkeypatch.setattr(AsyncHTTP11Connection, "READ_NUM_BYTES", 64 * 1024)
    patches.httpcore_read_bytes(256 * 1024)
    assert AsyncHTTP11Connection.READ_NUM_BYTES == 256 * 1024
    patches.httpcore_read_bytes(1024)  # never lowers it
    assert AsyncHTTP11Connection.READ_NUM_BYTES == 256 * 1024


def test_faust_worker_without_spinner():
    import faust

    assert "self.spinner" in inspect.getsource(faust.Worker._setup_spinner_handler)
    app = faust.App("plait-test-patches-spinner", broker="kafka://127.0.0.1:1")
    worker = faust.Worker(app, loglevel="warning", quiet=True)
    assert worker.spinner is not None
    assert patches.faust_worker_without_spinner(worker) is worker
    assert worker.spinner is None
    root = logging.Logger("plait-test-patches-root", level=logging.WARNING)
    root.addHandler(logging.NullHandler())
    worker.on_setup_root_logger(root, logging.WARNING)
    assert root.level == logging.WARNING


def test_faust_table_manager_wait(monkeypatch):
    import asyncio

    from faust.tables.manager import TableManager

    original = inspect.getsource(TableManager.on_start)
    for line in ("await self.sleep(1.0)", "if not self.should_stop:",
                 "await self._update_channels()", "await self.recovery.start()"):
        assert line in original, line
    monkeypatch.setattr(TableManager, "on_start", TableManager.on_start)
    done: list = []

    class Recovery:
        async def start(self):
            done.append("recovery")

    class Manager:
        should_stop = False
        recovery = Recovery()

        async def sleep(self, seconds):
            done.append(seconds)

        async def _update_channels(self):
            done.append("channels")

    patches.faust_table_manager_wait(0.05)
    asyncio.run(TableManager.on_start(Manager()))
    assert done == [0.05, "channels", "recovery"]
    Manager.should_stop = True  # stopped while waiting: nothing more, as Faust's own
    done.clear()
    asyncio.run(TableManager.on_start(Manager()))
    assert done == [0.05]


def test_faust_worker_quick_close():
    import asyncio
    import time

    import mode

    assert "self._sentinel_task()" in inspect.getsource(mode.Worker._shutdown_loop)
    assert "asyncio.sleep(1.0)" in inspect.getsource(mode.Worker._sentinel_task)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    worker = mode.Worker(loop=loop, quiet=True, loglevel="warning", override_logging=False)
    assert patches.faust_worker_quick_close(worker) is worker

    async def stop_soon():
        await asyncio.sleep(0.05)
        await worker.stop()

    loop.call_soon(lambda: loop.create_task(stop_soon()))
    started = time.monotonic()
    try:
        worker.execute_from_commandline()  # runs until stop_soon stops it, then closes the loop
    except SystemExit:
        pass
    finally:
        asyncio.set_event_loop(None)
    # unpatched, the close alone idles 1 s (mode.Worker._sentinel_task)
    assert time.monotonic() - started < 0.9
    assert loop.is_closed()


def test_mode_worker_starts_apps_together():
    import asyncio
    import time

    import mode

    assert "await child.maybe_start()" in inspect.getsource(mode.Service._actually_start)
    events: list[str] = []

    class Slow(mode.Service):  # starts as a Faust app does: after a group join
        async def on_start(self):
            events.append(f"{self.label} starting")
            await asyncio.sleep(0.4)

        async def on_stop(self):
            events.append(f"{self.label} stopped")

    class A(Slow):
        pass

    class B(Slow):
        pass

    async def run() -> float:
        worker = mode.Worker(A(), B(), quiet=True, loglevel="warning", override_logging=False)
        assert patches.mode_worker_starts_apps_together(worker) is worker
        [together] = worker.on_init_dependencies()  # the one child the worker starts
        started = time.monotonic()
        await together.start()
        took = time.monotonic() - started
        await together.stop()
        return took

    took = asyncio.run(run())
    # unpatched, B starts only once A has started: 0.8 s, events A starting, B starting later
    assert took < 0.75, took
    assert sorted(events[:2]) == ["A starting", "B starting"]
    assert events[2:] == ["B stopped", "A stopped"]  # stopped as mode does: in reverse


def test_faust_set_current_event():
    from faust import streams

    assert isinstance(streams._current_event, contextvars.ContextVar)

    class Event:
        pass

    event = Event()

    def apply():
        patches.faust_set_current_event(event)
        return streams.current_event()

    assert contextvars.copy_context().run(apply) is event
    assert streams.current_event() is None


def _third_party_assignments(path: Path) -> list[str]:
    """``X.attr = ...`` (or ``setattr(X, ...)``) where ``X`` is bound by an
    import of a module outside the product packages."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names
                         if a.name.split(".")[0] not in PRODUCT}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] not in PRODUCT:
            imported |= {a.asname or a.name for a in node.names}
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and node.args:
            targets = [ast.Attribute(value=node.args[0], attr="?")]
        for target in targets:
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if target is not root and isinstance(root, ast.Name) and root.id in imported:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(target)}")
    return found


def test_only_plait_patches_assigns_to_third_party_modules_and_classes(gc_paused):
    found = [hit for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))
             for hit in _third_party_assignments(path)]
    assert [hit for hit in found if not hit.startswith("plait/patches.py:")] == []
    assert any(hit.startswith("plait/patches.py:") for hit in found)


def test_private_internals_the_product_uses_in_place_are_still_there():
    """Private attributes read or written where they are used, not patched:
    faust-streaming 0.15.3 ``Consumer._committed_offset`` (``plait.metrics.
    update_lag``) and ``Producer._ensure_producer`` (``alerting.changelog.
    send_records``, ``plait.agent.AgentRuntime.spread_count``); CPython's
    ``zipfile`` write handle (``sinks.writers.xlsx_native``: pre-deflated sheet
    chunks written with the handle's CRC-32 and sizes kept, at
    ``ZipInfo._compresslevel``)."""
    import zipfile

    from faust.transport.consumer import Consumer
    from faust.transport.drivers.aiokafka import Producer

    assert "self._committed_offset = " in inspect.getsource(Consumer.__init__)
    assert list(inspect.signature(Producer._ensure_producer).parameters) == ["self"]
    assert "_compresslevel" in zipfile.ZipInfo.__slots__
    handle = inspect.getsource(zipfile._ZipWriteFile.__init__)
    assert all(f"self.{name} = 0" in handle for name in ("_file_size", "_compress_size", "_crc"))
    assert isinstance(zipfile._ZipWriteFile._fileobj, property)
