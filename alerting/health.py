"""Container probe of an alerting worker: its readiness key ``{PLAIT_REDIS_PREFIX}:ready:{worker
id}`` (:func:`plait.keys.ready`, refreshed every 0.5 s while consuming) goes stale when it died,
is wedged or is not consuming.

Run in the worker's container::

    python -m alerting.health     # exit 0: readiness fresh; 1: not

The worker id is ``PLAIT_WORKER_ID`` (set it: an alerting worker without one
names itself ``<pid>-alerting``, which a probe cannot guess).
"""
from __future__ import annotations

import sys

from plait.settings import Settings


def main() -> int:
    """Exit status 0 when this alerting worker's readiness key exists."""
    import redis

    from plait import keys as K

    s = Settings()
    if not s.worker_id:
        print("PLAIT_WORKER_ID is not set", file=sys.stderr)
        return 1
    try:
        client = redis.Redis.from_url(s.redis_url, socket_timeout=3, socket_connect_timeout=3)
        ok = bool(client.exists(K.ready(s.redis_prefix, s.worker_id)))
    except redis.RedisError as e:
        print(f"redis: {e}", file=sys.stderr)
        return 1
    print("ready" if ok else "not ready (no fresh readiness key)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
