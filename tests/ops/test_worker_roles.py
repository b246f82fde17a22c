"""Issue 11.6: exports and alerting run as separate worker roles, and the dev
stack restarts a worker that exits, so killing the alerting worker never
stops exports and the worker comes back."""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest
import yaml

import sys

from ops.cli import main
from ops.stack import Stack
from streams.app import app_id_for, create_apps
from plait.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "pipeline"))
from support import seq_spec, submit, wait_task  # noqa: E402

pytestmark = pytest.mark.integration


def wait_until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_roles_are_separate_consumer_groups():
    s = Settings(app_id="plait-x", alerting_config="")
    assert app_id_for(s, "alerting") == "plait-x-alerting" and app_id_for(s, "export") == "plait-x"
    with pytest.raises(ValueError, match="alerting"):
        create_apps(s, "alerting")
    with pytest.raises(ValueError, match="role"):
        create_apps(s, "nope")


def test_worker_cli_accepts_a_role():
    with pytest.raises(SystemExit):
        main(["worker", "--role", "bogus"])


def test_killing_the_alerting_worker_leaves_exports_running_and_it_comes_back(tmp_path: Path):
    cfg = tmp_path / "alerting.yaml"
    cfg.write_text(yaml.safe_dump({"receivers": [{"name": "r", "url": "http://127.0.0.1:9/x"}],
                                   "route": {"receiver": "r"}}))
    rid = uuid.uuid4().hex[:8]
    stack = Stack(tmp_path / "stack", {"PLAIT_ALERTING_CONFIG": str(cfg),
                                       "PLAIT_TOPIC_PREFIX": f"roles-{rid}.",
                                       "PLAIT_APP_ID": f"roles-{rid}"})
    stack.start(workers=1, api=True, demo_data_api=True, split_roles=True, supervise=True)
    try:
        assert set(stack.workers()) == {"worker-0", "worker-alerting"}
        alerting = stack.workers()["worker-alerting"]
        # when the alerting worker is killed -9
        os.kill(alerting.pid, signal.SIGKILL)
        # then an export still completes meanwhile
        task = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 300))
        assert wait_task(stack.api_url, task, 120)["status"] == "SUCCESS"
        # and the supervisor restarts the alerting worker (with a logged backoff)
        back = wait_until(lambda: (p := stack.workers().get("worker-alerting")) is not None
                          and p.pid != alerting.pid and p.poll() is None and p, 60,
                          "the alerting worker to be restarted")
        assert "worker-alerting exited" in (tmp_path / "stack" / "logs" / "supervisor.log").read_text()
        wait_until(lambda: back.pid in stack.ready_workers(), 90, "the restarted worker to consume")
    finally:
        stack.stop()
