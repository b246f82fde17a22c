"""Worker health check for container probes (docker compose ``healthcheck``,
Kubernetes ``livenessProbe`` / ``readinessProbe``).

A worker proves it is alive by refreshing its Redis key
(``plait.keys.worker``) on every heartbeat (every
``PLAIT_HEARTBEAT_INTERVAL_SECONDS``, expiring after
``PLAIT_STALE_AFTER_SECONDS``; ``streams.runtime.Runtime.heartbeat``). The key
is written from the worker's event loop, so it goes stale when the loop is
blocked or the process is wedged, not only when it died (docs/kafka-rules.md #4:
a crashed agent can leave a process that looks alive).

Run in the worker's container::

    python -m streams.health            # exit 0: heartbeat fresh; 1: not
    python -m streams.health --broker   # also: the broker answers metadata

The worker id is ``PLAIT_WORKER_ID`` when set; otherwise a worker names
itself ``<hostname>:<pid>``, so any heartbeat key of this host counts (one
worker per container or pod).
"""
from __future__ import annotations

import argparse
import socket
import sys

from plait.settings import Settings


def heartbeat_keys(settings: Settings, client, hostname: str | None = None) -> list[str]:
    """The live heartbeat keys of this worker: ``[key]`` for ``PLAIT_WORKER_ID``,
    else every ``<prefix>:worker:<hostname>:*`` key. ``client`` is a sync
    ``redis.Redis``; raises ``redis.RedisError`` when Redis cannot be reached."""
    from plait.keys import worker_key

    if settings.worker_id:
        key = worker_key(settings.redis_prefix, settings.worker_id)
        return [key] if client.exists(key) else []
    pattern = worker_key(settings.redis_prefix, f"{hostname or socket.gethostname()}:*")
    return sorted(k.decode() if isinstance(k, bytes) else k
                  for k in client.scan_iter(match=pattern, count=500))


def broker_answers(broker_url: str, timeout: float) -> bool:
    """True when the Kafka bootstrap servers answer a metadata request within
    ``timeout`` seconds."""
    import logging

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker_url},
                        logger=logging.getLogger("plait.kafka"))  # not librdkafka's stderr
    try:
        admin.list_topics(timeout=timeout)
        return True
    except Exception:
        return False


def check(settings: Settings, broker: bool = False, timeout: float = 5.0) -> tuple[bool, str]:
    """``(healthy, one line saying why)`` for this worker: its heartbeat key is
    live, and (``broker=True``) the broker answers. Never raises."""
    import redis

    client = redis.Redis.from_url(settings.redis_url, socket_timeout=timeout,
                                  socket_connect_timeout=timeout)
    try:
        keys = heartbeat_keys(settings, client)
    except redis.RedisError as exc:
        return False, f"unhealthy: Redis at {settings.redis_url} did not answer: {exc}"
    finally:
        client.close()
    if not keys:
        who = settings.worker_id or f"{socket.gethostname()}:*"
        return False, (f"unhealthy: no heartbeat from worker {who} in the last "
                       f"{settings.stale_after_seconds:g}s (is `plait worker` running?)")
    if broker and not broker_answers(settings.broker_url, timeout):
        return False, f"unhealthy: broker {settings.broker_url} did not answer in {timeout:g}s"
    return True, f"ok: heartbeat {', '.join(keys)}"


def main(argv: list[str] | None = None) -> int:
    """Command line: print one line, return 0 when healthy, 1 when not."""
    parser = argparse.ArgumentParser(prog="python -m streams.health", description=__doc__.split("\n")[0])
    parser.add_argument("--broker", action="store_true", help="also require the broker to answer")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per check")
    args = parser.parse_args(argv)
    ok, line = check(Settings(), broker=args.broker, timeout=args.timeout)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
