"""Fixtures of the API edge tests: the real app on a real Redis (key prefix per
test), with Kafka replaced by a recorder of what the routes would send."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis

from api.app import create_api
from plait.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/0"
ALERTING_YAML = Path(__file__).resolve().parents[2] / "examples" / "alerting.yaml"


@pytest.fixture
def client(sent, tmp_path):
    """A TestClient of ``create_api`` in open mode with the alerting routes."""
    from fastapi.testclient import TestClient

    r = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    try:
        r.ping()
    except Exception as exc:  # the real-service lane is mandatory: fail, never skip
        pytest.fail(f"the API edge tests need a real Redis at {REDIS_URL}: {exc}")
    prefix = f"plait-apitest-{uuid.uuid4().hex[:12]}"
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix,
                        storage_url=f"file://{tmp_path}/store", alerting_config=str(ALERTING_YAML),
                        broker_url="127.0.0.1:1")
    with TestClient(create_api(settings)) as c:
        yield c
    for key in r.scan_iter(match=f"{prefix}:*", count=500):
        r.delete(key)
    r.close()
