"""Configuration: one YAML file, pydantic validation, errors naming the key."""
from __future__ import annotations

import pytest

from alerting.config import ConfigError, load_config, parse_config, parse_duration

GOOD = """
receivers:
  - name: oncall
    url: https://hooks.example.com/plait
    format: alertmanager
    secret: s3cret
    bucket: {burst: 3, refill_interval: 10s}
  - name: dba
    url: http://127.0.0.1:8080/hook
route:
  receiver: oncall
  routes:
    - {matchers: ['team="db"'], receiver: dba}
grouping: {group_by: [rule, env], batch_size: 50}
timing: {group_wait: 30s, group_interval: 5m, repeat_interval: 4h}
dedupe: {fingerprint_labels: [rule, asset], cooldown: 300, suppress_transient: true}
delivery: {timeout: 10, backoff_initial: 1, backoff_max: 1m}
"""


def test_good_yaml_loads_with_durations(tmp_path):
    # given a complete YAML file
    path = tmp_path / "alerting.yaml"
    path.write_text(GOOD)
    # when loaded
    cfg = load_config(path)
    # then durations are seconds and every section is typed
    assert (cfg.timing.group_wait, cfg.timing.group_interval, cfg.timing.repeat_interval) == (30, 300, 14400)
    assert cfg.receiver("oncall").format == "alertmanager"
    assert cfg.receiver("oncall").bucket.refill_interval == 10
    assert cfg.delivery.backoff_max == 60 and cfg.dedupe.suppress_transient


def test_minimal_config_takes_defaults():
    cfg = load_config("receivers: [{name: r, url: 'http://x'}]\nroute: {receiver: r}\n")
    assert cfg.grouping.group_by == ["rule"] and cfg.dedupe.fingerprint_labels == ["rule", "asset"]


@pytest.mark.parametrize("edit, key", [
    (lambda t: t.replace("group_wait: 30s", "group_wait: soon"), "timing.group_wait"),
    (lambda t: t.replace("group_interval: 5m", "group_interval: 0"), "timing.group_interval"),
    (lambda t: t.replace("format: alertmanager", "format: slack"), "receivers.0.format"),
    (lambda t: t.replace("https://hooks.example.com/plait", "ftp://x"), "receivers.0.url"),
    (lambda t: t.replace("burst: 3", "burst: 0"), "receivers.0.bucket.burst"),
    (lambda t: t.replace("batch_size: 50", "batch_size: -1"), "grouping.batch_size"),
    (lambda t: t.replace("cooldown: 300", "cooldown: 300, cooldwn: 1"), "dedupe.cooldwn"),
    (lambda t: t.replace("receiver: dba}", "receiver: nobody}"), "route.routes.0.receiver"),
    (lambda t: t.replace("['team=\"db\"']", "['team ~ db']"), "route.routes.0.matchers"),
    (lambda t: t.replace("name: dba", "name: oncall"), "receivers: duplicate"),
])
def test_bad_key_is_named_in_the_error(edit, key):
    # when a config with one bad key is loaded, then the error names that key
    with pytest.raises(ConfigError) as err:
        load_config(edit(GOOD))
    assert key in str(err.value)


def test_missing_sections_and_bad_yaml():
    with pytest.raises(ConfigError, match="receivers"):
        parse_config({"route": {"receiver": "r"}})
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config("receivers: [\n  - {name: r\n")
    with pytest.raises(ConfigError, match="top level"):
        load_config("- just\n- a list\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config("/nonexistent/alerting.yaml")


@pytest.mark.parametrize("value, seconds", [(30, 30.0), ("30", 30.0), ("30s", 30.0), ("5m", 300.0),
                                            ("1.5h", 5400.0), ("1d", 86400.0), ("250ms", 0.25)])
def test_parse_duration(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", [-1, "5 minutes", True, None, "m"])
def test_parse_duration_rejects(value):
    with pytest.raises(ValueError):
        parse_duration(value)
