"""Alertmanager's own acceptance scenarios as data, played on Plait.

Each :class:`Scenario` is one test of Alertmanager's
``test/with_api_v2/acceptance/*_test.go`` (single instance): its
``alertmanager.yml`` verbatim (``am_yml``, the webhook URLs as
``http://%s``), the pushes at their times and the collectors'
expectations (``co.Want(Between(lo, hi), alerts...)``).
Times are seconds from the scenario's start, as in ``At(t)`` and
``Active(start, end)``.

:func:`config_text` fills in the webhook URLs; Plait reads the result
as Alertmanager does (``alerting.amconfig``, ``PLAIT_ALERTMANAGER_CONFIG``),
without a ``plait:`` block, so Plait's extras are out of the way (no
token bucket, no dedupe cooldown).

:func:`check` is Alertmanager's ``Collector.Check`` (test/testutils/
collector.go): every wanted batch arrives within its interval (alerts
equal by labels, annotations, ``startsAt`` and ``endsAt`` within the
tolerance, a firing alert's ``endsAt`` the zero time), and the collector
got no more alerts in total than wanted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alerting.intake import format_time, parse_time

#: Alertmanager's acceptance tolerance (``AcceptanceOpts.Tolerance``), seconds.
TOLERANCE = 0.150


def A(*kv: str, active: tuple[float, ...] = (), ann: dict[str, str] | None = None) -> dict:
    """A test alert (``Alert(k, v, ...).Active(start[, end]).Annotate(...)``)."""
    return {"labels": dict(zip(kv[::2], kv[1::2])), "annotations": dict(ann or {}),
            "start": active[0] if active else None,
            "end": active[1] if len(active) > 1 else None}


@dataclass
class Scenario:
    """One acceptance test: see the module doc."""

    name: str
    am_yml: str
    pushes: list[tuple[float, list[dict]]]
    #: collector index -> [(lo, hi, [alerts])]; an empty list wants nothing
    wants: dict[int, list[tuple[float, float, list[dict]]]]
    #: (at, "set" | "del", silence name, {"matchers": [...], "start", "end"})
    silences: list[tuple[float, str, str, dict]] = field(default_factory=list)
    #: times of a configuration reload (``at.Do(At(t), amc.Reload)``)
    reloads: list[float] = field(default_factory=list)
    #: collector index -> its webhook answers 500 before this time (``wh.Func``)
    fails: dict[int, float] = field(default_factory=dict)
    #: collector index -> (seconds, until): its webhook holds a request arriving
    #: before ``until`` that long and drops it (``wh.Func`` sleeping, true)
    slow: dict[int, tuple[float, float]] = field(default_factory=dict)

    def end(self) -> float:
        """When the scenario is over (Alertmanager's ``Collector.Latest``)."""
        return max(hi for ws in self.wants.values() for _lo, hi, _a in ws)


def config_text(sc: Scenario, urls: list[str]) -> str:
    """``sc``'s alertmanager.yml with webhooks ``urls`` (``http://host:port/path``;
    the file spells ``http://%s``)."""
    return sc.am_yml % tuple(u.removeprefix("http://") for u in urls)


def push_body(alerts: list[dict], t0: float) -> list[dict[str, Any]]:
    """The ``POST /api/v2/alerts`` body of a push (times from ``t0``, epoch s);
    a start or end not given is left out, as the acceptance mock leaves it zero."""
    out = []
    for a in alerts:
        d: dict[str, Any] = {"labels": a["labels"], "annotations": a["annotations"]}
        if a["start"] is not None:
            d["startsAt"] = format_time(t0 + a["start"])
        if a["end"] is not None:
            d["endsAt"] = format_time(t0 + a["end"])
        out.append(d)
    return out


def _equal(want: dict, got: dict, t0: float) -> bool:
    """``EqualAlerts`` (test/testutils/mock.go): labels, annotations, times
    within :data:`TOLERANCE`, the zero time only equal to itself."""
    if want["labels"] != got.get("labels") or want["annotations"] != (got.get("annotations") or {}):
        return False
    for key, rel in (("startsAt", want["start"]), ("endsAt", want["end"])):
        at = parse_time(got.get(key), key)
        if (rel is None) != (at is None or got.get(key, "").startswith("0001-")):
            return False
        if rel is not None and abs(at - (t0 + rel)) > TOLERANCE:
            return False
    return True


def check(sc: Scenario, collected: dict[int, list[tuple[float, list[dict]]]],
          t0: float) -> list[str]:
    """What fails of ``sc``'s expectations given ``collected`` (collector
    index -> [(arrival, webhook alerts)], arrival in seconds from ``t0``):
    [] when everything holds."""
    errors = []
    for ci, wants in sc.wants.items():
        got = collected.get(ci, [])
        for lo, hi, alerts in wants:
            inside = [b for at, b in got if lo <= at <= hi]
            ok = (not alerts and not inside) or any(
                len(b) == len(alerts) and all(any(_equal(w, g, t0) for g in b) for w in alerts)
                for b in inside)
            if not ok:
                errors.append(f"collector {ci}: Between({lo}, {hi}) wants {alerts}")
        total_want = sum(len(a) for _lo, _hi, a in wants)
        total_got = sum(len(b) for _at, b in got)
        if total_want != total_got:
            errors.append(f"collector {ci}: {total_got} alerts, wanted {total_want}")
    if errors:
        errors.append("received: " + repr({ci: [(round(at, 3), [
            (g["labels"], g["status"], g["startsAt"], g["endsAt"], g.get("annotations"))
            for g in b]) for at, b in got] for ci, got in collected.items()}))
    return errors


# ---------------------------------------------------------------- scenarios
_REPEAT_AM = """
route:
  receiver: "default"
  group_by: [alertname]
  group_wait:      1s
  group_interval:  1s
  repeat_interval: 1ms

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
    send_resolved: true
"""

#: send_test.go TestMergeAlerts: the earliest start of several senders, the
#: newest annotations, the latest end of several resolves, no merge of a
#: new occurrence after a resolve.
MERGE_ALERTS = Scenario(
    "TestMergeAlerts", _REPEAT_AM,
    pushes=[(1, [A("alertname", "test", active=(1.1,))]),
            (1.2, [A("alertname", "test", active=(1,))]),
            (2.1, [A("alertname", "test", active=(2,), ann={"ann": "v1"})]),
            (3.6, [A("alertname", "test", active=(1.5,), ann={"ann": "v2"})]),
            (4.6, [A("alertname", "test", active=(3, 4.5), ann={"ann": "v2"})]),
            (4.8, [A("alertname", "test", active=(2.9, 4.8), ann={"ann": "v3"})]),
            (4.8, [A("alertname", "test", active=(2.9, 4.1), ann={"ann": "v3"})]),
            (5.3, [A("alertname", "test", active=(5,))])],
    wants={0: [(2, 2.5, [A("alertname", "test", active=(1,))]),
               (3, 3.5, [A("alertname", "test", active=(1,), ann={"ann": "v1"})]),
               (4, 4.5, [A("alertname", "test", active=(1,), ann={"ann": "v2"})]),
               (5, 5.5, [A("alertname", "test", active=(1, 4.8), ann={"ann": "v3"})]),
               (6, 6.5, [A("alertname", "test", active=(5,))])]})

#: send_test.go TestRepeat: with repeat_interval under group_interval, one
#: reminder per flush.
REPEAT = Scenario(
    "TestRepeat", _REPEAT_AM.replace("    send_resolved: true\n", ""),
    pushes=[(1, [A("alertname", "test", active=(1,))]),
            (3.5, [A("alertname", "test", active=(1, 3))])],
    wants={0: [(2, 2.5, [A("alertname", "test", active=(1,))]),
               (3, 3.5, [A("alertname", "test", active=(1,))]),
               (4, 4.5, [A("alertname", "test", active=(1, 3))])]})

_BATCH = [A("alertname", n, active=(s,)) for n, s in
          (("test1", 1), ("test5", 1), ("test2", 1.5), ("test3", 1.5), ("test4", 1.6))]

#: send_test.go TestBatching: news waits for the group's next flush; the
#: reminder comes at the first flush after repeat_interval.
BATCHING = Scenario(
    "TestBatching", """
route:
  receiver: "default"
  group_by: []
  group_wait:      1s
  group_interval:  1s
  # use a value slightly below the 5s interval to avoid timing issues
  repeat_interval: 4900ms

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
""",
    pushes=[(1.1, [_BATCH[0]]), (1.7, [_BATCH[1]]), (3.3, _BATCH[2:])],
    wants={0: [(2.0, 2.5, _BATCH[:2]), (4.1, 4.5, _BATCH), (9.1, 9.5, _BATCH)]})

_RESOLVED_AM = """
global:
  resolve_timeout: 10s

route:
  receiver: "default"
  group_by: [alertname]
  group_wait: 1s
  group_interval: 5s

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
"""

#: send_test.go TestResolved: alerts not re-sent resolve after resolve_timeout,
#: told at the next flush.
RESOLVED = Scenario(
    "TestResolved", _RESOLVED_AM,
    pushes=[(1, [A("alertname", "test", "lbl", v) for v in ("v1", "v2", "v3")])],
    wants={0: [(2, 2.5, [A("alertname", "test", "lbl", v, active=(1,)) for v in ("v1", "v2", "v3")]),
               (12, 13, [A("alertname", "test", "lbl", v, active=(1, 11))
                         for v in ("v1", "v2", "v3")])]})


def _lbl(v: str, *active: float) -> dict:
    return A("alertname", "test", "lbl", v, active=active)


#: send_test.go TestResolvedFilter: a receiver with send_resolved false is
#: told nothing when only resolves changed. The receiver's two webhooks
#: are two Plait receivers (``default``, ``default.1``) reached together.
RESOLVED_FILTER = Scenario(
    "TestResolvedFilter", _RESOLVED_AM.replace(
        "  - url: 'http://%s'\n", "  - url: 'http://%s'\n    send_resolved: true\n"
        "  - url: 'http://%s'\n    send_resolved: false\n"),
    pushes=[(1, [_lbl("v1"), _lbl("v2")]),
            (3, [_lbl("v1", 1, 4), _lbl("v3")]),
            (8, [_lbl("v3", 3)])],
    wants={0: [(2, 2.5, [_lbl("v1", 1), _lbl("v2", 1)]),
               (7, 7.5, [_lbl("v1", 1, 4), _lbl("v2", 1), _lbl("v3", 3)]),
               (12, 12.5, [_lbl("v2", 1, 11), _lbl("v3", 3)])],
           1: [(2, 2.5, [_lbl("v1", 1), _lbl("v2", 1)]),
               (7, 7.5, [_lbl("v2", 1), _lbl("v3", 3)]),
               (12, 12.5, [])]})

_INHIBIT_AM = """
route:
  receiver: "default"
  group_by: []
  group_wait:      1s
  group_interval:  1s
  repeat_interval: 1s

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'

inhibit_rules:
- source_match:
    alertname: JobDown
  target_match:
    alertname: InstanceDown
  equal:
    - job
    - zone
"""


def _jz(name: str, zone: str = "aa", *active: float) -> dict:
    return A("alertname", name, "job", "testjob", "zone", zone, active=active)


#: inhibit_test.go TestAlwaysInhibiting: a target inhibited all its life is
#: told resolved with its source (both resolved by the flush).
ALWAYS_INHIBITING = Scenario(
    "TestAlwaysInhibiting", _INHIBIT_AM,
    pushes=[(1, [_jz("InstanceDown")]), (1, [_jz("JobDown")]),
            (2.6, [_jz("JobDown", "aa", 1, 2.6)]), (2.6, [_jz("InstanceDown", "aa", 1, 2.6)])],
    wants={0: [(2, 2.5, [_jz("JobDown", "aa", 1)]),
               (3, 3.5, [_jz("InstanceDown", "aa", 1, 2.6), _jz("JobDown", "aa", 1, 2.6)])]})

#: inhibit_test.go TestInhibiting.
INHIBITING = Scenario(
    "TestInhibiting", _INHIBIT_AM,
    pushes=[(1, [_jz("test1")]), (1, [_jz("InstanceDown")]), (1, [_jz("InstanceDown", "ab")]),
            (2.2, [_jz("JobDown")]), (3.6, [_jz("JobDown", "aa", 2.2, 3.6)])],
    wants={0: [(2, 2.5, [_jz("test1", "aa", 1), _jz("InstanceDown", "aa", 1),
                         _jz("InstanceDown", "ab", 1)]),
               (3, 3.5, [_jz("test1", "aa", 1), _jz("InstanceDown", "ab", 1),
                         _jz("JobDown", "aa", 2.2)]),
               (4, 4.5, [_jz("test1", "aa", 1), _jz("InstanceDown", "aa", 1),
                         _jz("InstanceDown", "ab", 1), _jz("JobDown", "aa", 2.2, 3.6)])]})

#: silence_test.go TestSilenceDelete: alerts silenced from the start go out
#: at the first flush after the silence is deleted.
SILENCE_DELETE = Scenario(
    "TestSilenceDelete", _REPEAT_AM.replace("    send_resolved: true\n", "").replace(
        "group_by: [alertname]", "group_by: []"),
    pushes=[(1, [A("alertname", "test1", active=(1,)), A("alertname", "test2", active=(1,))])],
    silences=[(1.3, "set", "all", {"matchers": ['alertname=~".+"'], "start": 1.5, "end": 100,
                                   "am": [{"name": "alertname", "value": ".+", "isRegex": True,
                                           "isEqual": True}]}),
              (3.5, "del", "all", {})],
    wants={0: [(3.5, 4.5, [A("alertname", "test1", active=(1,)),
                           A("alertname", "test2", active=(1,))])]})

#: send_test.go TestRetry: of a receiver's two webhooks, the one failing
#: until 4.5 gets the group once it answers, about the flush at 6 (the
#: windows the test logs; see :data:`RETRY_RECOVERED`).
RETRY = Scenario(
    "TestRetry", """
route:
  receiver: "default"
  group_by: [alertname]
  group_wait:      1s
  group_interval:  2s
  repeat_interval: 3s

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
  - url: 'http://%s'
""",
    pushes=[(1, [A("alertname", "test1")])],
    wants={0: [(2, 2.5, [A("alertname", "test1", active=(1,))]),
               (6, 6.5, [A("alertname", "test1", active=(1,))])],
           1: [(6, 6.5, [A("alertname", "test1", active=(1,))])]},
    fails={1: 4.5})

#: TestRetry as its test asserts it. Alertmanager retries a failed webhook
#: on a jittered exponential backoff (notify/retry_stage.go:
#: cenkalti/backoff, 0.5 s, x1.5, +-50%), so when the failing webhook gets
#: the group varies from run to run, and send_test.go only logs the
#: collectors' checks (``t.Log(c.Check())``). What the test states it wants
#: ("the succeeding one must still only receive the first successful
#: notifications; sending to the failing one must eventually succeed"):
#: the succeeding webhook gets exactly its two messages at the flushes, the
#: failing one the group exactly once, once it answers (after 4.5) and by
#: the end of the logged window (6.5).
RETRY_RECOVERED = Scenario(
    "TestRetry", RETRY.am_yml, RETRY.pushes,
    {0: RETRY.wants[0], 1: [(4.5, 6.5, [A("alertname", "test1", active=(1,))])]},
    fails=RETRY.fails)

#: send_test.go TestReload: a reload restarts the group's timers (the flush
#: after the reload at 3 is at 3 + group_interval) and sends nothing twice.
RELOAD = Scenario(
    "TestReload", """
route:
  receiver: "default"
  group_by: []
  group_wait:      1s
  group_interval:  6s
  repeat_interval: 10m

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
""",
    pushes=[(1, [A("alertname", "test1")]), (4, [A("alertname", "test2")])],
    wants={0: [(2, 2.5, [A("alertname", "test1", active=(1,))]),
               (9, 9.5, [A("alertname", "test1", active=(1,)),
                         A("alertname", "test2", active=(4,))])]},
    reloads=[3])

#: utf8_test.go TestSendAlertsToUTF8Route (Alertmanager 0.27+): a route's
#: matcher and group_by name a label by any UTF-8 text.
UTF8_ROUTE = Scenario(
    "TestSendAlertsToUTF8Route", """
route:
  receiver: default
  routes:
    - receiver: webhook
      matchers:
        - foo🙂=bar
      group_by:
        - foo🙂
      group_wait: 1s
receivers:
- name: default
- name: webhook
  webhook_configs:
  - url: 'http://%s'
""",
    pushes=[(1, [A("foo🙂", "bar", active=(1,))])],
    wants={0: [(2, 2.5, [A("foo🙂", "bar", active=(1,))])]})

#: api_test.go's alertmanager.yml (TestAlertGetReturnsCurrentAlertStatus,
#: TestFilterAlertRequest); utf8_test.go's is the same without inhibit_rules.
API_AM = """
route:
  receiver: "default"
  group_by: []
  group_wait:      1s
  group_interval:  10m
  repeat_interval: 1h

inhibit_rules:
  - source_match:
      severity: 'critical'
    target_match:
      severity: 'warning'
    equal: ['alertname']

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
"""

ALL = [MERGE_ALERTS, REPEAT, BATCHING, RESOLVED, RESOLVED_FILTER, ALWAYS_INHIBITING, INHIBITING,
       SILENCE_DELETE]


def _ends(start: float) -> tuple[float, float]:
    """``testMergeAlerts``' ``timerange(ts)`` with ``endsAt``: active until ``ts + 3``."""
    return (start, start + 3.0)


#: send_test.go TestMergeAlertsWithEndsAt (``testMergeAlerts(t, true)``):
#: :data:`MERGE_ALERTS` with every firing push carrying an ``endsAt`` 3 s
#: ahead. The same messages: a firing alert is sent with the zero
#: ``endsAt`` (dispatch.go ``aggrGroup.flush``), an explicit ``endsAt``
#: replaces the one a push without it got (types.go ``Alert.Merge``: a
#: timeout's end never rules), and the resolve at 4.6 moves the end back.
MERGE_ALERTS_WITH_ENDS_AT = Scenario(
    "TestMergeAlertsWithEndsAt", _REPEAT_AM,
    pushes=[(1, [A("alertname", "test", active=_ends(1.1))]),
            (1.2, [A("alertname", "test", active=(1,))]),
            (2.1, [A("alertname", "test", active=_ends(2), ann={"ann": "v1"})]),
            (3.6, [A("alertname", "test", active=_ends(1.5), ann={"ann": "v2"})]),
            *MERGE_ALERTS.pushes[4:7],
            (5.3, [A("alertname", "test", active=_ends(5))])],
    wants=MERGE_ALERTS.wants)

#: send_test.go TestWebhookTimeout: the webhook (``timeout: 500ms``) holds
#: every request before 3 for 1 s: each such attempt times out and is
#: retried, and the group arrives between 3 and 4.
WEBHOOK_TIMEOUT = Scenario(
    "TestWebhookTimeout", """
route:
  receiver: "default"
  group_by: [alertname]
  group_wait:      1s
  group_interval:  1m
  repeat_interval: 1m

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'
    timeout: 500ms
""",
    pushes=[(1, [A("alertname", "test1")])],
    wants={0: [(3, 4, [A("alertname", "test1", active=(1,))])]},
    slow={0: (1.0, 3.0)})

_SILENCE_AM = SILENCE_DELETE.am_yml

#: silence_test.go TestSilencing: a silence of test1 from 2.5 to 4.5 (set at
#: 2.3) keeps it out of the flushes at 3 and 4; at 5 it is back.
SILENCING = Scenario(
    "TestSilencing", _SILENCE_AM,
    pushes=[(1, [A("alertname", "test1", active=(1,))]),
            (1, [A("alertname", "test2", active=(1,))])],
    silences=[(2.3, "set", "test1", {
        "matchers": ['alertname="test1"'], "start": 2.5, "end": 4.5,
        "am": [{"name": "alertname", "value": "test1", "isRegex": False, "isEqual": True}]})],
    wants={0: [(2, 2.5, [A("alertname", "test1", active=(1,)),
                         A("alertname", "test2", active=(1,))]),
               (3, 3.5, [A("alertname", "test2", active=(1,))]),
               (4, 4.5, [A("alertname", "test2", active=(1,))]),
               (5, 5.5, [A("alertname", "test1", active=(1,)),
                         A("alertname", "test2", active=(1,))])]})

#: inhibit_test.go TestEmptyInhibitionRule: ``inhibit_rules`` with one empty
#: item loads. Alertmanager's test pushes nothing and wants nothing; the
#: port pushes one alert, which must go out: in Alertmanager such a rule
#: takes every alert as source and target, and a source that is also a
#: target never inhibits (inhibit.go ``hasEqual``), so it mutes nothing.
EMPTY_INHIBITION_RULE = Scenario(
    "TestEmptyInhibitionRule", """
route:
  receiver: "default"
  group_by: []
  group_wait:      1s
  group_interval:  1s
  repeat_interval: 1s

receivers:
- name: "default"
  webhook_configs:
  - url: 'http://%s'

inhibit_rules:
-
""",
    pushes=[(1, [A("alertname", "test1", active=(1,))])],
    wants={0: [(2, 2.5, [A("alertname", "test1", active=(1,))])]})
