"""The routing tree, as Alertmanager walks it (docs, "route"; docs/alerting.md,
"Routes"): pure functions over the configuration.

- an alert enters at the root route; the root always matches;
- the children of a matching route are tried in order: a matching child is
  walked (depth first); unless that child says ``continue: true`` the walk
  of its siblings stops there;
- a route none of whose children matched is itself a match;
- every setting (``receiver``, ``group_by``, ``group_wait``,
  ``group_interval``, ``repeat_interval``) is inherited from the parent
  unless the route sets it; ``mute_time_intervals`` /
  ``active_time_intervals`` belong to the route that names them (as in
  Alertmanager they are not inherited).

So one alert can reach several receivers (``continue``), each copy grouped
and timed by the route that matched it.

Time intervals (Alertmanager's ``time_intervals``): a route's notifications
are held while ``now`` is inside any of its mute intervals, or outside all
of its active intervals (:func:`muted_at`).

The router decides once per alert (issue 9.5): :func:`decide` walks the tree
(built once per config from the matchers compiled at config load,
:func:`_tree`) and computes the alert's Alertmanager identity
(:func:`alerting.dedupe.fingerprint`), giving one :class:`Decision` per route
reached; each travels in its own ``alerts.funnel`` command (keyed by its
receiver) and :meth:`alerting.funnel.Funnel.ingest` takes it as given. The
funnel decides itself only when called without one (unit tests, replays of
commands written before these fields existed).
"""
from __future__ import annotations

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
    """One matched route with its inherited settings.

    Attributes:
        id: ``"0"`` for the root, ``"0.2.1"`` for the second child of the
            third child; stable while the config is (part of the group key).
        receiver: receiver name.
        group_by: grouping labels.
        group_wait, group_interval, repeat_interval: seconds.
        mute: names of mute time intervals; active: names of active ones.
    """

    id: str
    receiver: str
    group_by: tuple[str, ...]
    group_wait: float
    group_interval: float
    repeat_interval: float
    mute: tuple[str, ...] = ()
    active: tuple[str, ...] = ()

    def timing(self) -> list[float]:
        """``[group_wait, group_interval, repeat_interval]``."""
        return [self.group_wait, self.group_interval, self.repeat_interval]


def _root(config: Any) -> Route:
    t = config.timing
    return Route("0", config.route.receiver, tuple(config.grouping.group_by),
                 t.group_wait, t.group_interval, t.repeat_interval)


def _child(parent: Route, sub: Any, rid: str) -> Route:
    pick = lambda v, d: d if v is None else v  # noqa: E731
    return Route(rid, pick(sub.receiver, parent.receiver),
                 tuple(pick(sub.group_by, parent.group_by)),
                 pick(sub.group_wait, parent.group_wait), pick(sub.group_interval, parent.group_interval),
                 pick(sub.repeat_interval, parent.repeat_interval),
                 tuple(sub.mute_time_intervals), tuple(sub.active_time_intervals))


@dataclass(frozen=True)
class _Node:
    """One route of the tree as the walk needs it: its settings resolved
    (:class:`Route`), its matchers compiled, its children likewise."""

    route: Route
    #: ``(name, value)`` of its ``=`` matchers (a dict lookup each), then the others
    #: (``!=`` before regexes)
    equal: tuple[tuple[str, str], ...]
    matchers: tuple
    continue_: bool
    children: tuple["_Node", ...]


def _nodes(parent: Route, subs: list) -> tuple[_Node, ...]:
    out = []
    for i, sub in enumerate(subs):
        child = _child(parent, sub, f"{parent.id}.{i}")
        ms = sub.compiled_matchers
        out.append(_Node(child, tuple((m.name, m.value) for m in ms if m.op is MatchOp.EQUAL),
                         tuple(sorted((m for m in ms if m.op is not MatchOp.EQUAL),
                                      key=lambda m: m.op.cost)),
                         sub.continue_,
                         _nodes(child, sub.routes)))
    return tuple(out)


#: id(config) -> (config, its tree); the config is held so its id stays its own
_TREES: dict[int, tuple[Any, _Node]] = {}
_MAX_TREES = 64


def _tree(config: Any) -> _Node:
    """The routing tree of ``config``, built once per config object (a
    configuration is not changed once loaded). The router walks it for
    every alert: walking the pydantic models themselves (private-attribute
    access ~1.3 us a route, a :class:`Route` built per level) cost ~9 us of
    a storm's ~150 us per alert."""
    got = _TREES.get(id(config))
    if got is not None and got[0] is config:
        return got[1]
    root = _root(config)
    tree = _Node(root, (), (), False, _nodes(root, config.route.routes))
    if len(_TREES) >= _MAX_TREES:  # more configs than a process keeps (tests): start over
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
    """Every route an alert with ``labels`` (its match labels) reaches, in
    tree order; never empty (the root catches everything). Raises nothing."""
    out: list[Route] = []
    _walk(_tree(config), labels, out)
    return out


def route_by_id(config: Any, rid: str) -> Route | None:
    """The route with id ``rid`` (settings inherited), None when the config
    has no such route (it changed since the group was made)."""
    node = _tree(config)
    for part in rid.split(".")[1:]:
        i = int(part)
        if not 0 <= i < len(node.children):  # ids are made from positions
            return None
        node = node.children[i]
    return node.route


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
    """True when epoch seconds ``now`` is inside one Alertmanager
    ``time_interval`` (every given field must match, in its ``location``)."""
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
    """True when ``route``'s notifications are held at ``now``: inside one of
    its mute intervals, or outside every one of its active intervals."""
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
    """What the router decided for one alert on one route it reaches.

    Attributes:
        receiver: receiver name (the ``alerts.funnel`` Kafka key).
        fingerprint: the episode identity: the alert's Alertmanager
            fingerprint (16 hex digits) on the first route, ``<fp>~<route
            id>`` on further ``continue`` routes (their own episodes).
        route: id of the route (``"0"`` the root; :func:`route_by_id`).
    """

    receiver: str
    fingerprint: str
    route: str = "0"

    def to_dict(self) -> dict[str, str]:
        """The command fields: ``{"receiver", "fp", "route"}``."""
        return {"receiver": self.receiver, "fp": self.fingerprint, "route": self.route}

    @classmethod
    def from_command(cls, cmd: dict[str, Any]) -> "Decision | None":
        """The decision a command carries, or None (an older command)."""
        r, fp, rid = cmd.get("receiver"), cmd.get("fp"), cmd.get("route", "0")
        if isinstance(r, str) and isinstance(fp, str) and isinstance(rid, str):
            return cls(r, fp, rid)
        return None


def decide(config: Any, alert: Alert) -> list[Decision]:
    """Every (receiver, identity, route) of ``alert`` under ``config``, one per
    route it reaches (:func:`routes_for`, tree order; never empty), and one
    more per further integration of its receiver (``config.fanout``: an
    Alertmanager receiver of several ``*_configs``; identity ``<fp>~<route
    id>~<n>``). Pure; raises only on a forged alert (the caller rejects it)."""
    fp = fingerprint(alert, config.dedupe.fingerprint_labels)
    routes = routes_for(config, alert.match_labels())
    fanout = getattr(config, "fanout", None)
    if not fanout:  # the common case, as cheap as before fanout existed
        return [Decision(r.receiver, fp if i == 0 else f"{fp}~{r.id}", r.id)
                for i, r in enumerate(routes)]
    out = []
    for i, r in enumerate(routes):
        out.append(Decision(r.receiver, fp if i == 0 else f"{fp}~{r.id}", r.id))
        out += [Decision(name, f"{fp}~{r.id}~{n}", r.id)
                for n, name in enumerate(fanout.get(r.receiver, ()), 1)]
    return out
