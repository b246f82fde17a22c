"""The ``plait`` command's error paths: one line that says what to do, exit 1,
no traceback, no librdkafka lines (issue 10 item 4). The last tests use a
real stack: unknown task, rebuild and follow through .plait/dev.env,
readiness of the workers."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ops.infra import free_port
from plait.devenv import PID_KEY, write_dev_env

ROOT = Path(__file__).resolve().parents[2]


def plait(*args: str, cwd: Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    """Run ``plait ARGS`` as a user would: no PLAIT_* settings but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return subprocess.run([sys.executable, "-m", "ops.cli", *args], cwd=cwd, timeout=timeout,
                          env={**clean, **env}, capture_output=True, text=True)


def one_line_error(out: subprocess.CompletedProcess, command: str) -> str:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"plait {command}: "), lines[0]
    assert "Traceback" not in out.stderr and not re.search(r"%\d\|", out.stderr)
    return lines[0]


def test_follow_without_a_dev_stack_says_how_to_start_one(tmp_path):
    line = one_line_error(plait("follow", "some-task", cwd=tmp_path), "follow")
    assert "no `plait dev` is running" in line and "--api" in line


def test_rebuild_without_a_dev_stack_says_what_to_set(tmp_path):
    line = one_line_error(plait("rebuild", cwd=tmp_path), "rebuild")
    assert "start `plait dev`" in line and "PLAIT_BROKER_URL" in line


def test_a_dev_file_left_by_a_dead_plait_dev_is_named(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".plait").mkdir()
    (tmp_path / ".plait" / "dev.env").write_text(
        f"export PLAIT_API_URL=http://127.0.0.1:9\nexport {PID_KEY}={dead.pid}\n")
    line = one_line_error(plait("follow", "t", cwd=tmp_path), "follow")
    assert "no longer running" in line


def test_rebuild_with_an_unreachable_broker_is_one_line(tmp_path):
    started = time.monotonic()
    out = plait("rebuild", cwd=tmp_path, PLAIT_BROKER_URL=f"127.0.0.1:{free_port()}")
    line = one_line_error(out, "rebuild")
    assert "cannot reach Kafka" in line and "PLAIT_BROKER_URL" in line
    assert time.monotonic() - started < 30


def test_follow_with_an_unreachable_api_is_one_line(tmp_path):
    out = plait("follow", "t", "--api", f"http://127.0.0.1:{free_port()}", cwd=tmp_path)
    assert "cannot reach the API" in one_line_error(out, "follow")


def test_sdk_without_a_broker_fails_fast_and_quietly(tmp_path):
    code = ("from producers.sdk import PlaitProducer, BrokerUnreachable\n"
            "try:\n    PlaitProducer()\nexcept ValueError as e:\n    print('no-broker', e)\n"
            f"sdk = PlaitProducer('127.0.0.1:{free_port()}')\n"
            "try:\n    sdk.request_export({'sysCode': 'a', 'bizType': 'b', 'userId': 'u',"
            " 'dataConfig': {'dataApiUrl': 'http://x'}, 'documentConfig': {'fileFormat': 'csv'}})\n"
            "except BrokerUnreachable as e:\n    print('unreachable', e)\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=clean,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "no-broker" in out.stdout and "plait dev" in out.stdout
    assert "unreachable cannot reach Kafka" in out.stdout
    assert out.stderr == ""  # no librdkafka lines
    assert time.monotonic() - started < 20


@pytest.mark.integration
def test_cli_against_a_running_stack_through_its_dev_file(stack, tmp_path):
    # what `plait dev` writes (this process stands in for it: its pid is alive)
    write_dev_env({"PLAIT_API_URL": stack.api_url,
                   **{k: stack.env[k] for k in ("PLAIT_BROKER_URL", "PLAIT_REDIS_URL",
                                                "PLAIT_REDIS_PREFIX", "PLAIT_TOPIC_PREFIX")}},
                  tmp_path / ".plait" / "dev.env")
    # every worker said it consumes before start() returned
    workers = stack.workers()
    assert workers and set(stack.ready_workers()) >= {p.pid for p in workers.values()}

    line = one_line_error(plait("follow", "no-such-task", cwd=tmp_path), "follow")
    assert "no task no-such-task at " + stack.api_url in line
    hint = re.search(r"list tasks with `plait ([^`]*)`", line).group(1).split()
    assert hint == ["tasks", "list", "--sys-code", "<sysCode>"], line
    elsewhere = tmp_path / "elsewhere"  # no dev file: the API named on the command line
    elsewhere.mkdir()
    line = one_line_error(plait("follow", "no-such-task", "--api", stack.api_url, cwd=elsewhere),
                          "follow")
    named = re.search(r"list tasks with `plait ([^`]*)`", line).group(1).split()
    assert named == hint + ["--api", stack.api_url], line

    spec = {"sysCode": "cli", "bizType": "t", "userId": "u",
            "dataConfig": {"dataApiUrl": f"{stack.demo_data_api}/data", "pageSize": 50,
                           "queryConditions": {"dataset": "seq", "rows": 120}},
            "documentConfig": {"fileName": "f", "fileFormat": "csv"}}
    task_id = httpx.post(f"{stack.api_url}/export/tasks", json=spec).json()["data"]["taskId"]
    out = plait("follow", task_id, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"status": "SUCCESS"' in out.stdout.splitlines()[-1]
    # the command the unknown task's hint gave lists it, with the caller's sysCode put in
    for cmd, cwd in ((hint, tmp_path), (named, elsewhere)):
        out = plait(*["cli" if a == "<sysCode>" else a for a in cmd], cwd=cwd)
        assert out.returncode == 0 and task_id in out.stdout, (cmd, out.stdout, out.stderr)

    out = plait("rebuild", cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert re.fullmatch(r'\{"applied": [1-9][0-9]*\}', out.stdout.strip()), out.stdout
    assert httpx.get(f"{stack.api_url}/export/tasks/{task_id}").json()["data"]["status"] == "SUCCESS"


def test_worker_at_warning_leaves_the_root_logger_at_its_level():
    """Faust's spinner set the root logger to DEBUG at WARNING and above
    (every aiokafka debug call then built a record); the worker has none."""
    import logging

    import faust

    from ops.cli import faust_worker

    app = faust.App("plait-test-spinner", broker="kafka://127.0.0.1:1")
    worker = faust_worker([app], "WARNING")
    logger = logging.Logger("plait-test-root", level=logging.WARNING)
    logger.addHandler(logging.NullHandler())
    worker.on_setup_root_logger(logger, logging.WARNING)
    assert worker.spinner is None
    assert logger.level == logging.WARNING


class _BigApi:
    """An API on 127.0.0.1 answering the GETs of `plait alerts list`, `plait silences list` and
    `plait alerts why` with ``n`` entries each (far more than a pipe holds)."""

    def __init__(self, n: int = 5000) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        alerts = [{"fingerprint": f"{i:016x}", "labels": {"alertname": f"A{i}", "instance": "h"},
                   "status": {"state": "active"}, "startsAt": "2026-01-01T00:00:00Z"}
                  for i in range(n)]
        silences = {"code": 200, "message": "ok", "data": {"silences": [
            {"id": f"s{i}", "status": "active", "endsAt": "2026-01-01T00:00:00Z", "silenced": 0,
             "matchers": [f'alertname="A{i}"'], "comment": "c", "createdBy": "me"}
            for i in range(n)]}}
        story = {"code": 200, "message": "ok", "data": {
            "fingerprint": "0" * 16, "retentionSeconds": 60, "entries": [
                {"kind": "attempt", "time": "2026-01-01T00:00:00Z", "messageId": f"m{i}",
                 "receiver": "r", "attempt": i, "ok": True, "httpStatus": 200,
                 "elapsedSeconds": 0.1} for i in range(n)]}}
        bodies = {"/api/v2/alerts": alerts, "/silences": silences,
                  f"/alerts/{'0' * 16}/history": story}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                body = json.dumps(bodies[self.path.split("?")[0]]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.mark.parametrize("command", [["alerts", "list", "--json"], ["alerts", "list"],
                                     ["silences", "list", "--json"],
                                     ["alerts", "why", "0" * 16]])
def test_output_piped_into_head_ends_quietly(tmp_path, command):
    """`plait alerts list --json | head`: the reader leaves early, the command stops without a
    word on stderr, as a Unix tool does (killed by SIGPIPE: status 141, 128 + SIGPIPE)."""
    import shlex

    api = _BigApi()
    try:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
        cli = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "ops.cli", *command,
                                                "--api", api.url])
        out = subprocess.run(["bash", "-c", f"{cli} | head -n 2; echo status=${{PIPESTATUS[0]}} >&2"],
                             cwd=tmp_path, env={**clean, "PYTHONPATH": str(ROOT)},
                             capture_output=True, text=True, timeout=60)
    finally:
        api.server.shutdown()
    assert len(out.stdout.splitlines()) == 2, out.stdout
    assert out.stderr.splitlines() == ["status=141"], out.stderr
