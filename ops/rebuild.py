"""Rebuild the Redis task projection from ``export.lifecycle``.

Redis is a projection: flushing it loses nothing the topic does not hold.
``rebuild`` replays every lifecycle event from the start of each partition
through the same fold the projector uses (``plait.lifecycle.apply``), whose
result does not depend on the order events of different partitions arrive in.
"""
from __future__ import annotations

import asyncio
import time
import uuid

import redis.asyncio as aioredis
from confluent_kafka import Consumer, KafkaException, TopicPartition

from plait import keys as K
from plait import topics as T
from plait.errors import PoisonError
from plait.events import Lifecycle, decode
from plait.logs import kafka_logger
from plait.projection import Projection
from plait.settings import Settings
from plait.topics import Topics

async def rebuild(settings: Settings, flush: bool = True, idle: float = 3.0,
                  connect_timeout: float = 5.0) -> int:
    """Replay ``export.lifecycle`` into the projection; returns events applied.

    Args:
        flush: delete the projection's keys first.
        idle: the replay ends after this many seconds without a new event
            (the topic's end; Tansu's watermarks are not reliable).
        connect_timeout: seconds to wait for the broker's metadata.
    Raises:
        ConnectionError: the broker did not answer (nothing is flushed then).
        LookupError: the broker has no lifecycle topic (nothing is flushed).
        redis.RedisError: Redis is unreachable.
    """
    topic = Topics(settings.topic_prefix).name(T.LIFECYCLE)
    consumer = Consumer({"bootstrap.servers": settings.broker_url,
                         "group.id": f"plait-rebuild-{uuid.uuid4().hex}",
                         "enable.auto.commit": False}, logger=kafka_logger())
    redis = aioredis.Redis.from_url(settings.redis_url)
    projection = Projection(redis, settings.redis_prefix)
    applied = 0
    try:
        # the broker first: nothing is flushed when the replay cannot run
        try:
            meta = await asyncio.to_thread(consumer.list_topics, topic, connect_timeout)
        except KafkaException as exc:
            raise ConnectionError(f"cannot reach Kafka at {settings.broker_url} "
                                  f"within {connect_timeout:g}s") from exc
        if topic not in meta.topics or meta.topics[topic].error is not None:
            raise LookupError(f"Kafka at {settings.broker_url} has no topic {topic}; "
                              f"check PLAIT_TOPIC_PREFIX")
        parts = meta.topics[topic].partitions
        if flush:
            await projection.flush()
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        last = time.monotonic()
        while time.monotonic() - last < idle:
            msgs = await asyncio.to_thread(consumer.consume, 500, 0.5)
            for msg in msgs:
                if msg.error():
                    continue
                last = time.monotonic()
                try:
                    _, event = decode(msg.value())
                except PoisonError:
                    continue
                if isinstance(event, Lifecycle):
                    await projection.apply(event)
                    applied += 1
        await redis.set(K.projection_built(settings.redis_prefix), int(time.time()))
    finally:
        consumer.close()
        await redis.aclose()
    return applied


async def ensure_built(settings: Settings) -> int | None:
    """Start-up check: rebuild when the projection's marker is missing (a new
    deployment, or Redis was flushed). Returns events applied, or None."""
    redis = aioredis.Redis.from_url(settings.redis_url)
    try:
        if await redis.exists(K.projection_built(settings.redis_prefix)):
            return None
    finally:
        await redis.aclose()
    return await rebuild(settings, flush=False, connect_timeout=10.0)
