"""Every Redis key Plait reads or writes, for ``prefix`` = ``Settings.redis_prefix`` (``P`` below).

No other module builds a ``prefix:...`` string; ``tests/kernel/test_keys.py`` pins every format byte
for byte, since the strings are a storage format (changing one orphans the data). Writers and
readers: docs/architecture.md, "State stores"."""
from __future__ import annotations


def everything(prefix: str) -> str:
    """``SCAN`` pattern ``P:*``: every key under the prefix (``ops.stack.drop_prefix``, tests)."""
    return f"{prefix}:*"


def dev_stack_prefix(tag: str) -> str:
    """``plait-{tag}``: the prefix of a dev stack with its own broker (``tag``: 8 hex chars)."""
    return f"plait-{tag}"


def task(prefix: str, task_id: str) -> str:
    """``P:task:{taskId}``, string: the task's projected state (compact JSON). No TTL."""
    return f"{prefix}:task:{task_id}"


def task_downloads(prefix: str, task_id: str) -> str:
    """``P:downloads:{taskId}``, hash: ``count``, ``lastAt``, ``lastBy`` of downloads. No TTL."""
    return f"{prefix}:downloads:{task_id}"


def task_spec(prefix: str, task_id: str) -> str:
    """``P:spec:{taskId}``, string: the task's accepted ``ExportSpec`` JSON. TTL
    :data:`TASK_SPEC_TTL`."""
    return f"{prefix}:spec:{task_id}"


TASK_SPEC_TTL = 30 * 24 * 3600


def task_pattern(prefix: str) -> str:
    """``SCAN`` pattern ``P:task:*`` of every :func:`task` key (``Projection.flush``)."""
    return f"{prefix}:task:*"


def caller_tasks(prefix: str, sys_code: str) -> str:
    """``P:tasks:{sysCode}``, sorted set: a caller's task ids by createdAt ms. No TTL."""
    return f"{prefix}:tasks:{sys_code}"


def user_tasks(prefix: str, sys_code: str, user_id: str) -> str:
    """``P:tasks:{sysCode}:{userId}``, sorted set: one user's :func:`caller_tasks`. No TTL."""
    return f"{prefix}:tasks:{sys_code}:{user_id}"


def task_index_pattern(prefix: str) -> str:
    """``SCAN`` pattern of every :func:`caller_tasks` and :func:`user_tasks` key."""
    return f"{prefix}:tasks:*"


def active(prefix: str) -> str:
    """``P:active``, sorted set: ids of tasks not yet ended, by createdAt ms. No TTL."""
    return f"{prefix}:active"


def task_events(prefix: str, task_id: str) -> str:
    """``P:events:{taskId}``, pub/sub channel: each new state of the task (:func:`task` JSON)."""
    return f"{prefix}:events:{task_id}"


def fingerprint(prefix: str, fp: str) -> str:
    """``P:fp:{fingerprint}``, string: the latest task id of a fingerprint. TTL reuse window + 7 d.
    """
    return f"{prefix}:fp:{fp}"


def projection_built(prefix: str) -> str:
    """``P:projection:built``, string: epoch s of the last full projection rebuild. No TTL."""
    return f"{prefix}:projection:built"


def checkpoint(prefix: str, task_id: str) -> str:
    """``P:ckpt:{taskId}``, hash: a task's progress markers. TTL ``streams.checkpoints.TTL``."""
    return f"{prefix}:ckpt:{task_id}"


def row_grants(prefix: str, task_id: str) -> str:
    """``P:ckpt:{taskId}:grants``, hash: a task's rows counted once per page:
    ``granted`` (rows so far) and ``<partition>:<seq>`` (that page's rows, so
    a repeated page counts the same). A partitioned pull task's ``maxRows``
    budget, written and read by the fetcher
    (``streams.partitions.within_max_rows``); a push task's rows accepted,
    by the page writer (``plait.quotas.count_page``); one Lua call per page,
    TTL 14 days, renewed on every page."""
    return f"{prefix}:ckpt:{task_id}:grants"


def slots(prefix: str, scope: str) -> str:
    """``P:slots:{scope}``, sorted set: task ids holding a slot, by lease expiry epoch s. No TTL."""
    return f"{prefix}:slots:{scope}"


def wait_queue(prefix: str, sys_code: str) -> str:
    """``P:wait:{sysCode}``, sorted set: a caller's waiting task ids, by enqueue epoch s. No TTL."""
    return f"{prefix}:wait:{sys_code}"


def wait_requests(prefix: str) -> str:
    """``P:waitreq``, hash: task id -> the waiting task's ``ExportRequested`` (JSON). No TTL."""
    return f"{prefix}:waitreq"


def waiting(prefix: str) -> str:
    """``P:waiting``, set: sysCodes that may have waiting tasks (pruned when empty). No TTL."""
    return f"{prefix}:waiting"


def passes(prefix: str) -> str:
    """``P:pass``, hash: sysCode -> stride pass (float; the lowest starts next). No TTL."""
    return f"{prefix}:pass"


def worker(prefix: str, worker_id: str) -> str:
    """``P:worker:{workerId}``, string ``1`` while the worker lives. TTL
    ``Settings.stale_after_seconds``."""
    return f"{prefix}:worker:{worker_id}"


def sweeper(prefix: str) -> str:
    """``P:sweeper``, string: the worker whose sweeper turn it is. NX, TTL 0.9 x sweep interval."""
    return f"{prefix}:sweeper"


def ready(prefix: str, worker_id: str) -> str:
    """``P:ready:{workerId}``, string: the worker's readiness JSON. TTL
    ``streams.readiness.TTL_SECONDS``."""
    return f"{prefix}:ready:{worker_id}"


def ready_pattern(prefix: str) -> str:
    """``SCAN`` pattern ``P:ready:*`` of every worker's :func:`ready` key."""
    return f"{prefix}:ready:*"


worker_key = worker
sweeper_key = sweeper


def nonce(prefix: str, app_key: str, nonce_: str) -> str:
    """``P:nonce:{appKey}:{nonce}``, string ``1``: a used request nonce. TTL 2 x auth skew."""
    return f"{prefix}:nonce:{app_key}:{nonce_}"


def audit(prefix: str, sys_code: str | None) -> str:
    """``P:audit:{sysCode}``, list: a caller's newest audit entries (``-``: caller unknown). No TTL.
    """
    return f"{prefix}:audit:{sys_code or '-'}"


def alert_counters(prefix: str) -> str:
    """``P:alerts:counters``, hash: funnel partition -> its counters (JSON). No TTL."""
    return f"{prefix}:alerts:counters"


def alert_reload(prefix: str) -> str:
    """``P:alerts:reload``, pub/sub channel: ``POST /-/reload`` asks every alerting worker to
    re-read its file; the message is the request id."""
    return f"{prefix}:alerts:reload"


def alert_reloaded(prefix: str, request_id: str) -> str:
    """``P:alerts:reloaded:{requestId}``, hash: worker (``host:pid``) -> ``ok`` or why its reload
    was refused, for one reload request. TTL 60 s."""
    return f"{prefix}:alerts:reloaded:{request_id}"


def alert_silences(prefix: str) -> str:
    """``P:alerts:silences``, hash: silence id -> the silence (JSON), expired ones kept. No TTL."""
    return f"{prefix}:alerts:silences"


def alert_view(prefix: str, partition: int) -> str:
    """``P:alerts:view:{partition}``, hash: a partition's current alerts. TTL
    ``alerting.view.VIEW_TTL``."""
    return f"{prefix}:alerts:view:{partition}"


def alert_history(prefix: str, fp: str) -> str:
    """``P:alerts:history:{fingerprint}``, list: an alert's story, oldest first. TTL: retention
    setting."""
    return f"{prefix}:alerts:history:{fp}"


def export_failed_marker(prefix: str, sys_code: str, biz_type: str) -> str:
    """``P:alerts:failed:{sysCode}/{bizType}``, string: the failed task id until a SUCCESS. TTL 7 d.
    """
    return f"{prefix}:alerts:failed:{sys_code}/{biz_type}"


def slow_task_marker(prefix: str, task_id: str) -> str:
    """``P:alerts:slow:{taskId}``, string ``1``: ``ExportSlow`` fired for the task. NX, TTL 7 d."""
    return f"{prefix}:alerts:slow:{task_id}"


def schedules(prefix: str) -> str:
    """``P:schedules``, hash: schedule id -> its definition (JSON). No TTL."""
    return f"{prefix}:schedules"


def schedule_state(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:state``, string: ``schedules.core.State`` JSON, fenced by the lease. No
    TTL."""
    return f"{prefix}:schedule:{schedule_id}:state"


def schedule_slot(prefix: str, schedule_id: str, slot_ms: int) -> str:
    """``P:schedule:{id}:slot:{slotMs}``, string: the claim of one slot (JSON). NX, TTL 8 d."""
    return f"{prefix}:schedule:{schedule_id}:slot:{slot_ms}"


def schedule_probe(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:probe``, hash: probe target -> ``up`` or ``down``. No TTL."""
    return f"{prefix}:schedule:{schedule_id}:probe"


def schedule_owner(prefix: str) -> str:
    """``P:schedules:owner``, string: the worker holding the scheduler turn. NX PX lease."""
    return f"{prefix}:schedules:owner"


def schedule_requests(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:requests``, list: manual trigger/backfill requests (JSON). No TTL."""
    return f"{prefix}:schedule:{schedule_id}:requests"


def notify(prefix: str, task_id: str, status: str) -> str:
    """``P:notify:{taskId}:{status}``, string: completion webhook state. TTL 10 min, then 7 d."""
    return f"{prefix}:notify:{task_id}:{status}"


def daily_rows(prefix: str, sys_code: str, day: str) -> str:
    """``P:quota:{sysCode}:{day}``, string: rows a caller exported that day. EXPIREAT day end + 1 d.
    """
    return f"{prefix}:quota:{sys_code}:{day}"
