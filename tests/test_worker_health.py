"""streams.health: the worker health check behind the compose healthcheck and
the Kubernetes liveness/readiness probes (``python -m streams.health``)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest
import redis

from plait.keys import worker_key
from plait.settings import Settings
from streams.health import check

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def prefix():
    """A Redis key prefix of this test; its keys are dropped afterwards."""
    p = f"plait-health-{uuid.uuid4().hex[:10]}"
    yield p
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{p}:*", count=1000):
        client.delete(key)


def test_named_worker_is_healthy_only_while_its_heartbeat_key_lives(prefix):
    # given a worker named by PLAIT_WORKER_ID
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, worker_id="worker-1")
    # when it has not beaten yet, then it is unhealthy and the line says why
    ok, line = check(settings)
    assert not ok and "no heartbeat from worker worker-1" in line
    # when its heartbeat key is set (as Runtime.heartbeat does), then healthy
    redis.Redis.from_url(REDIS_URL).set(worker_key(prefix, "worker-1"), 1, ex=30)
    ok, line = check(settings)
    assert ok and line == f"ok: heartbeat {prefix}:worker:worker-1"
    # and another worker's key does not count
    assert not check(settings.model_copy(update={"worker_id": "worker-2"}))[0]


def test_unnamed_worker_is_found_by_hostname(prefix):
    # given a worker without PLAIT_WORKER_ID: it names itself <hostname>:<pid>
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix)
    assert not check(settings)[0]
    redis.Redis.from_url(REDIS_URL).set(worker_key(prefix, f"{socket.gethostname()}:1"), 1, ex=30)
    assert check(settings)[0]


def test_unreachable_redis_is_one_unhealthy_line():
    port = _closed_port()
    ok, line = check(Settings(redis_url=f"redis://127.0.0.1:{port}/0", worker_id="w"), timeout=1)
    assert not ok and line.startswith("unhealthy: Redis at") and "\n" not in line


def test_broker_check_fails_fast_on_a_dead_broker(prefix):
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, worker_id="w",
                        broker_url=f"127.0.0.1:{_closed_port()}")
    redis.Redis.from_url(REDIS_URL).set(worker_key(prefix, "w"), 1, ex=30)
    started = time.monotonic()
    ok, line = check(settings, broker=True, timeout=2)
    assert not ok and "did not answer" in line and time.monotonic() - started < 10


@pytest.mark.integration
def test_a_running_worker_passes_the_command_as_compose_runs_it(stack):
    # given a real worker (ops.stack starts it without PLAIT_WORKER_ID)
    env = {**os.environ, **stack.env}
    env.pop("PLAIT_WORKER_ID", None)
    # when the probe command runs; then it exits 0 (the first beat may take one interval)
    deadline = time.monotonic() + 30
    while True:
        out = subprocess.run([sys.executable, "-m", "streams.health", "--broker"], env=env,
                             capture_output=True, text=True, timeout=60)
        if out.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("ok: heartbeat ") and len(out.stdout.splitlines()) == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
