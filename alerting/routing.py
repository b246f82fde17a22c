"""The routing tree, walked as Alertmanager walks it (docs/alerting.md, "Routes"): the root always
matches; children in order, depth first, a match stopping its siblings unless ``continue``; a
route whose children all miss is the match. Settings inherit unless set, time intervals do not
(:func:`muted_at`). :func:`decide` gives one :class:`Decision` per route reached, which the
funnel takes as given."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from alerting.dedupe import fingerprint
from alerting.matchers import MatchOp
from alerting.model import Alert

#: Go's weekday order (Sunday 0), as Alertmanager's ranges count
_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"]


@dataclass(frozen=True)
class Route:
    """One matched route with its inherited settings (timers in seconds); ``mute`` / ``active``:
    interval names. ``id``: its place, ``"0"`` the root, ``"0.2.1"`` the second child of its
    third child (in a continue copy's identity). ``key`` (in the group key): ``"0"`` for the
    root, a child's its parent's plus ``.r`` and 8 hex digits of its matchers and receiver
    (:func:`_child_key`), so a reload that adds, removes or moves other routes leaves it, as
    Alertmanager's route key (dispatch/route.go ``Key``) is its matchers."""

    id: str
    receiver: str
    group_by: tuple[str, ...]
    group_wait: float
    group_interval: float
    repeat_interval: float
    mute: tuple[str, ...] = ()
    active: tuple[str, ...] = ()
    key: str = "0"

    def timing(self) -> list[float]:
        """``[group_wait, group_interval, repeat_interval]``."""
        return [self.group_wait, self.group_interval, self.repeat_interval]


def _root(config: Any) -> Route:
    t = config.timing
    return Route("0", config.route.receiver, tuple(config.grouping.group_by),
                 t.group_wait, t.group_interval, t.repeat_interval)


def _child(parent: Route, sub: Any, rid: str, key: str) -> Route:
    pick = lambda v, d: d if v is None else v  # noqa: E731
    return Route(rid, pick(sub.receiver, parent.receiver),
                 tuple(pick(sub.group_by, parent.group_by)),
                 pick(sub.group_wait, parent.group_wait), pick(sub.group_interval, parent.group_interval),
                 pick(sub.repeat_interval, parent.repeat_interval),
                 tuple(sub.mute_time_intervals), tuple(sub.active_time_intervals), key)


@dataclass(frozen=True)
class _Node:
    """One route as the walk needs it: ``equal`` its ``=`` matchers as ``(name, value)``,
    ``matchers`` the others, cheapest first."""

    route: Route
    equal: tuple[tuple[str, str], ...]
    matchers: tuple
    continue_: bool
    children: tuple["_Node", ...]


def _child_key(parent: Route, sub: Any, seen: dict[str, int]) -> str:
    """The key of route ``sub`` under ``parent``: 8 hex digits of sha256 over its matchers (in
    any order) and receiver, and how many earlier siblings have both the same (``seen``, updated),
    so two routes that differ only in place keep apart."""
    doc = repr((sorted((m.name, str(m.op.value), m.value) for m in sub.compiled_matchers),
                sub.receiver))
    n = seen[doc] = seen.get(doc, -1) + 1
    return f"{parent.key}.r{hashlib.sha256(f'{doc}#{n}'.encode()).hexdigest()[:8]}"


def _nodes(parent: Route, subs: list) -> tuple[_Node, ...]:
    out: list[_Node] = []
    seen: dict[str, int] = {}
    for i, sub in enumerate(subs):
        child = _child(parent, sub, f"{parent.id}.{i}", _child_key(parent, sub, seen))
        ms = sub.compiled_matchers
        out.append(_Node(child, tuple((m.name, m.value) for m in ms if m.op is MatchOp.EQUAL),
                         tuple(sorted((m for m in ms if m.op is not MatchOp.EQUAL),
                                      key=lambda m: m.op.cost)),
                         sub.continue_,
                         _nodes(child, sub.routes)))
    return tuple(out)


_TREES: dict[int, tuple[Any, _Node]] = {}
_MAX_TREES = 64


def _tree(config: Any) -> _Node:
    """The routing tree of ``config``, built once per config object (held, so its id stays its
    own)."""
    got = _TREES.get(id(config))
    if got is not None and got[0] is config:
        return got[1]
    root = _root(config)
    tree = _Node(root, (), (), False, _nodes(root, config.route.routes))
    if len(_TREES) >= _MAX_TREES:
        _TREES.clear()
    _TREES[id(config)] = (config, tree)
    return tree


def _matches(node: _Node, labels: dict[str, str]) -> bool:
    get = labels.get
    for name, value in node.equal:  # an absent label is ""
        if get(name, "") != value:
            return False
    return not node.matchers or all(m.matches(labels) for m in node.matchers)


def _walk(node: _Node, labels: dict[str, str], out: list[Route]) -> None:
    before = len(out)
    for child in node.children:
        if not _matches(child, labels):
            continue
        _walk(child, labels, out)
        if not child.continue_:
            break
    if len(out) == before:
        out.append(node.route)


def routes_for(config: Any, labels: dict[str, str]) -> list[Route]:
    """Every route an alert with ``labels`` reaches, in tree order; never empty."""
    out: list[Route] = []
    _walk(_tree(config), labels, out)
    return out


def route_by_id(config: Any, rid: str) -> Route | None:
    """The route at place ``rid`` (:attr:`Route.id`); None when the config has no such route."""
    node = _tree(config)
    for part in rid.split(".")[1:]:
        i = int(part)
        if not 0 <= i < len(node.children):
            return None
        node = node.children[i]
    return node.route


def route_by_key(config: Any, key: str) -> Route | None:
    """The route with :attr:`Route.key` ``key``; None when the config has no such route."""
    return _keys(config).get(key)


_KEYS: dict[int, tuple[Any, dict[str, Route]]] = {}


def _keys(config: Any) -> dict[str, Route]:
    """Route key -> route of ``config``'s tree, built once per config object."""
    got = _KEYS.get(id(config))
    if got is not None and got[0] is config:
        return got[1]
    out: dict[str, Route] = {}
    stack = [_tree(config)]
    while stack:
        node = stack.pop()
        out[node.route.key] = node.route
        stack.extend(node.children)
    if len(_KEYS) >= _MAX_TREES:
        _KEYS.clear()
    _KEYS[id(config)] = (config, out)
    return out


def group_route(config: Any, group: dict[str, Any]) -> Route | None:
    """The route of an open group or an episode (``group``): by its ``route_key`` (the route,
    wherever a reload put it), else (written before they kept it) at its place ``route``; None
    when gone."""
    key = group.get("route_key")
    if key is not None:
        return route_by_key(config, key)
    return route_by_id(config, group.get("route") or "0")


def _in_ranges(value: int, items: list[str], names: list[str] | None = None,
               base: int = 1) -> bool:
    for item in items:
        parts = item.lower().split(":")
        ends = [names.index(p) + base if names and p in names else int(p) for p in parts]
        lo, hi = ends[0], ends[-1]
        if lo <= value <= hi:
            return True
    return False


def interval_matches(interval: Any, now: float) -> bool:
    """True when epoch seconds ``now`` is inside ``interval`` (every given field, in its ``location``)."""
    t = datetime.fromtimestamp(now, tz=timezone.utc).astimezone(ZoneInfo(interval.location))
    if interval.times:
        minute = t.hour * 60 + t.minute
        if not any(a <= minute < b for a, b in (r.minutes() for r in interval.times)):
            return False
    if interval.weekdays and not _in_ranges((t.weekday() + 1) % 7, interval.weekdays, _DAYS, base=0):
        return False
    if interval.days_of_month and not _in_ranges(t.day, interval.days_of_month):
        return False
    if interval.months and not _in_ranges(t.month, interval.months, _MONTHS):
        return False
    if getattr(interval, "years", None) and not _in_ranges(t.year, interval.years):
        return False
    return True


def muted_at(config: Any, route: Route, now: float) -> bool:
    """True inside one of ``route``'s mute intervals or outside all its active ones."""
    if not route.mute and not route.active:
        return False
    named = {n.name: n.time_intervals for n in config.time_intervals}
    inside = lambda names: any(interval_matches(i, now)  # noqa: E731
                               for n in names for i in named.get(n, ()))
    if route.mute and inside(route.mute):
        return True
    return bool(route.active) and not inside(route.active)


@dataclass(frozen=True)
class Decision:
    """One alert on one route it reaches: ``receiver`` (the ``alerts.funnel`` key), ``fingerprint``
    (16 hex digits on the first route, ``<fp>~<route id>`` on further ``continue`` routes),
    ``route`` id."""

    receiver: str
    fingerprint: str
    route: str = "0"

    def to_dict(self) -> dict[str, str]:
        """The command fields: ``{"receiver", "fp", "route"}``."""
        return {"receiver": self.receiver, "fp": self.fingerprint, "route": self.route}

    @classmethod
    def from_command(cls, cmd: dict[str, Any]) -> "Decision | None":
        """The decision a command carries, or None."""
        r, fp, rid = cmd.get("receiver"), cmd.get("fp"), cmd.get("route", "0")
        if isinstance(r, str) and isinstance(fp, str) and isinstance(rid, str):
            return cls(r, fp, rid)
        return None


#: The configuration sections a decision or the alert a command carries depends on.
_DECIDING = {"route", "dedupe", "normalize", "timing", "fanout"}
_VERSIONS: dict[int, tuple[Any, str]] = {}


def routing_version(config: Any) -> str:
    """16 hex digits naming what :func:`decide` and intake read from
    ``config`` (the route tree, ``dedupe``, ``normalize``, ``timing``,
    ``fanout``; not the receivers, which a worker extends on reload): two
    processes with the same version decide an alert alike. Computed once
    per config object."""
    got = _VERSIONS.get(id(config))
    if got is not None and got[0] is config:
        return got[1]
    doc = config.model_dump_json(include=_DECIDING).encode()
    version = hashlib.sha256(doc).hexdigest()[:16]
    if len(_VERSIONS) >= _MAX_TREES:
        _VERSIONS.clear()
    _VERSIONS[id(config)] = (config, version)
    return version


def decide(config: Any, alert: Alert) -> list[Decision]:
    """One :class:`Decision` per route ``alert`` reaches, plus one per further integration of its
    receiver (``config.fanout``; identity ``<fp>~<route id>~<n>``). Raises only on a forged
    alert."""
    fp = fingerprint(alert, config.dedupe.fingerprint_labels)
    routes = routes_for(config, alert.match_labels())
    fanout = getattr(config, "fanout", None)
    if not fanout:
        return [Decision(r.receiver, fp if i == 0 else f"{fp}~{r.id}", r.id)
                for i, r in enumerate(routes)]
    out = []
    for i, r in enumerate(routes):
        out.append(Decision(r.receiver, fp if i == 0 else f"{fp}~{r.id}", r.id))
        out += [Decision(name, f"{fp}~{r.id}~{n}", r.id)
                for n, name in enumerate(fanout.get(r.receiver, ()), 1)]
    return out
