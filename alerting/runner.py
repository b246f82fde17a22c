"""Apply ``alerts.funnel`` commands to their partition's funnel, without Kafka or HTTP:
:meth:`FunnelRunner.apply` runs the pure funnel, persists what changed (:mod:`alerting.store`) and
returns the :class:`Effects` the agent carries out."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, MutableMapping

from alerting.commands import origin, read_alert_command
from alerting.config import AlertingConfig
from alerting.counters import observe_decision
from alerting.due import DueIndex
from alerting.group import due_at
from alerting.model import Message
from alerting.silence import SilenceRefused
from alerting.store import PartitionState
from plait import tracing
from plait.memory import TrimAfterShrink

log = logging.getLogger("plait.alerting")

#: Longest lag (s) of an episode's stored ``last_seen`` when only repeats arrived.
SEEN_PERSIST_EVERY = 30.0
#: The episode fields a repeat may move without being written at once.
_MOVED_BY_REPEAT = frozenset({"last_seen", "expires_at"})


def _repeat_only(old: dict[str, Any] | None, ep: dict[str, Any], now: float) -> bool:
    """True when the alert just applied need not write its episode now (docs/alerting.md, "On
    Kafka", repeats): ``ep`` differs from ``old`` in ``last_seen``/``expires_at`` only, and the
    values last marked for writing (``seen_saved``, ``exp_saved``) still bound what a restart reads:
    stored ``last_seen`` under :data:`SEEN_PERSIST_EVERY` s behind, a firing episode's stored
    ``expires_at`` no later than the live one and over half its remaining life past ``now``."""
    if old is None or old is ep or len(old) != len(ep):
        return False
    for k, v in ep.items():
        if k not in _MOVED_BY_REPEAT and (k not in old or old[k] != v):
            return False
    if now - ep.get("seen_saved", float("-inf")) >= SEEN_PERSIST_EVERY:
        return False
    before, exp, saved = old.get("expires_at"), ep.get("expires_at"), ep.get("exp_saved")
    if ep.get("status") != "firing":
        return exp == before
    return (before is not None and exp is not None and before <= exp and saved is not None
            and now + (exp - now) / 2 < saved)


def offset_hole(last: int, offsets: list[int]) -> tuple[int, int] | None:
    """``(start, stop)``: the offsets from ``last + 1`` to the batch's highest (exclusive) when
    ``offsets`` (a batch of one ``alerts.funnel`` partition) does not hold every one of them, else
    None. ``last``: the partition's last applied offset, -1 when none (no hole can be told then).
    Offsets of the topic are contiguous (no compaction, no transactions), so a hole is a record
    the consumer did not hand over (docs/kafka-rules.md #18)."""
    new = {o for o in offsets if o > last}
    if last < 0 or not new or max(new) - last == len(new):
        return None
    return last + 1, max(new)


@dataclass
class Effects:
    """What one command asks the agent to do: ``ledger`` entries (dicts) to emit, ``messages`` to
    send (state persisted), ``wake_at`` (epoch s) for a tick sooner than the timer, ``skipped`` (a
    replay), ``writes`` made, ``release_memory`` when the process should hand the memory of
    alerts that went back to the OS (:class:`plait.memory.TrimAfterShrink`)."""

    ledger: list[dict[str, Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    wake_at: float | None = None
    skipped: bool = False
    writes: int = 0
    release_memory: bool = False

    def wake(self, at: float | None) -> None:
        """Want a tick at ``at`` (keeps the soonest; None: no wish)."""
        if at is not None and (self.wake_at is None or at < self.wake_at):
            self.wake_at = at


class FunnelRunner:
    """Every funnel partition this process has seen, each resumable from ``table`` (Faust
    ``Table`` or dict); ``clock`` gives epoch seconds."""

    def __init__(self, config: AlertingConfig, table: MutableMapping[str, bytes],
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.table = table
        self.clock = clock
        self.partitions: dict[int, PartitionState] = {}
        #: epoch s of this worker's last configuration reload (None: none since it started); a
        #: partition whose stored ``reloaded_at`` is older restarts its group timers at it
        self.reloaded_at: float | None = None
        #: the configuration before the last reload (:meth:`Funnel.restart_timers`)
        self.previous_config: Any = None
        #: partition -> (PartitionState, group id -> raws pending, their sum)
        self._pending: dict[int, tuple[PartitionState, dict[str, int], int]] = {}
        #: when a storm's alerts went (``Effects.release_memory``)
        self.trim = TrimAfterShrink()
        #: partition -> offsets this process gave up (a failing command, dead-lettered)
        self._given_up: dict[int, set[int]] = {}

    def state(self, partition: int) -> PartitionState:
        """The partition's state, (re)loaded from the table when absent or stale."""
        ps = self.partitions.get(partition)
        if ps is None or ps.stale():
            ps = self.partitions[partition] = PartitionState(partition, self.table, self.config)
            ps.due = DueIndex(self._timing)
            ps.due.rebuild(ps.funnel.state["groups"], self.clock())
        return ps

    def forget(self, partition: int) -> None:
        """Drop the in-memory copy (after an error: the table is the truth)."""
        self.partitions.pop(partition, None)
        self._pending.pop(partition, None)

    def give_up(self, partition: int, offset: int) -> None:
        """Record that ``offset`` of ``partition`` will not be applied (its command failed and was
        dead-lettered), so it is no hole (:func:`offset_hole`)."""
        self._given_up.setdefault(partition, set()).add(offset)

    def given_up(self, partition: int, after: int) -> set[int]:
        """The offsets of ``partition`` given up past ``after``; forgets those at or before it."""
        given = self._given_up.get(partition)
        if not given:
            return set()
        given.difference_update([o for o in given if o <= after])
        return set(given)

    def open_alerts(self) -> int:
        """Alerts (episodes: firing, or resolved and not yet settled) held in memory over every
        partition; O(partitions)."""
        return sum(len(ps.funnel.state["episodes"]) for ps in self.partitions.values())

    def counters(self, partition: int) -> dict[str, Any] | None:
        """The partition's counters with ``pending`` and ``balanced``, if known; ``pending`` is
        recounted only for groups written since the last call (published every second)."""
        ps = self.partitions.get(partition)
        if ps is None:
            return None
        return ps.funnel.counters(pending=self._pending_of(ps))

    def _pending_of(self, ps: PartitionState) -> int:
        f, groups = ps.funnel, ps.funnel.state["groups"]
        changed = ps.watch("pending").take()
        cached = self._pending.get(ps.partition)
        if cached is None or cached[0] is not ps or changed is None:
            counts = {gid: f.group_pending(g) for gid, g in groups.items()}
            total = sum(counts.values())
        else:
            _ps, counts, total = cached
            for gid in changed[1]:
                total -= counts.pop(gid, 0)
                g = groups.get(gid)
                if g is not None:
                    counts[gid] = n = f.group_pending(g)
                    total += n
        self._pending[ps.partition] = (ps, counts, total)
        return total + f.queued_pending()

    def apply(self, partition: int, offset: int, cmd: dict[str, Any]) -> Effects:
        """Apply one command read at ``offset`` of ``partition``. Raises only on a bug: the caller
        then calls :meth:`forget`."""
        return self.apply_batch(partition, [(offset, cmd)])

    def apply_batch(self, partition: int, commands: list[tuple[int, dict[str, Any]]]) -> Effects:
        """Apply ``commands`` (``[(offset, command)]``, offsets increasing) of ``partition`` in
        order (with a tick at the end when something is due), then persist each touched entity
        once with the last offset, so a replay is recognised whole (docs/kafka-rules.md).

        Returns the combined :class:`Effects` (messages to send only once the writes are durable).
        Raises only on a bug: the caller calls :meth:`forget` and the batch is redone.
        """
        ps = self.state(partition)
        fx = Effects()
        touched: set[str] | None = set()
        last, applied, ticked = None, 0, False
        for offset, cmd in commands:
            if ps.seen(offset):
                continue
            now = self.clock()
            if last is None and self.reloaded_at is not None:  # saved with this batch
                keys = self._restart_timers(ps, fx)
                self._reindex(ps, keys, now)
                touched |= set(keys)
            last = offset
            kind = cmd["kind"]
            if kind in ("alert", "alerts"):
                keys = []
                for item in (cmd,) if kind == "alert" else cmd.get("items") or ():
                    got = self._alert(ps, item, now, fx)
                    if got is not None:
                        keys += got
                        applied += 1
            else:
                keys = self._other(ps, kind, cmd, now, fx)
                applied += 1
            self._reindex(ps, keys, now)
            if touched is not None:
                touched = None if keys is None else touched | set(keys)
            ticked = kind == "tick"
        fx.skipped = applied == 0
        if last is None:
            return fx
        if not ticked and fx.wake_at is not None and fx.wake_at <= now + 1e-9:
            # something is due already: tick now, not after a trip through the 1 s timer
            fx.wake_at = None
            keys = self._other(ps, "tick", {"kind": "tick"}, now, fx)
            self._reindex(ps, keys, now)
            if touched is not None:
                touched |= set(keys)
        nxt = self.next_due(ps)
        if nxt is not None and nxt > now:  # a past one (a group held by a mute interval): the timer
            fx.wake(nxt)
        fx.writes = ps.save(last, touched)
        fx.release_memory = self.trim.observe(self.open_alerts())
        self._tag(fx.ledger, partition)
        return fx

    def _restart_timers(self, ps: PartitionState, fx: Effects) -> list[str]:
        """Restart the partition's group timers at this worker's last reload unless its state
        holds that reload or a later one (:meth:`alerting.funnel.Funnel.restart_timers`); the
        table keys of the groups changed, each group's next flush a wish in ``fx``."""
        gids = ps.funnel.restart_timers(self.reloaded_at, self.previous_config)
        groups = ps.funnel.state["groups"]
        for gid in gids:
            fx.wake(due_at(groups[gid], *self._timing(groups[gid])))
        return [ps.key("grp", gid) for gid in gids]

    @staticmethod
    def next_due(ps: PartitionState) -> float | None:
        """The partition's next tick (epoch s): soonest due group, expiry or retry, so a group
        flushes on its timer, not at the next 1 s tick."""
        st = ps.funnel.state
        times = [ps.due.next_due(), st.get("next_expiry"), st.get("next_foreign_expiry")] + [
            rs["inflight"].get("next_attempt_at") for rs in st["receivers"].values()
            if rs["inflight"] is not None and rs["inflight"].get("state") == "waiting"]
        times = [t for t in times if t is not None]
        return min(times) if times else None

    @staticmethod
    def _reindex(ps: PartitionState, keys: list[str] | None, now: float) -> None:
        """Tell the due index which groups ``keys`` (table keys; None: rebuild) may have changed."""
        groups = ps.funnel.state["groups"]
        if keys is None:
            ps.due.rebuild(groups, now)
            return
        head = ps.prefix + "grp|"
        ps.due.update(groups, [k[len(head):] for k in keys if k.startswith(head)])

    def _timing(self, g: dict[str, Any]) -> tuple[float, float, float]:
        """A group's (group_wait, group_interval, repeat_interval): its route's or the config's."""
        t = self.config.timing
        return tuple(g.get("timing") or (t.group_wait, t.group_interval, t.repeat_interval))

    def _due_groups(self, ps: PartitionState, now: float) -> list[str]:
        """Groups a tick at ``now`` may evaluate: due within the longest refill interval
        (critical first may pull them forward); they leave :mod:`alerting.due` until reindexed."""
        ahead = max((r.bucket.refill_interval for r in self.config.receivers), default=0.0)
        if ps.due.stale(now):
            ps.due.rebuild(ps.funnel.state["groups"], now)
        return ps.due.due_by(now + ahead + 1e-9)

    @staticmethod
    def _muted_or_expiring(ps: PartitionState, now: float) -> set[str]:
        """Episodes a tick may change beyond due groups: muted ones and expired firing ones."""
        f = ps.funnel
        st = f.state
        fps = f.muted()
        nxt = st.get("next_expiry")
        if nxt is not None and nxt <= now + 1e-9:
            fps |= {fp for fp, ep in st["episodes"].items()
                    if ep["status"] == "firing" and (ep.get("expires_at") is None
                                                     or ep["expires_at"] <= now + 1e-9)}
        return fps

    @staticmethod
    def _foreign_keys(ps: PartitionState) -> list[str]:
        """Table keys of the other partitions' inhibition sources changed since last asked."""
        return [ps.key("fs", fp) for fp in ps.funnel.take_foreign_written()]

    @staticmethod
    def _message_members(ps: PartitionState, message_id: str) -> dict[str, set[str]]:
        """Group id -> fingerprints listed in message ``message_id``'s sections, and in the
        sections of those groups queued in its lane: what its delivery may settle
        (:func:`alerting.group.settle`) or its refusal give back to the groups
        (:meth:`alerting.stages.dispatch.Dispatch._refused`)."""
        out: dict[str, set[str]] = {}
        for rs in ps.funnel.state["receivers"].values():
            if rs["inflight"] is not None and rs["inflight"]["id"] == message_id:
                for s in rs["inflight"]["sections"]:
                    out.setdefault(s["group_id"], set()).update(fp for fp, _q, _r in s["snapshot"])
                for s in rs["outbox"] if not ps.funnel.config.grouping.merge_groups else ():
                    if s["group_id"] in out:
                        out[s["group_id"]].update(fp for fp, _q, _r in s["snapshot"])
        return out

    @staticmethod
    def _member_keys(ps: PartitionState, members: dict[str, set[str]], fps: set[str]) -> set[str]:
        """Table keys of the groups ``members`` names (header, and the
        member and episode of each fingerprint listed), of the episodes
        ``fps``, and of every receiver."""
        keys = {ps.key("rcv", name) for name in ps.funnel.state["receivers"]}
        keys.update(ps.key("ep", fp) for fp in fps)
        for gid, group_fps in members.items():
            keys.add(ps.key("grp", gid))
            for fp in group_fps:
                keys.add(ps.member_key(gid, fp))
                keys.add(ps.key("ep", fp))
        return keys

    def _other(self, ps: PartitionState, kind: str, cmd: dict[str, Any], now: float,
               fx: Effects) -> list[str] | None:
        """Apply a tick, result, sources, silence or expire command; the table keys it may have
        changed (None: compare all)."""
        f = ps.funnel
        st = f.state
        if kind == "tick":
            silenced = self._muted_or_expiring(ps, now)
            due = self._due_groups(ps, now)
            members = {}  # group id -> fingerprints of members the tick may change
            for fp in silenced:
                gid = st["episodes"].get(fp, {}).get("group")
                if gid:
                    members.setdefault(gid, set()).add(fp)
            step = f.step(now, only=due)
            fx.messages += step.messages
            fx.ledger += [e.to_dict() for e in step.ledger]
            for gid, fps in step.members.items():
                members.setdefault(gid, set()).update(fps)
            for gid in due:
                members.setdefault(gid, set())
            return list(self._member_keys(ps, members, silenced)) + self._foreign_keys(ps)
        if kind == "sources":
            items = cmd.get("items")
            for item in items if isinstance(items, list) else [items]:
                try:
                    if f.take_source(item, now):
                        fx.wake(now)  # its targets are free at the next tick
                except ValueError as e:
                    log.warning("partition %s: %s", ps.partition, e)
            return self._foreign_keys(ps)
        if kind == "result":
            members = self._message_members(ps, cmd["message_id"])
            keys = self._member_keys(ps, members, set())
            if cmd.get("ok"):
                fx.ledger += [e.to_dict() for e in f.delivered(cmd["message_id"], now)]
                if any(rs["outbox"] and rs["inflight"] is None for rs in st["receivers"].values()):
                    fx.wake(now)  # the next message may leave at once
            else:
                fx.wake(f.delivery_failed(cmd["message_id"], now, status=cmd.get("status"),
                                          retry_after=cmd.get("retry_after"),
                                          maybe_delivered=bool(cmd.get("maybe_delivered"))))
            return list(keys)
        fx.wake(now)  # a silence made or ended changes what the next flush may send
        if kind == "silence":
            try:
                f.add_silence(cmd["silence"], now, silence_id=cmd["silence"].get("id"))
            except SilenceRefused as e:
                log.warning("silence %s refused on partition %s: %s",
                            cmd["silence"].get("id"), ps.partition, e)
        elif kind == "expire":
            f.expire_silence(cmd["id"], now)
        return None

    def _alert(self, ps: PartitionState, cmd: dict[str, Any], now: float,
               fx: Effects) -> list[str] | None:
        """Apply one alert; the table keys it may have changed, None for a replay."""
        src = origin(cmd)
        if ps.seen_raw(*src):
            return None
        # a span of the alert's trace (child of its route span); its group keeps the traceparent
        if not tracing.exporting():  # the span is optional: no context manager per alert
            return self._take_alert(ps, cmd, now, fx, src, None)
        with tracing.span("alert.funnel_decision", cmd.get("tp"), optional=True,
                          **{"plait.raw_id": cmd.get("id"), "plait.receiver": src[4]}) as sp:
            touched = self._take_alert(ps, cmd, now, fx, src, sp)
        return touched

    def _take_alert(self, ps: PartitionState, cmd: dict[str, Any], now: float, fx: Effects,
                src: tuple, sp: Any) -> list[str]:
        f, touched = ps.funnel, []
        tp = tracing.current_traceparent() if sp is not None else None
        group = None
        read = read_alert_command(self.config, cmd)
        if read.alert is None:
            entries = [f.reject(read.rejected or "(alert): invalid", now, read.raw_id)]
        else:
            olds = {fp: f.state["episodes"].get(fp) for fp in read.fingerprints}
            entries = []
            for rid, d in read.decisions:
                entries += f.take(read.alert, d, now, rid, traceparent=tp,
                                  received_at=read.received_at)
            if read.received_at is not None:
                observe_decision(f.state["counters"], now - read.received_at)  # raw in -> decided
            # raw ids not ended at once wait in a member (a repeat without cooldown): written
            held = {rid for rid, _d in read.decisions} - {e.raw_id for e in entries}
            for fp in read.fingerprints:
                ep = f.state["episodes"].get(fp)
                new_group = group = ep.get("group") if ep else None
                g = f.state["groups"].get(new_group) if new_group else None
                if g is not None:
                    fx.wake(due_at(g, *self._timing(g)))
                if ep is not None:
                    if not held and _repeat_only(olds[fp], ep, now):
                        continue  # its group and member are unchanged too
                    ep["seen_saved"], ep["exp_saved"] = ep["last_seen"], ep.get("expires_at")
                old_group = (olds[fp] or {}).get("group")
                touched += [ps.key("ep", fp)] + [
                    k for g in {old_group, new_group} if g
                    for k in (ps.key("grp", g), ps.member_key(g, fp))]
        touched += self._foreign_keys(ps)
        ps.mark_raw(*src)
        fx.ledger += [e.to_dict() for e in entries]
        if sp is not None:
            sp.set_attribute("plait.outcome", entries[0].outcome if entries else "grouped")
            if group and not entries:
                sp.set_attribute("plait.group_id", group)
        return touched

    @staticmethod
    def _tag(entries: list[dict[str, Any]], partition: int) -> None:
        for e in entries:
            e["partition"] = partition

