"""Worker health check for container probes (compose healthcheck, Kubernetes probes).

Healthy: a fresh heartbeat key, written from the event loop, so a wedged loop
reads as dead (docs/kafka-rules.md #4). Exit 0 healthy, 1 not; ``--broker``,
``--ready`` (dependencies as JSON)."""
from __future__ import annotations

import argparse
import socket
import sys

from plait.settings import Settings


def heartbeat_keys(settings: Settings, client, hostname: str | None = None) -> list[str]:
    """Live heartbeat keys of ``PLAIT_WORKER_ID``, else of ``<hostname>:*``.
    Raises ``redis.RedisError``."""
    from plait.keys import worker_key

    if settings.worker_id:
        key = worker_key(settings.redis_prefix, settings.worker_id)
        return [key] if client.exists(key) else []
    pattern = worker_key(settings.redis_prefix, f"{hostname or socket.gethostname()}:*")
    return sorted(k.decode() if isinstance(k, bytes) else k
                  for k in client.scan_iter(match=pattern, count=500))


def broker_answers(broker_url: str, timeout: float) -> bool:
    """Whether the broker answers a metadata request within ``timeout`` s."""
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
    """``(healthy, one line why)``; never raises."""
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


def _probe(fn, timeout: float) -> dict:
    """``{"ok", "ms", "detail"|"error"}`` of ``fn()``."""
    import time

    t0 = time.monotonic()
    try:
        detail = fn()
        return {"ok": True, "ms": round((time.monotonic() - t0) * 1000, 1), "detail": detail}
    except Exception as exc:
        return {"ok": False, "ms": round((time.monotonic() - t0) * 1000, 1),
                "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def dependencies(settings: Settings, timeout: float = 3.0) -> dict:
    """Blocking: ``{"ready", "checks": {name: probe}}`` for ``redis``,
    ``broker``, ``topics``, ``objectStore`` (a probe object under
    ``_health/``). Never raises."""
    import logging
    import uuid

    import redis

    from plait.topics import Topics
    from sinks.store import open_store

    checks: dict[str, dict] = {}

    def ping():
        client = redis.Redis.from_url(settings.redis_url, socket_timeout=timeout,
                                      socket_connect_timeout=timeout)
        try:
            client.ping()
            return "PONG"
        finally:
            client.close()

    checks["redis"] = _probe(ping, timeout)
    found: dict = {}

    def metadata():
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": settings.broker_url},
                            logger=logging.getLogger("plait.kafka"))
        found["topics"] = set(admin.list_topics(timeout=timeout).topics)
        return f"{len(found['topics'])} topics"

    checks["broker"] = _probe(metadata, timeout)

    def topics():
        if "topics" not in found:
            raise RuntimeError("broker did not answer")
        missing = [t for t in Topics(settings.topic_prefix).all() if t not in found["topics"]]
        if missing:
            raise RuntimeError(f"missing topics: {', '.join(missing)}")
        return "all present"

    checks["topics"] = _probe(topics, timeout)

    def bucket():
        store = open_store(settings.storage_url, settings.api_url, settings.signing_secret,
                           settings.s3_endpoint_url, settings.s3_region, settings.s3_public_url)
        folder = f"_health/{uuid.uuid4().hex}/"
        key = folder + "probe"
        store.put_bytes(key, b"ok")
        try:
            if store.get_bytes(key) != b"ok":
                raise RuntimeError("probe object read back differs")
        finally:
            store.delete_prefix(folder)
        return "writable"

    checks["objectStore"] = _probe(bucket, timeout)
    return {"ready": all(c["ok"] for c in checks.values()), "checks": checks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams.health", description=__doc__.split("\n")[0])
    parser.add_argument("--broker", action="store_true", help="also require the broker to answer")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per check")
    parser.add_argument("--ready", action="store_true",
                        help="check the dependencies (Redis, broker, topics, object store) "
                             "and print each one's state as JSON")
    args = parser.parse_args(argv)
    if args.ready:
        import json

        state = dependencies(Settings(), args.timeout)
        print(json.dumps(state))
        return 0 if state["ready"] else 1
    ok, line = check(Settings(), broker=args.broker, timeout=args.timeout)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
