"""``plait dev`` as a user meets it: ``--port``, a shell that sourced another
stack's ``.plait/dev.env``, another live stack's file in the same directory,
workers' metrics ports; and a worker whose ``PLAIT_METRICS_PORT`` is taken
(one line, no traceback)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from ops.infra import free_port
from plait.devenv import PID_KEY
from test_cli import ROOT, one_line_error, plait
from test_readme import READY, wait_for_line


def listening() -> socket.socket:
    """A socket listening on a free 127.0.0.1 port (the caller closes it)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_taken_port_is_one_line_before_anything_starts(tmp_path):
    with listening() as s:
        port = s.getsockname()[1]
        line = one_line_error(plait("dev", "--port", str(port), cwd=tmp_path, timeout=30), "dev")
    assert f"--port {port}" in line and "in use" in line
    assert not (tmp_path / ".plait" / "dev.env").exists()


def test_a_live_stacks_dev_file_here_is_left_alone(tmp_path):
    dev_file = tmp_path / ".plait" / "dev.env"
    dev_file.parent.mkdir()
    text = f"export PLAIT_API_URL=http://127.0.0.1:9\nexport {PID_KEY}={os.getpid()}\n"
    dev_file.write_text(text)
    line = one_line_error(plait("dev", cwd=tmp_path, timeout=30), "dev")
    assert f"pid {os.getpid()}" in line and "PLAIT_DEV_ENV" in line
    assert dev_file.read_text() == text


def test_a_worker_whose_metrics_port_is_taken_says_so_in_one_line(tmp_path):
    with listening() as s:
        port = s.getsockname()[1]
        out = plait("worker", cwd=tmp_path, timeout=60, PLAIT_METRICS_PORT=str(port),
                    PLAIT_BROKER_URL="127.0.0.1:1")
    line = one_line_error(out, "worker")
    assert f"PLAIT_METRICS_PORT={port}" in line and "already in use" in line


@pytest.mark.integration
def test_dev_in_a_shell_that_sourced_another_stack(tmp_path):
    # given a shell that sourced another (live) stack's dev.env, from another directory,
    # and that sets PLAIT_METRICS_PORT
    other = tmp_path / "other" / ".plait" / "dev.env"
    other.parent.mkdir(parents=True)
    other_text = (f"export PLAIT_REDIS_PREFIX=plait-other\nexport PLAIT_BROKER_URL=127.0.0.1:1\n"
                  f"export {PID_KEY}={os.getpid()}\n")
    other.write_text(other_text)
    work = tmp_path / "mine"
    work.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env.update(PLAIT_REDIS_PREFIX="plait-other", PLAIT_BROKER_URL="127.0.0.1:1",
               PLAIT_API_URL="http://127.0.0.1:1", PLAIT_METRICS_PORT=str(free_port()),
               **{PID_KEY: str(os.getpid())})
    # when `plait dev --port P --config ...` starts there (two workers: export, alerting)
    dev = subprocess.Popen([sys.executable, "-m", "ops.cli", "dev", "--port", str(port),
                            "--config", str(ROOT / "examples" / "alerting.yaml")],
                           cwd=work, env=env, text=True, stdout=subprocess.PIPE,
                           stderr=open(tmp_path / "dev.err", "w"), start_new_session=True)
    try:
        printed = wait_for_line(dev, READY, timeout=180)
        exports = dict(line.removeprefix("export ").split("=", 1)
                       for line in printed if line.startswith("export "))
        # then it runs its own stack on the port asked for
        assert exports["PLAIT_API_URL"] == f"http://127.0.0.1:{port}"
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        assert exports["PLAIT_REDIS_PREFIX"] != "plait-other"
        assert exports["PLAIT_BROKER_URL"] != "127.0.0.1:1"
        assert any("not using" in line and "PLAIT_REDIS_PREFIX" in line for line in printed)
        # and the export lines it printed are its dev.env's, its own pid included
        written = (work / ".plait" / "dev.env").read_text().splitlines()
        assert [ln for ln in printed if ln.startswith("export ")] \
            == [ln for ln in written if ln.startswith("export ")]
        assert exports[PID_KEY] == str(dev.pid)
        # and each worker serves its metrics on its own port, listed in the export lines
        urls = exports["PLAIT_METRICS_URLS"].split(",")
        assert len(set(urls)) == 2, urls
        for url in urls:
            assert "python_info" in httpx.get(url, timeout=5).text
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGTERM)
        dev.wait(90)
    # and on exit it removed its own dev.env, never the other stack's
    assert not (work / ".plait" / "dev.env").exists()
    assert other.read_text() == other_text
