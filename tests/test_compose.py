"""docker-compose.yml cannot run here (no Docker engine); keep it honest by
construction, against what the code expects: every PLAIT_* key is a known
setting, every command and health check runs an entry point that exists, the
topics and the bucket are created before anything uses them, the ports a host
needs (API, download links, the SDK's broker) are published and advertised,
every long-running service has a health check and every image is pinned."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import shlex
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from plait.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict] = COMPOSE["services"]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
KNOWN = {f"PLAIT_{name.upper()}" for name in Settings.model_fields}
PLAIT_BUILT = {n for n, s in SERVICES.items() if s.get("build") == "."}
WORKERS = sorted(n for n, s in SERVICES.items()
                 if s.get("command") == ["plait", "worker", "--role", "export"])
ALERTING = sorted(n for n, s in SERVICES.items()
                  if s.get("command") == ["plait", "worker", "--role", "alerting"])


def plait_keys(service: dict) -> set[str]:
    env = service.get("environment") or {}
    return {k for k in env if k.startswith("PLAIT_")}


def one_shot(name: str) -> bool:
    """A service others wait for with ``service_completed_successfully``."""
    return any((s.get("depends_on") or {}).get(name, {}).get("condition")
               == "service_completed_successfully" for s in SERVICES.values())


def env_of(name: str) -> dict[str, str]:
    return {k: str(v) for k, v in (SERVICES[name].get("environment") or {}).items()}


def published(name: str) -> set[int]:
    """Host ports a service publishes (``"host:container"`` entries)."""
    out = set()
    for p in SERVICES[name].get("ports") or []:
        parts = str(p).split(":")
        assert len(parts) == 2, f"{name}: publish ports as 'host:container', got {p!r}"
        out.add(int(parts[0]))
    return out


# -- schema -----------------------------------------------------------------

def test_the_file_is_valid_compose():
    # the Compose Specification's schema (what `docker compose config` checks first)
    import json

    import jsonschema

    schema = json.loads((ROOT / "tests" / "schemas" / "compose-spec.json").read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(COMPOSE), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]


# -- settings ---------------------------------------------------------------

def test_every_plait_key_is_a_known_setting():
    used = set().union(*(plait_keys(s) for s in SERVICES.values()))
    assert used, "compose sets no PLAIT_* keys"
    assert used <= KNOWN, f"unknown settings in docker-compose.yml: {sorted(used - KNOWN)}"


def test_compose_values_validate_as_settings(monkeypatch):
    for key, value in env_of("worker-1").items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.broker_url == "kafka:9092" and settings.partitions == 12
    assert settings.storage_url.startswith("s3://") and settings.worker_id == "worker-1"
    assert settings.s3_public_url == "http://localhost:9000"


def test_every_plait_service_gets_the_same_settings():
    # a worker's own id and metrics port, the alerting worker's config
    own = ("PLAIT_WORKER_ID", "PLAIT_ALERTING_CONFIG", "PLAIT_METRICS_PORT")
    envs = {n: {k: v for k, v in env_of(n).items() if k not in own}
            for n in PLAIT_BUILT if n != "demo-data-api"}
    first = envs.pop("api")
    assert all(env == first for env in envs.values()), envs
    assert len({env_of(w)["PLAIT_WORKER_ID"] for w in WORKERS}) == len(WORKERS) == 2


# -- entry points -----------------------------------------------------------

def console_main():
    """The ``main`` of the ``plait`` console script, wherever pyproject points."""
    module, _, attr = PYPROJECT["project"]["scripts"]["plait"].partition(":")
    return getattr(importlib.import_module(module), attr)


def check_python_code(code: str, where: str) -> None:
    """``python -c`` code compiles and every ``from X import Y`` resolves."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{where}: {node.module}.{alias.name} does not exist"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert importlib.util.find_spec(alias.name), f"{where}: no module {alias.name}"


def check_command(argv: list[str], where: str) -> None:
    """A command run in the plait image exists: a ``plait`` subcommand, a
    ``python -m`` module or ``python -c`` code whose imports resolve."""
    if argv[0] == "plait":
        with pytest.raises(SystemExit) as done:
            console_main()([argv[1], "--help"])
        assert done.value.code == 0, f"{where}: `plait {argv[1]}` is not a subcommand"
    elif argv[:2] == ["python", "-m"]:
        assert importlib.util.find_spec(argv[2]), f"{where}: no module {argv[2]}"
    elif argv[:2] == ["python", "-c"]:
        check_python_code(argv[2], where)
    else:
        raise AssertionError(f"{where}: unknown entry point {argv}")


@pytest.mark.parametrize("name", sorted(PLAIT_BUILT))
def test_commands_and_health_checks_are_entry_points_that_exist(name, capsys):
    service = SERVICES[name]
    check_command(service["command"], f"{name}.command")
    test = (service.get("healthcheck") or {}).get("test")
    if test:
        argv = test[1:] if test[0] == "CMD" else shlex.split(test[1])
        check_command(argv, f"{name}.healthcheck")


def test_the_worker_health_check_is_the_probe_module():
    for w in WORKERS:
        assert SERVICES[w]["healthcheck"]["test"] == ["CMD", "python", "-m", "streams.health"], w
    health = importlib.import_module("streams.health")
    assert callable(health.main) and callable(health.check)


def test_the_image_holds_every_package_the_distribution_installs():
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+) \1$", dockerfile, re.M))
    packages = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    present = {p for p in packages if (ROOT / p / "__init__.py").exists()}
    assert present <= copied, f"Dockerfile does not COPY {sorted(present - copied)}"


# -- topics and bucket ------------------------------------------------------

def test_the_topics_service_creates_every_plait_topic(monkeypatch):
    # given the topics service's code and environment, with the admin call recorded
    import plait.kafka_admin
    import plait.settings
    from plait import topics as T

    calls = []
    monkeypatch.setattr(plait.kafka_admin, "create_topics", lambda *a: calls.append(a) or [])
    for key, value in env_of("topics").items():
        monkeypatch.setenv(key, value)
    plait.settings.get_settings.cache_clear()
    command = SERVICES["topics"]["command"]
    assert command[0] == "plait"
    try:
        # when it runs
        console_main()(command[1:])
    finally:
        plait.settings.get_settings.cache_clear()
    # then every topic is created on the compose broker with the compose partition count
    (bootstrap, topics, partitions), = calls
    assert bootstrap == "kafka:9092" and partitions == 12
    assert topics == list(T.ALL)
    # and the broker creates none by itself (docs/kafka-rules.md #7)
    assert SERVICES["kafka"]["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert SERVICES["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_the_bucket_is_created_before_the_api_and_workers_start():
    bucket = urlparse(env_of("api")["PLAIT_STORAGE_URL"]).netloc
    init = SERVICES["bucket"]
    assert init["image"].startswith("minio/mc:")
    script = " ".join(init["command"])
    assert re.search(rf"mc mb --ignore-existing \S+/{re.escape(bucket)}\b", script), script
    # the alias points at the endpoint and credentials the workers use
    alias = re.search(r"mc alias set (\S+) (\S+) (\S+) (\S+)", script)
    env = env_of("api")
    assert alias.group(2) == env["PLAIT_S3_ENDPOINT_URL"]
    assert (alias.group(3), alias.group(4)) == (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
    minio = SERVICES["minio"]["environment"]
    assert (minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"]) == (alias.group(3), alias.group(4))
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"
    for name in ["api", *WORKERS]:
        deps = SERVICES[name]["depends_on"]
        assert deps["bucket"]["condition"] == "service_completed_successfully", name
        assert deps["topics"]["condition"] == "service_completed_successfully", name


# -- ports ------------------------------------------------------------------

def test_the_host_reaches_the_api_download_links_and_the_broker():
    env = env_of("api")
    # the API, at the address its own links use
    assert urlparse(env["PLAIT_API_URL"]).port in published("api")
    # presigned download links name a host address MinIO publishes
    public = urlparse(env["PLAIT_S3_PUBLIC_URL"])
    assert public.hostname == "localhost" and public.port in published("minio")
    # Kafka: containers use the internal listener, the host the published one
    kafka = SERVICES["kafka"]["environment"]
    advertised = dict(l.split("://") for l in kafka["KAFKA_ADVERTISED_LISTENERS"].split(","))
    listeners = dict(l.split("://") for l in kafka["KAFKA_LISTENERS"].split(","))
    protocols = dict(p.split(":") for p in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert env["PLAIT_BROKER_URL"] in advertised.values()
    host = [(n, a) for n, a in advertised.items() if a.startswith("localhost:")]
    assert host, "no listener advertised for the host"
    for name, address in host:
        port = int(address.split(":")[1])
        assert port in published("kafka") and listeners[name] == f":{port}"
    assert set(advertised) | set(listeners) <= set(protocols)
    assert kafka["KAFKA_INTER_BROKER_LISTENER_NAME"] in listeners


def test_no_two_services_publish_the_same_host_port():
    seen: dict[int, str] = {}
    for name in SERVICES:
        for port in published(name):
            assert port not in seen, f"{name} and {seen[port]} both publish {port}"
            seen[port] = name


# -- health, images, volumes, callers ---------------------------------------

def test_every_long_running_service_has_a_health_check():
    for name, service in SERVICES.items():
        if one_shot(name):
            continue
        check = service.get("healthcheck")
        assert check and check.get("test"), f"{name} has no health check"
        assert service.get("restart") == "unless-stopped", name
    assert {"api", "kafka", "redis", "minio", "demo-data-api", *WORKERS} <= {
        n for n in SERVICES if "healthcheck" in SERVICES[n]}


def test_every_dependency_waits_for_health_or_completion():
    for name, service in SERVICES.items():
        for dep, cond in (service.get("depends_on") or {}).items():
            want = "service_completed_successfully" if one_shot(dep) else "service_healthy"
            assert cond["condition"] == want, f"{name} -> {dep}"
            if want == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{name} waits on {dep}, which has none"


PINNED = re.compile(r"^[\w./-]+:(?!latest$)(RELEASE\.[\dT:-]+Z|v?\d+\.\d+\.\d+[\w.-]*)$")


def test_every_image_is_pinned():
    for name, service in SERVICES.items():
        image = service.get("image")
        assert image, f"{name} names no image"
        if service.get("build"):
            assert image == f"plait:{PYPROJECT['project']['version']}", name
        else:
            assert PINNED.match(image), f"{name}: pin {image!r} to a release tag"
    base = re.search(r"^FROM (\S+)", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    assert re.match(r"^python:3\.11\.\d+-slim$", base), base


def test_state_lives_in_named_volumes():
    declared = set(COMPOSE.get("volumes") or {})
    for name, path in (("kafka", "/var/lib/kafka/data"), ("redis", "/data"), ("minio", "/data")):
        mounts = dict(v.split(":")[:2][::-1] for v in SERVICES[name]["volumes"])
        assert mounts.get(path) in declared, f"{name}: {path} is not on a named volume"
    assert SERVICES["kafka"]["environment"]["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"


def test_the_api_is_open_by_default_so_the_readme_curl_works():
    # (a mounted caller registry makes every call need a signature: 401 for curl)
    for name in PLAIT_BUILT:
        assert "PLAIT_CALLERS_FILE" not in env_of(name), name
        assert not any("callers" in str(v) for v in SERVICES[name].get("volumes") or []), name
    # and the registry the comment tells you to mount is valid
    from plait.callers import load_callers

    registry = load_callers(ROOT / "examples" / "callers.yaml")
    assert registry.by_sys_code("demo") is not None and len(registry) == 2
    assert "examples/callers.yaml:/etc/plait/callers.yaml" in (ROOT / "docker-compose.yml").read_text()


def test_production_shape_has_kafka_kraft_redis_minio_api_two_workers():
    assert "KAFKA_PROCESS_ROLES" in SERVICES["kafka"]["environment"]  # KRaft, no ZooKeeper
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:")
    assert {"redis", "minio", "bucket", "topics", "api", "demo-data-api"} <= set(SERVICES)
    assert WORKERS == ["worker-1", "worker-2"]


def test_exports_and_alerting_are_separate_worker_services_that_restart():
    # issue 11.6: a crash or a storm in the alert funnel never stops exports
    assert ALERTING == ["worker-alerting"]
    for name in [*WORKERS, *ALERTING]:
        assert SERVICES[name]["restart"] == "unless-stopped", name
    alerting = SERVICES["worker-alerting"]
    path = env_of("worker-alerting")["PLAIT_ALERTING_CONFIG"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in alerting["volumes"]}
    assert path in mounts and (ROOT / mounts[path]).is_file()
    from alerting.config import load_config

    load_config(ROOT / mounts[path])  # the mounted config is valid
    assert alerting["healthcheck"]["test"] == ["CMD", "python", "-m", "alerting.health"]


def test_the_readme_compose_example_posts_a_valid_spec_to_a_service_that_exists():
    # given the README's "Running with docker compose" section
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Running with docker compose", 1)[1].split("\n## ", 1)[0]
    body = re.search(r"-d '(\{.*?\})'", section, re.S).group(1)
    # then its request is a spec the API accepts
    from plait.spec import ExportSpec

    spec = ExportSpec.model_validate_json(body)
    # and its data API is a compose service, at the port that service listens on
    url = urlparse(spec.dataConfig.dataApiUrl)
    service = SERVICES[url.hostname]
    assert str(url.port) == service["command"][service["command"].index("--port") + 1]
    # and the addresses it gives the host are the ones compose publishes
    assert "API=http://localhost:8000" in section and 8000 in published("api")
    assert "localhost:9094" in section and 9094 in published("kafka")
    assert "http://localhost:9000" in section and 9000 in published("minio")


def test_the_readme_compose_section_names_the_services_of_the_file():
    # given the README's "Running with docker compose" section
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Running with docker compose", 1)[1].split("\n## ", 1)[0]
    # then it names every worker service of the file
    for name in [*WORKERS, *ALERTING]:
        assert f"`{name}`" in section, name
    assert "Prometheus" in section.split("```", 1)[0] and "prometheus" in SERVICES
    # and the services it says to wait for are those with a health check no other waits on
    # (Kafka, Redis and MinIO are healthy before the API and workers start)
    line = re.search(r"# wait until (.*) show \(healthy\)", section).group(1)
    told = set(re.split(r",\s*|\s+and\s+", line))
    waited_on = {d for s in SERVICES.values() for d in s.get("depends_on") or {}}
    leaves = {n for n, s in SERVICES.items() if s.get("healthcheck") and n not in waited_on}
    assert told == leaves, (told, leaves)


# -- metrics ----------------------------------------------------------------

def prometheus_config() -> tuple[Path, dict]:
    """(host path, parsed config) of the file the prometheus service runs with:
    its ``--config.file`` mapped back through its volume mounts."""
    service = SERVICES["prometheus"]
    flag = next(a for a in service["command"] if a.startswith("--config.file="))
    path = flag.split("=", 1)[1]
    for volume in service["volumes"]:
        host, container = volume.split(":")[:2]
        if path.startswith(container.rstrip("/") + "/") and host.startswith("./"):
            local = ROOT / host / path[len(container.rstrip("/")) + 1:]
            return local, yaml.safe_load(local.read_text())
    raise AssertionError(f"prometheus: {path} is not on a mounted repository directory")


def scrape_targets(config: dict) -> dict[str, set[str]]:
    """job name -> its static ``host:port`` targets."""
    return {job["job_name"]: {t for sc in job.get("static_configs") or [] for t in sc["targets"]}
            for job in config["scrape_configs"]}


def test_every_worker_serves_metrics_and_prometheus_scrapes_exactly_them(monkeypatch):
    # given every worker service (export and alerting roles)
    workers = [*WORKERS, *ALERTING]
    ports = {}
    for w in workers:
        # it sets PLAIT_METRICS_PORT, a valid setting that makes the worker serve
        assert "PLAIT_METRICS_PORT" in env_of(w), f"{w} serves no metrics"
        monkeypatch.setenv("PLAIT_METRICS_PORT", env_of(w)["PLAIT_METRICS_PORT"])
        ports[w] = Settings().metrics_port
        assert ports[w] > 0, w
    # then Prometheus scrapes exactly those host:port pairs, and the API's /metrics
    local, config = prometheus_config()
    targets = scrape_targets(config)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    worker_jobs = [n for n, t in targets.items() if t & {f"{w}:{ports[w]}" for w in workers}]
    assert set().union(*(targets[n] for n in worker_jobs)) == {f"{w}:{ports[w]}" for w in workers}
    api_port = int(SERVICES["api"]["command"][SERVICES["api"]["command"].index("--port") + 1])
    api_jobs = [n for n, t in targets.items() if t == {f"api:{api_port}"}]
    assert len(api_jobs) == 1 and jobs[api_jobs[0]].get("metrics_path", "/metrics") == "/metrics"
    assert set(targets) == {*worker_jobs, *api_jobs}, "every scrape job is a Plait service"
    # and it loads Plait's alert rules (the file tests/test_observability.py checks)
    rules = [(local.parent / r).resolve() for r in config["rule_files"]]
    assert (ROOT / "deploy" / "prometheus" / "plait-rules.yml").resolve() in rules
    assert all(r.is_file() for r in rules)
    assert 9090 in published("prometheus")


def test_the_prometheus_config_passes_promtool():
    import shutil
    import subprocess

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    local, _config = prometheus_config()
    done = subprocess.run([promtool, "check", "config", str(local)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and "rule files found" in done.stdout
