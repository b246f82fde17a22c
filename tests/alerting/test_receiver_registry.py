"""Receiver types register every part or fail at import; the config, the
sender and /api/v2/status find a type only through the registry."""
from __future__ import annotations

import dataclasses

import pytest

from alerting import amconfig
from alerting.config import ConfigError, parse_config
from alerting.receivers.registry import AmFile, ReceiverType, receiver_type, receiver_types, register

PARTS = {"name": "pager", "requests": lambda *a: [], "am_requests": lambda *a: [],
         "am_status": lambda r: {}, "check": lambda r: None, "am_kind": "pager_configs",
         "am_file": AmFile(("url",), True, (), lambda c, key, ctx: {"type": "pager"})}


@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_type_missing_any_part_is_refused_at_registration(part):
    with pytest.raises(TypeError, match=part):
        register(ReceiverType(**(PARTS | {part: None})))
    assert "pager" not in receiver_types()


def test_an_alertmanager_kind_without_its_reader_is_refused():
    with pytest.raises(TypeError, match="am_file"):
        register(ReceiverType(**(PARTS | {"am_kind": ""})))


def test_a_name_registered_twice_is_refused():
    slack = receiver_type("slack")
    with pytest.raises(ValueError, match="twice"):
        register(dataclasses.replace(slack, am_kind="other_configs"))
    assert receiver_type("slack") is slack


def test_every_type_is_found_and_alertmanager_kinds_match_the_file_reader():
    types = receiver_types()
    assert sorted(types) == ["email", "none", "opsgenie", "pagerduty", "slack", "teams", "webhook"]
    assert {t.am_kind: n for n, t in types.items() if t.am_kind} == amconfig.KINDS
    with pytest.raises(ValueError, match="unknown receiver type 'fax'"):
        receiver_type("fax")


def test_an_unregistered_type_in_the_config_names_the_key():
    with pytest.raises(ConfigError, match=r"receivers\.0\.type: Input should be one of 'email'"):
        parse_config({"receivers": [{"name": "a", "type": "fax", "url": "http://x/"}],
                      "route": {"receiver": "a"}})


def test_status_shapes_come_from_the_type():
    config = parse_config({"receivers": [
        {"name": "pd", "type": "pagerduty", "routing_key": "k", "url": "https://pd.example/x"},
        {"name": "off", "type": "none"}], "route": {"receiver": "pd"}})
    pd, off = config.receivers
    assert receiver_type("pagerduty").am_status(pd) == {"pagerduty_configs": [
        {"routing_key": "<secret>", "send_resolved": True, "url": "https://pd.example/<secret>"}]}
    assert receiver_type("none").am_status(off) == {}


def test_an_alertmanager_reader_that_is_not_a_function_is_refused():
    with pytest.raises(TypeError, match="am_file"):
        register(ReceiverType(**(PARTS | {"am_file": AmFile(("url",), True, (), None)})))
