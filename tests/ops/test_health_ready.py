"""Issue 15 item 5: ``/health/live`` and ``/health/ready`` on the API, and the
same readiness from a worker's ``python -m streams.health --ready``: each
dependency's state in the body, not ready when one is missing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

pytestmark = pytest.mark.integration


def worker_ready(env: dict[str, str]) -> tuple[int, dict]:
    out = subprocess.run([sys.executable, "-m", "streams.health", "--ready", "--timeout", "3"],
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    return out.returncode, json.loads(out.stdout)


def test_live_and_ready_name_each_dependency(make_stack, tmp_path):
    stack = make_stack(workers=1)
    assert httpx.get(f"{stack.api_url}/health/live", timeout=5).json() == {"status": "live"}
    resp = httpx.get(f"{stack.api_url}/health/ready", timeout=20)
    body = resp.json()
    assert resp.status_code == 200, body
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"redis", "broker", "topics", "objectStore"}
    assert all(c["ok"] for c in body["checks"].values()), body
    assert body["checks"]["objectStore"]["detail"] == "writable"
    # nothing is left behind by the write probe
    assert not list((stack.data_dir / "storage").glob("_health/*"))

    # a worker answers the same
    code, state = worker_ready(stack.env)
    assert code == 0 and state["ready"], state

    # missing topics and an object store that cannot be written: not ready, and why
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    code, state = worker_ready({**stack.env, "PLAIT_TOPIC_PREFIX": "nowhere.",
                                "PLAIT_STORAGE_URL": f"file://{blocker}"})
    assert code == 1 and not state["ready"]
    checks = state["checks"]
    assert checks["redis"]["ok"] and checks["broker"]["ok"]
    assert not checks["topics"]["ok"] and "nowhere.export.requests" in checks["topics"]["error"]
    assert not checks["objectStore"]["ok"], checks["objectStore"]
