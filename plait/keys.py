"""Every Redis key Plait reads or writes, for ``prefix`` = ``Settings.redis_prefix`` (``P`` below).

No other module builds a ``prefix:...`` string; ``tests/kernel/test_keys.py`` pins every format byte
for byte, since the strings are a storage format (changing one orphans the data). Writers and
readers: docs/architecture.md, "State stores"."""
from __future__ import annotations

# ------------------------------------------------------------------ whole prefix


def everything(prefix: str) -> str:
    """``SCAN`` pattern ``P:*``: every key under the prefix (``ops.stack.drop_prefix``, tests)."""
    return f"{prefix}:*"


def dev_stack_prefix(tag: str) -> str:
    """The prefix ``plait-{tag}`` of a dev stack with its own broker (``tag``: 8 hex chars), so no
    other run's Redis state leaks in."""
    return f"plait-{tag}"


# ------------------------------------------------------------------ projection


def task(prefix: str, task_id: str) -> str:
    """``P:task:{taskId}``, string: the task's projected state, compact JSON (``plait.lifecycle``
    shape). No TTL."""
    return f"{prefix}:task:{task_id}"


def task_downloads(prefix: str, task_id: str) -> str:
    """``P:downloads:{taskId}``, hash: downloads of the task's file (``count``, ``lastAt`` RFC 3339,
    ``lastBy`` JSON ``{clientIp, userAgent}``). No TTL."""
    return f"{prefix}:downloads:{task_id}"


def task_spec(prefix: str, task_id: str) -> str:
    """``P:spec:{taskId}``, string: the task's accepted request (``ExportSpec`` JSON, a few KiB at
    most), so a client can submit it again. TTL :data:`TASK_SPEC_TTL`."""
    return f"{prefix}:spec:{task_id}"


TASK_SPEC_TTL = 30 * 24 * 3600


def task_pattern(prefix: str) -> str:
    """``SCAN`` pattern ``P:task:*`` of every :func:`task` key (``Projection.flush``)."""
    return f"{prefix}:task:*"


def caller_tasks(prefix: str, sys_code: str) -> str:
    """``P:tasks:{sysCode}``, sorted set: ids of a caller's tasks, score = createdAt epoch ms. No
    TTL."""
    return f"{prefix}:tasks:{sys_code}"


def user_tasks(prefix: str, sys_code: str, user_id: str) -> str:
    """``P:tasks:{sysCode}:{userId}``, sorted set: :func:`caller_tasks` for one user of the caller.
    No TTL."""
    return f"{prefix}:tasks:{sys_code}:{user_id}"


def task_index_pattern(prefix: str) -> str:
    """``SCAN`` pattern of every :func:`caller_tasks` and :func:`user_tasks` key
    (``Projection.flush``)."""
    return f"{prefix}:tasks:*"


def active(prefix: str) -> str:
    """``P:active``, sorted set: ids of tasks not yet terminal, score = createdAt epoch ms. No TTL.
    """
    return f"{prefix}:active"


def task_events(prefix: str, task_id: str) -> str:
    """``P:events:{taskId}``, pub/sub channel (no TTL): every new state of the task, the JSON of
    :func:`task`."""
    return f"{prefix}:events:{task_id}"


def fingerprint(prefix: str, fp: str) -> str:
    """``P:fp:{fingerprint}``, string: id of the latest task with this fingerprint (dedupe, reuse).
    TTL the reuse window (>= 1 s) + 7 days, renewed per claim."""
    return f"{prefix}:fp:{fp}"


def projection_built(prefix: str) -> str:
    """``P:projection:built``, string: epoch seconds of the last full replay of
    ``export.lifecycle``. No TTL."""
    return f"{prefix}:projection:built"


# ------------------------------------------------------------------ export workers


def checkpoint(prefix: str, task_id: str) -> str:
    """``P:ckpt:{taskId}``, hash: a task's progress markers (fields in ``streams.checkpoints``). TTL
    ``streams.checkpoints.TTL`` (14 days), renewed per write."""
    return f"{prefix}:ckpt:{task_id}"


def slots(prefix: str, scope: str) -> str:
    """``P:slots:{scope}``, sorted set: ids of the tasks holding a slot of one limit scope, score =
    lease expiry epoch s. No TTL."""
    return f"{prefix}:slots:{scope}"


def wait_queue(prefix: str, sys_code: str) -> str:
    """``P:wait:{sysCode}``, sorted set: a caller's waiting task ids, score = enqueue epoch s
    (FIFO). No TTL."""
    return f"{prefix}:wait:{sys_code}"


def wait_requests(prefix: str) -> str:
    """``P:waitreq``, hash: task id -> the waiting task's ``ExportRequested`` (JSON). No TTL."""
    return f"{prefix}:waitreq"


def waiting(prefix: str) -> str:
    """``P:waiting``, set: sysCodes that may have waiting tasks (pruned when found empty). No TTL.
    """
    return f"{prefix}:waiting"


def passes(prefix: str) -> str:
    """``P:pass``, hash: sysCode -> stride pass (float; +1/weight per started task, lowest starts
    next). No TTL."""
    return f"{prefix}:pass"


def worker(prefix: str, worker_id: str) -> str:
    """``P:worker:{workerId}``, string ``1`` while the worker lives. TTL
    ``Settings.stale_after_seconds``, set per heartbeat."""
    return f"{prefix}:worker:{worker_id}"


def sweeper(prefix: str) -> str:
    """``P:sweeper``, string: id of the worker whose sweeper turn it is. Set NX, TTL 0.9 x
    ``Settings.sweep_interval_seconds``."""
    return f"{prefix}:sweeper"


def ready(prefix: str, worker_id: str) -> str:
    """``P:ready:{workerId}``, string: JSON ``{"workerId", "pid", "generation", "partitions"}``
    while the worker consumes. TTL ``streams.readiness.TTL_SECONDS``."""
    return f"{prefix}:ready:{worker_id}"


def ready_pattern(prefix: str) -> str:
    """``SCAN`` pattern ``P:ready:*`` of every worker's :func:`ready` key."""
    return f"{prefix}:ready:*"


worker_key = worker
sweeper_key = sweeper


# ------------------------------------------------------------------ API


def nonce(prefix: str, app_key: str, nonce_: str) -> str:
    """``P:nonce:{appKey}:{nonce}``, string ``1``: a used request nonce (replay protection). TTL 2 x
    ``Settings.auth_skew_seconds``."""
    return f"{prefix}:nonce:{app_key}:{nonce_}"


def audit(prefix: str, sys_code: str | None) -> str:
    """``P:audit:{sysCode}``, list: a caller's newest audit entries (JSON, newest first);
    ``sys_code`` None files under ``-``. No TTL."""
    return f"{prefix}:audit:{sys_code or '-'}"


# ------------------------------------------------------------------ alerting


def alert_counters(prefix: str) -> str:
    """``P:alerts:counters``, hash: funnel partition -> its counters (JSON, with ``updated_at``). No
    TTL."""
    return f"{prefix}:alerts:counters"


def alert_silences(prefix: str) -> str:
    """``P:alerts:silences``, hash: silence id -> the silence (JSON); expired ones stay with
    ``ends_at`` set. No TTL."""
    return f"{prefix}:alerts:silences"


def alert_view(prefix: str, partition: int) -> str:
    """``P:alerts:view:{partition}``, hash: episode key -> Alertmanager ``gettableAlert`` JSON of
    one funnel partition, plus ``alerting.view.META_FIELD``. TTL ``alerting.view.VIEW_TTL``."""
    return f"{prefix}:alerts:view:{partition}"


def alert_history(prefix: str, fp: str) -> str:
    """``P:alerts:history:{fingerprint}``, list: an alert's story, oldest first, public JSON
    entries. TTL ``Settings.alert_history_retention_seconds``."""
    return f"{prefix}:alerts:history:{fp}"


def export_failed_marker(prefix: str, sys_code: str, biz_type: str) -> str:
    """``P:alerts:failed:{sysCode}/{bizType}``, string = the failed task id: a failure alert awaits
    the next SUCCESS (GETDEL). TTL 7 days."""
    return f"{prefix}:alerts:failed:{sys_code}/{biz_type}"


def slow_task_marker(prefix: str, task_id: str) -> str:
    """``P:alerts:slow:{taskId}``, string ``1``: ``ExportSlow`` has fired for this task. Set NX, TTL
    7 days."""
    return f"{prefix}:alerts:slow:{task_id}"


# ------------------------------------------------------------------ schedules


def schedules(prefix: str) -> str:
    """``P:schedules``, hash: schedule id -> its definition (``POST /schedules`` body plus ``id``,
    ``sysCode``, times). No TTL."""
    return f"{prefix}:schedules"


def schedule_state(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:state``, string: the runtime state (``schedules.core.State`` JSON); fenced
    by :func:`schedule_owner`. No TTL."""
    return f"{prefix}:schedule:{schedule_id}:state"


def schedule_slot(prefix: str, schedule_id: str, slot_ms: int) -> str:
    """``P:schedule:{id}:slot:{slotMs}``, string: the claim of one slot, JSON ``{"state":
    "claimed"|"fired", "ref", "worker", "at"}``. Set NX, TTL 8 days."""
    return f"{prefix}:schedule:{schedule_id}:slot:{slot_ms}"


def schedule_probe(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:probe``, hash: probe target -> ``up`` or ``down``, the last state seen. No
    TTL."""
    return f"{prefix}:schedule:{schedule_id}:probe"


def schedule_owner(prefix: str) -> str:
    """``P:schedules:owner``, string: id of the worker whose scheduler turn it is. Set NX PX
    ``Settings.schedule_lease_seconds``."""
    return f"{prefix}:schedules:owner"


def schedule_requests(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:requests``, list: manual trigger/backfill requests (JSON, epoch ms) for the
    next turn. No TTL."""
    return f"{prefix}:schedule:{schedule_id}:requests"


def notify(prefix: str, task_id: str, status: str) -> str:
    """``P:notify:{taskId}:{status}``, string ``sending``/``sent``/``failed``: the completion
    webhook; TTL 10 min while sending, else 7 days."""
    return f"{prefix}:notify:{task_id}:{status}"


def daily_rows(prefix: str, sys_code: str, day: str) -> str:
    """``P:quota:{sysCode}:{day}``, string (integer): rows a caller exported on ``day`` (its
    timezone). EXPIREAT a day after the day ends."""
    return f"{prefix}:quota:{sys_code}:{day}"
