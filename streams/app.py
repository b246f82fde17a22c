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
from plait.patches import aiokafka_lz4_level, aiokafka_prefetch_backoff, faust_fetch_max_wait
from plait.settings import Settings
from streams.notify import with_notify
from streams import readiness
from streams.context import build_context
from streams.control import after_cancel, cancel, project
from streams.finalize import after_finalize, finalize
from streams.handlers import admit, after_admit, after_fetch, fetch
from streams.runtime import Route, Runtime
from streams.shards import after_write_shard, write_shard


def routes(settings: Settings) -> list[Route]:
    """The export flow's agents and their time limits (seconds)."""
    fetch_bound = settings.fetch_retries * (settings.fetch_timeout_seconds + 65) + 30
    return [
        Route(T.REQUESTS, admit, after_admit, timeout=60),
        Route(T.FETCH, fetch, after_fetch, timeout=fetch_bound, attempts=2, detached=True,
              follow=True),
        # the last page closes and publishes the file in place (where it grew)
        Route(T.PAGES, write_shard, after_write_shard, timeout=3 * 3600),
        Route(T.FINALIZE, finalize, after_finalize, timeout=3 * 3600),
        Route(T.CONTROL, cancel, after_cancel, timeout=60),
        Route(T.LIFECYCLE, with_notify(project), timeout=60),
    ]


def tune_fetch_wait(max_wait_ms: int, prefetch_backoff_ms: int = 5) -> None:
    """Cap the consumer's fetch long-poll at ``max_wait_ms`` and its prefetch
    backoff at ``prefetch_backoff_ms`` (docs/kafka-rules.md #11, #15).

    Faust hard-codes ``fetch_max_wait_ms=1500``. Kafka answers a long-poll as soon
    as data arrives, but Tansu (the embedded broker) waits the whole time when
    a fetch finds nothing, which turned every hop of the page loop into ~1 s.
    A short wait costs only a few more empty fetches on Kafka.

    aiokafka sends no fetch to a broker while records it fetched from any
    partition led by that broker wait to be consumed, for up to its
    ``prefetch_backoff`` (0.1 s, not a consumer option): one agent's
    unconsumed records held every other agent's partitions on that broker.
    The worker's ``Fetcher`` is built with ``prefetch_backoff_ms`` instead.
    The patches: :func:`plait.patches.aiokafka_prefetch_backoff` and
    :func:`plait.patches.faust_fetch_max_wait`.
    """
    aiokafka_prefetch_backoff(prefetch_backoff_ms / 1000)
    faust_fetch_max_wait(max_wait_ms)


#: LZ4 level the worker's producer compresses record batches with (LZ4's fast mode).
LZ4_LEVEL = 1


def fast_lz4(level: int = LZ4_LEVEL) -> None:
    """Compress produced record batches with LZ4 ``level`` (docs/kafka-rules.md #16).

    aiokafka 0.11+ compresses every ``lz4`` batch at level 9 (LZ4HC, its
    ``codec.lz4_encode`` default; python-lz4 before it used level 0) and has
    no option for it (aio-libs/aiokafka#1028, fix pending in #1121). Level 9
    ran at ~280 MB/s against ~2,700 MB/s for level 1 on changelog JSON, for
    output ~3-15% smaller: ~5% of an alerting worker's CPU in a storm. The
    record builders (the pure-Python and the compiled one) call the module
    global ``lz4_encode``; it is replaced there by the same function at
    ``level`` (:func:`plait.patches.aiokafka_lz4_level`). The output is
    standard LZ4 frames: any consumer reads them."""
    aiokafka_lz4_level(level)


#: Young-generation threshold of the worker's cyclic GC (CPython's default: 700).
GC_GEN0_THRESHOLD = 50_000


def tune_gc(role: str) -> None:
    """Make the cyclic garbage collector cheap for a long-lived worker.

    Called once the app is built (``ops.cli`` ``worker``), with the worker's
    ``--role`` (``export``, ``alerting`` or ``all``). Every role:
    ``gc.freeze()`` moves what start-up made (Faust, aiokafka, pydantic,
    OpenTelemetry: objects that live as long as the process) out of every
    later full collection.

    Only ``alerting``: a young generation of 50,000 objects instead of 700.
    An alert storm allocates several dicts per alert and the funnel keeps them
    while the alert is open, so with the defaults the collector rescanned the
    open alerts over and over: ~20% of the runner's CPU at 40,000 open alerts
    (in-process, the threshold alone: 191 -> 154 us per alert). Not for
    export workers: there cyclic garbage from page decoding then waits long
    enough to double peak RSS (`bench/bench_export.py --formats csv
    --workers 1`: one export 243 -> 338 MB, ten concurrent 287 -> 624 MB, same
    CPU), past the < 300 MB budget of docs/architecture.md.
    """
    import gc

    gc.collect()
    gc.freeze()
    if role == "alerting":
        _, g1, g2 = gc.get_threshold()
        gc.set_threshold(GC_GEN0_THRESHOLD, g1, g2)


def faust_datadir(app_id: str) -> Path:
    """Faust's working directory for ``app_id`` (created here: Faust makes only
    the last level), outside the CWD so runs leave no ``<app id>-data`` behind."""
    base = Path(tempfile.gettempdir()) / "plait-faust"
    base.mkdir(parents=True, exist_ok=True)
    return base / f"{app_id}-data"


#: ``plait worker --role``: which agents a worker process runs.
ROLES = ("all", "export", "alerting")


def app_id_for(settings: Settings, role: str) -> str:
    """Faust app id (= consumer group) of a worker's ``export`` or ``alerting``
    app: exports keep ``settings.app_id``; the alert funnel is always its own
    group (``<app id>-alerting``), whichever role runs it, so every worker
    deciding alerts shares one group and one changelog and each alert is
    decided once; a crash or storm there never rebalances the export
    workers, and vice versa."""
    return f"{settings.app_id}-alerting" if role == "alerting" else settings.app_id


def create_apps(settings: Settings, role: str = "all") -> list[faust.App]:
    """Build the Faust apps a worker of ``role`` runs, one per consumer group.

    Args:
        role: ``all`` (the export app, plus the alerting app when
            an alerting config is set), ``export`` (the export app
            only) or ``alerting`` (the alerting app only; needs
            ``alerting_config``).

    Returns:
        ``[export app]``, ``[alerting app]`` or ``[export app, alerting app]``
        (ids from :func:`app_id_for`); ``ops.cli`` runs them in one Faust
        ``Worker``.

    Raises:
        ValueError: an unknown role, or ``alerting`` without a config.
    """
    if role not in ROLES:
        raise ValueError(f"role {role!r}: expected one of {', '.join(ROLES)}")
    from alerting.amconfig import enabled as alerting_enabled

    if role == "alerting" and not alerting_enabled(settings):
        raise ValueError("role 'alerting' needs PLAIT_ALERTMANAGER_CONFIG or PLAIT_ALERTING_CONFIG "
                         "(an alerting config file)")
    tune_fetch_wait(settings.fetch_max_wait_ms, settings.fetch_prefetch_backoff_ms)
    fast_lz4()
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
        # Faust's own working directory (default: "<app id>-data" in the CWD)
        datadir=str(faust_datadir(settings.app_id)),
        web_enabled=False,
        topic_disable_leader=True,
        topic_allow_declare=False,
        topic_partitions=settings.partitions,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=max(20.0, settings.session_timeout_seconds * 3),
        # memory bound (docs/kafka-rules.md #10): at most 128 buffered events per agent,
        # pages inline only up to page_inline_max_bytes (256 KiB): <= 32 MiB.
        # 20 records per poll capped small events (alerts) at ~200/s on Tansu.
        broker_max_poll_records=500,
        stream_buffer_maxsize=128,
        producer_compression_type="lz4",
        producer_max_request_size=2 * 1024 * 1024,
    )


def _export_app(settings: Settings, apps: int) -> faust.App:
    """The export agents, their timers and the scheduler (group ``app_id``);
    ``apps``: how many Faust apps this process runs (its readiness says so)."""
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
    """The alert funnel (group ``<app_id>-alerting``); ``apps`` as for
    :func:`_export_app`."""
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
