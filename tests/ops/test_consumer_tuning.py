"""The worker's consumer runs with Plait's fetch settings
(docs/kafka-rules.md #11 and #15), checked on a real aiokafka consumer
started against a Tansu broker."""
from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer

from ops.infra import start_broker
from streams.app import tune_fetch_wait


def test_prefetch_backoff_is_the_setting_not_aiokafkas_100_ms():
    broker = start_broker()
    try:
        async def fetcher_backoff() -> float:
            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
            await consumer.start()
            try:
                return consumer._fetcher._prefetch_backoff
            finally:
                try:
                    await consumer.stop()
                except asyncio.CancelledError:  # aiokafka's no-group coordinator, stopped at once
                    pass

        tune_fetch_wait(50, 7)
        assert asyncio.run(fetcher_backoff()) == 0.007
        tune_fetch_wait(50, 5)  # the last call wins (one process, several apps in tests)
        assert asyncio.run(fetcher_backoff()) == 0.005
    finally:
        broker.stop()
