"""Alertmanager's acceptance scenarios (``tests/am_scenarios.py``) as
black-box tests of a running Plait: alerts POSTed to ``/api/v2/alerts``
(silences to ``/api/v2/silences``) at the scenario's times, the webhook's
arrivals checked as Alertmanager's ``Collector.Check`` checks them, at
Alertmanager's tolerance (``am_scenarios.TOLERANCE``, 150 ms, for times in
the payload) and the scenario's ``Between(lo, hi)`` windows widened by
:data:`SLACK`.

One stack on the real broker serves the module. Each scenario puts its
alertmanager.yml in use verbatim (``PLAIT_ALERTMANAGER_CONFIG``, the webhook
URLs filled in by :func:`am_scenarios.config_text`, ``POST /-/reload`` and
SIGHUP), without a ``plait:`` block: Plait's extras are out of the way as in
Alertmanager (no token bucket, no dedupe cooldown). Afterwards its alerts are
resolved and the test waits until none is pending, so the next scenario
starts with an empty funnel, as a new Alertmanager does."""
from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from alert_e2e_support import Receiver, funnel_stack, wait_until
from am_scenarios import (ALWAYS_INHIBITING, BATCHING, INHIBITING, MERGE_ALERTS, RELOAD,
                          REPEAT, RESOLVED, RESOLVED_FILTER, RETRY, SILENCE_DELETE, Scenario,
                          check, config_text, push_body)

from alerting.intake import format_time

pytestmark = pytest.mark.integration

TOKEN = "am-acceptance-token-" + "k" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Windows are Alertmanager's (``Between(lo, hi)``, about 0.5 s after each
#: flush), widened by this much at their end (seconds). A flush's message
#: crosses the broker twice (the tick command, the "sending" state) before
#: its POST: warm, 30-170 ms after the flush time here, the group's first
#: message 240-440 ms and more (the webhook client is made on first use).
#: On this shared 2-core machine (load average 12-18 while other suites
#: run) 0.5 s is the tightest widening that passed three runs in a row;
#: 0.15 (Alertmanager's tolerance) failed a group's first message
#: (TestResolvedFilter, later than 2.65 s for the flush at 2).
SLACK = 0.5
#: webhook paths: collector ``i`` is ``/i``
COLLECTORS = 2


class Plait:
    """The module's stack, its alertmanager.yml and the webhook receiver."""

    def __init__(self, stack, config: Path, receiver: Receiver) -> None:
        self.stack, self.config, self.receiver = stack, config, receiver
        self.client = httpx.Client(base_url=stack.api_url, headers=AUTH, timeout=10)
        self._log = stack.data_dir / "logs" / "worker-0.log"

    def urls(self) -> list[str]:
        return urls(self.receiver)

    def reload(self) -> None:
        """Re-read the file: the API by ``POST /-/reload``, the worker by
        SIGHUP; returns once the worker logged the configuration in use."""
        resp = self.client.post("/-/reload")
        assert resp.status_code == 200, resp.text
        seen = self._log.read_text().count("configuration reloaded")
        for proc in self.stack.workers().values():
            proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self._log.read_text().count("configuration reloaded") > seen, 30,
                   "the worker to reload its configuration", every=0.1)

    def use(self, text: str) -> None:
        """Put alertmanager.yml ``text`` in use and forget what the receiver got."""
        self.config.write_text(text)
        self.reload()
        self.receiver.answer = None
        with self.receiver.lock:
            self.receiver.hits.clear()

    def counters(self) -> dict:
        return self.client.get("/alerts/counters").json()["data"]

    def resolve_all(self, label_sets: list[dict[str, str]]) -> None:
        """Resolve every alert of ``label_sets`` now and wait until the funnel
        holds no pending alert (the resolves told or dropped, their groups
        closed)."""
        self.receiver.answer = None
        sets = {tuple(sorted(ls.items())) for ls in label_sets}
        before = self.counters()["received"]
        now = time.time()
        resp = self.client.post("/api/v2/alerts", json=[
            {"labels": dict(ls), "startsAt": format_time(now - 1), "endsAt": format_time(now)}
            for ls in sets])
        assert resp.status_code == 200, resp.text
        wait_until(lambda: (lambda c: c["received"] >= before + len(sets) and c["pending"] == 0)(
            self.counters()), 60, "the funnel to settle every alert of the scenario")

    def no_alerts(self) -> None:
        """Wait until ``GET /api/v2/alerts`` lists nothing (the read model
        follows the funnel within ~2 s)."""
        wait_until(lambda: self.client.get("/api/v2/alerts").json() == [], 30,
                   "no alert listed")


def urls(receiver: Receiver) -> list[str]:
    """The collectors' webhook URLs."""
    return [receiver.url(f"/{i}") for i in range(COLLECTORS)]


@pytest.fixture(scope="module")
def plait(make_module_stack, tmp_path_factory):
    receiver = Receiver().start()
    cfg = tmp_path_factory.mktemp("am") / "alertmanager.yml"
    cfg.write_text(config_text(REPEAT, urls(receiver)[:1]))
    stack = funnel_stack(make_module_stack, cfg, setting="PLAIT_ALERTMANAGER_CONFIG",
                         PLAIT_ALERTMANAGER_TOKEN=TOKEN)
    p = Plait(stack, cfg, receiver)
    warm_up(p)
    yield p
    p.client.close()
    receiver.stop()


def warm_up(p: Plait) -> None:
    """Take the cold start out of the measurement (Alertmanager's run starts
    warm): resolved alerts nobody saw fire go through the API, the router and
    the funnel and are sent nowhere (Alertmanager would not send them
    either: DedupStage sends nothing for a group that never fired)."""
    before = p.counters()["received"]
    for i in range(5):
        now = time.time()
        resp = p.client.post("/api/v2/alerts", json=[{
            "labels": {"alertname": "WarmUp", "n": str(i)},
            "startsAt": format_time(now - 2), "endsAt": format_time(now - 1)}])
        assert resp.status_code == 200, resp.text
    wait_until(lambda: p.counters()["received"] >= before + 5, 30,
               "the warm-up alerts to reach the funnel")


def play(p: Plait, sc: Scenario) -> tuple[dict, float]:
    """Make the scenario's pushes, silence changes and reloads at their times
    (from a start 1 s ahead; a collector in ``sc.fails`` answers 500 until its
    time) and wait for its end; returns what each collector accepted (index
    -> [(arrival from the start, webhook alerts)]) and the start."""
    client = httpx.Client(base_url=p.stack.api_url, headers=AUTH, timeout=10)
    t0 = time.time() + 1.0
    fails = {f"/{ci}": t0 + until for ci, until in sc.fails.items()}
    p.receiver.answer = lambda path: 500 if time.time() < fails.get(path, 0) else 200
    ids: dict[str, str] = {}
    actions = ([(at, "push", alerts) for at, alerts in sc.pushes]
               + [(at, op, (name, spec)) for at, op, name, spec in sc.silences]
               + [(at, "reload", None) for at in sc.reloads])
    errors: list[str] = []

    def act(at: float, op: str, arg) -> None:
        time.sleep(max(0.0, t0 + at - time.time()))
        if op == "reload":
            p.reload()
            return
        if op == "push":
            resp = client.post("/api/v2/alerts", json=push_body(arg, t0))
        elif op == "set":
            name, spec = arg
            resp = client.post("/api/v2/silences", json={
                "matchers": spec["am"],
                "startsAt": format_time(t0 + spec["start"]), "endsAt": format_time(t0 + spec["end"]),
                "createdBy": "acceptance", "comment": sc.name})
            ids[name] = resp.json().get("silenceID", "") if resp.status_code == 200 else ""
        else:
            resp = client.delete(f"/api/v2/silence/{ids[arg[0]]}")
        if resp.status_code != 200:
            errors.append(f"{op} at {at}: {resp.status_code} {resp.text}")

    threads = [threading.Thread(target=act, args=a) for a in sorted(actions, key=lambda a: a[0])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until(lambda: time.time() >= t0 + sc.end() + SLACK, sc.end() + 5, "the scenario's end")
    client.close()
    assert errors == []
    got: dict[int, list] = {}
    for h in p.receiver.accepted():
        got.setdefault(int(h.path.strip("/")), []).append((h.at - t0, h.body["alerts"]))
    return got, t0


def widened(sc: Scenario) -> Scenario:
    return Scenario(sc.name, sc.am_yml, sc.pushes,
                    {ci: [(lo, hi + SLACK, a) for lo, hi, a in ws] for ci, ws in sc.wants.items()},
                    sc.silences, sc.reloads, sc.fails)


def labels_of(sc: Scenario) -> list[dict[str, str]]:
    return [a["labels"] for _at, alerts in sc.pushes for a in alerts]


@pytest.mark.parametrize("sc", [
    REPEAT, BATCHING, SILENCE_DELETE, RESOLVED_FILTER, ALWAYS_INHIBITING, MERGE_ALERTS, RESOLVED,
    INHIBITING,
    pytest.param(RETRY, marks=pytest.mark.xfail(strict=True, reason=(
        "Plait retries a failed message on its own backoff (delivery.backoff_initial 1 s, "
        "doubling), so the failing webhook gets the group at the retry after 4.5 (about 5), "
        "not at the flush at 6; Alertmanager only logs this check (t.Log(c.Check()))"))),
    pytest.param(RELOAD, marks=pytest.mark.xfail(strict=True, reason=(
        "a reload keeps the group's timers (docs/alerting.md, Differences from "
        "Alertmanager: Restart): the flush after the one at 2 is at 8, not 3 + 6"))),
], ids=lambda s: s.name)
def test_alertmanager_acceptance_scenario(plait, sc):
    """send_test.go TestMergeAlerts, TestRepeat, TestRetry, TestBatching,
    TestResolved, TestResolvedFilter and TestReload, silence_test.go
    TestSilenceDelete, inhibit_test.go TestInhibiting and
    TestAlwaysInhibiting: the webhook gets what Alertmanager's collector
    wants, in its windows (plus :data:`SLACK`)."""
    plait.use(config_text(sc, plait.urls()[:len(sc.wants)]))
    try:
        got, t0 = play(plait, sc)
        errors = check(widened(sc), got, t0)
        assert not errors, "\n".join(errors)
    finally:
        plait.resolve_all(labels_of(sc))
