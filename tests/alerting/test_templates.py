"""Messages a person can read at 3 a.m. (issue 16, item 2): title and text
from Jinja2 templates (sandboxed), defaults with what / where / since when /
how many / what changed / links, per-receiver templates checked at start-up
naming the template and the line."""
from __future__ import annotations

import os
from pathlib import Path

from urllib.parse import quote

import pytest
from alert_harness import case_config, ev

from alerting.config import ConfigError
from alerting.funnel import Funnel
from alerting.templates import render

GOLDEN = Path(__file__).parent / "golden"
T0 = 1_796_007_600.0  # 2026-11-30T03:00:00Z
URL = "https://plait.example.com"


def storm_messages():
    """Case A7 (docs/alerting.md): 500 NodeDown alerts, each asset its own
    group, spread over 10 s at 3 a.m.; burst 3, one token per 10 s."""
    cfg = case_config(grouping={"group_by": ["asset"], "batch_size": 50}, external_url=URL)
    f = Funnel(cfg)
    ann = {"summary": "node exporter unreachable for 1 minute",
           "runbook_url": "https://runbooks.example.com/NodeDown"}
    events = [(i * 10 / 500, ev("NodeDown", f"n{i + 1:03d}", "critical", annotations=ann))
              for i in range(500)]
    out, i = [], 0
    for second in range(0, 61):
        while i < len(events) and events[i][0] <= second:
            f.ingest(events[i][1], T0 + events[i][0])
            i += 1
        for m in f.tick(T0 + second):
            out.append(m)
            f.delivered(m.id, T0 + second)
    return cfg, out


def test_storm_message_at_3am_matches_the_golden_file():
    cfg, msgs = storm_messages()
    rc = cfg.receivers[0]
    first, merged = msgs[0], msgs[-1]
    assert merged.merged_groups > 0
    text = ""
    for label, m in (("first message", first), ("a later, merged message", merged)):
        title, body, _ = render(m, rc, URL)
        text += f"===== {label} =====\n{title}\n\n{body}\n"
    golden = GOLDEN / "storm_3am.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
    # and it is short: a title under 80 characters, a body under 15 lines
    title, body, _ = render(first, rc, URL)
    assert len(title) < 80 and len(body.splitlines()) < 15


def _cfg(**receiver):
    return case_config(receiver=receiver, external_url=URL)


def test_template_syntax_error_refuses_start_naming_template_and_line():
    bad = "line one\n{{ status }}\n{% for a in alerts %}{{ a.rule }\n"
    with pytest.raises(ConfigError) as e:
        _cfg(templates={"text": bad})
    msg = str(e.value)
    assert "receivers.0.templates.text" in msg and "'oncall'" in msg and "line 3" in msg


def test_unknown_filter_and_failing_render_are_refused_with_their_line():
    with pytest.raises(ConfigError, match=r"templates\.title .*line 1.*(?i:no filter named 'shout')"):
        _cfg(templates={"title": "{{ status|shout }}"})
    with pytest.raises(ConfigError, match=r"templates\.text .*line 2.*ZeroDivisionError"):
        _cfg(templates={"text": "ok\n{{ 1 / 0 }}\n"})


def test_sandbox_refuses_python_internals():
    with pytest.raises(ConfigError, match="templates.text"):
        _cfg(templates={"text": "{{ alerts.__class__.__mro__[1].__subclasses__() }}"})


def _one(**extra):
    cfg = _cfg(**extra.pop("receiver", {}))
    f = Funnel(cfg)
    for raw in extra.get("alerts") or [ev("ExportFailed", "BILL/daily", "critical",
                                          labels={"taskId": "01a22cee"},
                                          annotations={"summary": "export failed",
                                                       "runbook_url": "https://rb/ef"})]:
        f.ingest(raw, T0)
    [m] = f.tick(T0 + 30)
    return cfg, m


def test_default_message_links_task_silence_and_runbook():
    cfg, m = _one()
    title, text, ctx = render(m, cfg.receivers[0], URL)
    assert title == "[FIRING:1] ExportFailed on BILL/daily (+1 new)"
    assert f"task: {URL}/ui/tasks/01a22cee" in text
    assert "runbook: https://rb/ef" in text
    assert f"silence: {URL}/ui/silences/new?matchers=%7Brule%3D%22ExportFailed%22%7D" in text
    assert "since: 2026-11-30T03:00:00Z (30s ago)" in text


def test_a_silence_link_keeps_a_group_by_label_the_group_lacks_so_it_mutes_only_that_group():
    # group_by [rule, cluster], the alert has no cluster: the group is the alerts without one,
    # so the link says cluster="" (a link without it would mute every cluster's group too)
    cfg = case_config(receiver={}, external_url=URL, grouping={"group_by": ["rule", "cluster"]})
    f = Funnel(cfg)
    f.ingest(ev("ExportFailed", "BILL/daily", "critical"), T0)
    [m] = f.tick(T0 + 30)
    _title, text, _ctx = render(m, cfg.receivers[0], URL)
    link = f"{URL}/ui/silences/new?matchers=" + quote('{cluster="",rule="ExportFailed"}', safe="")
    assert f"silence: {link}" in text, text


def test_custom_templates_render_with_the_context():
    cfg, m = _one(receiver={"templates": {"title": "{{ rules|join(',') }}: {{ firing|length }}",
                                          "text": "{% for a in alerts %}{{ a.asset }} {{ a.task_url }}\n{% endfor %}"}})
    title, text, _ = render(m, cfg.receivers[0], URL)
    assert title == "ExportFailed: 1" and text == f"BILL/daily {URL}/ui/tasks/01a22cee\n"


def test_max_alerts_lists_some_and_counts_the_rest():
    alerts = [ev("X", f"h{i}") for i in range(5)]
    cfg, m = _one(receiver={"max_alerts": 2}, alerts=alerts)
    _title, text, ctx = render(m, cfg.receivers[0], URL)
    assert len(ctx["alerts"]) == 2 and ctx["omitted"] == 3
    assert "3 more alerts not listed (max_alerts)" in text
