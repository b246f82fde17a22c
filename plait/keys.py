"""Every Redis key Plait reads or writes, in one place (issue 9, item 5).

Each function returns the key (or ``SCAN`` pattern, or pub/sub channel) for
``prefix`` = ``Settings.redis_prefix`` (env ``PLAIT_REDIS_PREFIX``, default
``plait``; tests and dev stacks use their own so runs never share state).
No other module builds a ``prefix:...`` string (``tests/kernel/test_keys.py``
checks the source), so the full key space is the list below; the docstring of
each function says the Redis type, what it holds, who writes and reads it, and
its TTL.

The strings are a storage format: changing one orphans the data under the old
key, so ``tests/kernel/test_keys.py`` pins every format byte for byte.

``P`` = prefix::

    P:task:{taskId}            string  task state (JSON)          projection
    P:tasks:{sysCode}          zset    a caller's tasks           projection
    P:tasks:{sysCode}:{userId} zset    a user's tasks             projection
    P:active                   zset    unfinished tasks           projection
    P:events:{taskId}          channel task state changes (SSE)   projection
    P:fp:{fingerprint}         string  task owning a fingerprint  projection
    P:projection:built         string  the projection is built    ops.rebuild
    P:ckpt:{taskId}            hash    checkpoints of a task      streams.checkpoints
    P:slots:{scope}            zset    slot leases of a scope     streams.slots
    P:wait:{sysCode}           zset    a caller's waiting tasks   streams.slots
    P:waitreq                  hash    requests of waiting tasks  streams.slots
    P:waiting                  set     callers with waiting tasks streams.slots
    P:pass                     hash    stride pass per caller     streams.slots
    P:worker:{workerId}        string  worker heartbeat           streams.workers
    P:sweeper                  string  sweeper turn (lock)        streams.workers
    P:ready:{workerId}         string  worker readiness (JSON)    streams.readiness
    P:nonce:{appKey}:{nonce}   string  used request nonce         api.auth
    P:audit:{sysCode}          list    recent audit entries       api.services
    P:alerts:counters          hash    funnel counters            alerting.agents
    P:alerts:silences          hash    silences                   api.alerts
    P:alerts:view:{partition}  hash    current alerts (view)      alerting.view
    P:alerts:history:{fp}      list    an alert's story           alerting.history
    P:alerts:slow:{taskId}     string  ExportSlow fired           alerting.agents
    P:schedules                hash    schedule definitions       schedules.store
    P:schedule:{id}:state      string  schedule runtime state     schedules.store
    P:schedule:{id}:slot:{ms}  string  claim of one slot          schedules.store
    P:schedule:{id}:probe      hash    probe target up/down       schedules.store
    P:schedules:owner          string  scheduler turn (lease)     schedules.store
    P:schedule:{id}:requests   list    trigger/backfill requests  api.schedules
    P:notify:{taskId}:{status} string  completion webhook sent    schedules.notify
    P:downloads:{taskId}       hash    downloads of a task's file api.services
    P:spec:{taskId}            string  the task's request (JSON)  api.tasks
    P:quota:{sysCode}:{day}    string  rows counted on a day      plait.quotas
"""
from __future__ import annotations

# ------------------------------------------------------------------ whole prefix


def everything(prefix: str) -> str:
    """``SCAN`` pattern ``P:*``: every key under the prefix (all of a deployment's
    or test run's Redis state). Used by ``ops.stack.drop_prefix`` to clear an
    ephemeral dev stack's keys, and by tests to clean up."""
    return f"{prefix}:*"


def dev_stack_prefix(tag: str) -> str:
    """The prefix ``plait-{tag}`` that ``ops.stack.Stack`` gives a dev stack
    running its own broker (``tag``: 8 hex chars, random for a memory broker,
    from the data directory otherwise), so that Redis state of another run
    (reuse, slots, tasks) does not leak in."""
    return f"plait-{tag}"


# ------------------------------------------------------------------ projection


def task(prefix: str, task_id: str) -> str:
    """``P:task:{taskId}``, string: the task's projected state, compact JSON
    (``plait.lifecycle`` shape: status, counts, progress, file, RFC 3339 times).

    Written by ``plait.projection.Projection.apply`` (projector agent, API on
    create, ``ops.rebuild``); read through ``Projection.get`` by the API,
    handlers, sweeper and alerting. No TTL (deleted only by ``Projection.flush``).
    """
    return f"{prefix}:task:{task_id}"


def task_downloads(prefix: str, task_id: str) -> str:
    """``P:downloads:{taskId}``, hash: downloads of the task's file through the
    API (``count``, ``lastAt`` RFC 3339, ``lastBy`` JSON ``{clientIp,
    userAgent}``). Written by ``api.services.Services.record_download`` as the
    download is audited; read into the task JSON (``downloads``). No TTL."""
    return f"{prefix}:downloads:{task_id}"


def task_spec(prefix: str, task_id: str) -> str:
    """``P:spec:{taskId}``, string: the task's accepted request (``plait.spec.ExportSpec``
    JSON, a few KiB at most: its fields are length-bounded). Written by
    ``POST /export/tasks`` with the task; read by ``GET /export/tasks/{taskId}``
    (``spec``) so a client can submit the same export again. TTL
    :data:`TASK_SPEC_TTL`."""
    return f"{prefix}:spec:{task_id}"


#: Seconds a :func:`task_spec` is kept (30 days).
TASK_SPEC_TTL = 30 * 24 * 3600


def task_pattern(prefix: str) -> str:
    """``SCAN`` pattern ``P:task:*`` of every :func:`task` key; used by
    ``Projection.flush`` (``plait rebuild``) to drop the projected states."""
    return f"{prefix}:task:*"


def caller_tasks(prefix: str, sys_code: str) -> str:
    """``P:tasks:{sysCode}``, sorted set: ids of a caller's tasks, score =
    createdAt in epoch milliseconds. Written by ``Projection.apply``; read by
    ``Projection.page`` (``GET /export/tasks``). No TTL."""
    return f"{prefix}:tasks:{sys_code}"


def user_tasks(prefix: str, sys_code: str, user_id: str) -> str:
    """``P:tasks:{sysCode}:{userId}``, sorted set: the same as
    :func:`caller_tasks` for one user of the caller. Written by
    ``Projection.apply``; read by ``Projection.page``. No TTL."""
    return f"{prefix}:tasks:{sys_code}:{user_id}"


def task_index_pattern(prefix: str) -> str:
    """``SCAN`` pattern of every :func:`caller_tasks` and :func:`user_tasks`
    key (``Projection.flush``)."""
    return f"{prefix}:tasks:*"


def active(prefix: str) -> str:
    """``P:active``, sorted set: ids of tasks not yet in a terminal status,
    score = createdAt in epoch milliseconds. Written by ``Projection.apply``
    (added while active, removed when terminal); read by ``Projection.active``
    (sweeper). No TTL."""
    return f"{prefix}:active"


def task_events(prefix: str, task_id: str) -> str:
    """``P:events:{taskId}``, pub/sub channel (not a stored key, no TTL): every
    new state of the task (the JSON of :func:`task`). Published by
    ``Projection.apply``; subscribed by the API's SSE route
    (``GET /export/tasks/{id}/events``)."""
    return f"{prefix}:events:{task_id}"


def fingerprint(prefix: str, fp: str) -> str:
    """``P:fp:{fingerprint}``, string: id of the latest task with this task
    fingerprint (dedupe of unfinished tasks, reuse of recent successes).
    Written and read by ``Projection.claim_fingerprint`` (API on create); TTL
    the reuse window (at least 1 s) + 7 days, renewed on every claim."""
    return f"{prefix}:fp:{fp}"


def projection_built(prefix: str) -> str:
    """``P:projection:built``, string: epoch seconds of the last full replay of
    ``export.lifecycle`` into the projection. Written by ``ops.rebuild.rebuild``;
    read by ``ops.rebuild.ensure_built`` (rebuild at start-up when missing). No TTL."""
    return f"{prefix}:projection:built"


# ------------------------------------------------------------------ export workers


def checkpoint(prefix: str, task_id: str) -> str:
    """``P:ckpt:{taskId}``, hash: a task's progress markers (``admitted``,
    ``request``, ``fetched``, ``next_seq``, ``next_ctx``, ``rows_before``,
    ``last_seq``, ``finalized``, ``absorbed``, ``redrives``, ``quota_rows``: rows
    counted against the caller's daily quota, ``plait.quotas``; the page
    writer's ``partitions``, ``end:<partition>``, ``ends``, ``missing``: see
    ``streams.checkpoints``). Written by the handlers, their after-hooks and
    the sweeper, read by handlers (skip duplicates)
    and the sweeper (re-drive), all via ``streams.checkpoints.Checkpoints``.
    TTL ``streams.checkpoints.TTL`` (14 days), renewed on every write."""
    return f"{prefix}:ckpt:{task_id}"


def row_grants(prefix: str, task_id: str) -> str:
    """``P:ckpt:{taskId}:grants``, hash: a partitioned task's ``maxRows``
    budget: ``granted`` (rows granted so far) and ``<partition>:<seq>`` (the
    rows granted to that page, so a re-fetched page gets the same). Written
    and read by the fetcher (``streams.partitions.within_max_rows``, one Lua
    call per page); TTL 14 days, renewed on every grant."""
    return f"{prefix}:ckpt:{task_id}:grants"


def slots(prefix: str, scope: str) -> str:
    """``P:slots:{scope}``, sorted set: ids of the tasks holding a slot of one
    limit scope (``plait.limits.Limits.scopes`` names), score = lease expiry in
    epoch seconds (expired members are dropped by the start script). Written
    and read by ``streams.slots.Slots`` (admission, projector, sweeper; a
    ``KEYS`` argument of its Lua start script). No TTL."""
    return f"{prefix}:slots:{scope}"


def wait_queue(prefix: str, sys_code: str) -> str:
    """``P:wait:{sysCode}``, sorted set: a caller's waiting task ids, score =
    enqueue time in epoch seconds (FIFO). Written and read by
    ``streams.slots.Slots`` (the last ``KEYS`` argument of its Lua start
    script). No TTL."""
    return f"{prefix}:wait:{sys_code}"


def wait_requests(prefix: str) -> str:
    """``P:waitreq``, hash: task id -> the waiting task's ``ExportRequested``
    (JSON), removed when it starts or is released. ``streams.slots.Slots``. No TTL."""
    return f"{prefix}:waitreq"


def waiting(prefix: str) -> str:
    """``P:waiting``, set: sysCodes that may have waiting tasks (pruned when
    their queue is found empty). ``streams.slots.Slots``. No TTL."""
    return f"{prefix}:waiting"


def passes(prefix: str) -> str:
    """``P:pass``, hash: sysCode -> stride pass (float; grows by 1/weight per
    started task, the lowest pass starts next). ``streams.slots.Slots``. No TTL."""
    return f"{prefix}:pass"


def worker(prefix: str, worker_id: str) -> str:
    """``P:worker:{workerId}``, string ``1``: present while the worker lives.
    Set by every worker heartbeat (``streams.workers.Workers.beat``) with a TTL
    of ``Settings.stale_after_seconds``; read by the sweeper (re-drive a stale
    task only when its last worker's key is gone) and the container health
    check (``streams.health``)."""
    return f"{prefix}:worker:{worker_id}"


def sweeper(prefix: str) -> str:
    """``P:sweeper``, string: id of the worker whose sweeper turn it is. Set NX
    by ``streams.workers.Workers`` with a TTL of 0.9 x
    ``Settings.sweep_interval_seconds`` (one sweep per interval across workers)."""
    return f"{prefix}:sweeper"


def ready(prefix: str, worker_id: str) -> str:
    """``P:ready:{workerId}``, string: JSON ``{"workerId", "pid", "generation",
    "partitions"}`` while the worker consumes. Set (TTL
    ``streams.readiness.TTL_SECONDS``, 5 s, refreshed every 0.5 s) or deleted
    (while rebalancing) by ``streams.readiness.report``; read by
    ``ops.stack.Stack.ready_workers``."""
    return f"{prefix}:ready:{worker_id}"


def ready_pattern(prefix: str) -> str:
    """``SCAN`` pattern ``P:ready:*`` of every worker's :func:`ready` key; used
    by ``ops.stack.Stack.ready_workers``."""
    return f"{prefix}:ready:*"


#: Aliases kept for existing callers (``streams.workers``, ``streams.health``, tests).
worker_key = worker
sweeper_key = sweeper


# ------------------------------------------------------------------ API


def nonce(prefix: str, app_key: str, nonce_: str) -> str:
    """``P:nonce:{appKey}:{nonce}``, string ``1``: a request nonce already
    used by this caller (replay protection). Set NX by
    ``api.auth.verify_request`` after the signature checks, TTL 2 x the
    allowed clock skew (``Settings.auth_skew_seconds``)."""
    return f"{prefix}:nonce:{app_key}:{nonce_}"


def audit(prefix: str, sys_code: str | None) -> str:
    """``P:audit:{sysCode}``, list: a caller's newest audit entries (JSON,
    newest first, trimmed to ``api.services.AUDIT_KEEP``); ``sys_code`` None
    (no caller known) files under ``-``. Written by ``Services.audit``, read by
    ``Services.audit_entries`` (``GET /audit``). No TTL."""
    return f"{prefix}:audit:{sys_code or '-'}"


# ------------------------------------------------------------------ alerting


def alert_counters(prefix: str) -> str:
    """``P:alerts:counters``, hash: funnel partition -> that partition's
    counters (JSON, with ``updated_at``). Written by the alerting agents after
    each funnel step; read by ``alerting.counters.CountersCollector``
    (Prometheus) and ``api.alerts`` (``GET /alerts/counters``, silence
    counts). No TTL."""
    return f"{prefix}:alerts:counters"


def alert_silences(prefix: str) -> str:
    """``P:alerts:silences``, hash: silence id -> the silence (JSON, with
    ``updated_at``), the one silence store the API lists (the funnel's own copy
    lives in its Faust table); an expired silence stays with its ``ends_at``
    set. Written and read by ``api.alerts`` (native ``/silences`` and
    Alertmanager ``/api/v2/silences`` routes). No TTL."""
    return f"{prefix}:alerts:silences"


def alert_view(prefix: str, partition: int) -> str:
    """``P:alerts:view:{partition}``, hash: the current firing alerts of one
    funnel partition, episode key -> Alertmanager ``gettableAlert`` JSON, plus
    the field ``alerting.view.META_FIELD``. Written by ``alerting.view``'s
    ``ViewPublisher`` (a worker hook, at most every ``PUBLISH_EVERY`` s); read
    by ``alerting.view.read_views`` (``GET /api/v2/alerts``). TTL
    ``alerting.view.VIEW_TTL`` (30 s) after the last publish."""
    return f"{prefix}:alerts:view:{partition}"


def alert_history(prefix: str, fp: str) -> str:
    """``P:alerts:history:{fingerprint}``, list: the story of one alert
    fingerprint, oldest entry first, each the public JSON of one fact
    (``alerting.history``: outcome, message, attempt). Written by the alerting
    agents (``alerting.history.write``: RPUSH, LTRIM to
    ``Settings.alert_history_max_entries``); read by ``api.alerts`` (``GET
    /alerts/{fingerprint}/history``, ``GET /api/v2/alerts/{fingerprint}/history``).
    TTL ``Settings.alert_history_retention_seconds`` after the last write."""
    return f"{prefix}:alerts:history:{fp}"


def export_failed_marker(prefix: str, sys_code: str, biz_type: str) -> str:
    """``P:alerts:failed:{sysCode}/{bizType}``, string = the failed task id: an
    ``ExportFailed`` / ``ExportTimeout`` alert was raised for this
    sysCode/bizType and no task of it has succeeded since. Set by
    ``alerting.agents`` on FAILED / TIMEOUT (TTL 7 days), taken (GETDEL) by
    the next SUCCESS, which then sends the resolved alerts."""
    return f"{prefix}:alerts:failed:{sys_code}/{biz_type}"


def slow_task_marker(prefix: str, task_id: str) -> str:
    """``P:alerts:slow:{taskId}``, string ``1``: ``ExportSlow`` has fired for
    this task (fire once, resolve when it ends). Set NX by
    ``alerting.agents`` when it fires, TTL 7 days; deleted when it resolves."""
    return f"{prefix}:alerts:slow:{task_id}"


# ------------------------------------------------------------------ schedules


def schedules(prefix: str) -> str:
    """``P:schedules``, hash: schedule id -> its definition (JSON: the
    ``POST /schedules`` body plus ``id``, ``sysCode``, ``createdAt``,
    ``updatedAt``). Written by the API (``api.schedules``), read by the API and
    the scheduler (``schedules.runner``), both via ``schedules.store.Store``. No TTL."""
    return f"{prefix}:schedules"


def schedule_state(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:state``, string: the schedule's runtime state (JSON of
    ``schedules.core.State``: cursor, running slots, buffered and backfill
    slots, paused, counters, history). Written by the scheduler while it holds
    :func:`schedule_owner` (fenced: a write by a worker that lost the lease is
    refused), and by the API for pause/trigger/backfill requests; read by both.
    Deleted with the schedule. No TTL."""
    return f"{prefix}:schedule:{schedule_id}:state"


def schedule_slot(prefix: str, schedule_id: str, slot_ms: int) -> str:
    """``P:schedule:{id}:slot:{slotMs}``, string: the claim of one slot (the
    slot's idempotency key, issue 14): JSON ``{"state": "claimed"|"fired",
    "ref": task id, "worker", "at"}``. Set NX by ``schedules.runner`` before a
    slot fires (the task id is chosen in the claim, so a re-driven slot
    re-sends the same task, never a second one). TTL 8 days."""
    return f"{prefix}:schedule:{schedule_id}:slot:{slot_ms}"


def schedule_probe(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:probe``, hash: probe target (asset) -> ``up`` or
    ``down``, the last state seen; a change emits a ``TargetDown`` raw alert.
    Written and read by ``schedules.probes`` (scheduler). No TTL; deleted with
    the schedule."""
    return f"{prefix}:schedule:{schedule_id}:probe"


def schedule_owner(prefix: str) -> str:
    """``P:schedules:owner``, string: id of the worker whose scheduler turn it
    is (lease). Set NX PX by ``schedules.store.Store.take_turn`` for
    ``Settings.schedule_lease_seconds``, released at the end of a turn; one worker
    decides slots at a time."""
    return f"{prefix}:schedules:owner"


def schedule_requests(prefix: str, schedule_id: str) -> str:
    """``P:schedule:{id}:requests``, list: manual requests (JSON ``{"kind":
    "trigger", "at"}`` or ``{"kind": "backfill", "start", "end"}``, epoch ms)
    pushed by the API (``POST /schedules/{id}/trigger`` / ``backfill``) and
    popped by the scheduler on its next turn. No TTL; deleted with the schedule."""
    return f"{prefix}:schedule:{schedule_id}:requests"


def notify(prefix: str, task_id: str, status: str) -> str:
    """``P:notify:{taskId}:{status}``, string ``sending`` / ``sent`` /
    ``failed``: the completion webhook (``jobConfig.notifyUrl``) of a task's
    final status; the pair is also its ``Idempotency-Key``. Set NX by
    ``schedules.notify`` before the first attempt (TTL 10 min, so a worker
    that died mid-delivery lets a redelivered lifecycle event try again), then
    ``sent``/``failed`` with a TTL of 7 days."""
    return f"{prefix}:notify:{task_id}:{status}"


def daily_rows(prefix: str, sys_code: str, day: str) -> str:
    """``P:quota:{sysCode}:{day}``, string (integer): rows a caller exported
    on ``day`` (``YYYY-MM-DD`` in the caller's ``timezone``), counted against
    its ``dailyRows``. Incremented by the export workers as pages are fetched
    or written and read by the API (``plait.quotas``). Expires a day after
    the day ends (EXPIREAT, renewed on every charge)."""
    return f"{prefix}:quota:{sys_code}:{day}"
