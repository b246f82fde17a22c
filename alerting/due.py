"""When each open group of one funnel partition is next due (:func:`alerting.group.due_at`),
in a heap, so a tick looks only at the groups due by then, not at every open group.

In memory only: rebuilt on load and every :data:`REBUILD_SECONDS` as a safety net; the runner
reports after each batch the groups it may have changed (the table keys it persists).
"""
from __future__ import annotations

import heapq
from typing import Any, Callable, Iterable

from alerting.group import due_at

#: Longest time (seconds) the index goes without a full rebuild.
REBUILD_SECONDS = 30.0


class DueIndex:
    """Due times of one partition's open groups; ``timing(group)`` gives (group_wait,
    group_interval, repeat_interval) in seconds."""

    def __init__(self, timing: Callable[[dict[str, Any]], tuple[float, float, float]]) -> None:
        self.timing = timing
        self._due: dict[str, float] = {}      # group id -> due (epoch s); absent: nothing due
        self._order: dict[str, int] = {}      # group id -> position in the groups' dict order
        self._heap: list[tuple[float, str]] = []  # (due, group id), stale entries skipped
        self._n = 0
        self.built_at: float | None = None

    def rebuild(self, groups: dict[str, dict[str, Any]], now: float) -> None:
        """Index every group of ``state["groups"]`` afresh, in dict order, at ``now`` (s)."""
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
        """True when a full rebuild is due."""
        return self.built_at is None or now - self.built_at >= REBUILD_SECONDS

    def update(self, groups: dict[str, dict[str, Any]], gids: Iterable[str]) -> None:
        """Re-read the due time of groups ``gids`` (deleted leave, new join the order's end)."""
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
        """Ids of the groups due by ``t`` (s) in dict order; they leave the index until
        :meth:`update` puts back those still due later."""
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
        """The soonest due time (s), or None; stale heap tops are dropped."""
        heap = self._heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def __len__(self) -> int:
        return len(self._due)
