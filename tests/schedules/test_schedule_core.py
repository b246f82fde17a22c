"""The pure scheduling core with an injected clock (issue 14, "Tests that must exist"):
nothing sleeps; time is the integer ms the tests pass in."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from schedules.core import (ON_TIME_MS, Policy, State, Trigger, backfill, finished, jitter_fraction,
                            lag, tick, trigger_now, wall_to_instant)

S = 1000
MIN = 60 * S
H = 60 * MIN
BERLIN = ZoneInfo("Europe/Berlin")
T0 = int(datetime(2026, 1, 5, tzinfo=timezone.utc).timestamp() * 1000)


def iso(ms: int, tz=BERLIN) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).astimezone(tz).isoformat()


def fires(actions):
    return [a for a in actions if a.kind == "fire"]


def test_drift_2s_runs_15min_interval_for_a_day_stay_on_the_grid():
    # given a 15 min grid and runs of 2 s, driven by a tick every second
    trig, pol = Trigger(interval_ms=15 * MIN, anchor_ms=T0), Policy()
    st = State(cursor=T0 - 1)
    fired: list[tuple[int, int]] = []
    running_until = None
    now = T0
    while now <= T0 + 24 * H:
        if running_until is not None and now >= running_until:
            finished("s", trig, pol, st, fired[-1][0], True, now)
            running_until = None
        for a in fires(tick("s", trig, pol, st, now)):
            fired.append((a.slot, now))
            running_until = now + 2 * S
        now += S
    # then 97 slots fired, each exactly on the grid: 0 s drift after a day
    assert len(fired) == 24 * 4 + 1
    assert [slot for slot, _ in fired] == [T0 + i * 15 * MIN for i in range(97)]
    assert max(at - slot for slot, at in fired) == 0
    assert st.counters["skipped_missed"] == st.counters["skipped_overlap"] == 0


def test_six_hours_down_with_grace_10min_and_max_catchup_1_runs_one_and_skips_the_rest():
    # given a 5 min grid, grace 10 min, maxCatchup 1, last decided slot at T0
    trig = Trigger(interval_ms=5 * MIN, anchor_ms=T0)
    pol = Policy(grace_ms=10 * MIN, max_catchup=1)
    st = State(cursor=T0)
    # when the scheduler comes back 6 h 2 min later
    now = T0 + 6 * H + 2 * MIN
    actions = tick("s", trig, pol, st, now)
    # then exactly one catch-up run (the newest missed slot) and the other 71 skipped
    f = fires(actions)
    assert [(a.slot, a.reason) for a in f] == [(T0 + 6 * H, "catchup")]
    skip = [a for a in actions if a.kind == "skip"]
    assert len(skip) == 1 and skip[0].reason == "missed" and skip[0].count == 71
    assert skip[0].slots[0] == T0 + 5 * MIN and skip[0].slots[-1] == T0 + 6 * H - 5 * MIN
    assert st.counters["skipped_missed"] == 71 and st.counters["fired"] == 1
    assert st.history[-1]["count"] == 71 and len(st.history[-1]["slots"]) == 71
    # and the next tick carries on normally on the grid
    finished("s", trig, pol, st, T0 + 6 * H, True, now + S)
    assert [a.slot for a in fires(tick("s", trig, pol, st, T0 + 6 * H + 5 * MIN))] == [
        T0 + 6 * H + 5 * MIN]


def test_downtime_beyond_grace_skips_everything_and_counts_a_long_outage_exactly():
    trig = Trigger(interval_ms=1 * S, anchor_ms=T0)
    st = State(cursor=T0)
    actions = tick("s", trig, Policy(grace_ms=0, max_catchup=5), st, T0 + 30 * 86_400 * S + 500)
    # the slot 0.5 s ago is on time; every missed one is past grace 0
    assert [a.slot for a in fires(actions)] == [T0 + 30 * 86_400 * S]
    assert st.counters["skipped_missed"] == 30 * 86_400 - 1


def simulate(overlap: str, run_ms: int = 75 * S, interval: int = 60 * S, until: int = 6 * MIN):
    """A 75 s run every 60 s, ticking each second; returns (fires, cancels, state)."""
    trig, pol = Trigger(interval_ms=interval, anchor_ms=T0), Policy(overlap=overlap)
    st = State(cursor=T0 - 1)
    ends: dict[int, int] = {}
    log, cancels = [], []

    def apply(actions, now):
        for a in actions:
            if a.kind == "fire":
                log.append((a.slot, now, a.reason))
                ends[a.slot] = now + run_ms
            elif a.kind == "cancel":
                cancels.append((a.slot, now))
                ends.pop(a.slot)

    for now in range(T0, T0 + until + 1, S):
        for slot, end in sorted(ends.items()):
            if end <= now:
                ends.pop(slot)
                apply(finished("s", trig, pol, st, slot, True, now), now)
        apply(tick("s", trig, pol, st, now), now)
    return log, cancels, st


def test_75s_run_60s_interval_skip():
    log, _, st = simulate("skip")
    assert [(s - T0) // S for s, _, _ in log] == [0, 120, 240, 360]
    assert st.counters["skipped_overlap"] == 3


def test_75s_run_60s_interval_buffer_one():
    log, _, st = simulate("bufferOne")
    # each run starts when the previous ends; one slot waits, the next one is skipped
    assert [((s - T0) // S, (at - T0) // S, r) for s, at, r in log] == [
        (0, 0, "scheduled"), (60, 75, "buffered"), (120, 150, "buffered"),
        (180, 225, "buffered"), (240, 300, "buffered")]
    assert st.buffered == T0 + 300 * S and st.counters["skipped_overlap"] == 1


def test_75s_run_60s_interval_allow():
    log, _, st = simulate("allow")
    assert [(s - T0) // S for s, _, _ in log] == [0, 60, 120, 180, 240, 300, 360]
    assert all(at == s for s, at, _ in log) and len(st.running) == 2


def test_75s_run_60s_interval_cancel_previous():
    log, cancels, st = simulate("cancelPrevious")
    assert [(s - T0) // S for s, _, _ in log] == [0, 60, 120, 180, 240, 300, 360]
    assert [((s - T0) // S, (at - T0) // S) for s, at in cancels] == [
        (0, 60), (60, 120), (120, 180), (180, 240), (240, 300), (300, 360)]
    assert st.counters["cancelled"] == 6 and len(st.running) == 1


@pytest.mark.parametrize("cron, days", [
    ("0 0 */2 * MON", ["Mon 05", "Mon 19", "Mon 09", "Mon 23"]),  # a '*' field: AND (Vixie)
    ("0 0 1,15 * MON", ["Thu 01", "Mon 05", "Mon 12", "Thu 15"]),  # both restricted: OR
    ("0 0 * * MON", ["Mon 05", "Mon 12", "Mon 19", "Mon 26"]),
    ("0 0 1 * *", ["Thu 01", "Sun 01", "Sun 01", "Wed 01"]),
    ("0 0 * * 7-7", ["Sun 04", "Sun 11", "Sun 18", "Sun 25"]),  # a range of one value
    ("0 0 01-1 * *", ["Thu 01", "Sun 01", "Sun 01", "Wed 01"]),
])
def test_day_of_month_and_weekday_combine_as_vixie_cron(cron, days):
    trig = Trigger(cron=cron, time_zone="UTC")
    lo = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000) - 1
    got = [datetime.fromtimestamp(s / 1000, timezone.utc).strftime("%a %d")
           for s in trig.slots(lo, lo + 120 * 86_400_000)][:4]
    assert got == days


@pytest.mark.parametrize("cron, years", [("0 0 29 2 *", [2028, 2032, 2036, 2040, 2044]),
                                         ("@yearly", [2027, 2028, 2029, 2030, 2031]),
                                         ("0 0 29 2 */7", [2032, 2060, 2088, 2128, 2156])])
def test_the_next_fire_times_of_a_rare_cron_are_all_listed(cron, years):
    trig = Trigger(cron=cron, time_zone="UTC")
    lo = int(datetime(2026, 6, 1, tzinfo=timezone.utc).timestamp() * 1000)
    assert [datetime.fromtimestamp(s / 1000, timezone.utc).year
            for s in trig.next_slots(lo, 5)] == years


def berlin_cron_slots(start: datetime, days: int) -> list[str]:
    trig = Trigger(cron="30 2 * * *", time_zone="Europe/Berlin")
    lo = int(start.timestamp() * 1000)
    return [iso(s) for s in trig.slots(lo, lo + days * 86_400_000)]


def test_dst_spring_forward_0230_berlin_fires_once_at_0300():
    got = berlin_cron_slots(datetime(2026, 3, 27, 12, tzinfo=timezone.utc), 4)
    assert got == ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00",
                   "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"]


def test_dst_fall_back_0230_berlin_fires_once_at_the_first_0230():
    got = berlin_cron_slots(datetime(2026, 10, 23, 12, tzinfo=timezone.utc), 4)
    assert got == ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00",
                   "2026-10-26T02:30:00+01:00", "2026-10-27T02:30:00+01:00"]


def test_dst_gap_with_several_wall_times_fires_once_per_instant():
    trig = Trigger(cron="*/20 2 * * *", time_zone="Europe/Berlin")
    lo = int(datetime(2026, 3, 29, 0, tzinfo=timezone.utc).timestamp() * 1000) - 1
    assert [iso(s) for s in trig.slots(lo, lo + 3 * H)] == ["2026-03-29T03:00:00+02:00"]


def test_dst_cron_through_the_tick_planner_fires_each_day_once():
    trig = Trigger(cron="30 2 * * *", time_zone="Europe/Berlin")
    start = int(datetime(2026, 3, 28, 0, tzinfo=timezone.utc).timestamp() * 1000)
    st, pol, got = State(cursor=start), Policy(), []
    for now in range(start, start + 3 * 86_400_000, 30 * S):
        for a in fires(tick("c", trig, pol, st, now)):
            got.append(iso(a.slot))
            finished("c", trig, pol, st, a.slot, True, now)
    assert got == ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00",
                   "2026-03-30T02:30:00+02:00"]


def test_wall_to_instant_rules():
    assert wall_to_instant(datetime(2026, 3, 29, 2, 30), BERLIN).isoformat() == \
        "2026-03-29T01:00:00+00:00"
    assert wall_to_instant(datetime(2026, 10, 25, 2, 30), BERLIN).isoformat() == \
        "2026-10-25T00:30:00+00:00"


def test_jitter_is_deterministic_per_schedule_and_keeps_the_slot_on_the_grid():
    trig = Trigger(interval_ms=60 * S, anchor_ms=T0, jitter=0.5)
    a, b = trig.fire_at("sched-a", T0), trig.fire_at("sched-b", T0)
    assert a == trig.fire_at("sched-a", T0) and a != b
    assert T0 <= a < T0 + 30 * S and a - T0 == int(jitter_fraction("sched-a") * 30 * S)
    st = State(cursor=T0 - 1)
    assert fires(tick("sched-a", trig, Policy(), st, a - 1)) == []
    assert [x.slot for x in fires(tick("sched-a", trig, Policy(), st, a))] == [T0]


def test_start_and_end_bound_the_slots():
    trig = Trigger(interval_ms=10 * S, anchor_ms=T0, start_at_ms=T0 + 25 * S, end_at_ms=T0 + 60 * S)
    assert [(s - T0) // S for s in trig.slots(T0 - 1, T0 + 100 * S)] == [30, 40, 50, 60]
    assert trig.next_slots(T0 + 60 * S, 5) == []


def test_pause_on_failure_after_n_consecutive_failures_and_paused_slots_are_counted():
    trig, pol = Trigger(interval_ms=10 * S, anchor_ms=T0), Policy(pause_on_failure=2)
    st = State(cursor=T0 - 1)
    for i in range(2):
        (a,) = fires(tick("s", trig, pol, st, T0 + i * 10 * S))
        out = finished("s", trig, pol, st, a.slot, False, T0 + i * 10 * S + S)
    assert st.paused and out[0].kind == "pause" and "2 consecutive failures" in st.note
    actions = tick("s", trig, pol, st, T0 + 20 * S)
    assert fires(actions) == [] and st.counters["skipped_paused"] == 1
    # a manual trigger still runs while paused
    assert fires(trigger_now("s", trig, pol, st, T0 + 21 * S))[0].reason == "manual"


def test_a_success_resets_the_failure_count():
    trig, pol = Trigger(interval_ms=10 * S, anchor_ms=T0), Policy(pause_on_failure=2)
    st = State(cursor=T0 - 1)
    for i, ok in enumerate([False, True, False]):
        (a,) = fires(tick("s", trig, pol, st, T0 + i * 10 * S))
        finished("s", trig, pol, st, a.slot, ok, T0 + i * 10 * S + S)
    assert not st.paused and st.failures == 1


def test_backfill_runs_past_slots_one_at_a_time_under_skip():
    trig, pol = Trigger(interval_ms=MIN, anchor_ms=T0), Policy(overlap="skip")
    st = State(cursor=T0 + 10 * MIN)
    assert backfill(trig, st, T0, T0 + 2 * MIN) == [T0, T0 + MIN, T0 + 2 * MIN]
    now = T0 + 10 * MIN + S
    (a,) = fires(tick("s", trig, pol, st, now))
    assert a.slot == T0 and a.reason == "backfill"
    assert fires(tick("s", trig, pol, st, now + S)) == []  # still running: waits, not skipped
    (b,) = fires(finished("s", trig, pol, st, T0, True, now + 2 * S))
    assert b.slot == T0 + MIN
    with pytest.raises(ValueError, match="at most"):
        backfill(trig, st, T0, T0 + 5000 * MIN)


def test_lag_is_now_minus_the_oldest_due_undecided_slot():
    trig = Trigger(interval_ms=MIN, anchor_ms=T0)
    st = State(cursor=T0)
    assert lag("s", trig, st, T0 + 30 * S) == 0
    assert lag("s", trig, st, T0 + MIN + 7 * S) == 7


def test_state_round_trips_through_json():
    trig, pol = Trigger(interval_ms=MIN, anchor_ms=T0), Policy()
    st = State(cursor=T0 - 1)
    tick("s", trig, pol, st, T0)
    st.running[0].ref = "task-1"
    again = State.from_dict(st.to_dict())
    assert again == st


def test_on_time_tolerance():
    trig, pol = Trigger(interval_ms=MIN, anchor_ms=T0), Policy(max_catchup=0)
    st = State(cursor=T0 - 1)
    assert fires(tick("s", trig, pol, st, T0 + ON_TIME_MS))[0].reason == "scheduled"
    st = State(cursor=T0 - 1)
    assert fires(tick("s", trig, pol, st, T0 + ON_TIME_MS + 1)) == []


@pytest.mark.parametrize("kwargs, field", [
    ({}, "interval or cron"), ({"interval_ms": 10}, "trigger.interval"),
    ({"cron": "61 * * * *"}, "trigger.cron"), ({"interval_ms": 1000, "jitter": 2}, "trigger.jitter"),
    ({"cron": "0 0 30 2 *"}, "trigger.cron: never fires"),
    ({"cron": "0 0 31 4,6 *"}, "trigger.cron: never fires"),
    ({"cron": "* * * * * *"}, "trigger.cron: not a valid 5-field"),
    ({"cron": "5-1 * * * *"}, "trigger.cron: not a valid 5-field")])
def test_invalid_triggers_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Trigger(**kwargs)


def test_a_long_outage_on_a_jittered_cron_is_counted_without_each_slots_fire_time(monkeypatch):
    trig, pol = Trigger(cron="* * * * *", time_zone="Europe/Berlin", jitter=0.5), Policy()
    now = T0 + 3 * 24 * H + 17 * S
    jitter = int(jitter_fraction("s") * 0.5 * MIN)  # the period is a minute throughout
    due = [s for s in range(T0 + MIN, now + 1, MIN) if s + jitter <= now]
    periods = []
    real_period = Trigger.period
    monkeypatch.setattr(Trigger, "period", lambda self, slot: periods.append(slot) or
                        real_period(self, slot))
    st = State(cursor=T0)
    actions = tick("s", trig, pol, st, now)
    # every due slot is decided exactly as before: the newest within grace fires, the rest skip
    in_grace = [s for s in due if ON_TIME_MS < now - (s + jitter) <= pol.grace_ms][-1:]
    assert [a.slot for a in fires(actions)] == in_grace
    (skip,) = [a for a in actions if a.kind == "skip"]
    assert skip.count == len(due) - len(in_grace) and skip.reason == "missed"
    assert list(skip.slots) == [s for s in due if s not in in_grace][-100:]
    assert st.cursor == due[-1]
    # and fire times were worked out for the last few slots only, not for 4,000
    assert len(periods) < 10, len(periods)
