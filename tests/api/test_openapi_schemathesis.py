"""The OpenAPI document tells the truth (issue 10.8): schemathesis, from the
document the running API serves, generates requests for EVERY operation the
app has at run time (no hard-coded list: routes added later are checked too)
and finds no server error; error answers match the documented envelope and
status codes; stateful runs follow the document's links from
``POST /export/tasks`` to the task routes (read, events, cancel).

The API runs for real: uvicorn on a free port, a real Redis (key prefix per
run), a Tansu broker with the topics created (so an export is accepted with
202 and the links lead to a real task), the alerting routes on
``examples/alerting.yaml``. A second run has no broker at all: everything
that needs Kafka must answer a documented 503, never a 500.

Bounded for the suite (2 shared cores): ``MAX_EXAMPLES`` cases per operation,
derandomized (the same cases every run), stateful runs of ``STATEFUL_RUNS``
scenarios of at most ``STATEFUL_STEPS`` calls; the whole module takes about
30-60 s.
"""
from __future__ import annotations

import socket
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
import redis
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance,
                                               response_schema_conformance,
                                               status_code_conformance)

from alerting.topics import FUNNEL_TOPIC
from api.app import create_api
from api.ingest import AlertIngest
from ops.infra import start_broker
from plait.kafka_admin import create_topics
from plait.settings import Settings
from plait.topics import Topics

REDIS_URL = "redis://127.0.0.1:6379/0"
ALERTING_YAML = Path(__file__).resolve().parents[2] / "examples" / "alerting.yaml"
MAX_EXAMPLES = 20
STATEFUL_RUNS = 20
STATEFUL_STEPS = 6
#: What every response is checked for: no 5xx other than a documented 503,
#: a documented status, the documented content type and body schema.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@schemathesis.check
def no_server_error_but_a_documented_503(ctx, response, case) -> None:
    """Without a broker: a 503 is the documented answer (status_code_conformance
    checks it is documented); any other 5xx is a bug."""
    if response.status_code >= 500 and response.status_code != 503:
        raise AssertionError(f"server error {response.status_code}: {response.text[:200]}")


#: The no-broker run: a 503 is expected where Kafka is needed.
CHECKS_NO_BROKER = [no_server_error_but_a_documented_503, *CHECKS[1:]]
#: The links from POST /export/tasks (operationIds), which the stateful run must follow.
TASK_ROUTES = {"getTask", "taskEvents", "cancelTask"}
SETTINGS = dict(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=list(HealthCheck))
CONFIG = {"max-stream-events": 1, "request-timeout": 10}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveApi:
    """``create_api(settings)`` served by uvicorn in a thread; ``url`` is its base."""

    def __init__(self, settings: Settings) -> None:
        self.app = create_api(settings)
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port,
                                                    log_level="warning", lifespan="on",
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LiveApi":
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # wait for the condition: /health answers
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"the API at {self.url} did not answer /health within 20 s")

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _settings(tmp: Path, prefix: str, broker_url: str) -> Settings:
    return Settings(redis_url=REDIS_URL, redis_prefix=prefix, topic_prefix=f"{prefix}.",
                    storage_url=f"file://{tmp}/store", alerting_config=str(ALERTING_YAML),
                    broker_url=broker_url, partitions=2)


@pytest.fixture(scope="module")
def redis_prefix():
    """A Redis key prefix for this module's runs; its keys are dropped afterwards."""
    r = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    try:
        r.ping()
    except Exception as exc:  # the real-service lane is mandatory: fail, never skip
        pytest.fail(f"the schemathesis run needs a real Redis at {REDIS_URL}: {exc}")
    prefix = f"plait-oastest-{uuid.uuid4().hex[:12]}"
    yield prefix
    for key in r.scan_iter(match=f"{prefix}*", count=500):
        r.delete(key)
    r.close()


@pytest.fixture(scope="module")
def live_api(tmp_path_factory, redis_prefix):
    """The API on a real Redis and a Tansu broker whose topics exist."""
    broker = start_broker()
    try:
        topics = Topics(f"{redis_prefix}.")
        create_topics(broker.bootstrap, [*topics.all(), topics.name(FUNNEL_TOPIC)], 2)
        settings = _settings(tmp_path_factory.mktemp("oas"), redis_prefix, broker.bootstrap)
        with LiveApi(settings) as api:
            yield api
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def api_schema(live_api):
    """The document the running API serves, loaded by schemathesis."""
    config = schemathesis.config.SchemathesisConfig.from_dict(CONFIG)
    return schemathesis.openapi.from_url(f"{live_api.url}/openapi.json", config=config)


def run_every_operation(api_schema, max_examples: int, method: str | None = None,
                        checks=CHECKS, coverage: bool = True) -> Counter:
    """The CLI's per-operation phases for every operation of ``api_schema``
    (or those of ``method``): the coverage phase (boundary and type-violating
    values of each parameter and body field, deterministic) and fuzzing
    (``max_examples`` positive and negative cases, derandomized), each
    response checked with ``checks``; ``coverage=False`` runs positive
    fuzzing only. Returns the count of cases per
    ``"<METHOD> <path> <status>"``.

    Raises:
        AssertionError: listing every operation with a failing case (the
            minimal failing case and its curl line, per operation).
    """
    from hypothesis import given

    from schemathesis.generation import GenerationMode
    from schemathesis.generation.feedback import FeedbackSources
    from schemathesis.pytest._test_builder import build_operation_test

    seen: Counter[str] = Counter()
    failures: list[str] = []
    operations = [r.ok() for r in api_schema.get_all_operations()]
    assert operations, "the document lists no operation"
    for op in operations:
        if method and op.method.upper() != method:
            continue

        def check(case):
            response = case.call()
            seen[f"{case.operation.method.upper()} {case.operation.path} "
                 f"{response.status_code}"] += 1
            case.validate_response(response, checks=checks)

        if coverage:
            test = build_operation_test(
                config=api_schema.config, operation=op, test_func=check, given_kwargs={},
                feedback=FeedbackSources(),
                explicit_settings=settings(max_examples=max_examples, **SETTINGS))
        else:
            test = settings(max_examples=max_examples, phases=[Phase.generate], **SETTINGS)(
                given(case=op.as_strategy(generation_mode=GenerationMode.POSITIVE))(check))
        try:
            test()
        except (Exception, BaseExceptionGroup) as exc:  # report every operation
            failures.append(f"{op.method.upper()} {op.path}: {exc}")
    assert not failures, "\n\n".join(failures)
    return seen


def test_every_operation_answers_as_documented(api_schema):
    # given every operation of the running API's document
    # when bounded positive and negative cases are sent to each
    seen = run_every_operation(api_schema, MAX_EXAMPLES)
    print(f"\n{sum(seen.values())} cases:", sorted(seen.items()))
    # then none failed a check (no 500, documented status, type and schema)
    # and every operation was reached
    reached = {k.rsplit(" ", 1)[0] for k in seen}
    assert len(reached) == len([r for r in api_schema.get_all_operations()]), seen


def test_the_document_covers_every_route_with_its_errors(api_schema, live_api):
    # given the routes the app has at run time
    routes = {(m, r.path_format) for r in live_api.app.routes
              if getattr(r, "include_in_schema", False)
              for m in getattr(r, "methods", ()) if m not in ("HEAD", "OPTIONS")}
    doc = api_schema.raw_schema
    # then each is in the document, and each that takes input documents its 422 envelope
    for method, path in routes:
        op = doc["paths"][path][method.lower()]
        assert op.get("operationId"), (method, path)
        takes_input = op.get("parameters") or op.get("requestBody")
        if takes_input:
            assert "422" in op["responses"], (method, path)
            ref = op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorEnvelope"), (method, path)
    # and the routes that read their body themselves document it
    for path in ("/alerts", "/api/v2/alerts", "/silences", "/export/tasks"):
        assert "requestBody" in doc["paths"][path]["post"], path


def _drop_keys(prefix: str) -> None:
    r = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    try:
        for key in r.scan_iter(match=f"{prefix}:*", count=500):
            r.delete(key)
    finally:
        r.close()


def run_stateful(api_schema, prefix: str) -> tuple[Counter, Counter]:
    """Bounded, repeatable stateful scenarios over ``api_schema``'s links,
    each response checked with :data:`CHECKS`. Every scenario starts on an
    empty store (the API's Redis keys under ``prefix`` are dropped first), so
    a replayed scenario meets the same answers (an identical export is
    otherwise a 200 "identical task running" the second time). Returns ``(calls per
    "<METHOD> <path> <status>", successful calls per task-route operationId)``.

    Raises:
        AssertionError / FailureGroup: a check failed (the failing scenario).
    """
    followed: Counter[str] = Counter()
    calls: Counter[str] = Counter()

    class Machine(api_schema.as_state_machine()):
        def setup(self):
            _drop_keys(prefix)

        def after_call(self, response, case):
            super().after_call(response, case)
            op_id = case.operation.definition.raw.get("operationId")
            calls[f"{case.operation.label} {response.status_code}"] += 1
            if op_id in TASK_ROUTES and response.status_code < 400:
                followed[op_id] += 1

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS)

    Machine.run(settings=settings(max_examples=STATEFUL_RUNS, stateful_step_count=STATEFUL_STEPS,
                                  **SETTINGS))
    return calls, followed


def test_stateful_runs_follow_the_links_from_create_to_the_task_routes(api_schema, redis_prefix):
    # given the export routes and the document's links from POST /export/tasks
    # (schemathesis only starts from POST /export/tasks when no other creator
    # is there: it guesses userId names a resource no route creates)
    exports = api_schema.include(path_regex="^/export/tasks")
    # when bounded, repeatable scenarios run against the live API
    calls, followed = run_stateful(exports, redis_prefix)
    # then no check failed (run raises otherwise), and created tasks were read,
    # streamed and cancelled through the links
    assert set(followed) == TASK_ROUTES, calls


def test_stateful_runs_over_every_link(api_schema, redis_prefix):
    # given every operation and link of the document (silences: create -> expire)
    # when bounded scenarios run
    calls, _ = run_stateful(api_schema, redis_prefix)
    # then no check failed, and a created silence was expired through its link
    assert calls["DELETE /silences/{silenceId} 200"], calls


# -- no broker: Kafka's absence is a documented 503 ---------------------------------

@pytest.fixture(scope="module")
def api_schema_no_broker(tmp_path_factory, redis_prefix):
    """The API with nothing listening at its broker address (acks wait 0.25 s)."""
    settings = _settings(tmp_path_factory.mktemp("oas-nobroker"), f"{redis_prefix}-nb",
                         f"127.0.0.1:{_free_port()}")
    saved = AlertIngest.ack_timeout
    AlertIngest.ack_timeout = 0.25
    try:
        api = LiveApi(settings)
        api.app.state.services.emit_timeout = 0.25
        with api:
            config = schemathesis.config.SchemathesisConfig.from_dict(CONFIG)
            yield schemathesis.openapi.from_url(f"{api.url}/openapi.json", config=config)
    finally:
        AlertIngest.ack_timeout = saved


def test_without_a_broker_writes_answer_a_documented_503_never_a_500(api_schema_no_broker):
    # given an API whose broker does not answer, and generated write requests
    # when they are sent
    seen = run_every_operation(api_schema_no_broker, 6, method="POST", checks=CHECKS_NO_BROKER,
                               coverage=False)
    # then each answer is documented (503 when it needed Kafka), never a 500
    assert any(k.endswith(" 503") for k in seen), seen


# -- the document per mode ------------------------------------------------------------

def _required_query(doc: dict, method: str, path: str) -> set[str]:
    return {p["name"] for p in doc["paths"][path][method].get("parameters", [])
            if p["in"] == "query" and p.get("required")}


def test_the_document_says_what_is_required_in_each_mode(tmp_path, redis_prefix):
    # given the API without and with a caller registry
    import yaml

    registry = tmp_path / "callers.yaml"
    registry.write_text(yaml.safe_dump({"callers": {"crm": dict(
        appKey="crm-app", appSecret="s" * 40, bizTypes=["orders"], fileFormats=["csv"],
        maxRows=1000)}}))
    open_doc = create_api(_settings(tmp_path, redis_prefix, "127.0.0.1:1")).openapi()
    signed = _settings(tmp_path, redis_prefix, "127.0.0.1:1").model_copy(
        update={"callers_file": str(registry)})
    signed_doc = create_api(signed).openapi()
    # then open mode requires sysCode (lists, audit); signed mode requires userId
    # on lists and takes sysCode from the signature
    assert _required_query(open_doc, "get", "/export/tasks") == {"sysCode"}
    assert _required_query(open_doc, "get", "/audit") == {"sysCode"}
    assert _required_query(signed_doc, "get", "/export/tasks") == {"userId"}
    assert _required_query(signed_doc, "get", "/audit") == set()
    # and the refusals of signing are documented on the routes that sign
    for path, method in (("/export/tasks", "post"), ("/alerts", "post"), ("/silences", "post"),
                         ("/silences/{silenceId}", "delete")):
        assert {"401", "403", "422", "503"} <= set(signed_doc["paths"][path][method]["responses"])
    # (Alertmanager's routes answer bad input with its 400, as Alertmanager does)
    assert {"400", "401", "403", "503"} <= set(signed_doc["paths"]["/api/v2/alerts"]["post"]
                                               ["responses"])
