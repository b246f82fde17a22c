"""docker-compose.yml cannot run here (no Docker engine); keep it honest by
construction: every PLAIT_* key it sets is a key the settings model knows,
and every service it needs is declared with a health check or a dependency."""
from __future__ import annotations

from pathlib import Path

import yaml

from plait.settings import Settings

COMPOSE = yaml.safe_load((Path(__file__).resolve().parent.parent / "docker-compose.yml").read_text())
KNOWN = {f"PLAIT_{name.upper()}" for name in Settings.model_fields}


def plait_keys(service: dict) -> set[str]:
    env = service.get("environment") or {}
    return {k for k in env if k.startswith("PLAIT_")}


def test_every_plait_key_is_a_known_setting():
    used = set().union(*(plait_keys(s) for s in COMPOSE["services"].values()))
    assert used, "compose sets no PLAIT_* keys"
    assert used <= KNOWN, f"unknown settings in docker-compose.yml: {sorted(used - KNOWN)}"


def test_compose_values_validate_as_settings(monkeypatch):
    env = COMPOSE["services"]["worker-1"]["environment"]
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    settings = Settings()
    assert settings.broker_url == "kafka:9092" and settings.partitions == 12
    assert settings.storage_url.startswith("s3://")


def test_production_shape_has_kafka_kraft_redis_minio_api_two_workers():
    services = COMPOSE["services"]
    assert "KAFKA_PROCESS_ROLES" in services["kafka"]["environment"]  # KRaft, no ZooKeeper
    assert services["kafka"]["image"].startswith("apache/kafka")
    assert {"redis", "minio", "api", "worker-1", "worker-2", "demo-data-api"} <= set(services)
    for name in ("kafka", "redis", "minio", "api"):
        assert "healthcheck" in services[name], name


def test_the_mounted_caller_registry_is_valid():
    from plait.callers import load_callers

    registry = load_callers(Path(__file__).resolve().parent.parent / "examples" / "callers.yaml")
    assert registry.by_sys_code("demo") is not None and len(registry) == 2
    mounts = COMPOSE["services"]["api"]["volumes"]
    assert any(m.startswith("./examples/callers.yaml:") for m in mounts)
