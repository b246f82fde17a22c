"""Alertmanager's acceptance scenarios (``tests/am_scenarios.py``)
played on the pure funnel with a fake clock: ticks every 10 ms, every
message delivered at once, bodies built by the real webhook code
(:func:`alerting.receivers.build_requests`), checked as Alertmanager's
``Collector.Check`` checks them. Each test names the Go test it comes from;
the rule behind it is cited in its docstring. Each scenario's
alertmanager.yml is read verbatim (:func:`alerting.amconfig.load_alertmanager_config`)."""
from __future__ import annotations

import json

import pytest
from am_scenarios import (ALWAYS_INHIBITING, BATCHING, EMPTY_INHIBITION_RULE, INHIBITING,
                          MERGE_ALERTS, MERGE_ALERTS_WITH_ENDS_AT, RELOAD, REPEAT, RESOLVED,
                          RESOLVED_FILTER, SILENCE_DELETE, SILENCING, Scenario, check,
                          config_text, push_body)

from alerting.amconfig import load_alertmanager_config
from alerting.config import AlertingConfig
from alerting.dedupe import decide
from alerting.funnel import Funnel
from alerting.stages import dispatch
from alerting.view import receiver_levels
from alerting.intake import format_time, normalize
from alerting.delivery import render_alertmanager
from alerting.receivers import build_requests, without_resolved

STEP = 0.01


#: Integrations whose send_resolved defaults to true, as the webhook's: each scenario's webhook
#: entry rewritten as one of them (``- url: 'http://%s'`` -> its own keys)
INTEGRATIONS = {"webhook": ("webhook_configs:", "- url: "),
                "pagerduty": ("pagerduty_configs:", "- routing_key: k\n    url: "),
                "opsgenie": ("opsgenie_configs:", "- api_key: k\n    api_url: ")}


def load(sc: Scenario, tmp_path, kind: str = "webhook") -> AlertingConfig:
    """``sc``'s alertmanager.yml, written to ``tmp_path`` and loaded as
    ``PLAIT_ALERTMANAGER_CONFIG`` loads it (webhooks at 127.0.0.1:9/<i>, or the integration
    ``kind`` of :data:`INTEGRATIONS` there instead)."""
    path = tmp_path / "alertmanager.yml"
    text = config_text(sc, [f"http://127.0.0.1:9/{i}" for i in range(len(sc.wants))])
    section, entry = INTEGRATIONS[kind]
    path.write_text(text.replace("webhook_configs:", section).replace("- url: ", entry))
    return load_alertmanager_config(path)


def play(sc: Scenario, tmp_path, order=lambda pushes: pushes,
         kind: str = "webhook") -> dict[int, list[tuple[float, list]]]:
    """Run ``sc`` (its alertmanager.yml written to ``tmp_path``) on a funnel
    from t = 0 to its end, reloading at ``sc.reloads``; returns what each
    collector (receiver index) received, with arrival times. ``order``
    reorders the pushes made at the same time. With another ``kind`` than the
    webhook, a message that sends anything counts as the alerts it lists
    (the webhook body's ``alerts``: what Alertmanager gives every notifier)."""
    cfg = load(sc, tmp_path, kind)
    f = Funnel(cfg)
    names = [r.name for r in cfg.receivers]
    events: dict[int, list] = {}
    for at, alerts in sc.pushes:
        events.setdefault(round(at / STEP), []).append(("push", alerts))
    for at, op, name, spec in sc.silences:
        events.setdefault(round(at / STEP), []).append((op, name, spec))
    reloads = {round(at / STEP) for at in sc.reloads}
    got: dict[int, list[tuple[float, list]]] = {}
    for k in range(round(sc.end() / STEP) + 1):
        now = k * STEP
        if k in reloads:  # as a worker's reload: the file re-read, the funnel rebuilt from JSON
            cfg = load(sc, tmp_path, kind)
            f = Funnel(cfg, json.loads(json.dumps(f.state)))
            f.restart_timers(now)
        pushes = [e for e in events.get(k, []) if e[0] == "push"]
        for _kind, alerts in order(pushes):
            for body in push_body(alerts, 0.0):
                f.ingest(body, now)
        for op, name, spec in (e for e in events.get(k, []) if e[0] != "push"):
            if op == "set":
                f.add_silence({"matchers": spec["matchers"], "createdBy": "t", "comment": "t",
                               "startsAt": format_time(spec["start"]),
                               "endsAt": format_time(spec["end"])}, now, silence_id=name)
            else:
                f.expire_silence(name, now)
        for msg in f.tick(now):
            rc = cfg.receiver(msg.receiver)
            reqs = build_requests(msg, rc)
            bodies = ([json.loads(r.body) for r in reqs] if kind == "webhook" else
                      [render_alertmanager(msg if rc.send_resolved else without_resolved(msg))]
                      if reqs else [])
            for body in bodies:
                got.setdefault(names.index(msg.receiver), []).append((now, body["alerts"]))
            f.delivered(msg.id, now)
        f.drain_ledger()
    assert f.counters()["balanced"]
    return got


def test_repeat_is_sent_at_the_next_flush_not_every_repeat_interval(tmp_path):
    """send_test.go TestRepeat: repeat_interval 1 ms under a 1 s
    group_interval gives one reminder per flush (dispatch.go
    ``aggrGroup.run`` flushes every group_interval; notify.go DedupStage
    ``needsUpdate`` sends an unchanged group once ``repeat_interval`` passed)."""
    assert check(REPEAT, play(REPEAT, tmp_path), 0.0) == []


def test_reminder_waits_for_the_flush_after_repeat_interval(tmp_path):
    """send_test.go TestBatching: news goes out at the group's next flush
    (every 1 s from 2.1), and the reminder after repeat_interval 4.9 s at the
    flush at 9.1, not at 4.1 + 4.9 = 9.0."""
    assert check(BATCHING, play(BATCHING, tmp_path), 0.0) == []


def test_alerts_merge_as_alertmanagers_store_merges_them(tmp_path):
    """send_test.go TestMergeAlerts: the earliest startsAt of several senders
    is kept, the newest annotations win, of several resolves the latest
    endsAt wins, and a new occurrence after a resolve does not merge
    (types/types.go ``Alert.Merge``, provider/mem ``Put``)."""
    assert check(MERGE_ALERTS, play(MERGE_ALERTS, tmp_path), 0.0) == []


def test_alert_firing_again_before_its_resolve_went_out_starts_anew(tmp_path):
    """send_test.go TestMergeAlerts ("Reactivate an alert after a previous
    occurrence has been resolved. No overlap, no merge must occur"),
    with the new occurrence arriving before the resolve's flush: the group
    tells it firing with its own start (provider/mem ``Put`` merges only
    overlapping alerts; the aggregation group holds the newer one)."""
    sc = Scenario("refire", MERGE_ALERTS.am_yml,
                  pushes=[(1, [{"labels": {"alertname": "test"}, "annotations": {},
                                "start": 1, "end": None}]),
                          (2.5, [{"labels": {"alertname": "test"}, "annotations": {},
                                  "start": 1, "end": 2.4}]),
                          (2.7, [{"labels": {"alertname": "test"}, "annotations": {},
                                  "start": 2.6, "end": None}])],
                  wants={0: [(2, 2.1, [{"labels": {"alertname": "test"}, "annotations": {},
                                        "start": 1, "end": None}]),
                             (3, 3.1, [{"labels": {"alertname": "test"}, "annotations": {},
                                        "start": 2.6, "end": None}]),
                             (4, 4.1, [{"labels": {"alertname": "test"}, "annotations": {},
                                        "start": 2.6, "end": None}])]})
    assert check(sc, play(sc, tmp_path), 0.0) == []


def test_receiver_without_send_resolved_is_not_told_of_resolves_alone(tmp_path):
    """send_test.go TestResolvedFilter: the send_resolved: false webhook gets
    nothing at 12 when the only change is v2's resolve (notify.go DedupStage
    ``needsUpdate``: a shrunk firing set is news only with ``SendResolved()``)."""
    assert check(RESOLVED_FILTER, play(RESOLVED_FILTER, tmp_path), 0.0) == []


@pytest.mark.parametrize("source_first", [True, False], ids=["source-first", "target-first"])
def test_resolve_of_an_alert_inhibited_all_its_life_is_told_whatever_the_order(source_first, tmp_path):
    """inhibit_test.go TestAlwaysInhibiting: InstanceDown, inhibited by
    JobDown all its life, is told resolved along with JobDown, whichever of
    the two resolves arrives first (notify.go MuteStage asks the inhibitor at
    the flush, when neither fires any more)."""
    order = (lambda p: p) if source_first else (lambda p: list(reversed(p)))
    assert check(ALWAYS_INHIBITING, play(ALWAYS_INHIBITING, tmp_path, order), 0.0) == []


@pytest.mark.parametrize("sc", [RESOLVED, INHIBITING, SILENCE_DELETE], ids=lambda s: s.name)
def test_other_scenarios_hold(sc, tmp_path):
    """send_test.go TestResolved, inhibit_test.go TestInhibiting,
    silence_test.go TestSilenceDelete, on the pure funnel."""
    assert check(sc, play(sc, tmp_path), 0.0) == []


@pytest.mark.parametrize("kind", ["pagerduty", "opsgenie"])
@pytest.mark.parametrize("sc", [REPEAT, BATCHING, MERGE_ALERTS, RESOLVED_FILTER, RESOLVED,
                                INHIBITING, SILENCE_DELETE, MERGE_ALERTS_WITH_ENDS_AT, SILENCING],
                         ids=lambda s: s.name)
def test_every_integration_is_told_what_the_webhook_is_told(sc, kind, tmp_path):
    """Alertmanager's notify pipeline hands each notifier of a receiver the same alerts (the
    whole group, notify/notify.go); a scenario's webhook rewritten as another integration
    gets the same alerts at the same times."""
    assert check(sc, play(sc, tmp_path, kind=kind), 0.0) == []


def test_a_reload_restarts_the_group_timer_and_sends_nothing_twice(tmp_path):
    """send_test.go TestReload: the reload at 3 stops Alertmanager's
    dispatcher and builds a new one (coordinator.go ``Reload``); test1, older
    than group_wait, flushes its new group at once (dispatch.go ``insert``),
    where the notification log (nflog, DedupStage) finds nothing new to send;
    test2 at 4 goes out with test1 at the next flush, 3 + group_interval 6 = 9,
    not at 2 + 6 = 8 on the timer from before the reload."""
    got = play(RELOAD, tmp_path)
    assert [round(at, 2) for at, _alerts in got[0]] == [2.0, 9.0]
    assert check(RELOAD, got, 0.0) == []


def _am(at: float, start: float | None, end: float | None = None, ann: str = ""):
    raw = {"labels": {"alertname": "test"}, "annotations": {"ann": ann} if ann else {}}
    if start is not None:
        raw["startsAt"] = format_time(start)
    if end is not None:
        raw["endsAt"] = format_time(end)
    return normalize(raw, at)


def test_the_earliest_start_of_several_senders_is_kept():
    """send_test.go TestMergeAlerts ("Another Prometheus server might be
    sending later but with an earlier start time"); types/types.go
    ``Alert.Merge``: "Always pick the earliest starting time"."""
    _, ep = decide(None, _am(1, 1.1), 1, 0)
    verdict, ep = decide(ep, _am(1.2, 1.0), 1.2, 0)
    assert verdict == "refresh" and ep["started_at"] == 1.0


def test_a_later_resolve_moves_the_end_and_takes_the_new_annotations():
    """send_test.go TestMergeAlerts ("If an alert is marked resolved twice,
    the latest point in time must be set as the eventual resolve time");
    types/types.go ``Alert.Merge``: the latest explicit end of two resolved
    alerts wins, the younger alert's annotations are kept."""
    _, ep = decide(None, _am(1, 1), 1, 0)
    _, ep = decide(ep, _am(4.6, 3, 4.5, "v2"), 4.6, 0)
    verdict, ep = decide(ep, _am(4.8, 2.9, 4.8, "v3"), 4.8, 0)
    assert verdict == "resolved" and (ep["started_at"], ep["resolved_at"]) == (1, 4.8)
    assert ep["alert"]["annotations"] == {"ann": "v3"}
    verdict, ep = decide(ep, _am(4.8, 2.9, 4.1, "v3"), 4.8, 0)
    assert verdict == "resolve_repeat" and ep["resolved_at"] == 4.8


def test_a_group_whose_first_alert_is_old_flushes_at_once(tmp_path):
    """Alertmanager 0.25 dispatch/dispatch.go ``aggrGroup.insert``: before
    the group's first flush, an alert whose ``StartsAt + GroupWait`` has
    passed makes the group flush at once (``next.Reset(0)``; later versions,
    the mirror's HEAD, do it for the alert that creates the group: "Alert is
    old enough for immediate flush"); then every group_interval from there."""
    slow = REPEAT.am_yml.replace("group_wait:      1s", "group_wait:      30s").replace(
        "group_interval:  1s", "group_interval:  60s").replace("repeat_interval: 1ms",
                                                                "repeat_interval: 1h")
    cfg = load(Scenario("old", slow, [], {0: []}), tmp_path)
    assert (cfg.timing.group_wait, cfg.timing.group_interval) == (30, 60)
    f = Funnel(cfg)
    f.ingest({"labels": {"alertname": "old"}, "startsAt": format_time(900.0)}, 1_000.0)
    [first] = f.tick(1_000.0)
    f.delivered(first.id, 1_000.0)
    f.ingest({"labels": {"alertname": "old", "pod": "b"}}, 1_010.0)
    assert f.tick(1_030.0) == [] and f.tick(1_059.0) == []
    assert [m.alert_count for m in f.tick(1_060.0)] == [2]


@pytest.mark.parametrize("sc", [MERGE_ALERTS_WITH_ENDS_AT, SILENCING, EMPTY_INHIBITION_RULE],
                         ids=lambda s: s.name)
def test_more_scenarios_hold(sc, tmp_path):
    """send_test.go TestMergeAlertsWithEndsAt (an explicit ``endsAt`` rules
    over the end a push without one got: types.go ``Alert.Merge``),
    silence_test.go TestSilencing (a silence mutes from its start to its
    end, judged at each flush: notify.go MuteStage), inhibit_test.go
    TestEmptyInhibitionRule (an empty rule mutes nothing), on the pure funnel."""
    assert check(sc, play(sc, tmp_path), 0.0) == []


def test_a_group_queued_behind_a_busy_receiver_tells_its_resolve(tmp_path, monkeypatch):
    """Alertmanager tells each group at the flush that decides it (no queue behind another
    group's notification), so a group whose alerts resolve while Plait's receiver still sends an
    earlier message was told firing there: its resolve is news, not a transient of a group never
    told (notify/dedup_stage.go ``needsUpdate`` has a log entry for it)."""
    path = tmp_path / "alertmanager.yml"
    path.write_text("route:\n  receiver: r\n  group_by: [alertname]\n  group_wait: 1s\n"
                    "  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n- name: r\n"
                    "  webhook_configs:\n  - url: http://127.0.0.1:9/hook\n")
    monkeypatch.setattr(dispatch, "LANES", 1)  # one lane: B waits behind A
    f = Funnel(load_alertmanager_config(path))
    # given A's message in flight (no answer yet) and B due behind it
    f.ingest({"labels": {"alertname": "A"}}, 0.0)
    [a] = f.tick(1.0)
    f.ingest({"labels": {"alertname": "B"}}, 1.0)
    assert f.tick(2.0) == []
    # when B resolves before the receiver is free, then A is delivered
    f.ingest({"labels": {"alertname": "B"}, "startsAt": format_time(1.0),
              "endsAt": format_time(2.5)}, 2.5)
    assert f.tick(3.0) == []
    f.delivered(a.id, 3.5)
    # then B's message tells its resolve, and nothing was dropped as transient
    [b] = f.tick(4.0)
    assert [(x["labels"]["alertname"], x["status"]) for x in b.alerts()] == [("B", "resolved")]
    assert f.counters()["transient_suppressed"] == 0


def test_a_receiver_tells_many_groups_at_once_through_its_lanes(tmp_path):
    """Alertmanager flushes each aggregation group on its own, so a receiver with many groups
    due gets them at once, not one after another: Plait sends one message per lane
    (``alerting.stages.dispatch.LANES``), a group always through the same lane."""
    path = tmp_path / "alertmanager.yml"
    path.write_text("route:\n  receiver: r\n  group_by: [alertname]\n  group_wait: 1s\n"
                    "  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n- name: r\n"
                    "  webhook_configs:\n  - url: http://127.0.0.1:9/hook\n")
    cfg = load_alertmanager_config(path)
    f = Funnel(cfg)
    for i in range(40):
        f.ingest({"labels": {"alertname": f"G{i}"}}, 0.0)
    told: dict[str, int] = {}
    for t in [float(t) for t in range(1, 13)]:
        msgs = f.tick(t)
        if t == 1.0:  # every lane sends at once, one group each
            assert dispatch.LANES // 2 < len(msgs) <= dispatch.LANES
        for m in msgs:
            [gid] = {s["group_id"] for s in m.sections}
            assert m.receiver == "r"
            told[gid] = told.get(gid, 0) + 1
            f.delivered(m.id, t)
        f = Funnel(cfg, json.loads(json.dumps(f.state)))  # as a restarted worker
    # then every group was told once, and the console sums the lanes into the receiver
    assert len(told) == 40 and set(told.values()) == {1}
    assert f.counters()["pending"] == 0 and f.counters()["balanced"]
    levels = receiver_levels(f.state, cfg, 12.0)
    assert list(levels) == ["r"] and levels["r"]["outbox"] == 0
