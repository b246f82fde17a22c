"""A configuration reload restarts the group timers as Alertmanager's does
(dispatch/dispatch.go: the reload builds a new dispatcher, whose new groups
flush at once when one of their alerts is older than group_wait, else
group_wait later, then every group_interval; the notification log keeps an
unchanged group from being sent again), once per reload and durably: the
reload time is stored with the restarted timers (docs/alerting.md,
"Reload")."""
from __future__ import annotations

import copy

from alerting.amconfig import translate
from alerting.funnel import Funnel
from alerting.intake import format_time
from alerting.model import Alert
from alerting.runner import FunnelRunner
from alerting.wire import RawAlert, route_alert

T0 = 1_000_000.0


def am_config(group_interval: str = "6s", nested: bool = False):
    """send_test.go TestReload's alertmanager.yml (``nested``: its route as a
    child route of a root that catches nothing else)."""
    route = {"receiver": "default", "group_by": [], "group_wait": "1s",
             "group_interval": group_interval, "repeat_interval": "10m"}
    if nested:
        route = {"receiver": "default", "routes": [dict(route, matchers=['alertname=~"test.*"'])]}
    return translate({"route": route, "receivers": [
        {"name": "default", "webhook_configs": [{"url": "http://127.0.0.1:9/hook"}]}]})


class Worker:
    """A funnel runner on ``table`` (partition 0) with a settable clock,
    ``reloaded_at`` (seconds from :data:`T0`) as a worker that reloaded then;
    every message is delivered at once."""

    def __init__(self, table: dict, config, reloaded_at: float | None = None,
                 offset: int = 0) -> None:
        self.now, self.config, self.table = T0, config, table
        self.runner = FunnelRunner(config, table, clock=lambda: self.now)
        if reloaded_at is not None:
            self.reload(reloaded_at)
        self.offset = offset
        self.sent: list[tuple[float, list[str]]] = []  # (at from T0, alertnames listed, sorted)

    def reload(self, at: float) -> None:
        """What :meth:`alerting.agents.AlertingService.reload` does to the runner."""
        self.runner.config = self.config
        self.runner.reloaded_at = T0 + at
        self.runner.forget(0)

    def apply(self, cmd: dict) -> None:
        fx = self.runner.apply_batch(0, [(self.offset, cmd)])
        self.offset += 1
        for m in fx.messages:
            self.sent.append((round(self.now - T0, 2),
                              sorted(a["labels"]["alertname"] for s in m.sections for a in s["alerts"])))
            self.apply({"kind": "result", "message_id": m.id, "ok": True})

    def push(self, name: str, start: float) -> None:
        body = {"labels": {"alertname": name}, "startsAt": format_time(T0 + start)}
        self.apply(route_alert(self.config, RawAlert(f"{name}:{start}", body, self.now))[1])

    def run(self, until: float, pushes: dict[float, str] = {}, step: float = 0.1) -> None:
        """Tick every ``step`` s up to ``until`` (s from T0); ``pushes``: alert
        ``name`` started and pushed at ``t``, before that tick."""
        k = round((self.now - T0) / step) + 1
        while k * step <= until + 1e-9:
            self.now = T0 + k * step
            for at, name in pushes.items():
                if abs(at - k * step) < 1e-9:
                    self.push(name, at)
            self.apply({"kind": "tick"})
            k += 1

    def group(self) -> dict:
        [g] = self.runner.state(0).funnel.state["groups"].values()
        return g


def test_reload_at_3_moves_the_next_flush_from_8_to_9_and_sends_nothing_twice():
    # given TestReload: test1 at 1, flushed at 2 (group_wait 1 s, group_interval 6 s)
    w = Worker({}, am_config())
    w.run(2.95, {1.0: "test1"})
    assert w.sent == [(2.0, ["test1"])]
    # when the worker reloads at 3 (the same file) and test2 comes at 4
    w.reload(3.0)
    w.run(10.0, {4.0: "test2"})
    # then the flush at 3 sends nothing new, the next is at 3 + 6, not 2 + 6
    assert w.sent == [(2.0, ["test1"]), (9.0, ["test1", "test2"])]
    assert w.runner.state(0).funnel.state["reloaded_at"] == T0 + 3.0


def test_a_restart_without_reload_keeps_the_timer():
    # given test1 flushed at 2 on a worker that stops at 3
    table: dict = {}
    w = Worker(table, am_config())
    w.run(3.0, {1.0: "test1"})
    # when another worker (no reload) takes the partition at 3
    b = Worker(table, am_config(), offset=w.offset)
    b.now = w.now
    b.run(10.0, {4.0: "test2"})
    # then the timer runs on from the table: the flush after 2 is at 8
    assert b.sent == [(8.0, ["test1", "test2"])]


def test_restarted_timers_are_stored_and_restarted_once_per_reload():
    # given a worker that reloaded at 3 and applied the restart with its tick at 3.1
    table: dict = {}
    w = Worker(table, am_config())
    w.run(3.0, {1.0: "test1"})
    before = copy.deepcopy(table)  # the table before the restart's batch
    w.reload(3.0)
    w.run(3.1)
    # when it dies and a worker that reloaded earlier (2.5), or not at all, takes over
    for reloaded in (None, 2.5):
        b = Worker(dict(table), am_config(), reloaded, offset=w.offset)
        b.now = w.now
        b.run(10.0, {4.0: "test2"})
        # then the timers restarted at 3 run on: the next flush is at 9
        assert b.sent == [(9.0, ["test1", "test2"])], reloaded
    # and when the restart's batch was never stored (killed before the changelog
    # acked it), the worker that takes over redoes the batch on the old timer:
    # no message lost, none doubled
    c = Worker(before, am_config(), offset=w.offset - 1)
    c.now = w.now
    c.run(10.0, {4.0: "test2"})
    assert c.sent == [(8.0, ["test1", "test2"])]


def test_a_batch_replayed_after_the_restart_changes_nothing():
    w = Worker({}, am_config())
    w.run(3.0, {1.0: "test1"})
    w.reload(3.0)
    w.run(3.1)
    state = copy.deepcopy(w.runner.state(0).funnel.state)
    fx = w.runner.apply_batch(0, [(w.offset - 1, {"kind": "tick"})])
    assert fx.skipped and w.runner.state(0).funnel.state == state
    # a new funnel from the table, the same reload: nothing restarts again
    w.runner.forget(0)
    w.run(3.2)
    assert w.group()["first"] == T0 + 3.0


def test_a_worker_that_reloaded_later_restarts_the_timers_it_takes_over():
    # given timers restarted at 3 by one worker, test2 in the group since 4
    table: dict = {}
    w = Worker(table, am_config(), reloaded_at=3.0)
    w.run(4.5, {1.0: "test1", 4.0: "test2"})
    assert w.sent == [(2.0, ["test1"])]
    # when a worker that reloaded at 5 takes the partition at 5.5
    b = Worker(table, am_config(), reloaded_at=5.0, offset=w.offset)
    b.now = T0 + 5.4
    b.run(12.0)
    # then its new group flushes at once (test1 is older than group_wait) with
    # test2's news, and every 6 s from 5 after that
    assert b.sent == [(5.5, ["test1", "test2"])]
    assert b.group()["first"] == T0 + 5.0


def test_a_group_of_young_alerts_flushes_group_wait_after_the_reload():
    # given test1 started 0.5 s before a reload at 3 (group_wait 1 s)
    w = Worker({}, am_config())
    w.run(3.0, {2.5: "test1"})
    assert w.sent == []
    w.reload(3.0)
    # then its group's first flush is 3 + 1, not 2.5 + 1
    w.run(4.5)
    assert w.sent == [(4.0, ["test1"])]


def test_a_group_opened_after_the_reload_keeps_its_timer():
    # given a group opened at 5 on a worker that did not reload
    table: dict = {}
    w = Worker(table, am_config())
    w.run(5.2, {5.0: "test1"})
    assert w.sent == []
    # when a worker that reloaded at 4 takes it over
    b = Worker(table, am_config(), reloaded_at=4.0, offset=w.offset)
    b.now = w.now
    b.run(7.0)
    # then the group is new since that reload: it flushes at 5 + group_wait
    assert b.sent == [(6.0, ["test1"])]


def test_after_the_restart_an_old_alert_flushes_the_group_at_once():
    """dispatch.go ``insert``: before the new group's first flush an alert
    older than group_wait resets its timer to 0, whether or not the group
    sent before the reload."""
    from alerting.group import new_group, note_insert, restart_timer

    g = new_group("g", "default", {}, T0)
    g.update(last_sent_at=T0 + 1.0, members={"a": {"started_at": T0 + 2.9}})
    assert restart_timer(g, T0 + 3.0, 1.0) and g["first"] == T0 + 4.0
    note_insert(g, T0, 1.0, T0 + 3.5)
    assert g["first"] == T0 + 3.5
    # once flushed after the restart, an old alert waits for the next flush
    g["last_sent_at"] = T0 + 3.5
    note_insert(g, T0, 1.0, T0 + 5.0)
    assert g["first"] == T0 + 3.5


def test_a_reload_gives_the_open_groups_of_a_route_its_new_timing():
    # given a group of a child route with group_interval 6 s, flushed at 2
    f = Funnel(am_config(nested=True))
    f.ingest({"labels": {"alertname": "test1"}, "startsAt": format_time(T0 + 1)}, T0 + 1)
    [m] = f.tick(T0 + 2)
    f.delivered(m.id, T0 + 2)
    # when the file changes it to 2 s and the worker reloads at 3
    f = Funnel(am_config("2s", nested=True), copy.deepcopy(f.state))
    [gid] = f.restart_timers(T0 + 3)
    assert f.restart_timers(T0 + 3) == []  # once per reload
    # then the group flushes every 2 s from 3, as Alertmanager's new group does
    assert f.state["groups"][gid]["timing"][:2] == [1.0, 2.0]
    f.ingest({"labels": {"alertname": "test2"}, "startsAt": format_time(T0 + 4)}, T0 + 4)
    assert f.tick(T0 + 4.9) == []
    assert [m.alert_count for m in f.tick(T0 + 5)] == [2]


def muting_config(dummy_first: bool):
    """A route muted all day (test="mute", group_interval 7s) and, when ``dummy_first``, a
    sibling inserted before it: the reload of the side-by-side review."""
    hook = lambda n: {"name": n, "webhook_configs": [{"url": f"http://127.0.0.1:9/{n}"}]}  # noqa: E731
    routes = [{"matchers": ['test="mute"'], "receiver": "mute-hook", "group_interval": "7s",
               "mute_time_intervals": ["always"]}]
    if dummy_first:
        routes.insert(0, {"matchers": ['test="dummy"'], "receiver": "default"})
    return translate({
        "route": {"receiver": "default", "group_by": ["test"], "group_wait": "1s",
                  "group_interval": "6s", "repeat_interval": "10m", "routes": routes},
        "receivers": [hook("default"), hook("mute-hook")],
        "time_intervals": [{"name": "always", "time_intervals": [
            {"times": [{"start_time": "00:00", "end_time": "24:00"}]}]}]})


def test_a_reload_that_moves_a_route_leaves_its_groups_on_it():
    # given a group held by its route's mute interval
    f = Funnel(muting_config(dummy_first=False))
    f.ingest({"labels": {"alertname": "M1", "test": "mute"}, "startsAt": format_time(T0 + 1)},
             T0 + 1)
    assert f.tick(T0 + 2) == []
    # when a sibling is inserted before its route and the worker reloads
    f = Funnel(muting_config(dummy_first=True), copy.deepcopy(f.state))
    f.restart_timers(T0 + 3)
    # then the group is still its route's: muted, on its timing, and a new alert of the same
    # group labels joins it, as Alertmanager's route key (its matchers) keeps the group
    assert f.tick(T0 + 4) == [] and f.tick(T0 + 20) == []
    f.ingest({"labels": {"alertname": "M2", "test": "mute"}, "startsAt": format_time(T0 + 21)},
             T0 + 21)
    assert f.tick(T0 + 30) == []
    [g] = f.state["groups"].values()
    assert g["receiver"] == "mute-hook" and g["timing"][1] == 7.0 and len(g["members"]) == 2


def stored_by_place() -> tuple[dict, str]:
    """``(state, group id)``: a group of muting_config's muted route (alert M1) as state written
    before groups and episodes kept their route's key: its id hashed from the route's place."""
    from alerting.group import group_key

    f = Funnel(muting_config(dummy_first=False))
    f.ingest({"labels": {"alertname": "M1", "test": "mute"}, "startsAt": format_time(T0 + 1)},
             T0 + 1)
    [g] = f.state["groups"].values()
    [ep] = f.state["episodes"].values()
    legacy, _ = group_key(f"mute-hook@{g['route']}", Alert.from_dict(ep["alert"]), ["test"])
    del g["route_key"]
    del ep["route_key"]
    g["id"] = ep["group"] = legacy
    f.state["groups"] = {legacy: g}
    return copy.deepcopy(f.state), legacy


def test_a_group_opened_by_place_before_route_keys_is_joined_and_still_muted():
    state, legacy = stored_by_place()
    f = Funnel(muting_config(dummy_first=False), state)
    # when a new alert of the same group labels comes
    f.ingest({"labels": {"alertname": "M2", "test": "mute"}, "startsAt": format_time(T0 + 5)},
             T0 + 5)
    # then it joins that group, which its route still mutes
    assert list(f.state["groups"]) == [legacy] and len(f.state["groups"][legacy]["members"]) == 2
    assert f.tick(T0 + 30) == []


def test_a_reload_gives_a_group_by_place_its_route_key_from_the_previous_file():
    state, legacy = stored_by_place()
    # when a reload inserts a sibling before its route
    f = Funnel(muting_config(dummy_first=True), state)
    assert legacy in f.restart_timers(T0 + 3, muting_config(dummy_first=False))
    # then the group is its route's: muted, on its timing (a new alert of the same labels opens
    # a group of the route's key: docs/alerting.md, "Bring your alertmanager.yml")
    assert f.tick(T0 + 30) == [] and f.state["groups"][legacy]["timing"][1] == 7.0


def test_a_silenced_alert_joins_its_own_routes_group_after_a_reload_moves_it():
    f = Funnel(muting_config(dummy_first=False))
    f.add_silence({"matchers": [{"name": "alertname", "value": "S"}], "author": "a",
                   "comment": "c", "ends_at": T0 + 10}, T0, "s1")
    f.ingest({"labels": {"alertname": "S", "test": "mute"}, "startsAt": format_time(T0 + 1)},
             T0 + 1)
    assert not f.state["groups"]
    f = Funnel(muting_config(dummy_first=True), copy.deepcopy(f.state))
    f.restart_timers(T0 + 3)
    f.tick(T0 + 11)  # the silence ended: the alert joins its group
    [g] = f.state["groups"].values()
    assert g["receiver"] == "mute-hook"
