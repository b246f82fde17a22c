"""bench/bench_alert_vs_alertmanager.py: its storm, its profile summary and
one tiny run on the whole Plait stack (API, alerting worker, Tansu)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_alert_vs_alertmanager as bench  # noqa: E402


def test_the_storm_is_distinct_alerts_over_20_alertnames_with_5_labels_and_2_annotations():
    alerts = bench.storm(20_000)
    assert len(alerts) == 20_000
    assert len({tuple(sorted(a["labels"].items())) for a in alerts}) == 20_000
    assert len({a["labels"]["alertname"] for a in alerts}) == 20
    assert len({a["labels"]["instance"] for a in alerts}) == 1000
    assert {len(a["labels"]) for a in alerts} == {5}
    assert {len(a["annotations"]) for a in alerts} == {2}


def test_bodies_hold_64_alerts_each_and_a_past_end_marks_them_resolved():
    bodies = bench.bodies(bench.storm(200), 1000.0, 2000.0)
    docs = [json.loads(b) for b in bodies]
    assert [len(d) for d in docs] == [64, 64, 64, 8]
    assert docs[0][0]["startsAt"] == "1970-01-01T00:16:40Z"
    assert docs[0][0]["endsAt"] == "1970-01-01T00:33:20Z"


def test_top_frames_shares_self_inclusive_and_stage_time_and_sets_idle_apart():
    raw = ("<module> (/a/x.py:1);post_alerts (/a/api/alertmanager.py:5);"
           "dumps (/u/json/__init__.py:9) 6\n"
           "<module> (/a/x.py:1);post_alerts (/a/api/alertmanager.py:7) 2\n"
           "<module> (/a/x.py:1);select (/u/selectors.py:3) 2\n")
    top = bench.top_frames(raw, 5)
    assert top["samples"] == 10
    assert top["idle_share"] == 0.2
    assert top["self"] == {"dumps (json/__init__.py)": 0.75, "post_alerts (api/alertmanager.py)": 0.25}
    assert top["inclusive"]["post_alerts (api/alertmanager.py)"] == 1.0
    assert top["parts"] == {"api_post": 1.0, "json_dumps": 0.75}


def test_too_few_alerts_is_refused_naming_the_option(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--alerts", "5"])
    assert "--alerts" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_tiny_storm_is_delivered_and_resolved_through_the_whole_stack(capsys):
    assert bench.main(["--alerts", "200", "--group-by", "alertname", "--no-alertmanager"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    line = next(x for x in lines if x.get("system") == "plait")
    assert line["alerts"] == 200
    assert line["webhook_posts"] >= 1
    assert line["resolve_webhook_posts"] >= 1
    assert set(line["cpu_s_by_process"]) == {"api", "broker", "worker-0"}
    assert set(line["rss_mb_by_process_before"]) == {"api", "broker", "worker-0"}
    assert line["delivered_per_s"] > 0 and line["accepted_per_s"] > 0
