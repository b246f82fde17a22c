"""When each open group of one funnel partition is next due, indexed.

A tick evaluates the groups whose next message is due
(:func:`alerting.group.due_at`). Computing that for every open group on every
tick made a tick cost grow with the open groups (20,000 groups after a storm:
tens of milliseconds per tick, and the runner ticks at the end of every batch
with something due). :class:`DueIndex` keeps each group's due time in a heap,
so a tick looks only at the groups due by then.

The index is in memory only, rebuilt from the groups whenever the partition's
state is loaded, and again every :data:`REBUILD_SECONDS` as a safety net (a
group whose due time changed without the runner telling the index would
otherwise wait until then, never longer). The runner tells it after each
batch which groups the batch may have changed (the same table keys it
persists).
"""
from __future__ import annotations

import heapq
from typing import Any, Callable, Iterable

from alerting.group import due_at

#: Longest time (seconds) the index goes without a full rebuild.
REBUILD_SECONDS = 30.0


class DueIndex:
    """Due times of the open groups of one partition.

    Args:
        timing: ``timing(group) -> (group_wait, group_interval,
            repeat_interval)`` in seconds (the group's route's, else the
            config's).
    """

    def __init__(self, timing: Callable[[dict[str, Any]], tuple[float, float, float]]) -> None:
        self.timing = timing
        self._due: dict[str, float] = {}      # group id -> due (epoch s); absent: nothing due
        self._order: dict[str, int] = {}      # group id -> position in the groups' dict order
        self._heap: list[tuple[float, str]] = []  # (due, group id), stale entries skipped
        self._n = 0
        self.built_at: float | None = None

    def rebuild(self, groups: dict[str, dict[str, Any]], now: float) -> None:
        """Index every group of ``groups`` (the funnel's ``state["groups"]``)
        afresh, in their dict order, at ``now`` (seconds)."""
        self._due, self._order, self._heap, self._n = {}, {}, [], 0
        for gid, g in groups.items():
            self._order[gid] = self._n
            self._n += 1
            d = due_at(g, *self.timing(g))
            if d is not None:
                self._due[gid] = d
        self._heap = [(d, gid) for gid, d in self._due.items()]
        heapq.heapify(self._heap)
        self.built_at = now

    def stale(self, now: float) -> bool:
        """True when a full rebuild is due (never built, or built more than
        :data:`REBUILD_SECONDS` before ``now``)."""
        return self.built_at is None or now - self.built_at >= REBUILD_SECONDS

    def update(self, groups: dict[str, dict[str, Any]], gids: Iterable[str]) -> None:
        """Re-read the due time of each group in ``gids`` (deleted groups
        leave the index; new ones join at the end of the order)."""
        for gid in gids:
            g = groups.get(gid)
            if g is None:
                self._due.pop(gid, None)
                self._order.pop(gid, None)
                continue
            if gid not in self._order:
                self._order[gid] = self._n
                self._n += 1
            d = due_at(g, *self.timing(g))
            if d is None:
                self._due.pop(gid, None)
            elif self._due.get(gid) != d:
                self._due[gid] = d
                heapq.heappush(self._heap, (d, gid))
        if len(self._heap) > 2 * len(self._due) + 1024:  # drop stale entries
            self._heap = [(d, gid) for gid, d in self._due.items()]
            heapq.heapify(self._heap)

    def due_by(self, t: float) -> list[str]:
        """Ids of the groups due at or before ``t`` (seconds), in the groups'
        dict order. They leave the index: the caller evaluates them and then
        passes them to :meth:`update`, which puts back those still due later."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= t:
            d, gid = heapq.heappop(heap)
            if self._due.get(gid) == d:
                del self._due[gid]
                out.append(gid)
        out.sort(key=lambda gid: self._order.get(gid, self._n))
        return out

    def next_due(self) -> float | None:
        """The soonest due time in the index (seconds), or None (nothing
        due); stale heap entries on top are dropped on the way."""
        heap = self._heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def __len__(self) -> int:
        return len(self._due)
