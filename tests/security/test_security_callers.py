"""plait.callers: the registry file (load, validation errors naming the key and
never the secret), lookups, and check_spec / check_data_api_url (SSRF rules)."""
from __future__ import annotations

import json

import pytest
import yaml
from security_helpers import SECRET, make_caller, make_registry, make_spec

from plait.callers import (CallerConfigError, NotAllowed, check_data_api_url, check_spec,
                           effective_max_rows, limits_by_sys_code, load_callers)


def _entry(**over):
    entry = {"appKey": "crm-app", "appSecret": SECRET, "bizTypes": ["orders"],
             "dataApiPrefixes": ["https://data.crm.example.com/export/"],
             "fileFormats": ["csv"], "maxRows": 1000, "maxConcurrentTasks": 2,
             "reuseWindowSeconds": 60, "linkTtlSeconds": 600, "tier": "platinum"}
    entry.update(over)
    return entry


# -- registry file ------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_registry_loads_from_yaml_or_json_and_looks_up_both_ways(tmp_path, suffix):
    # given a registry file with two callers
    doc = {"callers": {"crm": _entry(), "erp": _entry(appKey="erp-app", tier="standard")}}
    path = tmp_path / f"callers{suffix}"
    path.write_text(json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc))
    # when it is loaded
    registry = load_callers(path)
    # then both lookups find the caller, unknown keys find nothing
    assert len(registry) == 2
    assert registry.by_app_key("erp-app").sysCode == "erp"
    assert registry.by_sys_code("crm").appKey == "crm-app"
    assert registry.by_sys_code("crm").tier == "platinum"
    assert registry.by_sys_code("crm").secret() == SECRET
    assert registry.by_app_key("nope") is None and registry.by_sys_code("nope") is None


@pytest.mark.parametrize("over,key", [
    ({"maxRows": 0}, "callers.crm.maxRows"),
    ({"tier": "diamond"}, "callers.crm.tier"),
    ({"fileFormats": ["exe"]}, "callers.crm.fileFormats"),
    ({"appSecret": "too-short"}, "callers.crm.appSecret"),
    ({"dataApiPrefixes": ["ftp://x.example.com/"]}, "callers.crm.dataApiPrefixes"),
    ({"dataApiPrefixes": ["https://u:p@x.example.com/"]}, "callers.crm.dataApiPrefixes"),
    ({"linkTtlSeconds": -1}, "callers.crm.linkTtlSeconds"),
    ({"maxConcurentTasks": 3}, "callers.crm.maxConcurentTasks"),  # typo: extra key
])
def test_invalid_registry_errors_name_the_key(tmp_path, over, key):
    # given a registry with one bad field
    path = tmp_path / "callers.yaml"
    path.write_text(yaml.safe_dump({"callers": {"crm": _entry(**over)}}))
    # when it is loaded, then the error names the file and the key
    with pytest.raises(CallerConfigError) as err:
        load_callers(path)
    assert str(path) in str(err.value) and key in str(err.value)


def test_registry_errors_never_echo_the_secret(tmp_path):
    # given a secret that fails validation (too long) and one that is valid but in a bad entry
    leaked = "LEAKME-" + "z" * 600
    path = tmp_path / "callers.yaml"
    path.write_text(yaml.safe_dump({"callers": {"crm": _entry(appSecret=leaked)}}))
    # when loading fails, then neither the message nor its context shows the value
    with pytest.raises(CallerConfigError) as err:
        load_callers(path)
    assert "LEAKME" not in str(err.value) and err.value.__cause__ is None
    assert "appSecret" in str(err.value)


def test_duplicate_app_keys_are_refused(tmp_path):
    # given two sysCodes sharing one appKey
    path = tmp_path / "callers.json"
    path.write_text(json.dumps({"callers": {"crm": _entry(), "erp": _entry()}}))
    # when loaded, then the error names both callers
    with pytest.raises(CallerConfigError, match=r"callers\.erp\.appKey.*callers\.crm"):
        load_callers(path)


@pytest.mark.parametrize("text,match", [
    ("callers: [", "not valid YAML"),
    ("other: 1", "'callers' mapping"),
    ("callers: {crm: 3}", "callers.crm: expected a mapping"),
])
def test_malformed_registry_files(tmp_path, text, match):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(CallerConfigError, match=match):
        load_callers(path)


def test_missing_registry_file(tmp_path):
    with pytest.raises(CallerConfigError, match="cannot read caller registry"):
        load_callers(tmp_path / "absent.yaml")


def test_secret_is_hidden_in_repr_and_dump():
    caller = make_caller()
    assert SECRET not in repr(caller) and SECRET not in str(caller.model_dump())
    assert SECRET not in caller.model_dump_json()


# -- check_spec -----------------------------------------------------------------

def test_allowed_spec_passes():
    check_spec(make_caller(), make_spec())  # no exception


@pytest.mark.parametrize("spec_over,field", [
    ({"bizType": "payroll"}, "bizType"),
    ({"fileFormat": "parquet"}, "documentConfig.fileFormat"),
    ({"url": "https://evil.example.net/export/"}, "dataConfig.dataApiUrl"),
    ({"maxRows": 100_001}, "jobConfig.maxRows"),
    ({"sysCode": "erp"}, "sysCode"),
])
def test_check_spec_names_the_field_not_allowed(spec_over, field):
    # given a caller and a spec breaking one of its limits
    caller, spec = make_caller(), make_spec(**spec_over)
    # when checked, then the error names the field
    with pytest.raises(NotAllowed) as err:
        check_spec(caller, spec)
    assert err.value.field == field and str(err.value).startswith(field + ":")
    assert isinstance(err.value, ValueError)


def test_max_rows_cap_is_applied_when_absent_and_kept_when_lower():
    caller = make_caller(maxRows=500)
    assert effective_max_rows(caller, make_spec()) == 500
    assert effective_max_rows(caller, make_spec(maxRows=20)) == 20


def test_push_mode_needs_no_data_api_prefix():
    spec = make_spec(dataConfig={"mode": "push"})
    check_spec(make_caller(dataApiPrefixes=[]), spec)


def test_pull_mode_with_no_prefixes_is_refused():
    with pytest.raises(NotAllowed, match="not under any data-API URL prefix"):
        check_spec(make_caller(dataApiPrefixes=[]), make_spec())


# -- SSRF rules -----------------------------------------------------------------

GOOD = ["http://good.example.com", "https://data.crm.example.com/export/",
        "http://10.0.0.5:8080/api/export"]


@pytest.mark.parametrize("url", [
    "http://good.example.com",
    "http://good.example.com/",
    "http://GOOD.Example.COM/orders?x=1",
    "http://good.example.com./orders",
    "http://good.example.com:80/orders",
    "https://data.crm.example.com/export/orders",
    "http://10.0.0.5:8080/api/export",
    "http://10.0.0.5:8080/api/export/orders",
])
def test_urls_under_an_allowed_prefix_pass(url):
    check_data_api_url(url, GOOD)


@pytest.mark.parametrize("url,rule", [
    ("http://127.0.0.1:6379", "allowlist"),             # internal Redis
    ("http://127.0.0.1:6379/", "allowlist"),
    ("http://169.254.169.254/latest/meta-data/", "allowlist"),  # cloud metadata
    ("file:///etc/passwd", "scheme"),
    ("gopher://127.0.0.1:6379/_FLUSHALL", "scheme"),
    ("ftp://good.example.com/", "scheme"),
    ("//good.example.com/", "scheme"),
    ("http://user:pw@good.example.com/", "userinfo"),
    ("http://good.example.com@evil.net/", "userinfo"),
    ("http://good.example.com.evil.net/", "allowlist"),  # host-suffix trick
    ("http://good.example.comevil.net/", "allowlist"),
    ("http://evil.net/good.example.com", "allowlist"),
    ("http://good.example.com:6379/", "allowlist"),      # other port, same host
    ("https://good.example.com/", "allowlist"),          # other scheme
    ("http://10.0.0.5:8080/api/exporter", "allowlist"),  # path not on a / boundary
    ("http://10.0.0.5:8080/api/export/../admin", "path"),
    ("http://10.0.0.5:8080/api/export/%2e%2e/admin", "path"),
    ("http://good.example.com\\@evil.net/", "characters"),
    ("http://good.example.com/\r\nHost: evil", "characters"),
    ("http://good.example.com:99999/", "url"),
    ("", "url"),
    ("http://ｇood.example.com/x", "url"),  # full-width g: the fetcher cannot parse it
])
def test_dangerous_urls_are_refused(url, rule):
    # given the allow list GOOD, when a dangerous URL is checked, then it is refused by rule
    with pytest.raises(NotAllowed) as err:
        check_data_api_url(url, GOOD)
    assert err.value.code == rule, str(err.value)
    assert err.value.field == "dataConfig.dataApiUrl"


def test_prefix_with_trailing_slash_matches_below_it_only():
    check_data_api_url("https://data.crm.example.com/export/x", GOOD)
    with pytest.raises(NotAllowed):
        check_data_api_url("https://data.crm.example.com/exportx", GOOD)
    with pytest.raises(NotAllowed):
        check_data_api_url("https://data.crm.example.com/", GOOD)


def test_ipv6_literals_compare_by_address():
    check_data_api_url("http://[::0:1]:8080/api", ["http://[::1]:8080/api"])
    with pytest.raises(NotAllowed):
        check_data_api_url("http://[::2]:8080/api", ["http://[::1]:8080/api"])


def test_registry_refuses_nothing_it_should_not():
    # given the default test registry, its caller's prefix works end to end
    caller = make_registry().by_app_key("crm-app")
    check_data_api_url("https://data.crm.example.com/export/orders", caller.dataApiPrefixes)


def test_limits_by_sys_code_feeds_admission_from_the_registry():
    # given two callers, when their limits are exported, then concurrency and tier per sysCode
    registry = make_registry(make_caller(), make_caller(sysCode="erp", appKey="erp-app",
                                                        maxConcurrentTasks=9, tier="platinum"))
    assert limits_by_sys_code(registry) == {
        "crm": {"maxConcurrent": 3, "tier": "gold"},
        "erp": {"maxConcurrent": 9, "tier": "platinum"}}


@pytest.mark.parametrize("url", [
    "http://good.example.com#@evil.net/",
    "http://good.example.com?@evil.net/",
    "http://good.example.com/#@evil.net",
    "http://GOOD.EXAMPLE.COM:80/x",
])
def test_accepted_urls_reach_the_allowed_host_in_httpx_too(url):
    # given an odd URL the check accepts, when httpx (the fetcher's client) parses it,
    # then it connects to the allowed host and port, not to the part after '@'
    import httpx
    check_data_api_url(url, GOOD)
    parsed = httpx.URL(url)
    assert (parsed.host, parsed.port or 80) == ("good.example.com", 80)
