"""The read model of current alerts (``GET /api/v2/alerts``). The API process has no Faust
tables, so each funnel partition publishes its firing alerts to Redis and the API reads them:

- hash ``plait.keys.alert_view`` per partition: episode key -> Alertmanager's ``gettableAlert``
  JSON plus ``_group``/``_route`` (for ``/api/v2/alerts/groups``) and ``_m`` (``rule``, ``asset``,
  ``severity``); field :data:`META_FIELD` holds ``{"updatedAt", "total", "shown"}``;
- bounded: firing episodes only (as Alertmanager's API), at most :data:`MAX_VIEW_ALERTS` (most
  recently seen), key TTL :data:`VIEW_TTL` so a dead worker's partition stops being listed;
- incremental: at most every :data:`PUBLISH_EVERY` s, one pipeline of the changed fields
  (``PartitionState.watch``); a partition's first publish in a process rewrites the hash;
- off the funnel's path: :meth:`ViewHook.schedule` publishes in the background (views built in a
  thread), one publish per partition at a time.

A Redis failure is logged and the view skipped, never raised into the funnel. State follows
Alertmanager's ``types.AlertState``: ``suppressed`` when silenced or inhibited, else ``active``.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Callable, Coroutine, Iterable

import orjson
from sortedcontainers import SortedList

from alerting.dedupe import fingerprint as alert_fingerprint
from alerting.group import group_labels
from alerting.intake import format_time
from alerting.model import Alert
from alerting.store import compact
from alerting.routing import group_route, routes_for
from plait import keys as K

log = logging.getLogger("plait.alerting")

#: Most alerts one partition lists; beyond, the most recently seen are kept.
MAX_VIEW_ALERTS = 10_000
#: Seconds a partition's view outlives its last publish.
VIEW_TTL = 30
#: Least seconds between two publishes of one partition.
PUBLISH_EVERY = 1.0
#: Hash field holding the partition's publish metadata (not an alert).
META_FIELD = "~meta"


def am_labels(alert: Alert) -> dict[str, str]:
    """Labels an Alertmanager client sees: a native alert's plus ``alertname``, ``asset``,
    ``severity``."""
    if alert.source == "alertmanager":
        return dict(alert.labels)
    out = dict(alert.labels)
    out.setdefault("alertname", alert.rule)
    out.setdefault("asset", alert.asset)
    out.setdefault("severity", alert.severity.label)
    return out


def _inhibitors(ep: dict[str, Any]) -> list[str]:
    value = ep.get("inhibited_by")
    if not value:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def alert_view(ep: dict[str, Any], config: Any, groups: dict[str, Any]) -> dict[str, Any]:
    """Firing episode ``ep`` as Alertmanager's ``gettableAlert`` plus ``_group``/``_route``, with
    ``updatedAt`` = ``last_seen`` and ``endsAt`` = ``expires_at`` (api/v2/api.go
    ``postAlertsHandler`` sets both on every POST; alert.go ``Merge`` keeps the younger ``EndsAt``).
    Receiver and group labels are its group's in ``groups``, else its route's."""
    alert = Alert.from_dict(ep["alert"])
    match = alert.match_labels()
    group = groups.get(ep.get("group") or "")
    if group:  # grouped: its receiver, route and labels (its route's group_by)
        route = group_route(config, group)
        rid = route.id if route is not None else group.get("route", "0")
        receiver, glabels = group["receiver"], group["labels"]
    else:  # not grouped (silenced, inhibited): the route it was taken for, else its first
        route = group_route(config, ep) if ep.get("route") else None
        route = route or routes_for(config, match)[0]
        receiver, rid = route.receiver, route.id
        glabels = group_labels(alert, route.group_by, match)  # group_key's, without hashing
    labels = am_labels(alert)
    silenced = [ep["silenced_by"]] if ep.get("silenced_by") else []
    inhibited = _inhibitors(ep)
    seen = float(ep.get("last_seen") or alert.time)
    started = ep.get("started_at")
    ends = ep.get("expires_at")  # the funnel's: set by every firing receipt
    if ends is None:
        ends = alert.ends_at if alert.ends_at else seen + config.timing.resolve_timeout
    out = {
        "labels": labels, "annotations": dict(alert.annotations),
        "startsAt": format_time(started if started is not None else seen),
        "endsAt": format_time(ends),
        "updatedAt": format_time(seen),
        "fingerprint": _view_fingerprint(ep, alert, config),
        "receivers": [{"name": receiver}],
        "status": {"state": "suppressed" if silenced or inhibited else "active",
                   "silencedBy": silenced, "inhibitedBy": inhibited},
        "_group": glabels, "_route": rid,
        "_m": {k: match[k] for k in ("rule", "asset", "severity") if k in match},
    }
    if alert.generator_url:  # Alertmanager's gettableAlert: omitempty
        out["generatorURL"] = alert.generator_url
    return out


def _view_fingerprint(ep: dict[str, Any], alert: Alert, config: Any) -> str:
    """The alert's identity (docs/alerting.md, "Identity"), the name its messages and its story
    (``GET /alerts/{fingerprint}/history``) give it: the episode's before any ``~`` (a
    ``continue`` route's copy), else (no episode: :class:`RecentAlerts`) :func:`identity`."""
    if ep.get("fp"):
        return ep["fp"].partition("~")[0]
    return identity(alert, config)


def identity(alert: Alert, config: Any) -> str:
    """The fingerprint the funnel keys ``alert``'s episode on under ``config``
    (:func:`alerting.dedupe.fingerprint`): an Alertmanager-form alert's label set hashed as
    Alertmanager does, a native alert's ``dedupe.fingerprint_labels`` (not its labels: those
    describe it, and a severity label would make an escalation another alert)."""
    return alert_fingerprint(alert, config.dedupe.fingerprint_labels)


def view_json(view: dict[str, Any]) -> bytes:
    """A view as compact UTF-8 JSON (orjson; what it refuses takes the stdlib's ``default=str``,
    unencodable characters as ``?``), in bytes of their own size (``alerting.store.compact``)."""
    try:
        return compact(orjson.dumps(view))
    except TypeError:
        return json.dumps(view, separators=(",", ":"), ensure_ascii=False,
                          default=str).encode("utf-8", "replace")


def _signature(ep: dict[str, Any], groups: dict[str, Any]) -> tuple:
    """What a view depends on: unchanged signature -> the bytes are reused."""
    group = groups.get(ep.get("group") or "")
    return (ep.get("last_seen"), ep.get("expires_at"), ep.get("started_at"),
            ep.get("silenced_by"), str(ep.get("inhibited_by")), ep.get("group"),
            group["receiver"] if group else None,
            ep["alert"].get("time"), ep["alert"].get("severity"))


def _rank(fp: str, ep: dict[str, Any] | None) -> tuple[float, str] | None:
    """An episode's place in the view: ``(last seen, key)``, greatest first; None unless firing."""
    if ep is None or ep.get("status") != "firing" or not ep.get("alert"):
        return None
    return (float(ep.get("last_seen") or 0), fp)


class _Shown:
    """One partition's view: written views (key -> (signature, bytes)), shown keys per group, and
    firing episodes ranked (:func:`_rank`) so the shown set follows from changes; ``floor``: the
    least rank shown when not all are, else None."""

    __slots__ = ("views", "members", "ranks", "order", "floor")

    def __init__(self) -> None:
        self.views: dict[str, tuple[tuple, bytes]] = {}
        self.members: dict[str, set[str]] = {}
        self.ranks: dict[str, tuple[float, str]] = {}
        self.order = SortedList()
        self.floor: tuple[float, str] | None = None

    def rerank(self, fp: str, rank: tuple[float, str] | None) -> None:
        old = self.ranks.pop(fp, None)
        if old is not None:
            self.order.remove(old)
        if rank is not None:
            self.ranks[fp] = rank
            self.order.add(rank)

    def show(self, fp: str, entry: tuple[tuple, bytes]) -> None:
        self.hide(fp)
        self.views[fp] = entry
        if entry[0][4]:
            self.members.setdefault(entry[0][4], set()).add(fp)

    def hide(self, fp: str) -> None:
        old = self.views.pop(fp, None)
        gid = old[0][4] if old is not None else None
        if gid and gid in self.members:
            self.members[gid].discard(fp)
            if not self.members[gid]:
                del self.members[gid]


class ViewPublisher:
    """Publishes funnel partitions' current alerts to ``redis`` (a client or a callable giving one)
    under ``prefix`` (see module doc)."""

    def __init__(self, redis: Any, prefix: str, config: Any, limit: int = MAX_VIEW_ALERTS,
                 ttl: int = VIEW_TTL, every: float = PUBLISH_EVERY) -> None:
        self._redis = redis
        self.prefix, self.config = prefix, config
        self.limit, self.ttl, self.every = limit, ttl, every
        self._shown: dict[int, _Shown] = {}
        self._at: dict[int, float] = {}

    def key(self, partition: int) -> str:
        """The Redis key of ``partition``'s view."""
        return K.alert_view(self.prefix, partition)

    def _view_bytes(self, fp: str, ep: dict[str, Any], groups: dict[str, Any]) -> bytes | None:
        try:
            view = alert_view(ep, self.config, groups)
        except Exception as e:  # one odd episode must not hide the others
            log.warning("alert view of %s skipped: %s", fp, e)
            return None
        return view_json(view)

    def _floor(self, shown: _Shown) -> tuple[float, str] | None:
        return shown.order[-self.limit] if len(shown.order) > self.limit else None

    def walk(self, state: dict[str, Any], old: _Shown | None) -> tuple[_Shown, dict[str, bytes], list[str]]:
        """The view of ``state`` from every episode: ``(shown, views to write, keys to delete)``
        against ``old``, reusing bytes of unchanged signatures."""
        groups = state.get("groups", {})
        firing: dict[str, dict[str, Any]] = {}
        new = _Shown()
        for fp, ep in list(state.get("episodes", {}).items()):
            rank = _rank(fp, ep)
            if rank is not None:
                firing[fp], new.ranks[fp] = ep, rank
        new.order = SortedList(new.ranks.values())
        new.floor = self._floor(new)
        last = old.views if old is not None else {}
        writes: dict[str, bytes] = {}
        for _seen, fp in new.order.islice(-min(self.limit, len(new.order))) if new.order else ():
            ep, entry = firing[fp], last.get(fp)
            sig = _signature(ep, groups)
            if entry is None or entry[0] != sig:
                data = self._view_bytes(fp, ep, groups)
                if data is None:
                    continue
                entry = (sig, data)
                writes[fp] = data
            new.show(fp, entry)
        return new, writes, [fp for fp in last if fp not in new.views]

    def step(self, state: dict[str, Any], shown: _Shown,
             changed: tuple[set[str], set[str]]) -> tuple[dict[str, bytes], list[str]]:
        """Update ``shown`` in place from ``changed`` (:meth:`alerting.store.Changes.take`) and the
        episodes that crossed the floor; returns what :meth:`walk` would."""
        eps, gids = changed
        episodes, groups = state.get("episodes", {}), state.get("groups", {})
        fps = set(eps)
        for gid in gids:
            fps |= shown.members.get(gid, set())
        for fp in fps:
            shown.rerank(fp, _rank(fp, episodes.get(fp)))
        floor, old = self._floor(shown), shown.floor
        if floor != old:  # what lies between the two floors may have crossed
            lo = None if floor is None or old is None else min(floor, old)
            hi = old if floor is None else floor if old is None else max(floor, old)
            fps.update(fp for _seen, fp in shown.order.irange(lo, hi))
        shown.floor = floor
        writes: dict[str, bytes] = {}
        removed: list[str] = []
        for fp in fps:
            rank, entry = shown.ranks.get(fp), shown.views.get(fp)
            ep = episodes.get(fp) if rank is not None and (floor is None or rank >= floor) else None
            data = None
            if ep is not None:
                sig = _signature(ep, groups)
                if entry is not None and entry[0] == sig:
                    continue
                data = self._view_bytes(fp, ep, groups)
            if data is not None:
                shown.show(fp, (sig, data))
                writes[fp] = data
            elif entry is not None:
                shown.hide(fp)
                removed.append(fp)
        return writes, removed

    def _compute(self, state: dict[str, Any], last: _Shown | None,
                 changed: tuple[set[str], set[str]] | None) -> tuple[_Shown, dict[str, bytes], list[str]]:
        """:meth:`step` on ``last`` when it and ``changed`` are known, else :meth:`walk`."""
        if last is None or changed is None:
            return self.walk(state, last)
        return (last, *self.step(state, last, changed))

    async def publish(self, partition: int, state: dict[str, Any], now: float | None = None,
                      force: bool = False, changes: Any = None) -> int | None:
        """Publish ``partition``'s alerts unless it did less than ``every`` s ago (``force``
        ignores that); ``changes`` limits the look to what was written (:meth:`step`), None walks
        all. Returns the Redis commands sent, None when skipped or Redis failed (logged)."""
        now = time.time() if now is None else now
        if not force and now - self._at.get(partition, float("-inf")) < self.every:
            return None
        self._at[partition] = now
        last = self._shown.get(partition)
        try:
            changed = changes.take() if changes is not None else None
            # Built in a thread (it only reads the state) so the funnel does not wait; a failed
            # publish drops what the thread changed (the next rewrites the hash whole).
            shown, writes, removed = await asyncio.to_thread(self._compute, state, last, changed)
            redis = self._redis() if callable(self._redis) else self._redis
            pipe = redis.pipeline(transaction=True)
            key, commands = self.key(partition), 0
            if last is None:
                pipe.delete(key)
            items = list(writes.items())
            for i in range(0, len(items), 1000):
                pipe.hset(key, mapping=dict(items[i:i + 1000]))
                commands += 1
            for i in range(0, len(removed), 1000):
                pipe.hdel(key, *removed[i:i + 1000])
                commands += 1
            meta = {"updatedAt": now, "total": len(shown.order), "shown": len(shown.views),
                    "partition": partition, "receivers": receiver_levels(state, self.config, now)}
            pipe.hset(key, META_FIELD, json.dumps(meta))
            pipe.expire(key, self.ttl)
            await asyncio.wait_for(pipe.execute(), 3)
            if self._shown.get(partition) is last:  # not forgotten meanwhile
                self._shown[partition] = shown
            return commands + 2 + (last is None)
        except Exception as e:  # the view is a view: the funnel goes on without Redis
            self._shown.pop(partition, None)  # next publish rewrites the hash whole
            log.warning("cannot publish the alert view of partition %s: %s", partition, e)
            return None

    def next_at(self, partition: int) -> float:
        """Epoch seconds from which ``partition`` may publish again."""
        return self._at.get(partition, float("-inf")) + self.every

    def forget(self, partition: int) -> None:
        """Drop what was published for ``partition`` (it was revoked)."""
        self._shown.pop(partition, None)
        self._at.pop(partition, None)


def receiver_levels(state: dict[str, Any], config: Any, now: float) -> dict[str, dict[str, Any]]:
    """Per receiver of ``state``: ``tokens`` (refilled to ``now``), ``burst``, ``outbox``,
    ``inflight`` and ``last`` delivery result (None before any), its lanes
    (:data:`alerting.stages.dispatch.LANES`) added in; ``api.console`` sums them."""
    from alerting import bucket as tb

    from alerting.stages.dispatch import base_name

    out: dict[str, dict[str, Any]] = {}
    lanes = sorted((state.get("receivers") or {}).items(), key=lambda kv: "#" in kv[0])
    for name, rs in lanes:  # each receiver before its lanes, which add to it
        m = out.get(base_name(name))
        if m is not None:
            m["outbox"] += len(rs.get("outbox") or [])
            m["inflight"] = m["inflight"] or rs.get("inflight") is not None
            if rs.get("last") and (not m["last"] or rs["last"]["at"] > m["last"]["at"]):
                m["last"] = rs["last"]
            continue
        try:
            bc = config.receiver(name).bucket
            b = tb.refill(rs.get("bucket") or tb.new_bucket(bc.burst, now), now, bc.burst,
                          bc.refill_interval)
            out[name] = {"tokens": round(b["tokens"], 3), "burst": bc.burst,
                         "outbox": len(rs.get("outbox") or []),
                         "inflight": rs.get("inflight") is not None, "last": rs.get("last")}
        except Exception:  # a receiver gone from the config: skip it
            continue
    return out


async def read_receivers(redis: Any, prefix: str, partitions: Iterable[int]) -> dict[str, dict[str, Any]]:
    """Receiver levels of ``partitions`` merged: lowest tokens, outboxes summed, newest ``last``."""
    pipe = redis.pipeline(transaction=False)
    for p in partitions:
        pipe.hget(K.alert_view(prefix, p), META_FIELD)
    merged: dict[str, dict[str, Any]] = {}
    for raw in await pipe.execute():
        try:
            levels = json.loads(raw).get("receivers") or {} if raw else {}
        except ValueError:
            continue
        for name, r in levels.items():
            m = merged.get(name)
            if m is None:
                merged[name] = dict(r)
                continue
            m["tokens"] = min(m["tokens"], r["tokens"])
            m["outbox"] += r["outbox"]
            m["inflight"] = m["inflight"] or r["inflight"]
            if r.get("last") and (not m.get("last") or r["last"]["at"] > m["last"]["at"]):
                m["last"] = r["last"]
    return merged


class ViewHook:
    """Background view publishing for the worker: one publish per partition at a time, one more
    after it when asked meanwhile. ``partition_state``: partition -> its
    :class:`alerting.store.PartitionState` or None; ``spawn`` runs a coroutine."""

    def __init__(self, publisher: ViewPublisher, partition_state: Callable[[int], Any],
                 spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        self.publisher = publisher
        self.partition_state = partition_state
        self.spawn = spawn
        #: partition -> asked again while its publish is in flight
        self.flights: dict[int, bool] = {}

    def schedule(self, partition: int) -> None:
        """Publish ``partition``'s view in the background (see the class doc)."""
        if partition in self.flights:
            self.flights[partition] = True  # again when the one in flight is done
            return
        self.flights[partition] = False
        self.spawn(self._fly(partition))

    async def _fly(self, partition: int) -> None:
        try:
            while True:
                await self.publish(partition)
                if not self.flights.get(partition):
                    return
                self.flights[partition] = False
                # the follow-up would be throttled and dropped: wait for its turn
                wait = self.publisher.next_at(partition) - time.time()
                if wait > 0:
                    await asyncio.sleep(wait)
        finally:
            self.flights.pop(partition, None)

    async def publish(self, partition: int) -> None:
        """Publish ``partition``'s view now if the runner holds it. Never raises."""
        try:
            ps = self.partition_state(partition)
            if ps is not None:
                watch = getattr(ps, "watch", None)
                await self.publisher.publish(partition, ps.funnel.state,
                                             changes=watch("view") if watch is not None else None)
        except Exception as e:
            log.warning("alert view hook failed on partition %s: %s", partition, e)


async def read_views(redis: Any, prefix: str, partitions: Iterable[int]) -> list[dict[str, Any]]:
    """Every alert view published by ``partitions`` (one pipelined HGETALL each); unreadable values
    are skipped. Raises what Redis raises."""
    parts = list(partitions)
    pipe = redis.pipeline(transaction=False)
    for p in parts:
        pipe.hgetall(K.alert_view(prefix, p))
    out: list[dict[str, Any]] = []
    for found in await pipe.execute():
        for field, raw in (found or {}).items():
            name = field.decode() if isinstance(field, bytes) else field
            if name == META_FIELD:
                continue
            try:
                out.append(json.loads(raw))
            except ValueError:
                continue
    return out


#: Most alerts one API process keeps in its read-your-writes overlay (:class:`RecentAlerts`).
RECENT_MAX = 2_000
#: Seconds an accepted alert stays in the overlay: several publishes (:data:`PUBLISH_EVERY`).
RECENT_AGE = 10.0


class RecentAlerts:
    """The API's read-your-writes overlay: alerts this process accepted in the last
    :data:`RECENT_AGE` s, merged into the published view until it shows them (Alertmanager answers
    from its current state). At most :data:`RECENT_MAX` entries; a resolved alert is a tombstone
    hiding its published view. An entry keeps the alert and the config it was taken under; its
    view is built only when a read needs it (:func:`alert_view`), since most accepted alerts are
    published before anyone reads them and the view cost the POST more than its route decision."""

    def __init__(self, limit: int = RECENT_MAX, age: float = RECENT_AGE) -> None:
        from collections import OrderedDict

        self.limit, self.age = limit, age
        #: fingerprint -> _Recent (accepted at, epoch s; resolved: the entry only dates it)
        self._views: "OrderedDict[str, _Recent]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._views)

    def add(self, alert: Alert, config: Any, now: float) -> None:
        """Keep ``alert`` accepted at ``now`` under ``config``, for :meth:`merge`."""
        fp = identity(alert, config)
        self._views.pop(fp, None)
        resolved = alert.status.value != "firing" or (alert.ends_at is not None
                                                      and alert.ends_at <= now)
        self._views[fp] = _Recent(now, alert, config, resolved)
        self._prune(now)
        while len(self._views) > self.limit:
            self._views.popitem(last=False)

    def _prune(self, now: float) -> None:
        while self._views:
            fp, entry = next(iter(self._views.items()))
            if now - entry.at <= self.age:
                return
            del self._views[fp]

    def merge(self, views: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """``views`` from :func:`read_views` with this process's newer receipts added or updated
        (start, group and status kept), resolved ones left out; a published view as new ends its
        overlay entry."""
        self._prune(now)
        if not self._views:
            return views
        out, present = [], set()
        for v in views:
            fp = v.get("fingerprint", "")
            present.add(fp)
            entry = self._views.get(fp)
            if entry is None or str(v.get("updatedAt", "")) >= format_time(entry.at):
                if entry is not None and not entry.resolved:
                    del self._views[fp]  # the published view caught up
                out.append(v)
            elif not entry.resolved:
                view = entry.view()
                out.append({**v, **{k: view[k] for k in ("endsAt", "updatedAt", "annotations")}})
        for fp, entry in self._views.items():
            if not entry.resolved and fp not in present:  # a copy: the routes change what they list
                out.append(json.loads(view_json(entry.view())))
        return out


class _Recent:
    """One :class:`RecentAlerts` entry: ``at`` (accepted, epoch s), the alert, the config it was
    accepted under, ``resolved``; :meth:`view` builds its view once."""

    __slots__ = ("at", "alert", "config", "resolved", "_view")

    def __init__(self, at: float, alert: Alert, config: Any, resolved: bool) -> None:
        self.at, self.alert, self.config, self.resolved = at, alert, config, resolved
        self._view: dict[str, Any] | None = None

    def view(self) -> dict[str, Any]:
        """The alert as :func:`alert_view` shows it, not yet grouped."""
        if self._view is None:
            alert = self.alert
            ep = {"alert": alert.to_dict(), "last_seen": self.at,
                  "started_at": alert.starts_at if alert.starts_at is not None else self.at}
            self._view = alert_view(ep, self.config, {})
        return self._view


def inhibited_now(alerts: list[tuple[str, dict[str, str]]], config: Any) -> dict[str, list[str]]:
    """fingerprint -> [inhibiting source fp] for ``alerts`` (``(fp, labels)``, all firing) under
    ``config.inhibit_rules``, at query time as Alertmanager's API does; the rule is
    :meth:`alerting.stages.inhibit.Inhibit._inhibitors` (``inhibit.Inhibitor.Mutes``)."""
    from alerting.matchers import parse_matcher

    out: dict[str, list[str]] = {}
    for rule in getattr(config, "inhibit_rules", None) or []:
        src = [parse_matcher(m) for m in rule.source_matchers]
        tgt = [parse_matcher(m) for m in rule.target_matchers]
        sources: dict[tuple[str, ...], list[tuple[str, bool]]] = {}
        for fp, labels in alerts:
            if all(m.matches(labels) for m in src):
                sources.setdefault(tuple(labels.get(n, "") for n in rule.equal), []).append(
                    (fp, all(m.matches(labels) for m in tgt)))
        if not sources:
            continue
        for fp, labels in alerts:
            if fp in out or not all(m.matches(labels) for m in tgt):
                continue
            two_sided = all(m.matches(labels) for m in src)
            for sfp, both in sources.get(tuple(labels.get(n, "") for n in rule.equal), ()):
                if sfp != fp and not (two_sided and both):
                    out[fp] = [sfp]
                    break
    return out
