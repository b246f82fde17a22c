"""Worker readiness: a worker says it consumes only once it has joined its
consumer group, been assigned its partitions and recovered its tables.

Each worker keeps ``plait.keys.ready`` in Redis while it is ready
(JSON ``{"workerId", "pid", "group", "apps", "generation", "partitions"}``,
one per Faust app: a ``--role all`` worker runs two, the export group and
the alerting group; expiring after :data:`TTL_SECONDS` unless refreshed)
and deletes it while it rebalances. ``ops.stack.Stack`` waits until every
worker it started has a key for each of its apps, and the workers of each
group share one consumer-group generation, before it calls the stack ready.
"""
from __future__ import annotations

import json
import os

import faust

from plait import keys as K

#: Readiness keys expire this many seconds after the last refresh (a dead worker).
TTL_SECONDS = 5
#: How often a worker refreshes its readiness, seconds.
INTERVAL_SECONDS = 0.5


def worker_state(app: faust.App, worker_id: str, apps: int = 1) -> dict | None:
    """The readiness record of this worker, or None while it has not joined
    the group, is rebalancing or is recovering tables.

    Faust sets ``recovery.completed`` once the first assignment's tables are
    recovered and the fetcher runs; ``app.rebalancing`` is True from a
    revocation until the next assignment has recovered (Faust's
    ``on_rebalance_start`` / ``on_rebalance_end``).
    """
    if app.rebalancing or not app.tables.recovery.completed.is_set():
        return None
    return {"workerId": worker_id, "pid": os.getpid(), "group": app.conf.id, "apps": apps,
            "generation": app.consumer_generation_id,
            "partitions": len(app.consumer.assignment())}


async def report(app: faust.App, redis, prefix: str, worker_id: str, apps: int = 1) -> None:
    """Set or delete the readiness key of ``app`` in this worker (one Faust
    timer tick); ``apps``: how many Faust apps (consumer groups) the process runs."""
    state = worker_state(app, worker_id, apps)
    key = K.ready(prefix, worker_id)
    if state is None:
        await redis.delete(key)
    else:
        await redis.set(key, json.dumps(state), ex=TTL_SECONDS)
