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

import dataclasses
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml
from alert_e2e_support import Receiver, funnel_stack, run_amtool, wait_until
from am_scenarios import (ALWAYS_INHIBITING, API_AM, BATCHING, EMPTY_INHIBITION_RULE,
                          INHIBITING, MERGE_ALERTS, MERGE_ALERTS_WITH_ENDS_AT, RELOAD, REPEAT,
                          RESOLVED, RESOLVED_FILTER, RETRY_RECOVERED, SILENCE_DELETE, SILENCING,
                          TOLERANCE, UTF8_ROUTE, WEBHOOK_TIMEOUT, Scenario, check, config_text,
                          push_body)

from alerting.intake import format_time

pytestmark = pytest.mark.integration

TOKEN = "am-acceptance-token-" + "k" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Windows are Alertmanager's (``Between(lo, hi)``, about 0.5 s after each
#: flush), widened at their end by Alertmanager's tolerance for times
#: (seconds): a flush's message crosses the broker twice (the tick command,
#: the "sending" state) before its POST, 30-170 ms after the flush time here.
SLACK = TOLERANCE
#: webhook paths: collector ``i`` is ``/i``
COLLECTORS = 2


def drained(text: str) -> str:
    """alertmanager.yml ``text`` with every route's group_wait and
    group_interval at 100 ms: what a scenario's alerts are resolved under,
    so their groups close at once (the reload that puts it in use restarts
    the open groups' timers with these)."""
    data = yaml.safe_load(text)
    routes = [data["route"]]
    while routes:
        r = routes.pop()
        r.update(group_wait="100ms", group_interval="100ms")
        routes += r.get("routes") or []
    return yaml.safe_dump(data, allow_unicode=True)


class Plait:
    """The module's stack, its alertmanager.yml and the webhook receiver."""

    def __init__(self, stack, config: Path, receiver: Receiver) -> None:
        self.stack, self.config, self.receiver = stack, config, receiver
        self.text = config.read_text()
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
        self.text = text
        self.config.write_text(text)
        self.reload()
        self.receiver.answer = None
        with self.receiver.lock:
            self.receiver.hits.clear()

    def counters(self) -> dict:
        return self.client.get("/alerts/counters").json()["data"]

    def resolve_all(self, label_sets: list[dict[str, str]], settle: bool = True) -> None:
        """Resolve every alert of ``label_sets`` now (routed as the scenario
        routes them: the same episodes); with ``settle``, then put
        :func:`drained` in use and wait until the funnel holds no pending
        alert (the resolves settled, their groups closed). Without: a group
        whose next flush is minutes away keeps its resolves (until a reload
        restarts its timer); the alerts are no longer listed and the module's
        later tests use other receivers or only read the API."""
        self.receiver.answer = None
        sets = {tuple(sorted(ls.items())) for ls in label_sets}
        before = self.counters()["received"]
        now = time.time()
        resp = self.client.post("/api/v2/alerts", json=[
            {"labels": dict(ls), "startsAt": format_time(now - 1), "endsAt": format_time(now)}
            for ls in sets])
        assert resp.status_code == 200, resp.text
        seen: list[dict] = [{}]

        def counted(pending: bool) -> bool:
            c = seen[0] = self.counters()
            return c["received"] >= before + len(sets) and (not pending or c["pending"] == 0)

        try:
            wait_until(lambda: counted(False), 30, "the resolves to reach the funnel")
            if not settle:
                return
            self.use(drained(self.text))
            wait_until(lambda: counted(True), 30, "the funnel to settle every alert")
        except AssertionError as e:
            raise AssertionError(f"{e}; counters: {seen[0]}") from None

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


def play(p: Plait, sc: Scenario) -> tuple[dict, float, dict]:
    """Make the scenario's pushes, silence changes and reloads at their times
    (from a start 1 s ahead; a collector in ``sc.fails`` answers 500 until its
    time, one in ``sc.slow`` holds and drops requests until its time) and wait
    for its end; returns what each collector accepted until then (index ->
    [(arrival from the start, webhook alerts)]), the start, and when each push
    without a start time was actually sent ((at, labels) -> seconds from the
    start; the API stamps such an alert with its receipt time)."""
    client = httpx.Client(base_url=p.stack.api_url, headers=AUTH, timeout=10)
    t0 = time.time() + 1.0
    fails = {f"/{ci}": t0 + until for ci, until in sc.fails.items()}
    p.receiver.answer = lambda path: 500 if time.time() < fails.get(path, 0) else 200
    p.receiver.slow = {f"/{ci}": (s, t0 + until) for ci, (s, until) in sc.slow.items()}
    ids: dict[str, str] = {}
    actions = ([(at, "push", alerts) for at, alerts in sc.pushes]
               + [(at, op, (name, spec)) for at, op, name, spec in sc.silences]
               + [(at, "reload", None) for at in sc.reloads])
    errors: list[str] = []
    sent: dict[tuple, float] = {}

    def act(at: float, op: str, arg) -> None:
        time.sleep(max(0.0, t0 + at - time.time()))
        if op == "reload":
            p.reload()
            return
        if op == "push":
            sent.update({(at, tuple(sorted(a["labels"].items()))): time.time() - t0
                         for a in arg if a["start"] is None})
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
        if h.at - t0 <= sc.end() + SLACK:  # the collector stops at the end, as in at.Run()
            got.setdefault(int(h.path.strip("/")), []).append((h.at - t0, h.body["alerts"]))
    return got, t0, sent


def widened(sc: Scenario, sent: dict[tuple, float]) -> Scenario:
    """``sc`` with each window widened by :data:`SLACK`, and each wanted
    start of an alert pushed without one at the moment its push was sent
    (``sent``, from :func:`play`) instead of the push's time: the test's own
    threads, not Plait, can send a push late on a loaded machine; the API's
    stamp is still checked at the tolerance."""
    def stamped(a: dict) -> dict:
        key = (a["start"], tuple(sorted(a["labels"].items())))
        return {**a, "start": sent[key]} if key in sent else a

    return dataclasses.replace(sc, wants={ci: [(lo, hi + SLACK, [stamped(a) for a in alerts])
                                               for lo, hi, alerts in ws]
                                          for ci, ws in sc.wants.items()})


def labels_of(sc: Scenario) -> list[dict[str, str]]:
    return [a["labels"] for _at, alerts in sc.pushes for a in alerts]


@pytest.mark.parametrize("sc", [
    REPEAT, BATCHING, SILENCE_DELETE, RESOLVED_FILTER, ALWAYS_INHIBITING, MERGE_ALERTS, RESOLVED,
    INHIBITING,
    # before UTF8_ROUTE, which does not wait for its resolve to settle: a scenario after it
    # would find that resolve pending when it waits for the funnel to settle
    MERGE_ALERTS_WITH_ENDS_AT, WEBHOOK_TIMEOUT, SILENCING, EMPTY_INHIBITION_RULE,
    RETRY_RECOVERED,
    RELOAD,
    UTF8_ROUTE,
], ids=lambda s: s.name)
def test_alertmanager_acceptance_scenario(plait, sc):
    """send_test.go TestMergeAlerts, TestRepeat, TestRetry, TestBatching,
    TestResolved, TestResolvedFilter and TestReload, silence_test.go
    TestSilenceDelete, inhibit_test.go TestInhibiting and
    TestAlwaysInhibiting, utf8_test.go TestSendAlertsToUTF8Route;
    TestMergeAlertsWithEndsAt, TestWebhookTimeout, TestSilencing and
    TestEmptyInhibitionRule: the webhook gets what Alertmanager's collector
    wants, in its windows (plus :data:`SLACK`)."""
    plait.use(config_text(sc, plait.urls()[:len(sc.wants)]))
    plait.no_alerts()  # what an earlier scenario left would show here, not in the check
    try:
        got, t0, sent = play(plait, sc)
        errors = check(widened(sc, sent), got, t0)
        assert not errors, "\n".join(errors)
    finally:
        plait.resolve_all(labels_of(sc), settle=sc is not UTF8_ROUTE)


def am_fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's fingerprint of a label set (prometheus/common
    ``model.LabelSet.Fingerprint``: FNV-1a 64 over the sorted names, each
    name and value followed by byte 0xff), 16 hex digits."""
    h = 0xCBF29CE484222325
    for name in sorted(labels):
        for byte in name.encode() + b"\xff" + labels[name].encode() + b"\xff":
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def posted(labels: dict[str, str], now: float) -> dict:
    """A postable alert active from ``now`` for 5 minutes (api_test.go's)."""
    return {"labels": labels, "startsAt": format_time(now), "endsAt": format_time(now + 300)}


def test_alert_get_returns_current_alert_status(plait):
    """api_test.go TestAlertGetReturnsCurrentAlertStatus: ``GET /api/v2/alerts``
    tells at once that an alert is silenced, inhibited, or neither again."""
    plait.use(API_AM % plait.urls()[0].removeprefix("http://"))
    plait.no_alerts()
    warning = {"alertname": "test1", "severity": "warning"}
    critical = {"alertname": "test1", "severity": "critical"}
    fp, inhibiting_fp = am_fingerprint(warning), am_fingerprint(critical)
    now = time.time()
    try:
        assert plait.client.post("/api/v2/alerts", json=[posted(warning, now)]).status_code == 200
        alerts = plait.client.get("/api/v2/alerts").json()
        assert [a["fingerprint"] for a in alerts] == [fp]
        assert all(a["status"]["state"] == "active" for a in alerts)
        # in the group_interval period: the group's first message went out
        wait_until(lambda: plait.receiver.accepted("/0"), 30, "the group's first message")
        resp = plait.client.post("/api/v2/silences", json={
            "matchers": [{"name": "alertname", "value": "test1", "isRegex": False}],
            "startsAt": format_time(now), "endsAt": format_time(now + 300),
            "comment": "a", "createdBy": "a"})
        assert resp.status_code == 200, resp.text
        silence_id = resp.json()["silenceID"]
        for a in plait.client.get("/api/v2/alerts").json():
            assert a["status"]["state"] == "suppressed" and a["fingerprint"] == fp
            assert a["status"]["silencedBy"] == [silence_id]
        assert plait.client.post("/api/v2/alerts", json=[posted(critical, now)]).status_code == 200
        alerts = plait.client.get("/api/v2/alerts").json()
        assert sorted(a["fingerprint"] for a in alerts) == sorted([fp, inhibiting_fp])
        for a in alerts:
            assert a["status"]["silencedBy"] == [silence_id]
            if a["fingerprint"] == fp:
                assert a["status"]["state"] == "suppressed"
                assert a["status"]["inhibitedBy"] == [inhibiting_fp]
        assert plait.client.delete(f"/api/v2/silence/{silence_id}").status_code == 200
        for a in plait.client.get("/api/v2/alerts").json():
            assert a["status"]["silencedBy"] == []
            want = "active" if a["fingerprint"] == inhibiting_fp else "suppressed"
            assert a["status"]["state"] == want, a
    finally:
        plait.resolve_all([warning, critical], settle=False)


def test_filter_alert_request(plait):
    """api_test.go TestFilterAlertRequest: ``filter`` matchers select the alerts."""
    plait.use(API_AM % plait.urls()[0].removeprefix("http://"))
    plait.no_alerts()
    test1 = {"alertname": "test1", "severity": "warning"}
    system = {"system": "foo", "severity": "critical"}
    now = time.time()
    try:
        resp = plait.client.post("/api/v2/alerts", json=[posted(test1, now), posted(system, now)])
        assert resp.status_code == 200, resp.text
        alerts = plait.client.get("/api/v2/alerts", params={
            "filter": ["alertname=test1", "severity=warning"]}).json()
        assert len(alerts) == 1 and alerts[0]["labels"] == test1
        assert all(a["status"]["state"] == "active" for a in alerts)
    finally:
        plait.resolve_all([test1, system], settle=False)


UTF8_LABELS = {"a": "a", "00": "b", "\u03a3": "c", "\U0001f642": "d\u0398"}
#: utf8_test.go's filter: unquoted UTF-8 names, one in quotes with Go's
#: byte escapes (``"\xf0\x9f\x99\x82"`` is U+1F642)
UTF8_FILTER = ["00=b", "\u03a3=c", '"\\xf0\\x9f\\x99\\x82"=d\u0398']


def utf8_alert_posted(plait) -> None:
    plait.use(API_AM.split("\ninhibit_rules")[0] + API_AM.split("equal: ['alertname']")[1]
              % plait.urls()[0].removeprefix("http://"))
    resp = plait.client.post("/api/v2/alerts", json=[posted(UTF8_LABELS, time.time())])
    assert resp.status_code == 200, resp.text


def test_add_utf8_alerts(plait):
    """utf8_test.go TestAddUTF8Alerts (Alertmanager 0.27+), without its
    filters (below): an alert with UTF-8 label names is listed and grouped
    as posted."""
    plait.no_alerts()
    try:
        utf8_alert_posted(plait)
        alerts = plait.client.get("/api/v2/alerts").json()
        assert [a["labels"] for a in alerts] == [UTF8_LABELS]
        groups = plait.client.get("/api/v2/alerts/groups").json()
        assert [[a["labels"] for a in g["alerts"]] for g in groups] == [[UTF8_LABELS]]
    finally:
        plait.resolve_all([UTF8_LABELS], settle=False)


def test_add_utf8_alerts_filters(plait):
    """utf8_test.go TestAddUTF8Alerts, its filters: ``00=b``, ``Σ=c`` and
    ``"\\xf0\\x9f\\x99\\x82"=dΘ`` find the alert in ``/api/v2/alerts``
    and ``/api/v2/alerts/groups``."""
    plait.no_alerts()
    try:
        utf8_alert_posted(plait)
        alerts = plait.client.get("/api/v2/alerts", params={"filter": UTF8_FILTER})
        assert alerts.status_code == 200, alerts.text
        assert [a["labels"] for a in alerts.json()] == [UTF8_LABELS]
        groups = plait.client.get("/api/v2/alerts/groups", params={"filter": UTF8_FILTER})
        assert groups.status_code == 200, groups.text
        assert [[a["labels"] for a in g["alerts"]] for g in groups.json()] == [[UTF8_LABELS]]
    finally:
        plait.resolve_all([UTF8_LABELS], settle=False)


def post_day_silence(plait, matchers: list[dict]) -> httpx.Response:
    """``POST /api/v2/silences`` of ``matchers`` from now for a day (the
    acceptance tests' silence); asserts the 200."""
    now = time.time()
    resp = plait.client.post("/api/v2/silences", json={
        "matchers": matchers, "comment": "test", "createdBy": "test",
        "startsAt": format_time(now), "endsAt": format_time(now + 86400)})
    assert resp.status_code == 200, resp.text
    return resp


def test_add_utf8_silences(plait):
    """utf8_test.go TestAddUTF8Silences (Alertmanager 0.27+): a silence on a
    UTF-8 label name is listed as posted and found by a UTF-8 filter."""
    silences = lambda **params: plait.client.get("/api/v2/silences", params=params).json()
    before = {s["id"] for s in silences()}
    matchers = [{"name": "foo\u03a3", "value": "bar\U0001f642", "isRegex": False, "isEqual": True}]
    resp = post_day_silence(plait, matchers)
    try:
        for params in ({}, {"filter": ["foo\u03a3=bar\U0001f642"]}):
            new = [s for s in silences(**params) if s["id"] not in before]
            assert [s["matchers"] for s in new] == [matchers], params
    finally:
        plait.client.delete(f"/api/v2/silence/{resp.json()['silenceID']}")


def test_add_silence(plait):
    """silence_test.go TestAddSilence: ``POST /api/v2/silences`` takes a
    silence of ``foo="bar"`` for a day; it is listed as posted."""
    matchers = [{"name": "foo", "value": "bar", "isRegex": False, "isEqual": True}]
    resp = post_day_silence(plait, matchers)
    silence_id = resp.json()["silenceID"]
    try:
        got = plait.client.get(f"/api/v2/silence/{silence_id}").json()
        assert (got["matchers"], got["status"]["state"]) == (matchers, "active")
    finally:
        plait.client.delete(f"/api/v2/silence/{silence_id}")


#: api_test.go TestAddAlerts: label values in UTF-8 (names classic)
UTF8_VALUES = {"a": "b", "b": "\u03a3", "c": "\U0001f642", "d": "e\u0398"}


def test_add_alerts(plait):
    """api_test.go TestAddAlerts: ``POST /api/v2/alerts`` takes an alert whose
    label values are UTF-8 text; it is listed as posted. (Alertmanager runs
    it in classic mode, where only label names are restricted: Plait has no
    classic mode, see docs/alerting.md.)"""
    plait.use(API_AM % plait.urls()[0].removeprefix("http://"))
    plait.no_alerts()
    try:
        resp = plait.client.post("/api/v2/alerts", json=[posted(UTF8_VALUES, time.time())])
        assert resp.status_code == 200, resp.text
        assert [a["labels"] for a in plait.client.get("/api/v2/alerts").json()] == [UTF8_VALUES]
    finally:
        plait.resolve_all([UTF8_VALUES], settle=False)


@pytest.fixture
def prefixed_api(plait, tmp_path):
    """One more API process on the module's stack, started as
    ``plait api --web.route-prefix /foo``: its base URL (no prefix)."""
    import os
    import subprocess
    import sys

    from ops.infra import free_port

    port = free_port()
    with open(tmp_path / "api-foo.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "api", "--port", str(port),
             "--web.route-prefix", "/foo"], env={**os.environ, **plait.stack.env},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:  # the acceptance framework's readiness poll: GET <prefix>/api/v2/status
            return httpx.get(f"{base}/foo/api/v2/status", headers=AUTH, timeout=2).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None
    try:
        wait_until(up, 60, "the API under /foo to answer")
        assert proc.poll() is None, (tmp_path / "api-foo.log").read_text()
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def test_web_with_prefix(prefixed_api, tmp_path):
    """web_test.go TestWebWithPrefix (``RoutePrefix: "/foo"``,
    ``--web.route-prefix``): the API answers under the prefix, and only
    there; the real amtool works against ``<url>/foo``."""
    base = prefixed_api
    with httpx.Client(base_url=base, headers=AUTH, timeout=10) as c:
        assert c.get("/foo/api/v2/status").json()["config"]["original"]
        assert [(p, c.get(p).status_code) for p in ("/api/v2/status", "/-/healthy", "/foo2/-/healthy")
                ] == [("/api/v2/status", 404), ("/-/healthy", 404), ("/foo2/-/healthy", 404)]
        root = c.get("/")
        assert (root.status_code, root.headers["location"]) == (302, "/foo")
        assert [(c.get(p).status_code, c.get(p).text) for p in ("/foo/-/healthy", "/foo/-/ready")
                ] == [(200, "OK"), (200, "OK")]
        assert c.post("/foo/-/reload").status_code == 200
        # the console too: its pages ask for their files and the API relative to the prefix
        assert [c.get(p).status_code for p in ("/foo/ui/alerts", "/foo/ui/static/console.js",
                                               "/foo/ui/config", "/ui/alerts")] == [200, 200, 200, 404]
        assert (c.get("/foo/ui").headers["location"]) == "/foo/ui/exports"
    run_amtool(f"{base}/foo", tmp_path, "alert", "query", token=TOKEN)
    sid = run_amtool(f"{base}/foo", tmp_path, "silence", "add", "foo=bar", "-c", "prefix",
                     token=TOKEN).stdout.strip()
    try:
        assert run_amtool(f"{base}/foo", tmp_path, "silence", "query", "-q", "foo=bar",
                          token=TOKEN).stdout.split() == [sid]
    finally:
        run_amtool(f"{base}/foo", tmp_path, "silence", "expire", sid, token=TOKEN)
