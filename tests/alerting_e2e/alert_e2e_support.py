"""Helpers of the alerting end-to-end tests: a local webhook receiver, an
alerting config writer, the alert API (the stack's when it serves the
alerting routes, else one in a thread), a ledger reader and polling."""
from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import httpx
import yaml

from alerting.wire import ledger_entries, raw_envelope
from plait.settings import Settings
from plait.topics import Topics
from stack_env import wait_for as wait_until  # noqa: F401 (re-exported for the alerting tests)




def serve_posts(on_post: Callable[[BaseHTTPRequestHandler, bytes], tuple[int, dict[str, str]]]
                ) -> ThreadingHTTPServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) answering every POST
    with ``on_post(handler, body) -> (status, headers)`` and an empty body;
    quiet. Stop it with ``shutdown()``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server API
            status, headers = on_post(self, self.rfile.read(int(self.headers.get("Content-Length")
                                                                 or 0)))
            try:
                self.send_response(status)
                for k, v in {**headers, "Content-Length": "0"}.items():
                    self.send_header(k, v)
                self.end_headers()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout): nobody to answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Hit:
    """One request the receiver got: when (epoch s), path, headers, JSON body, answer;
    ``dropped``: answered late on purpose (:attr:`Receiver.slow`), not accepted."""

    at: float
    path: str
    headers: dict[str, str]
    body: Any
    status: int
    dropped: bool = False

    @property
    def key(self) -> str:
        """The ``Idempotency-Key`` header."""
        return self.headers.get("idempotency-key", "")


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1 recording every request.

    ``answer(path) -> status`` decides each answer (default 200); set
    :attr:`status` to answer that status on every path instead. :attr:`slow`
    (path -> (seconds, until epoch s)): a request on that path arriving before
    ``until`` is answered only after ``seconds`` and counts as dropped, as
    Alertmanager's mock webhook drops what its ``Func`` holds up
    (test/testutils/mock.go).
    """

    hits: list[Hit] = field(default_factory=list)
    status: int = 200
    answer: Callable[[str], int] | None = None
    slow: dict[str, tuple[float, float]] = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "Receiver":
        def on_post(req: BaseHTTPRequestHandler, raw: bytes) -> tuple[int, dict[str, str]]:
            at = time.time()
            status = self.answer(req.path) if self.answer else self.status
            seconds, until = self.slow.get(req.path, (0.0, 0.0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            with self.lock:
                self.hits.append(Hit(at, req.path, {k.lower(): v for k, v in req.headers.items()},
                                     body, status, dropped=at < until))
            if at < until:
                time.sleep(seconds)  # this handler's own thread (ThreadingHTTPServer)
            return status, {}

        self._server = serve_posts(on_post)
        return self

    def url(self, path: str) -> str:
        """URL of ``path`` on this receiver."""
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def accepted(self, path: str | None = None) -> list[Hit]:
        """Requests answered 2xx in time (on ``path`` when given), in arrival order."""
        with self.lock:
            return [h for h in self.hits if 200 <= h.status < 300 and not h.dropped
                    and (path is None or h.path == path)]

    def on(self, path: str) -> list[Hit]:
        """Every request on ``path``."""
        with self.lock:
            return [h for h in self.hits if h.path == path]

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()


@dataclass
class OtlpReceiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 (``POST /v1/traces``,
    protobuf): what the stack's processes export when their environment has
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` = :attr:`endpoint`. Each span read back
    is a dict: ``name``, ``service``, ``trace_id``, ``span_id``, ``parent``
    (hex; ``""`` for a root), ``links`` ([(trace id, span id)]), ``attrs``."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "OtlpReceiver":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest)

        def on_post(req: BaseHTTPRequestHandler, raw: bytes) -> tuple[int, dict[str, str]]:
            if req.headers.get("Content-Encoding") == "gzip":
                import gzip

                raw = gzip.decompress(raw)
            got = []
            for rs in ExportTraceServiceRequest.FromString(raw).resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes
                                if a.key == "service.name"), "")
                for ss in rs.scope_spans:
                    for sp in ss.spans:
                        got.append({
                            "name": sp.name, "service": service, "trace_id": sp.trace_id.hex(),
                            "span_id": sp.span_id.hex(), "parent": sp.parent_span_id.hex(),
                            "links": [(ln.trace_id.hex(), ln.span_id.hex()) for ln in sp.links],
                            "attrs": {a.key: a.value.string_value or a.value.int_value
                                      for a in sp.attributes}})
            with self.lock:
                self.spans += got
            return 200, {"Content-Type": "application/x-protobuf"}

        self._server = serve_posts(on_post)
        return self

    @property
    def endpoint(self) -> str:
        """The base URL to put in ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """Stack environment exporting every span here within ~0.2 s."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}

    def named(self, name: str) -> list[dict[str, Any]]:
        """The spans named ``name`` received so far."""
        with self.lock:
            return [s for s in self.spans if s["name"] == name]

    def trace(self, trace_id: str) -> list[dict[str, Any]]:
        """The spans of one trace received so far."""
        with self.lock:
            return [s for s in self.spans if s["trace_id"] == trace_id]

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()


def native_alerts(hit: Hit) -> list[dict[str, Any]]:
    """The alert views listed in a native-format message."""
    return [a for g in hit.body["groups"] for a in g["alerts"]]


def write_config(path: Path, receivers: list[dict], routes: list[dict] | None = None,
                 **sections: Any) -> Path:
    """Write an alerting YAML with ``receivers`` (default route = the first)."""
    data = {"receivers": receivers,
            "route": {"receiver": receivers[0]["name"], "routes": routes or []}, **sections}
    path.write_text(yaml.safe_dump(data))
    return path


def storm_stack(make_stack, tmp_path: Path, receiver: "Receiver", bucket: dict, grouping: dict,
                **options: Any):
    """One worker whose one receiver ``oncall`` (``bucket``, and ``options``
    such as ``max_alerts``) gets every alert, grouped by ``grouping``, sent
    at once (group_wait 0, group_interval 1 s for permissive buckets, 5 s
    otherwise); returns ``(stack, Kafka, the worker's process)``."""
    cfg = write_config(tmp_path / "alerting.yaml",
                       [{"name": "oncall", "url": receiver.url("/r"), "bucket": bucket, **options}],
                       grouping=grouping,
                       timing={"group_wait": 0, "group_interval": "5s" if bucket["burst"] < 10 else "1s",
                               "repeat_interval": "1h"})
    stack = make_stack(workers=1, PLAIT_ALERTING_CONFIG=str(cfg))
    return stack, Kafka(stack), stack.workers()["worker-0"]


def fast_timing(group_wait: str = "1s", group_interval: str = "2s", **timing: str) -> dict:
    """Config sections for quick tests: ``timing`` (repeat_interval 1h plus
    ``timing``) and a ``delivery`` retrying every 0.5-2 s, 3 s a try."""
    return {"timing": {"group_wait": group_wait, "group_interval": group_interval,
                       "repeat_interval": "1h", **timing},
            "delivery": {"timeout": "3s", "backoff_initial": "0.5s", "backoff_max": "2s"}}

def funnel_stack(make_stack, config_path: Path, api_replicas: int = 1,
                 setting: str = "PLAIT_ALERTING_CONFIG", **env: str):
    """A one-worker stack (``api_replicas`` API processes) running the
    alerting config at ``config_path``, given as ``setting`` (Plait's YAML;
    ``"PLAIT_ALERTMANAGER_CONFIG"`` for an alertmanager.yml), ``env``: more
    PLAIT_ settings; returned once every funnel partition published its
    counters."""
    stack = make_stack(workers=1, api_replicas=api_replicas,
                       **{setting: str(config_path)}, **env)

    def running():
        try:
            c = httpx.get(f"{stack.api_url}/alerts/counters", timeout=5).json()["data"]
            return c["partitions"] >= int(stack.env.get("PLAIT_PARTITIONS", 4))
        except (httpx.HTTPError, KeyError, ValueError):
            return False

    wait_until(running, 90, "the funnel worker to publish its counters")
    return stack


def stack_settings(stack) -> Settings:
    """The settings the stack's children run with."""
    env = stack.env
    return Settings(broker_url=env["PLAIT_BROKER_URL"], redis_url=env["PLAIT_REDIS_URL"],
                    redis_prefix=env.get("PLAIT_REDIS_PREFIX", "plait"),
                    topic_prefix=env.get("PLAIT_TOPIC_PREFIX", ""),
                    partitions=int(env.get("PLAIT_PARTITIONS", 4)),
                    alerting_config=env.get("PLAIT_ALERTING_CONFIG", ""))


class AlertApi:
    """Base URL of the alerting routes: the stack's API when api/app.py
    includes them, else an API in a thread built with ``api.app.install_alerting``."""

    def __init__(self, stack) -> None:
        self.stack = stack
        self._server = None
        try:
            wired = httpx.get(f"{stack.api_url}/alerts/counters", timeout=5).status_code == 200
        except httpx.HTTPError:
            wired = False
        self.url = stack.api_url if wired else self._start_local()

    def _start_local(self) -> str:
        import uvicorn
        from fastapi import FastAPI
        from fastapi.responses import Response
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from api.app import install_alerting

        from api.envelope import install_error_handlers

        app = FastAPI()
        install_error_handlers(app)
        install_alerting(app, stack_settings(self.stack))

        @app.get("/metrics")
        async def metrics():
            return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                                     log_level="warning"))
        threading.Thread(target=self._server.run, daemon=True).start()
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: self._up(url), 20, "the in-test alert API")
        return url

    @staticmethod
    def _up(url: str) -> bool:
        try:
            return httpx.get(f"{url}/alerts/counters", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def post(self, path: str, body: Any) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=15)

    def counters(self) -> dict[str, Any]:
        return httpx.get(f"{self.url}/alerts/counters", timeout=10).json()["data"]

    def partitions_ticked_since(self, since: float) -> set[int]:
        """The ``alerts.funnel`` partitions whose funnel published its counters
        after epoch second ``since`` (each does after every tick): the
        partitions some worker owns, has recovered and runs."""
        import redis

        from plait import keys as K

        settings = stack_settings(self.stack)
        client = redis.Redis.from_url(settings.redis_url)
        try:
            raw = client.hgetall(K.alert_counters(settings.redis_prefix))
        finally:
            client.close()
        return {int(p) for p, v in raw.items() if json.loads(v).get("updated_at", 0) > since}

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True


class Kafka:
    """Direct access to the stack's topics: produce raw alerts, read the ledger."""

    def __init__(self, stack) -> None:
        from confluent_kafka import Consumer, Producer

        self.topics = Topics(stack.env.get("PLAIT_TOPIC_PREFIX", ""))
        bootstrap = stack.env["PLAIT_BROKER_URL"]
        self.producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                                  "linger.ms": 2})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self._assigned: set[str] = set()
        self.ledger: list[dict[str, Any]] = []

    def send_alerts(self, alerts: list[dict], source: str = "test-producer") -> list[str]:
        """Produce one ``alerts.raw`` envelope; returns the raw ids."""
        eid, value = raw_envelope(alerts, source=source)
        self.producer.produce(self.topics.name("alerts.raw"), key=eid.encode(), value=value)
        self.producer.flush(10)
        return [f"{eid}:{i}" for i in range(len(alerts))]

    def _assign(self, base: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        name = self.topics.name(base)
        if name in self._assigned:
            return
        meta = self.consumer.list_topics(name, timeout=10).topics[name]
        current = self.consumer.assignment()
        self.consumer.assign(current + [TopicPartition(name, p, OFFSET_BEGINNING)
                                        for p in meta.partitions])
        self._assigned.add(name)

    def read_ledger(self, budget: float = 0.5) -> list[dict[str, Any]]:
        """Read whatever ``alerts.ledger`` has now (within ``budget`` seconds);
        returns every entry read so far."""
        self._assign("alerts.ledger")
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.05)
            if msg is None or msg.error():
                continue
            self.ledger += ledger_entries(msg.value())  # version 2: a batch per record
        return self.ledger

    def ledger_by_id(self) -> dict[str, list[dict[str, Any]]]:
        """Ledger entries grouped by raw id."""
        out: dict[str, list[dict[str, Any]]] = {}
        for e in self.ledger:
            out.setdefault(e["raw_id"], []).append(e)
        return out

    def close(self) -> None:
        self.consumer.close()


async def record_sizes(bootstrap: str, wanted, keep=lambda t: t.endswith("alerts.notifications")
                       ) -> dict[str, tuple[int, int, list[bytes]]]:
    """Per topic whose name ``wanted(name)`` accepts: (records, largest
    key + value bytes, values of the topics ``keep(name)`` accepts: by
    default alerts.notifications), read from the beginning until the
    topics stay idle for 2 s."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                max_partition_fetch_bytes=4 * 1024 * 1024)
    await consumer.start()
    try:
        topics = [t for t in await consumer.topics() if wanted(t)]
        tps = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out = {t: (0, 0, []) for t in topics}
        idle = deadline = time.monotonic()
        while time.monotonic() - idle < 2.0 and time.monotonic() - deadline < 60:
            batch = await consumer.getmany(timeout_ms=300)
            for tp, records in batch.items():
                idle = time.monotonic()
                n, most, values = out[tp.topic]
                for r in records:
                    most = max(most, len(r.key or b"") + len(r.value or b""))
                    if keep(tp.topic):
                        values.append(r.value)
                out[tp.topic] = (n + len(records), most, values)
        return out
    finally:
        await consumer.stop()


def start_prometheus(directory: Path, alertmanagers: list[str], rules: list[dict],
                     scrape_configs: list[dict] | None = None, token: str = "") -> "subprocess.Popen":
    """Start the real ``prometheus`` on a free loopback port, evaluating
    ``rules`` (one group, every second) and sending to every
    ``alertmanagers`` entry (``host:port``, API v2, with ``Bearer token``
    when given) with ``--rules.alert.resend-delay=2s``; writes
    ``prometheus.yml``, ``rules.yml`` and ``prometheus.log`` under
    ``directory``. The caller kills the process."""
    import subprocess
    import shutil

    from ops.infra import free_port

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rules.yml").write_text(yaml.safe_dump({"groups": [{
        "name": "rules", "interval": "1s", "rules": rules}]}))
    am: dict[str, Any] = {"api_version": "v2", "timeout": "5s",
                          "static_configs": [{"targets": alertmanagers}]}
    if token:
        am["authorization"] = {"type": "Bearer", "credentials": token}
    (directory / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(directory / "rules.yml")],
        "scrape_configs": scrape_configs or [], "alerting": {"alertmanagers": [am]}}))
    log = open(directory / "prometheus.log", "wb")
    return subprocess.Popen(
        [shutil.which("prometheus") or "prometheus", f"--config.file={directory / 'prometheus.yml'}",
         f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{free_port()}",
         "--rules.alert.resend-delay=2s", "--log.level=info"],
        stdout=log, stderr=subprocess.STDOUT)


def run_amtool(url: str, directory: Path, *args: str, token: str = "",
               check: bool = True) -> "subprocess.CompletedProcess":
    """Run the real ``amtool`` against ``url`` (``Bearer token`` when given;
    its HTTP config file goes to ``directory``); asserts exit 0 when ``check``."""
    import subprocess
    import shutil

    http = directory / "amtool-http.yml"
    if not http.exists():
        http.write_text(yaml.safe_dump({"authorization": {"credentials": token}} if token else {}))
    out = subprocess.run([shutil.which("amtool") or "amtool", f"--alertmanager.url={url}",
                          f"--http.config.file={http}", "--timeout=20s", *args],
                         capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, f"amtool {' '.join(args)}: {out.stdout}{out.stderr}"
    return out
