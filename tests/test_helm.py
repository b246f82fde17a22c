"""The Helm chart (deploy/helm/plait): rendered by Helm's own Go SDK
(``helm-python-sdk``, no helm binary or cluster), linted like ``helm lint
--strict``, every Kubernetes object validated against the Kubernetes JSON
schemas (``kubernetes-validate``, strict: unknown fields fail), the KEDA
ScaledObject checked against the kafka scaler's fields, and the whole checked
against what the code expects (settings, entry points, topics, probes)."""
from __future__ import annotations

from pathlib import Path

import helm_python as helm  # test extra helm-python-sdk (pyproject.toml)
import kubernetes_validate  # test extra kubernetes-validate
import pytest
import yaml

from plait import topics as T
from plait.settings import Settings
from test_compose import check_command

CHART = Path(__file__).resolve().parent.parent / "deploy" / "helm" / "plait"
KNOWN = {f"PLAIT_{name.upper()}" for name in Settings.model_fields}
#: the oldest and newest Kubernetes the chart is validated for (Chart.yaml kubeVersion)
KUBE_VERSIONS = ("1.26.0", kubernetes_validate.latest_version())


def render(values: dict | None = None, name: str = "plait") -> list[dict]:
    """Every object the chart renders with ``values``, parsed."""
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values or {})
        out = chart.render(values or {}, name=name, namespace="plait", is_install=True)
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict], kind: str, component: str | None = None) -> dict:
    found = [d for d in by_kind(docs, kind)
             if component is None or d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    assert len(found) == 1, (kind, component, found)
    return found[0]


DEFAULT = render()
VARIANTS = {
    "default": DEFAULT,
    "no-keda-own-secret": render({"keda": {"enabled": False}, "topicsJob": {"enabled": False},
                                  "secret": {"existingSecret": "plait-creds"}}, name="exports"),
    "pod-monitor": render({"metrics": {"podMonitor": {"enabled": True,
                                                      "labels": {"release": "kube-prometheus"}}},
                           "worker": {"metricsPort": 9400}}),
}


def test_chart_lints_clean():
    report = helm.lint(str(CHART), strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_every_kubernetes_object_validates_against_the_schemas(variant, kube):
    for doc in VARIANTS[variant]:
        if doc["apiVersion"].startswith(("keda.sh/", "monitoring.coreos.com/")):
            continue  # a CRD: checked below
        kubernetes_validate.validate(doc, kube, strict=True)


def test_values_outside_the_schema_are_refused():
    with helm.Chart.load(CHART) as chart:
        for bad in ({"keda": {"lagThreshold": 100}}, {"settings": {"partitions": "12"}},
                    {"image": {"pullPolicy": "Sometimes"}}):
            with pytest.raises(helm.HelmValuesError):
                chart.validate_schema(bad)


def test_settings_are_known_plait_keys_and_validate():
    config = one(DEFAULT, "ConfigMap")["data"]
    secret = one(DEFAULT, "Secret")["stringData"]
    keys = {k for k in {**config, **secret} if k.startswith("PLAIT_")}
    assert keys and keys <= KNOWN, sorted(keys - KNOWN)
    settings = Settings(**{k.removeprefix("PLAIT_").lower(): v for k, v in config.items()})
    assert settings.partitions == 12 and settings.app_id == "plait-worker"


def test_containers_run_entry_points_that_exist(capsys):
    for variant, docs in VARIANTS.items():
        for doc in by_kind(docs, "Deployment") + by_kind(docs, "Job"):
            for c in doc["spec"]["template"]["spec"]["containers"]:
                where = f"{variant}/{doc['metadata']['name']}/{c['name']}"
                check_command(c["command"], where)
                for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                    if "exec" in c.get(probe, {}):
                        check_command(c[probe]["exec"]["command"], f"{where}.{probe}")


def test_worker_has_liveness_and_readiness_probes_on_its_heartbeat():
    worker = one(DEFAULT, "Deployment", "worker")["spec"]["template"]["spec"]["containers"][0]
    assert worker["livenessProbe"]["exec"]["command"] == ["python", "-m", "streams.health"]
    assert worker["readinessProbe"]["exec"]["command"] == ["python", "-m", "streams.health", "--broker"]
    assert worker["startupProbe"]["exec"]["command"][:3] == ["python", "-m", "streams.health"]
    # the probe finds the heartbeat by PLAIT_WORKER_ID: the pod's own name
    env = {e["name"]: e for e in worker["env"]}
    assert env["PLAIT_WORKER_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # a liveness probe slower than the heartbeat expiry would never see it stale
    assert worker["livenessProbe"]["periodSeconds"] <= Settings().stale_after_seconds


@pytest.mark.parametrize("variant", VARIANTS)
def test_workers_of_two_versions_never_run_side_by_side(variant):
    # an earlier worker cannot read a later one's shards (docs/architecture.md)
    worker = one(VARIANTS[variant], "Deployment", "worker")
    assert worker["spec"]["strategy"] == {"type": "Recreate"}


def test_api_probes_hit_the_health_route_on_the_served_port():
    from api.app import create_api  # noqa: F401  (the route below is the app's own)

    api = one(DEFAULT, "Deployment", "api")["spec"]["template"]["spec"]["containers"][0]
    port = api["ports"][0]
    assert api["command"][-1] == str(port["containerPort"])
    for probe in ("livenessProbe", "readinessProbe"):
        assert api[probe]["httpGet"] == {"path": "/health", "port": port["name"]}
    service = one(DEFAULT, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert service["spec"]["selector"].items() <= one(DEFAULT, "Deployment", "api")[
        "spec"]["template"]["metadata"]["labels"].items()


def test_keda_scales_the_workers_on_consumer_lag_of_the_export_topics():
    scaled = one(DEFAULT, "ScaledObject")
    worker = one(DEFAULT, "Deployment", "worker")
    config = one(DEFAULT, "ConfigMap")["data"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": worker["metadata"]["name"]}
    assert "replicas" not in worker["spec"]  # KEDA owns the replica count
    assert 0 < spec["maxReplicaCount"] <= int(config["PLAIT_PARTITIONS"])  # no idle consumers
    assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    topics = set()
    for trigger in spec["triggers"]:
        assert trigger["type"] == "kafka"
        meta = trigger["metadata"]
        assert set(meta) <= {"bootstrapServers", "consumerGroup", "topic", "lagThreshold",
                             "activationLagThreshold", "offsetResetPolicy", "allowIdleConsumers",
                             "excludePersistentLag", "limitToPartitionsWithLag", "version"}
        assert meta["bootstrapServers"] == config["PLAIT_BROKER_URL"]
        # Faust's consumer group is the app id (streams/app.py)
        assert meta["consumerGroup"] == config["PLAIT_APP_ID"]
        assert meta["lagThreshold"].isdigit() and meta["offsetResetPolicy"] in ("earliest", "latest")
        topics.add(meta["topic"])
    assert topics <= set(T.ALL) and {T.FETCH, T.PAGES} <= topics


def test_without_keda_the_deployment_sets_its_replicas_and_an_existing_secret_is_used():
    docs = VARIANTS["no-keda-own-secret"]
    assert by_kind(docs, "ScaledObject") == [] and by_kind(docs, "Secret") == []
    assert by_kind(docs, "Job") == []
    worker = one(docs, "Deployment", "worker")
    assert worker["spec"]["replicas"] == 2 and worker["metadata"]["name"] == "exports-plait-worker"
    refs = worker["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert {"secretRef": {"name": "plait-creds"}} in refs


def test_the_topics_job_creates_every_topic():
    job = one(DEFAULT, "Job")
    code = job["spec"]["template"]["spec"]["containers"][0]["command"]
    compose = yaml.safe_load((CHART.parents[2] / "docker-compose.yml").read_text())
    assert code == compose["services"]["topics"]["command"]  # the same code test_compose runs
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_image_is_pinned_to_the_app_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    import tomllib

    version = tomllib.loads((CHART.parents[2] / "pyproject.toml").read_text())["project"]["version"]
    assert chart["appVersion"] == version
    for doc in by_kind(DEFAULT, "Deployment") + by_kind(DEFAULT, "Job"):
        for c in doc["spec"]["template"]["spec"]["containers"]:
            assert c["image"] == f"plait:{version}"


def worker_pod(docs: list[dict]) -> tuple[dict, dict]:
    """(pod template metadata, worker container) of the worker Deployment."""
    template = one(docs, "Deployment", "worker")["spec"]["template"]
    return template["metadata"], template["spec"]["containers"][0]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_worker_pods_expose_the_metrics_port_they_serve_and_are_annotated(variant):
    meta, worker = worker_pod(VARIANTS[variant])
    # the worker serves its metrics on PLAIT_METRICS_PORT (plait/metrics.py) ...
    env = {e["name"]: e.get("value") for e in worker["env"]}
    port = Settings(metrics_port=env["PLAIT_METRICS_PORT"]).metrics_port
    assert port > 0
    # ... which is the container port named "metrics"
    ports = {p["name"]: p for p in worker["ports"]}
    assert ports["metrics"]["containerPort"] == port and ports["metrics"]["protocol"] == "TCP"
    # and the pod says so to annotation-based scraping
    notes = meta["annotations"]
    assert notes["prometheus.io/scrape"] == "true"
    assert notes["prometheus.io/port"] == str(port) and notes["prometheus.io/path"] == "/metrics"
    assert (port == 9400) == (variant == "pod-monitor")  # the value reaches every place


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_api_pods_are_annotated_for_scraping_on_their_http_port(variant):
    template = one(VARIANTS[variant], "Deployment", "api")["spec"]["template"]
    [api] = template["spec"]["containers"]
    http = {p["name"]: p["containerPort"] for p in api["ports"]}["http"]
    notes = template["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true"
    assert notes["prometheus.io/port"] == str(http) and notes["prometheus.io/path"] == "/metrics"


#: Fields of the Prometheus Operator's PodMonitor (monitoring.coreos.com/v1):
#: ``spec`` and one ``podMetricsEndpoints`` item.
POD_MONITOR_SPEC = {
    "jobLabel", "podTargetLabels", "podMetricsEndpoints", "selector", "selectorMechanism",
    "namespaceSelector", "sampleLimit", "targetLimit", "labelLimit", "labelNameLengthLimit",
    "labelValueLengthLimit", "keepDroppedTargets", "attachMetadata", "scrapeClass",
    "scrapeProtocols", "fallbackScrapeProtocol", "bodySizeLimit", "scrapeClassicHistograms",
    "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor",
    "convertClassicHistogramsToNHCB", "scrapeNativeHistograms"}
POD_METRICS_ENDPOINT = {
    "port", "portNumber", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout",
    "honorLabels", "honorTimestamps", "trackTimestampsStaleness", "metricRelabelings",
    "relabelings", "proxyUrl", "followRedirects", "enableHttp2", "filterRunning", "basicAuth",
    "bearerTokenSecret", "oauth2", "authorization", "tlsConfig", "noProxy",
    "proxyFromEnvironment", "proxyConnectHeader"}
DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"


def seconds(duration: str) -> float:
    import re

    units = {"y": 31536000, "w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(ms|[ywdhms])", duration))


def test_the_pod_monitor_is_off_by_default_and_scrapes_the_worker_metrics_port_when_on():
    import re

    assert by_kind(DEFAULT, "PodMonitor") == []
    docs = VARIANTS["pod-monitor"]
    monitor = one(docs, "PodMonitor")
    meta, worker = worker_pod(docs)
    # a PodMonitor of the Operator's API (a CRD: its fields checked one by one)
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    for kube in KUBE_VERSIONS:  # its metadata is valid object metadata
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": monitor["metadata"]}, kube, strict=True)
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    spec = monitor["spec"]
    assert set(spec) <= POD_MONITOR_SPEC, sorted(set(spec) - POD_MONITOR_SPEC)
    # selecting the worker pods (and nothing else the chart runs)
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= meta["labels"].items()
    for doc in by_kind(docs, "Deployment"):
        if doc is not one(docs, "Deployment", "worker"):
            assert not selector.items() <= doc["spec"]["template"]["metadata"]["labels"].items()
    # on the port the worker serves its metrics on, at the annotated path
    [endpoint] = spec["podMetricsEndpoints"]
    assert set(endpoint) <= POD_METRICS_ENDPOINT, sorted(set(endpoint) - POD_METRICS_ENDPOINT)
    assert endpoint["port"] in {p["name"] for p in worker["ports"]} and endpoint["port"] == "metrics"
    assert endpoint["path"] == meta["annotations"]["prometheus.io/path"]
    for key in ("interval", "scrapeTimeout"):
        assert re.match(DURATION, endpoint[key]), endpoint[key]
    assert 0 < seconds(endpoint["scrapeTimeout"]) <= seconds(endpoint["interval"])
