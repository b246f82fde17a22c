"""The pure scheduling core: slot math and policies, no I/O, no clock.

Times are integer epoch milliseconds: ``(schedule id, slot ms)`` is a run's
idempotency key. Slots: an interval grid ``anchor + n * interval`` (no drift),
or cron wall times in an IANA zone mapped by :func:`wall_to_instant` (croniter's
aware mode is wrong across DST); ``jitter`` moves only the fire time.
Policies follow Kubernetes CronJob, APScheduler (misfire grace, coalesce) and
Temporal Schedules (overlap, catch-up window, pause, backfill). The planners
mutate a :class:`State` and return :class:`Action` s for ``schedules.runner``."""
from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from collections.abc import Collection
from itertools import islice
from typing import Iterator, Literal
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

Overlap = Literal["skip", "bufferOne", "allow", "cancelPrevious"]
OVERLAPS = ("skip", "bufferOne", "allow", "cancelPrevious")
#: ms after its fire time a slot is still on time, not missed.
ON_TIME_MS = 5_000
#: Runs and skips kept in a schedule's history.
HISTORY = 50
#: Slot times listed per skip record (the count is always exact).
SKIP_SAMPLE = 100
#: Most slots one catch-up scan lists.
SCAN_LIMIT = 200_000


def wall_to_instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """UTC instant of naive ``wall`` in ``tz``: a DST gap maps to the first
    instant after it, a repeated hour to its first occurrence."""
    first = wall.replace(tzinfo=tz, fold=0)
    utc = first.astimezone(timezone.utc)
    if utc.astimezone(tz).replace(tzinfo=None) == wall:
        return utc  # exists (fold=0 = the first of a repeated hour)
    # in a gap: bisect for the transition instant
    after = wall.replace(tzinfo=tz, fold=1).astimezone(timezone.utc)
    lo, hi = min(utc, after), max(utc, after)
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(tz).replace(tzinfo=None) > wall:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


#: Month and weekday names a cron field may hold, as numbers.
_CRON_NAMES = {
    **{m: n for n, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
                                   "sep", "oct", "nov", "dec"), start=1)},
    **{d: n for n, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}}


def _cron_number(text: str) -> int | None:
    return int(text) if text.isdigit() else _CRON_NAMES.get(text.lower())


def _range_ends(part: str) -> tuple[str, int | None, int | None]:
    """A cron list item's range start as written and both ends as numbers (None: not a range
    of two known values): ``"MON-FRI/2"`` -> ``("MON", 1, 5)``."""
    lo, dash, hi = part.split("/")[0].partition("-")
    return lo, _cron_number(lo) if dash else None, _cron_number(hi) if dash else None


def cron_problem(expr: str) -> str | None:
    """What is wrong with cron ``expr`` (a rule quoting it), or None when it
    is a valid expression of 5 fields (minute to weekday; croniter reads a
    6th as seconds) or a macro (``@daily``) that matches at least one date.
    A range must not run backwards (``5-1``), as in Vixie cron."""
    fields = expr.split()
    macro = len(fields) == 1 and fields[0].startswith("@")
    if not croniter.is_valid(expr) or not (macro or len(fields) == 5):
        return f"not a valid 5-field cron expression: {expr!r}"
    for part in (p for f in fields for p in f.split(",")):
        _lo, first, last = _range_ends(part)
        if first is not None and last is not None and first > last:
            return (f"not a valid 5-field cron expression: {expr!r} "
                    f"(the range {part.split('/')[0]} runs backwards)")
    try:
        croniter(croniter_expr(expr), datetime(2000, 1, 1), day_or=day_or(expr)).get_next(datetime)
    except CroniterBadDateError:
        return f"never fires: no date matches {expr!r}"
    return None


def croniter_expr(expr: str) -> str:
    """``expr`` with each range whose ends are one value (``7-7``, ``01-1``) written as that
    value: croniter reads such a range as the whole field (every day), Vixie cron as the value."""
    fields = expr.split()
    if len(fields) != 5:
        return expr
    def one(part: str) -> str:
        lo, first, last = _range_ends(part)
        return lo if first is not None and first == last else part

    return " ".join(",".join(map(one, f.split(","))) for f in fields)


def day_or(expr: str) -> bool:
    """Whether cron ``expr`` fires on a day matching its day of month OR its weekday: only when
    both fields are restricted (neither starts with ``*``); otherwise a day must match both, as
    Vixie cron and cronie read it (``0 0 */2 * MON``: odd days that are Mondays). croniter ORs
    any two fields but a plain ``*``."""
    fields = expr.split()
    return len(fields) != 5 or not (fields[2].startswith("*") or fields[4].startswith("*"))


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)


@dataclass(frozen=True)
class Trigger:
    """When slots are: ``interval_ms`` (grid from ``anchor_ms``) or 5-field
    ``cron`` in ``time_zone``; ``jitter`` 0..0.9 of the period; inclusive
    bounds. ``ValueError`` (naming the field) when inconsistent."""

    interval_ms: int | None = None
    anchor_ms: int = 0
    cron: str | None = None
    time_zone: str = "UTC"
    jitter: float = 0.0
    start_at_ms: int | None = None
    end_at_ms: int | None = None

    def __post_init__(self) -> None:
        if (self.interval_ms is None) == (self.cron is None):
            raise ValueError("trigger: give exactly one of interval or cron")
        if self.interval_ms is not None and self.interval_ms < 100:
            raise ValueError("trigger.interval: must be at least 0.1 s")
        if self.cron is not None and (problem := cron_problem(self.cron)):
            raise ValueError(f"trigger.cron: {problem}")
        ZoneInfo(self.time_zone)  # raises ZoneInfoNotFoundError
        if not 0 <= self.jitter <= 0.9:
            raise ValueError("trigger.jitter: must be a fraction between 0 and 0.9")

    def slots(self, after_ms: int, until_ms: int) -> Iterator[int]:
        """Slots in ``(after_ms, until_ms]``, ascending, within the bounds."""
        lo = after_ms if self.start_at_ms is None else max(after_ms, self.start_at_ms - 1)
        hi = until_ms if self.end_at_ms is None else min(until_ms, self.end_at_ms)
        if hi <= lo:
            return
        if self.interval_ms is not None:
            n = max(0, (lo - self.anchor_ms) // self.interval_ms + 1)
            s = self.anchor_ms + n * self.interval_ms
            while s <= hi:
                yield s
                s += self.interval_ms
            return
        tz = ZoneInfo(self.time_zone)
        wall = _dt(lo).astimezone(tz).replace(tzinfo=None) - timedelta(hours=3)
        it = croniter(croniter_expr(self.cron), wall, day_or=day_or(self.cron))
        last = None
        while True:
            try:
                w = it.get_next(datetime)
            except CroniterBadDateError:  # no match within croniter's reach (50 years)
                return
            s = _ms(wall_to_instant(w, tz))
            if s <= lo or s == last:
                continue  # before the window, or a second wall time on one instant
            if s > hi:
                return
            last = s
            yield s

    def count(self, after_ms: int, until_ms: int) -> int:
        """Number of slots in ``(after_ms, until_ms]`` (exact, arithmetic for a grid)."""
        lo = after_ms if self.start_at_ms is None else max(after_ms, self.start_at_ms - 1)
        hi = until_ms if self.end_at_ms is None else min(until_ms, self.end_at_ms)
        if hi <= lo:
            return 0
        if self.interval_ms is not None:
            first = max(0, (lo - self.anchor_ms) // self.interval_ms + 1)
            last = (hi - self.anchor_ms) // self.interval_ms
            return max(0, last - first + 1)
        return sum(1 for _ in self.slots(after_ms, until_ms))

    def next_slots(self, after_ms: int, n: int) -> list[int]:
        """The next ``n`` slots after ``after_ms`` (fewer when ``endAt`` comes, or a cron
        matches no date within croniter's 50 years). A cron's slots are found one by one, so a
        frequent cron stops at the ``n``-th and a rare one (29 February on a Sunday: 28 or 40
        years apart) finds its ``n``."""
        out: list[int] = []
        reach = self.interval_ms if self.cron is None else 50 * 366 * 86_400_000
        for s in self.slots(after_ms, after_ms + reach * max(n, 1)):
            out.append(s)
            if len(out) == n:
                break
        return out

    def period(self, slot_ms: int) -> int:
        """The slot's period (ms): the interval, or the distance to the next cron slot."""
        if self.interval_ms is not None:
            return self.interval_ms
        nxt = Trigger(cron=self.cron, time_zone=self.time_zone).next_slots(slot_ms, 1)
        return (nxt[0] - slot_ms) if nxt else 60_000

    def fire_at(self, schedule_id: str, slot_ms: int) -> int:
        """When ``slot_ms`` fires: the slot plus the schedule's jitter share of its period."""
        if not self.jitter:
            return slot_ms
        return slot_ms + int(jitter_fraction(schedule_id) * self.jitter * self.period(slot_ms))


def jitter_fraction(schedule_id: str) -> float:
    """A fraction in [0, 1) fixed by the schedule id (first 8 bytes of its sha256)."""
    return int.from_bytes(hashlib.sha256(schedule_id.encode()).digest()[:8], "big") / 2 ** 64


@dataclass(frozen=True)
class Policy:
    """Catch-up (a missed slot runs within ``grace_ms``, newest ``max_catchup``),
    ``overlap``, and pause after ``pause_on_failure`` failures in a row (0: never)."""

    grace_ms: int = 60_000
    max_catchup: int = 1
    overlap: Overlap = "skip"
    pause_on_failure: int = 0

    def __post_init__(self) -> None:
        if self.overlap not in OVERLAPS:
            raise ValueError(f"policy.overlap: one of {', '.join(OVERLAPS)}")
        if self.grace_ms < 0 or self.max_catchup < 0 or self.pause_on_failure < 0:
            raise ValueError("policy: grace, maxCatchup and pauseOnFailure must be >= 0")


@dataclass
class Run:
    """A fired slot still running; ``ref``: the task id once set."""

    slot: int
    fired_at: int
    kind: str = "scheduled"
    ref: str | None = None


COUNTERS = ("fired", "skipped_missed", "skipped_overlap", "skipped_paused", "succeeded",
            "failed", "cancelled")


@dataclass
class State:
    """A schedule's runtime state; ``cursor``: newest slot decided (ms);
    ``failures``: consecutive; ``history``: newest last, <= :data:`HISTORY`."""

    cursor: int
    running: list[Run] = field(default_factory=list)
    buffered: int | None = None
    backfill: list[int] = field(default_factory=list)
    paused: bool = False
    note: str | None = None
    failures: int = 0
    counters: dict[str, int] = field(default_factory=lambda: {c: 0 for c in COUNTERS})
    history: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "State":
        data = dict(data)
        data["running"] = [Run(**r) for r in data.get("running", [])]
        counters = {c: 0 for c in COUNTERS} | data.get("counters", {})
        data["counters"] = counters
        return cls(**data)

    def record(self, entry: dict) -> None:
        self.history.append(entry)
        del self.history[:-HISTORY]


@dataclass(frozen=True)
class Action:
    """For the runner: ``fire`` ``slot`` (``late`` ms), ``skip`` ``count``
    slots (a sample in ``slots``), ``cancel`` ``ref``, or ``pause``."""

    kind: Literal["fire", "skip", "cancel", "pause"]
    slot: int | None = None
    reason: str = ""
    late: int = 0
    slots: tuple[int, ...] = ()
    count: int = 0
    ref: str | None = None


def _skip(state: State, slots: list[int], count: int, reason: str, now: int) -> Action:
    state.counters[f"skipped_{reason}"] += count
    sample = tuple(slots[-SKIP_SAMPLE:])
    state.record({"status": "skipped", "reason": reason, "count": count,
                  "slots": list(sample), "at": now})
    return Action("skip", slots=sample, count=count, reason=reason)


def _fire(state: State, slot: int, reason: str, now: int, fire_at: int) -> Action:
    state.running.append(Run(slot=slot, fired_at=now, kind=reason))
    state.counters["fired"] += 1
    return Action("fire", slot=slot, reason=reason, late=max(0, now - fire_at))


def _admit(policy: Policy, state: State, slot: int, reason: str, now: int,
           fire_at: int) -> list[Action]:
    if not state.running or policy.overlap == "allow":
        return [_fire(state, slot, reason, now, fire_at)]
    if policy.overlap == "skip":
        return [_skip(state, [slot], 1, "overlap", now)]
    if policy.overlap == "bufferOne":
        if state.buffered is None:
            state.buffered = slot
            return []
        return [_skip(state, [slot], 1, "overlap", now)]
    # cancelPrevious
    out = [Action("cancel", slot=r.slot, ref=r.ref) for r in state.running]
    for r in state.running:
        state.counters["cancelled"] += 1
        state.record({"slot": r.slot, "status": "cancelled", "ref": r.ref, "at": now,
                      "kind": r.kind, "durationMs": now - r.fired_at})
    state.running.clear()
    return out + [_fire(state, slot, reason, now, fire_at)]


def adopt(state: State, claims: dict[int, dict], now: int) -> None:
    """Take slots after ``state.cursor`` whose claim (``{"state", "ref", "at"}``) says
    ``fired`` as decided: a worker fired them and was killed before it saved the state. An
    export's run goes to ``running`` (overlap sees it, its end is counted), a probe's ended
    with its worker; the cursor moves past them, so no turn reports them missed or runs them
    again. Mutates ``state``."""
    fired = sorted(s for s, c in claims.items() if s > state.cursor and c.get("state") == "fired")
    for s in fired:
        ref = claims[s].get("ref")
        if ref is not None and all(r.slot != s for r in state.running):
            state.running.append(Run(slot=s, fired_at=int(claims[s].get("at") or now), ref=ref))
        state.counters["fired"] = state.counters.get("fired", 0) + 1
    if fired:
        state.cursor = fired[-1]


def tick(schedule_id: str, trigger: Trigger, policy: Policy, state: State,
         now: int) -> list[Action]:
    """Decide every slot due at ``now`` (ms) after ``state.cursor``: on time or
    within grace fire (per overlap), the rest are skipped and counted."""
    out: list[Action] = []
    due: list[int] = []
    horizon = now
    total_old = 0
    lo = state.cursor
    oldest_in_grace = now - policy.grace_ms - 1
    old_sample: list[int] = []
    if trigger.interval_ms is not None and lo < oldest_in_grace - trigger.interval_ms:
        # long downtime on a grid: count, do not list
        cut = oldest_in_grace - trigger.interval_ms
        total_old = trigger.count(lo, cut)
        old_sample = list(trigger.slots(max(lo, cut - SKIP_SAMPLE * trigger.interval_ms), cut))
        lo = cut
    elif trigger.cron is not None and lo < (cut := now - max(policy.grace_ms, ON_TIME_MS) - 1):
        # long downtime on a cron: a slot followed by another by ``cut`` fired
        # before it (jitter < its period), so it is missed and out of grace:
        # count, keep a sample, and work out fire times only for the rest
        recent: deque[int] = deque(maxlen=SKIP_SAMPLE + 1)
        for s in trigger.slots(lo, cut):
            recent.append(s)
            total_old += 1
        if total_old:
            total_old -= 1  # the newest may still be within grace
            old_sample = list(recent)[:-1]
            lo = old_sample[-1] if old_sample else lo
    for s in trigger.slots(lo, horizon):
        if trigger.fire_at(schedule_id, s) > now:
            break
        due.append(s)
        if len(due) > SCAN_LIMIT:
            break
    if not due and not total_old:
        return out + _drain_backfill(schedule_id, trigger, policy, state, now)
    newest = due[-1] if due else old_sample[-1]
    state.cursor = max(state.cursor, newest)
    if state.paused:
        out.append(_skip(state, old_sample + due, total_old + len(due), "paused", now))
        return out
    fire_at = {s: trigger.fire_at(schedule_id, s) for s in due}
    on_time = [s for s in due if now - fire_at[s] <= ON_TIME_MS]
    missed = [s for s in due if now - fire_at[s] > ON_TIME_MS]
    in_grace = [s for s in missed if now - fire_at[s] <= policy.grace_ms]
    catch = in_grace[len(in_grace) - policy.max_catchup:] if policy.max_catchup else []
    skipped = [s for s in missed if s not in catch]
    if skipped or total_old:
        out.append(_skip(state, old_sample + skipped, total_old + len(skipped), "missed", now))
    for s in catch:
        out.extend(_admit(policy, state, s, "catchup", now, fire_at[s]))
    for s in on_time:
        out.extend(_admit(policy, state, s, "scheduled", now, fire_at[s]))
    return out + _drain_backfill(schedule_id, trigger, policy, state, now)


def _drain_backfill(schedule_id: str, trigger: Trigger, policy: Policy, state: State,
                    now: int) -> list[Action]:
    out: list[Action] = []
    while state.backfill and not state.paused and (
            not state.running or policy.overlap == "allow"):
        slot = state.backfill.pop(0)
        out.append(_fire(state, slot, "backfill", now, trigger.fire_at(schedule_id, slot)))
    return out


def finished(schedule_id: str, trigger: Trigger, policy: Policy, state: State, slot: int,
             ok: bool, now: int, result: dict | None = None) -> list[Action]:
    """The run of ``slot`` ended: record, maybe pause, fire what waits.
    Unknown slots (a cancelled run) are ignored."""
    run = next((r for r in state.running if r.slot == slot), None)
    if run is None:
        return []
    state.running.remove(run)
    state.counters["succeeded" if ok else "failed"] += 1
    state.failures = 0 if ok else state.failures + 1
    state.record({"slot": slot, "status": "succeeded" if ok else "failed", "kind": run.kind,
                  "ref": run.ref, "firedAt": run.fired_at, "durationMs": now - run.fired_at,
                  "lateMs": max(0, run.fired_at - trigger.fire_at(schedule_id, slot)),
                  "result": result or {}, "at": now})
    out: list[Action] = []
    if not ok and policy.pause_on_failure and state.failures >= policy.pause_on_failure:
        state.paused = True
        state.note = f"paused after {state.failures} consecutive failures"
        out.append(Action("pause", reason=state.note))
    if state.buffered is not None and not state.running and not state.paused:
        slot, state.buffered = state.buffered, None
        out.append(_fire(state, slot, "buffered", now, trigger.fire_at(schedule_id, slot)))
    return out + _drain_backfill(schedule_id, trigger, policy, state, now)


def trigger_now(schedule_id: str, trigger: Trigger, policy: Policy, state: State,
                now: int) -> list[Action]:
    """A manual run with slot = ``now`` (ms), obeying overlap (works while paused)."""
    return _admit(policy, state, now, "manual", now, now)


def backfill(trigger: Trigger, state: State, start_ms: int, end_ms: int,
             limit: int = 1000, done: Collection[int] = ()) -> list[int]:
    """Queue the slots of ``[start_ms, end_ms]`` not in ``done``; the range's
    slots. ``ValueError`` over ``limit``."""
    slots = backfill_slots(trigger, start_ms, end_ms, limit)
    queued = sorted(set(state.backfill) | (set(slots) - set(done)))
    state.backfill = queued
    return slots


def backfill_slots(trigger: Trigger, start_ms: int, end_ms: int, limit: int = 1000) -> list[int]:
    """The slots of ``[start_ms, end_ms]``; ``ValueError`` over ``limit``."""
    slots = list(islice(trigger.slots(start_ms - 1, end_ms), limit + 1))
    if len(slots) > limit:
        raise ValueError(f"end: the range holds more than {limit} slots; at most {limit} "
                         "per backfill")
    return slots


def lag(schedule_id: str, trigger: Trigger, state: State, now: int) -> float:
    """Seconds since the oldest undecided due slot's fire time (0 if none)."""
    nxt = trigger.next_slots(state.cursor, 1)
    if not nxt:
        return 0.0
    at = trigger.fire_at(schedule_id, nxt[0])
    return max(0.0, (now - at) / 1000)
