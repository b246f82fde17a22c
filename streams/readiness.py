"""Worker readiness key ``plait.keys.ready`` (JSON ``{workerId, pid, group,
apps, generation, partitions}``), kept while the app has joined its group and
recovered its tables, deleted while rebalancing (``ops.stack.Stack`` waits on it)."""
from __future__ import annotations

import json
import os

import faust

from plait import keys as K

#: Seconds a readiness key outlives its last refresh.
TTL_SECONDS = 5
INTERVAL_SECONDS = 0.5


def worker_state(app: faust.App, worker_id: str, apps: int = 1) -> dict | None:
    """This worker's readiness record; None while joining, rebalancing or recovering."""
    if app.rebalancing or not app.tables.recovery.completed.is_set():
        return None
    return {"workerId": worker_id, "pid": os.getpid(), "group": app.conf.id, "apps": apps,
            "generation": app.consumer_generation_id,
            "partitions": len(app.consumer.assignment())}


async def report(app: faust.App, redis, prefix: str, worker_id: str, apps: int = 1) -> None:
    """Set or delete this worker's readiness key for ``app``."""
    state = worker_state(app, worker_id, apps)
    key = K.ready(prefix, worker_id)
    if state is None:
        await redis.delete(key)
    else:
        await redis.set(key, json.dumps(state), ex=TTL_SECONDS)
