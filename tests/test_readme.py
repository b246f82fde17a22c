"""The README runs as written against `plait dev` (issue 10 item 4).

Every ```sh / ```bash / ```python block is run in order; the one marked
``<!-- run-in-background ... -->`` is `plait dev` itself (started first,
stopped last); blocks preceded by ``<!-- not-run: reason -->`` are skipped.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RUNNABLE = {"sh", "bash", "python"}
MARKER = re.compile(r"^<!--\s*(not-run|run-in-background)\s*(?::\s*(.*?))?\s*-->$")
READY = "# plait dev: ready"


@dataclass
class Block:
    lang: str
    code: str
    line: int          # 1-based line of the opening fence
    marker: str | None  # "not-run", "run-in-background" or None
    reason: str


def readme_blocks(text: str) -> list[Block]:
    """Fenced blocks of ``text`` with the marker comment right above them."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        above = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        m = MARKER.match(above)
        blocks.append(Block(fence[1], "\n".join(body) + "\n", start + 1,
                            m[1] if m else None, (m[2] or "") if m else ""))
        i += 1
    return blocks


def test_every_runnable_block_runs_or_says_why_not():
    blocks = [b for b in readme_blocks(README.read_text()) if b.lang in RUNNABLE]
    assert blocks, "README has no sh/bash/python blocks"
    for b in blocks:
        if b.marker == "not-run":
            assert len(b.reason) > 10, f"README line {b.line}: not-run needs a reason"
    background = [b for b in blocks if b.marker == "run-in-background"]
    assert len(background) == 1 and "plait dev" in background[0].code


def test_block_parser_reads_markers():
    text = "x\n<!-- not-run: production only -->\n```sh\necho no\n```\n\n```python\nprint(1)\n```\n"
    a, b = readme_blocks(text)
    assert (a.lang, a.marker, a.reason, a.code) == ("sh", "not-run", "production only", "echo no\n")
    assert (b.lang, b.marker, b.line) == ("python", None, 7)


LOOPBACK = {"127.0.0.1", "localhost", "::1"}
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://(?:[^@/\s'\"]*@)?(\[[^\]]*\]|[^/:\s'\"?#]+)")
HOST_PORT = re.compile(r"[\"'=\s](?!\d+[\"'\s])([A-Za-z][A-Za-z0-9.-]*):\d{2,5}\b")


def compose_services() -> set[str]:
    """Service names of ``docker-compose.yml`` (hosts on the compose network)."""
    import yaml

    return set(yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"])


def hosts_named(code: str) -> set[str]:
    """Hosts a block names: of URLs, and of quoted or spaced ``host:port``;
    comments (`` #`` to the end of a line) are left out."""
    text = "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in code.splitlines())
    found = {h.strip("[]") for h in URL.findall(text)}
    found |= {h for h in HOST_PORT.findall(" " + text) if not h.isdigit()}
    return found


def test_readme_blocks_name_only_hosts_of_this_machine():
    """Blocks that run against `plait dev` reach only loopback; not-run blocks
    may also name the compose services (hosts inside the compose network)."""
    services = compose_services()
    wrong = []
    for b in readme_blocks(README.read_text()):
        if b.lang not in RUNNABLE:
            continue
        allowed = LOOPBACK | (services if b.marker == "not-run" else set())
        wrong += [(b.line, h) for h in sorted(hosts_named(b.code) - allowed)]
    assert not wrong, f"README blocks (line, host) reach outside the machine: {wrong}"


def test_host_scan_finds_urls_and_host_ports():
    code = ('curl -s https://hooks.example.com/x "http://[::1]:80/" # http://comment.example\n'
            'PlaitProducer("kafka:9092") {"tcp": "db.internal:5432"} $API:8000 "12:30"')
    assert hosts_named(code) == {"hooks.example.com", "::1", "kafka", "db.internal"}


def test_fixed_api_addresses_are_where_a_readme_plait_dev_puts_the_api():
    """A block that names the API at a fixed ``127.0.0.1:PORT`` (a reload, amtool, Prometheus'
    target) follows a ``plait dev --port PORT``: without ``--port`` the API takes a free port.
    Redis's 6379 is the embedded server's."""
    blocks = readme_blocks(README.read_text())
    started = {int(p) for b in blocks for p in re.findall(r"plait dev\b[^\n]*--port (\d+)", b.code)}
    named = {(b.line, int(p)) for b in blocks for p in re.findall(r"127\.0\.0\.1:(\d+)", b.code)
             if int(p) != 6379}
    assert named and [(line, port) for line, port in sorted(named) if port not in started] == [], \
        (named, started)


def clean_env() -> dict[str, str]:
    """A new user's shell: no PLAIT_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    if block.lang == "python":
        cmd = [str(cwd / ".venv" / "bin" / "python"), "-c", block.code]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float) -> list[str]:
    """stdout lines of ``proc`` up to and including the one starting with
    ``prefix`` (a thread reads them: the wait has a deadline)."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l.rstrip("\n")) for l in proc.stdout],
                     daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if line.startswith(prefix):
            return seen
    raise AssertionError(f"no line starting {prefix!r} within {timeout}s; got {seen}")


def assert_quiet(block: Block, out: subprocess.CompletedProcess) -> None:
    err = out.stderr
    assert "Traceback" not in err, f"README line {block.line}: traceback\n{err}"
    assert not re.search(r"%\d\|\d+\.\d+\|", err), f"README line {block.line}: librdkafka lines\n{err}"


@pytest.mark.integration
def test_readme_blocks_run_as_written_against_plait_dev(tmp_path):
    work = tmp_path / "user"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "examples").symlink_to(ROOT / "examples")
    env = clean_env()
    blocks = [b for b in readme_blocks(README.read_text())
              if b.lang in RUNNABLE and b.marker != "not-run"]
    dev_block = next(b for b in blocks if b.marker == "run-in-background")
    dev = subprocess.Popen(["bash", "-c", dev_block.code], cwd=work, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=open(tmp_path / "dev.err", "w"),
                           start_new_session=True)
    try:
        printed = wait_for_line(dev, READY, timeout=180)
        exports = dict(line.removeprefix("export ").split("=", 1)
                       for line in printed if line.startswith("export "))
        assert {"PLAIT_API_URL", "PLAIT_DEMO_DATA_API_URL", "PLAIT_BROKER_URL"} <= set(exports)
        dev_file = work / ".plait" / "dev.env"
        assert dev_file.is_file()
        api = exports["PLAIT_API_URL"]
        for block in blocks:
            if block is dev_block:
                continue
            out = run_block(block, work, env)
            assert out.returncode == 0, (
                f"README line {block.line} ({block.lang}) exited {out.returncode} against "
                f"`plait dev` (precede it with <!-- not-run: reason --> if it is not meant to "
                f"run there)\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}")
            assert_quiet(block, out)
            if "PlaitProducer" in block.code:
                # the SDK snippet's task runs to the end like one made through the API
                task_id = out.stdout.strip().splitlines()[-1]
                deadline = time.monotonic() + 120
                while True:
                    # None until the worker has admitted the request the SDK put on Kafka
                    state = httpx.get(f"{api}/export/tasks/{task_id}", timeout=5).json()["data"]
                    if state and state["status"] in ("SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"):
                        break
                    assert time.monotonic() < deadline, state
                    time.sleep(0.2)
                assert state["status"] == "SUCCESS", state
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGTERM)
        dev.wait(90)
    assert not (work / ".plait" / "dev.env").exists(), "plait dev left its dev.env behind"
