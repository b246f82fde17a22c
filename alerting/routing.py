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
(matchers compiled at config load, :meth:`alerting.config.SubRoute.matches`)
and computes the alert's Alertmanager identity
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
from alerting.model import Alert

_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
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


def _walk(node: Route, subs: list, labels: dict[str, str]) -> list[Route]:
    out: list[Route] = []
    for i, sub in enumerate(subs):
        if not sub.matches(labels):  # compiled at config load
            continue
        child = _child(node, sub, f"{node.id}.{i}")
        out += _walk(child, sub.routes, labels)
        if not sub.continue_:
            break
    return out or [node]


def routes_for(config: Any, labels: dict[str, str]) -> list[Route]:
    """Every route an alert with ``labels`` (its match labels) reaches, in
    tree order; never empty (the root catches everything). Raises nothing."""
    return _walk(_root(config), config.route.routes, labels)


def route_by_id(config: Any, rid: str) -> Route | None:
    """The route with id ``rid`` (settings inherited), None when the config
    has no such route (it changed since the group was made)."""
    node, subs = _root(config), config.route.routes
    for part in rid.split(".")[1:]:
        i = int(part)
        if i >= len(subs):
            return None
        node, subs = _child(node, subs[i], f"{node.id}.{i}"), subs[i].routes
    return node


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
    if interval.weekdays and not _in_ranges(t.weekday(), interval.weekdays, _DAYS, base=0):
        return False
    if interval.days_of_month and not _in_ranges(t.day, interval.days_of_month):
        return False
    if interval.months and not _in_ranges(t.month, interval.months, _MONTHS):
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
    route it reaches (:func:`routes_for`, tree order; never empty). Pure;
    raises only on a forged alert (the caller rejects it)."""
    fp = fingerprint(alert, config.dedupe.fingerprint_labels)
    routes = routes_for(config, alert.match_labels())
    return [Decision(r.receiver, fp if i == 0 else f"{fp}~{r.id}", r.id)
            for i, r in enumerate(routes)]
