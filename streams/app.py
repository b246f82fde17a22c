"""The Faust app: one agent per route, each at concurrency 1 (docs/kafka-rules.md #2);
scale with partitions and worker processes."""
from __future__ import annotations

import os
import tempfile
from functools import partial
from pathlib import Path

import faust

from plait import topics as T
from plait.logs import get_logger
from plait.patches import (aiokafka_lz4_level, aiokafka_prefetch_backoff, faust_fetch_max_wait,
                           faust_table_manager_wait)
from plait.settings import Settings
from streams.notify import with_notify
from streams import readiness
from streams.context import build_context
from streams.control import after_cancel, cancel, project
from streams.finalize import after_finalize, finalize
from streams.handlers import admit, after_admit, after_fetch, fetch
from streams.runtime import Route, Runtime
from streams.shards import after_write_shard, page_run, write_pages, write_shard


def routes(settings: Settings) -> list[Route]:
    """The export flow's agents and their time limits (seconds)."""
    fetch_bound = settings.fetch_retries * (settings.fetch_timeout_seconds + 65) + 30
    return [
        Route(T.REQUESTS, admit, after_admit, timeout=60),
        Route(T.FETCH, fetch, after_fetch, timeout=fetch_bound, attempts=2, detached=True,
              follow=True),
        # the last page closes and publishes the file in place (where it grew)
        Route(T.PAGES, write_shard, after_write_shard, timeout=3 * 3600, batch=write_pages,
              run_key=page_run),
        Route(T.FINALIZE, finalize, after_finalize, timeout=3 * 3600),
        Route(T.CONTROL, cancel, after_cancel, timeout=60),
        Route(T.LIFECYCLE, with_notify(project), timeout=60),
    ]


def tune_fetch_wait(max_wait_ms: int, prefetch_backoff_ms: int = 5) -> None:
    """Cap the consumer's fetch long-poll at ``max_wait_ms`` (Faust hard-codes
    1500; Tansu waits it out on an empty fetch) and aiokafka's prefetch backoff
    (one agent's unconsumed records stall the others) at
    ``prefetch_backoff_ms``: docs/kafka-rules.md #11, #15."""
    aiokafka_prefetch_backoff(prefetch_backoff_ms / 1000)
    faust_fetch_max_wait(max_wait_ms)


#: LZ4 level the worker's producer compresses record batches with (LZ4's fast mode).
LZ4_LEVEL = 1


def fast_lz4(level: int = LZ4_LEVEL) -> None:
    """Compress produced batches with LZ4 ``level`` (docs/kafka-rules.md #16):
    aiokafka 0.11+ uses LZ4HC level 9 with no option (aio-libs/aiokafka#1028).
    Output stays standard LZ4 frames."""
    aiokafka_lz4_level(level)


#: Young-generation threshold of the worker's cyclic GC (CPython's default: 700).
GC_GEN0_THRESHOLD = 50_000


def tune_gc(role: str) -> None:
    """Cheap cyclic GC for a long-lived worker of ``role``: ``gc.freeze()`` the
    start-up objects; for ``alerting`` only, a young generation of
    :data:`GC_GEN0_THRESHOLD` (open alerts are long-lived; export workers
    would exceed the 300 MB budget of docs/architecture.md): docs/perf-notes.md."""
    import gc

    gc.collect()
    gc.freeze()
    if role == "alerting":
        _, g1, g2 = gc.get_threshold()
        gc.set_threshold(GC_GEN0_THRESHOLD, g1, g2)


def faust_datadir(app_id: str) -> Path:
    """Faust's working directory for ``app_id``, under the temp dir, not the CWD."""
    base = Path(tempfile.gettempdir()) / "plait-faust"
    base.mkdir(parents=True, exist_ok=True)
    return base / f"{app_id}-data"


#: ``plait worker --role``: which agents a worker process runs.
ROLES = ("all", "export", "alerting")


def app_id_for(settings: Settings, role: str) -> str:
    """Consumer group of a role's app: the alert funnel is always
    ``<app id>-alerting`` (each alert decided once; no shared rebalances)."""
    return f"{settings.app_id}-alerting" if role == "alerting" else settings.app_id


#: Seconds an app's table manager waits before recovery (Faust's fixed 1 s; every table exists
#: before the app starts: ``plait.patches.faust_table_manager_wait``).
TABLE_START_WAIT = 0.05


def create_apps(settings: Settings, role: str = "all") -> list[faust.App]:
    """The Faust apps of ``role`` (``all``: export, plus alerting when
    configured). Raises ``ValueError`` for an unknown role or ``alerting``
    without a config."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: expected one of {', '.join(ROLES)}")
    from alerting.amconfig import enabled as alerting_enabled

    if role == "alerting" and not alerting_enabled(settings):
        raise ValueError("role 'alerting' needs PLAIT_ALERTMANAGER_CONFIG or PLAIT_ALERTING_CONFIG "
                         "(an alerting config file)")
    tune_fetch_wait(settings.fetch_max_wait_ms, settings.fetch_prefetch_backoff_ms)
    fast_lz4()
    faust_table_manager_wait(TABLE_START_WAIT)
    from plait import metrics, tracing

    tracing.setup("plait-worker")
    metrics.serve(settings.metrics_port)
    export = role in ("all", "export")
    alerting = alerting_enabled(settings) and role in ("all", "alerting")
    count = export + alerting
    return ([_export_app(settings, count)] if export else []) + (
        [_alerting_app(settings, count)] if alerting else [])


def _faust_app(settings: Settings, app_id: str) -> faust.App:
    return faust.App(
        app_id,
        broker=f"kafka://{settings.broker_url}",
        store="memory://",
        datadir=str(faust_datadir(settings.app_id)),
        web_enabled=False,
        topic_disable_leader=True,
        topic_allow_declare=False,
        topic_partitions=settings.partitions,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=max(20.0, settings.session_timeout_seconds * 3),
        # memory bound: docs/kafka-rules.md #10
        broker_max_poll_records=500,
        stream_buffer_maxsize=128,
        producer_compression_type="lz4",
        producer_max_request_size=2 * 1024 * 1024,
    )


def _export_app(settings: Settings, apps: int) -> faust.App:
    """The export agents, timers and scheduler; ``apps``: apps in this process."""
    from plait import metrics

    app = _faust_app(settings, app_id_for(settings, "export"))
    names = {T.Topics(settings.topic_prefix).name(t): t for t in T.ALL}
    runtime = Runtime(app, build_context(settings), routes(settings))

    async def gauges() -> None:
        metrics.update_lag(app, names)
        metrics.WORKER_INFLIGHT.set(len(runtime.inflight))

    _every(app, 5.0, gauges, "gauges")
    _every(app, settings.heartbeat_interval_seconds, runtime.heartbeat, "heartbeat")
    _every(app, settings.sweep_interval_seconds, runtime.sweep, "sweeper")
    _every(app, readiness.INTERVAL_SECONDS, partial(
        readiness.report, app, runtime.ctx.projection.redis, settings.redis_prefix,
        runtime.ctx.worker_id, apps), "readiness")
    from schedules.worker import register_scheduler

    register_scheduler(runtime, settings, partial(_every, app))
    return app


def _alerting_app(settings: Settings, apps: int) -> faust.App:
    """The alert funnel app."""
    import redis.asyncio as aioredis

    from alerting.agents import register_alerting

    app = _faust_app(settings, app_id_for(settings, "alerting"))
    client = aioredis.Redis.from_url(settings.redis_url, socket_timeout=2,
                                     socket_connect_timeout=2)
    _every(app, readiness.INTERVAL_SECONDS, partial(
        readiness.report, app, client, settings.redis_prefix,
        f"{settings.worker_id or os.getpid()}-alerting", apps), "readiness")
    register_alerting(app, settings)
    return app


def _every(app: faust.App, seconds: float, job, name: str) -> None:
    """Run ``job`` on a Faust timer; a failure is logged, never kills the timer."""
    log = get_logger("plait.timers")

    async def tick():
        try:
            await job()
        except Exception:
            log.exception("timer failed", timer=name)

    tick.__name__ = tick.__qualname__ = f"plait_{name}"  # Faust keys timers by qualname
    app.timer(seconds, name=f"plait.{name}")(tick)
