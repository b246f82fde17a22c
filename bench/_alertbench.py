"""Pieces the alert benches share: a keep-alive webhook receiver
(:class:`Sink`), polling (:func:`wait`), a real Alertmanager as a child
process (:func:`alertmanager`) and process-tree CPU / RSS readings
(:func:`cpu_seconds`, :func:`rss_bytes`)."""
from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import httpx
import psutil
import yaml


class Sink:
    """Webhook receiver on 127.0.0.1 (HTTP/1.1 keep-alive) counting POSTs.

    Two body shapes are read:

    - Plait's native body (``groups[].alerts[]``): per new alert carrying an
      ``annotations.sent_at`` (epoch seconds), the latency in ms goes to
      :attr:`latencies`;
    - Alertmanager's webhook v4 body (``alerts[]`` at the top, as
      Alertmanager and Plait's ``format: alertmanager`` send it): each
      alert's ``(alertname, instance, status)`` goes to :attr:`seen`, and
      :attr:`last_new` is the ``time.monotonic()`` at which the latest key
      not seen before arrived.
    """

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.messages = 0
        self.seen: set[tuple[str, str, str]] = set()
        self.last_new = 0.0
        #: fingerprints of every native-body alert delivered (distinct alerts)
        self.fingerprints: set[str] = set()
        #: (monotonic arrival time, ``alertCount``) of every native-body POST
        self.posts: list[tuple[float, int]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            # keep-alive, as the receivers alerts go to (Slack, PagerDuty,
            # chat bridges) are: HTTP/1.0 pays a TCP connect per message
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                outer.record(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def record(self, body: object) -> None:
        """Count one POST body (either shape above)."""
        now, mono = time.time(), time.monotonic()
        with self.lock:
            self.messages += 1
            if not isinstance(body, dict):
                return
            if "groups" in body:
                self.posts.append((mono, body.get("alertCount", 0)))
            for g in body.get("groups", []):
                for a in g["alerts"]:
                    self.fingerprints.add(a["fingerprint"])
                    sent = a["annotations"].get("sent_at")
                    if sent and a["change"] == "new":
                        self.latencies.append((now - float(sent)) * 1000)
            for a in body.get("alerts", []):
                labels = a.get("labels", {})
                key = (labels.get("alertname", ""), labels.get("instance", ""), a.get("status", ""))
                if key not in self.seen:
                    self.seen.add(key)
                    self.last_new = mono

    def count(self, status: str) -> int:
        """Distinct alerts seen with ``status`` (firing | resolved)."""
        with self.lock:
            return sum(1 for k in self.seen if k[2] == status)

    def stop(self) -> None:
        self.server.shutdown()


def wait(check, timeout: float, what: str, step: float = 0.02) -> None:
    """Poll ``check()`` every ``step`` s until true; ``TimeoutError`` naming
    ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(step)
    raise TimeoutError(f"timed out waiting for {what}")


def answers(url: str) -> bool:
    """Whether ``url`` answers 200 within a second."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def alertmanager_binary() -> str | None:
    """Path of ``alertmanager`` (or Debian's ``prometheus-alertmanager``), or None."""
    return shutil.which("alertmanager") or shutil.which("prometheus-alertmanager")


@contextlib.contextmanager
def alertmanager(config: dict) -> Iterator[tuple[str, subprocess.Popen]]:
    """A real Alertmanager (no cluster, its own storage dir) running
    ``config`` (an ``alertmanager.yml`` as a dict) on a free loopback port:
    yields ``(base URL, process)`` once ``/-/ready`` answers, stops it
    after. ``RuntimeError`` when the binary is absent, ``TimeoutError``
    when it does not get ready in 30 s."""
    binary = alertmanager_binary()
    if binary is None:
        raise RuntimeError("no alertmanager binary on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="plait-bench-am-"))
    (tmp / "am.yml").write_text(yaml.safe_dump(config))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([binary, f"--config.file={tmp / 'am.yml'}", f"--storage.path={tmp}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait(lambda: answers(f"{base}/-/ready"), 30, "alertmanager", step=0.1)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        p = psutil.Process(pid)
        return [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` and its live descendants
    used so far; 0 for a process gone."""
    total = 0.0
    for p in _tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def rss_bytes(pid: int) -> int:
    """Resident set size (bytes) of ``pid`` and its live descendants."""
    total = 0
    for p in _tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total
