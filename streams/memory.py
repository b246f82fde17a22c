"""In-memory stand-ins for the export worker's Redis and object-store members
(``streams.context`` protocols), for unit tests of handler logic without
Redis or a broker. Same contracts as the Redis classes, one process only.

- :class:`MemoryCheckpoints`  ~ ``streams.checkpoints.Checkpoints``
- :class:`MemoryProjection`   ~ ``plait.projection.Projection`` (the part handlers use)
- :class:`MemorySlots`        ~ ``streams.slots.Slots`` (leases, FIFO per caller, stride passes)
- :class:`MemoryWorkers`      ~ ``streams.workers.Workers``
- :class:`MemoryStore`        ~ ``sinks.store.ObjectStore``

Time comes from a ``clock`` callable (epoch seconds) where it matters, so
tests can move it.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from plait.clock import parse_iso
from plait.events import ExportRequested, Lifecycle
from plait.lifecycle import TERMINAL, apply
from plait.limits import Limits
from streams.slots import LEASE_SLACK


class MemoryCheckpoints:
    """Per-task markers (strings, as Redis keeps them)."""

    def __init__(self) -> None:
        self.marks: dict[str, dict[str, str]] = {}
        #: task id -> page (``<partition>:<seq>``) -> its rows, counted once
        self.pages: dict[str, dict[str, int]] = {}

    async def get(self, task_id: str) -> dict[str, str]:
        return dict(self.marks.get(task_id, {}))

    async def set(self, task_id: str, **fields: Any) -> None:
        marks = self.marks.setdefault(task_id, {})
        for k, v in fields.items():
            marks[k] = str(v) if isinstance(v, (str, int)) else json.dumps(v)

    async def field(self, task_id: str, name: str) -> str | None:
        return self.marks.get(task_id, {}).get(name)

    async def clear(self, task_id: str, *fields: str) -> None:
        for field in fields:
            self.marks.get(task_id, {}).pop(field, None)

    async def fetched_seq(self, task_id: str) -> int:
        raw = self.marks.get(task_id, {}).get("fetched")
        return int(raw) if raw is not None else -1

    async def count(self, task_id: str, field: str) -> int:
        marks = self.marks.setdefault(task_id, {})
        marks[field] = str(int(marks.get(field, 0)) + 1)
        return int(marks[field])

    async def count_page(self, task_id: str, page: str, rows: int, caller: Any = None) -> int:
        """Count ``page``'s rows once for the task (no quotas in memory)."""
        ledger = self.pages.setdefault(task_id, {})
        ledger.setdefault(page, rows)
        return sum(ledger.values())


class MemoryProjection:
    """Task states folded from lifecycle events (``plait.lifecycle.apply``)."""

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}
        self._active: dict[str, float] = {}
        #: every state change, in order (what the Redis class publishes)
        self.published: list[dict[str, Any]] = []

    async def get(self, task_id: str) -> dict[str, Any] | None:
        state = self.tasks.get(task_id)
        return json.loads(json.dumps(state)) if state is not None else None

    async def status(self, task_id: str) -> str | None:
        state = self.tasks.get(task_id)
        return state["status"] if state else None

    async def apply(self, event: Lifecycle) -> dict[str, Any] | None:
        new = apply(self.tasks.get(event.taskId), event)
        if new is None:
            return None
        new = json.loads(json.dumps(new))
        self.tasks[event.taskId] = new
        if new["status"] in TERMINAL:
            self._active.pop(event.taskId, None)
        else:
            self._active[event.taskId] = parse_iso(new["createdAt"]) * 1000
        self.published.append(new)
        return new

    async def active(self) -> list[str]:
        return [t for t, _ in sorted(self._active.items(), key=lambda kv: (kv[1], kv[0]))]


class MemorySlots:
    """Concurrency slots and the fair waiting queue (``streams.slots``)."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self.clock = clock
        self.slots: dict[str, dict[str, float]] = {}   # scope -> task id -> lease until
        self.wait: dict[str, dict[str, float]] = {}    # sysCode -> task id -> enqueued at
        self.waitreq: dict[str, ExportRequested] = {}
        self.passes: dict[str, float] = {}

    def _scopes(self, req: ExportRequested) -> list[tuple[str, int]]:
        s = req.spec
        return self.limits.scopes(s.sysCode, s.bizType, s.userId)

    async def enqueue(self, req: ExportRequested) -> None:
        sys_code = req.spec.sysCode
        floor = min((self.passes.get(s, 0.0) for s in self.wait), default=0.0)
        self.wait.setdefault(sys_code, {}).setdefault(req.taskId, self.clock())
        self.waitreq[req.taskId] = req
        if self.passes.get(sys_code, 0.0) < floor:
            self.passes[sys_code] = floor

    async def promote(self, now: float | None = None) -> list[ExportRequested]:
        now = now or self.clock()
        started: list[ExportRequested] = []
        while True:
            for _, sys_code, task_id in self._heads():
                req = self.waitreq.get(task_id)
                if req is None:
                    self.wait[sys_code].pop(task_id, None)
                    break
                result = self._try_start(req, now)
                if result == 1:
                    del self.waitreq[task_id]
                    self.passes[sys_code] = (self.passes.get(sys_code, 0.0)
                                             + 1 / self.limits.weight(sys_code))
                    started.append(req)
                    break
                if result == -1:
                    break
            else:
                return started

    def _try_start(self, req: ExportRequested, now: float) -> int:
        task_id, wait = req.taskId, self.wait.get(req.spec.sysCode, {})
        if task_id not in wait:
            return -1
        scopes = self._scopes(req)
        for name, limit in scopes:
            held = self.slots.setdefault(name, {})
            for other in [t for t, until in held.items() if until <= now]:
                del held[other]
            if task_id not in held and len(held) >= limit:
                return 0
        lease = now + req.spec.jobConfig.timeout + LEASE_SLACK
        for name, _ in scopes:
            self.slots[name][task_id] = lease
        del wait[task_id]
        return 1

    def _heads(self) -> list[tuple[float, str, str]]:
        heads = []
        for sys_code in list(self.wait):
            queue = self.wait[sys_code]
            if not queue:
                del self.wait[sys_code]
                continue
            head = min(queue.items(), key=lambda kv: (kv[1], kv[0]))[0]
            heads.append((self.passes.get(sys_code, 0.0), sys_code, head))
        return sorted(heads)

    async def release(self, task_id: str, sys_code: str, biz_type: str, user_id: str) -> None:
        for name, _ in self.limits.scopes(sys_code, biz_type, user_id):
            self.slots.get(name, {}).pop(task_id, None)
        self.wait.get(sys_code, {}).pop(task_id, None)
        self.waitreq.pop(task_id, None)

    def holding(self, scope: str = "global") -> set[str]:
        return set(self.slots.get(scope, {}))


class MemoryWorkers:
    """Worker liveness and the sweeper's turn (``streams.workers``)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.beats: dict[str, float] = {}  # worker id -> alive until
        self.turn: tuple[str, float] | None = None

    async def beat(self, worker_id: str, ttl: float) -> None:
        self.beats[worker_id] = self.clock() + max(1, int(ttl))

    async def alive(self, worker_id: str) -> bool:
        return self.beats.get(worker_id, 0.0) > self.clock()

    async def take_turn(self, worker_id: str, interval: float) -> bool:
        now = self.clock()
        if self.turn is not None and self.turn[1] > now:
            return False
        self.turn = (worker_id, now + max(0.001, interval * 0.9))
        return True


class MemoryStore:
    """An object store in a dict (``sinks.store.ObjectStore``)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_file(self, key: str, path: Path) -> None:
        self.objects[key] = Path(path).read_bytes()

    def put_bytes(self, key: str, data: bytes) -> None:
        self.objects[key] = bytes(data)

    def get_bytes(self, key: str) -> bytes:
        return self.objects[key]

    def exists(self, key: str) -> bool:
        return key in self.objects

    def list(self, prefix: str) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix))

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list(prefix)
        for k in keys:
            del self.objects[k]
        return len(keys)

    def link(self, key: str, file_name: str, ttl: int) -> str:
        return f"memory://{key}?name={file_name}&ttl={ttl}"
