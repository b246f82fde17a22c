"""Inhibition across ``alerts.funnel`` partitions (docs/alerting.md, "Inhibition"): receivers
live on the partition their name hashes to, so Alertmanager's usual file (critical to a pager,
warnings to a chat receiver, a rule muting the warnings under a critical alert) puts source and
target on different partitions. The source reaches the target's partition as a ``sources``
item; these run the commands the API builds (:mod:`alerting.wire`) through
:class:`alerting.runner.FunnelRunner` and its table, as a worker does."""
from __future__ import annotations

from alerting.config import parse_config
from alerting.intake import format_time, normalize
from alerting.runner import FunnelRunner
from alerting.wire import (command, decided_commands, funnel_partition, pack_alerts, parse_command,
                           source_copies)

PARTITIONS = 4
CONFIG = parse_config({
    "receivers": [{"name": "pager", "url": "http://127.0.0.1:9/pager", "format": "alertmanager"},
                  {"name": "slack", "url": "http://127.0.0.1:9/slack", "format": "alertmanager"}],
    "route": {"receiver": "slack", "routes": [{"receiver": "pager",
                                                "matchers": ['severity="critical"']}]},
    "grouping": {"group_by": ["alertname"]},
    "timing": {"group_wait": 30, "group_interval": 30, "repeat_interval": 3600,
               "resolve_timeout": 300},
    "inhibit_rules": [{"source_matchers": ['severity="critical"'],
                       "target_matchers": ['severity="warning"'], "equal": ["cluster"]}],
})
PAGER, SLACK = (funnel_partition(n, PARTITIONS) for n in ("pager", "slack"))


class Worker:
    """Every partition of one ``alerts.funnel`` on one runner; ``sent`` the messages."""

    def __init__(self, table: dict | None = None) -> None:
        self.table = {} if table is None else table
        self.runner = FunnelRunner(CONFIG, self.table, lambda: self.now)
        self.now, self.offsets, self.sent = 0.0, [0] * PARTITIONS, []

    def apply(self, partition: int, value: bytes) -> None:
        self.offsets[partition] += 1
        fx = self.runner.apply(partition, self.offsets[partition], parse_command(value))
        self.sent += [(m.receiver, [a["labels"]["severity"] for a in m.alerts()])
                      for m in fx.messages]
        for m in fx.messages:  # delivered at once
            self.offsets[partition] += 1
            self.runner.apply(partition, self.offsets[partition],
                              {"kind": "result", "message_id": m.id, "ok": True})

    def post(self, labels: dict[str, str], ends_at: float | None = None) -> None:
        """What ``POST /api/v2/alerts`` sends for one alert: sources first, then the alert."""
        alert = normalize({"labels": labels, "startsAt": format_time(self.now),
                           **({"endsAt": format_time(ends_at)} if ends_at is not None else {})},
                          self.now)
        decided = decided_commands(CONFIG, alert, {"v": 1, "kind": "alert", "id": f"r{self.now}",
                                                  "received_at": self.now})
        items = [(funnel_partition(r, PARTITIONS), command(**c)) for r, c in decided]
        copies = source_copies(CONFIG, alert, decided[0][1]["fp"], {p for p, _ in items},
                               lambda r: funnel_partition(r, PARTITIONS))
        for p, data in copies.items():
            [value] = pack_alerts([(None, data)], kind="sources")
            self.apply(p, value)
        for p, data in items:
            [value] = pack_alerts([(None, data)])
            self.apply(p, value)

    def tick(self, at: float) -> None:
        self.now = at
        for p in range(PARTITIONS):
            self.apply(p, command("tick"))

    def suppressed(self) -> dict[str, list[str]]:
        """severity -> inhibitedBy of each open alert, over every partition."""
        return {a["labels"]["severity"]: a["status"]["inhibitedBy"]
                for p in range(PARTITIONS) for a in self.runner.state(p).funnel.open_alerts(self.now)}


CRITICAL = {"alertname": "DiskFull", "cluster": "eu1", "severity": "critical"}
WARNING = {"alertname": "DiskFull", "cluster": "eu1", "severity": "warning"}


def test_the_usual_file_puts_source_and_target_on_two_partitions():
    assert PAGER != SLACK


def test_a_critical_alert_mutes_its_warning_on_another_partition_until_it_resolves():
    w = Worker()
    # given a critical alert (pager's partition) and its warning (slack's), posted together
    w.post(CRITICAL)
    w.post(WARNING)
    # when their groups are due
    w.tick(31)
    # then only the critical one is sent, and the warning shows inhibited by it
    assert w.sent == [("pager", ["critical"])]
    critical_fp = w.runner.state(PAGER).funnel.open_alerts(w.now)[0]["fingerprint"]
    assert w.suppressed() == {"critical": [], "warning": [critical_fp]}
    # when the critical alert resolves
    w.now = 40
    w.post(CRITICAL, ends_at=40)
    w.tick(100)
    # then the warning is free, and is sent with the resolve
    assert sorted(w.sent[1:]) == [("pager", ["critical"]), ("slack", ["warning"])]
    assert w.suppressed() == {"warning": []}


def test_a_source_that_is_not_resent_stops_muting_at_its_expiry_as_an_episode():
    w = Worker()
    w.post(CRITICAL, ends_at=200)  # Prometheus's endsAt: the source lives until 200 unless resent
    w.post(WARNING, ends_at=1000)
    w.tick(31)
    assert w.sent == [("pager", ["critical"])]
    w.tick(150)
    assert [r for r, _ in w.sent] == ["pager"]
    # past the critical alert's endsAt the warning's partition drops its source and sends it
    w.tick(201)
    w.tick(240)
    assert ("slack", ["warning"]) in w.sent
    assert w.runner.state(SLACK).funnel.state["foreign"] == {}


def test_the_sources_of_other_partitions_outlive_a_restart():
    w = Worker()
    w.post(CRITICAL)
    # when the worker restarts from its table before the warning arrives
    again = Worker(w.table)
    again.now, again.offsets = w.now, list(w.offsets)
    again.post(WARNING)
    again.tick(31)
    # then the warning is still muted
    assert all(receiver == "pager" for receiver, _ in again.sent)
    assert again.suppressed()["warning"] != []


def test_only_a_source_is_copied_and_only_to_partitions_without_its_routes():
    def copies(labels: dict[str, str]) -> dict[int, bytes]:
        alert = normalize({"labels": labels}, 0.0)
        [(receiver, cmd)] = decided_commands(CONFIG, alert, {"id": "r", "received_at": 0.0})
        return source_copies(CONFIG, alert, cmd["fp"], {funnel_partition(receiver, PARTITIONS)},
                             lambda r: funnel_partition(r, PARTITIONS))

    assert copies(WARNING) == {}
    assert list(copies(CRITICAL)) == [SLACK]
    no_rules = CONFIG.model_copy(update={"inhibit_rules": []})
    alert = normalize({"labels": CRITICAL}, 0.0)
    assert source_copies(no_rules, alert, "f", set(), lambda r: 9) == {}


def test_a_source_whose_routes_moved_here_is_its_own_and_its_resolve_outlives_a_restart():
    w = Worker()
    w.post(CRITICAL)  # a source copy on slack's partition
    assert w.runner.state(SLACK).funnel.state["foreign"]
    # when a reload moves the critical route to slack (no sub-route: the root's receiver), and the
    # alert fires there, then resolves
    moved = CONFIG.model_copy(update={"route": CONFIG.route.model_copy(update={"routes": []})})
    for ends_at in (None, w.now):
        alert = normalize({"labels": CRITICAL, "startsAt": format_time(w.now),
                           **({"endsAt": format_time(ends_at)} if ends_at is not None else {})},
                          w.now)
        [(receiver, cmd)] = decided_commands(moved, alert, {"v": 1, "kind": "alert", "id": "m",
                                                            "received_at": w.now})
        assert receiver == "slack"
        [value] = pack_alerts([(None, command(**cmd))])
        w.apply(SLACK, value)
    # then the copy is gone with it, and after a restart the warning is not muted by it
    assert w.runner.state(SLACK).funnel.state["foreign"] == {}
    again = Worker(w.table)
    again.now, again.offsets = w.now, list(w.offsets)
    again.post(WARNING)
    again.tick(31)
    again.tick(62)
    assert any(r == "slack" and "warning" in sev for r, sev in again.sent), again.sent


def test_a_forged_sources_command_is_skipped_and_the_partition_goes_on():
    w = Worker()
    for items in (7, [7], [{"fp": 1, "labels": {}}], [{"fp": "f", "labels": {"a": 1}}]):
        w.apply(SLACK, command("sources", items=items))
    assert w.runner.state(SLACK).funnel.state["foreign"] == {}
    w.post(WARNING)
    w.tick(31)
    assert w.sent == [("slack", ["warning"])]
