"""Redis key formats (plait/keys.py): every key is built there and nowhere else,
and each format stays byte-identical (the strings are a storage format: a
changed one orphans the data under the old key)."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from plait import keys as K

ROOT = Path(__file__).resolve().parents[2]

#: (function, arguments, the exact key). Add a row with every new key.
PINNED = [
    (K.everything, ("P",), "P:*"),
    (K.dev_stack_prefix, ("1a2b3c4d",), "plait-1a2b3c4d"),
    (K.task, ("P", "t1"), "P:task:t1"),
    (K.task_pattern, ("P",), "P:task:*"),
    (K.task_downloads, ("P", "t1"), "P:downloads:t1"),
    (K.task_spec, ("P", "t1"), "P:spec:t1"),
    (K.caller_tasks, ("P", "crm"), "P:tasks:crm"),
    (K.user_tasks, ("P", "crm", "u7"), "P:tasks:crm:u7"),
    (K.task_index_pattern, ("P",), "P:tasks:*"),
    (K.active, ("P",), "P:active"),
    (K.task_events, ("P", "t1"), "P:events:t1"),
    (K.fingerprint, ("P", "ab12"), "P:fp:ab12"),
    (K.projection_built, ("P",), "P:projection:built"),
    (K.checkpoint, ("P", "t1"), "P:ckpt:t1"),
    (K.row_grants, ("P", "t1"), "P:ckpt:t1:grants"),
    (K.slots, ("P", "sys:crm"), "P:slots:sys:crm"),
    (K.wait_queue, ("P", "crm"), "P:wait:crm"),
    (K.wait_requests, ("P",), "P:waitreq"),
    (K.waiting, ("P",), "P:waiting"),
    (K.passes, ("P",), "P:pass"),
    (K.worker, ("P", "host:12"), "P:worker:host:12"),
    (K.sweeper, ("P",), "P:sweeper"),
    (K.ready, ("P", "w1"), "P:ready:w1"),
    (K.ready_pattern, ("P",), "P:ready:*"),
    (K.nonce, ("P", "crm-app", "n0"), "P:nonce:crm-app:n0"),
    (K.audit, ("P", "crm"), "P:audit:crm"),
    (K.audit, ("P", None), "P:audit:-"),
    (K.alert_counters, ("P",), "P:alerts:counters"),
    (K.alert_silences, ("P",), "P:alerts:silences"),
    (K.alert_reload, ("P",), "P:alerts:reload"),
    (K.alert_reloaded, ("P", "r1"), "P:alerts:reloaded:r1"),
    (K.alert_view, ("P", 3), "P:alerts:view:3"),
    (K.alert_history, ("P", "0123abcd0123abcd"), "P:alerts:history:0123abcd0123abcd"),
    (K.slow_task_marker, ("P", "t1"), "P:alerts:slow:t1"),
    (K.export_failed_marker, ("P", "BILL", "daily"), "P:alerts:failed:BILL/daily"),
    (K.schedules, ("P",), "P:schedules"),
    (K.schedule_state, ("P", "s1"), "P:schedule:s1:state"),
    (K.schedule_slot, ("P", "s1", 1700000000000), "P:schedule:s1:slot:1700000000000"),
    (K.schedule_probe, ("P", "s1"), "P:schedule:s1:probe"),
    (K.schedule_owner, ("P",), "P:schedules:owner"),
    (K.schedule_requests, ("P", "s1"), "P:schedule:s1:requests"),
    (K.notify, ("P", "t1", "SUCCESS"), "P:notify:t1:SUCCESS"),
    (K.daily_rows, ("P", "crm", "2026-12-04"), "P:quota:crm:2026-12-04"),
]


@pytest.mark.parametrize("fn, args, expected", PINNED, ids=lambda v: getattr(v, "__name__", None))
def test_every_key_format_is_pinned(fn, args, expected):
    assert fn(*args) == expected


def test_every_key_function_is_pinned_and_documented():
    public = {fn.__name__ for name, fn in vars(K).items()
              if callable(fn) and not name.startswith("_") and fn.__module__ == K.__name__}
    pinned = {fn.__name__ for fn, _, _ in PINNED}
    assert public - pinned == set(), "pin the format of every key function above"
    for name in public:
        assert len((getattr(K, name).__doc__ or "").split()) >= 8, f"{name} needs a docstring"
    assert K.worker_key is K.worker and K.sweeper_key is K.sweeper


# ---------------------------------------------------------------- one place

#: An expression naming a Redis prefix: ``prefix``, ``p``, ``self.p``,
#: ``settings.redis_prefix``, ``self.prefix``...
_PREFIXISH = re.compile(r"(^|[._])(p|prefix|redis_prefix)$")


def _key_builds(source: str) -> list[tuple[int, str]]:
    """Lines of ``source`` that build a ``<prefix>:...`` string: an f-string
    starting ``{<prefix>}:``, a ``"{prefix}:..."`` template, or
    ``<prefix> + ":..."``. Docstrings and comments do not count."""
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            for head, tail in zip(parts, parts[1:]):
                if (isinstance(head, ast.FormattedValue) and isinstance(tail, ast.Constant)
                        and str(tail.value).startswith(":")
                        and _PREFIXISH.search(ast.unparse(head.value))):
                    found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings
              and re.search(r"\{(p|prefix|redis_prefix)\}:", node.value)):
            found.append((node.lineno, node.value))
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
              and isinstance(node.right, ast.Constant) and str(node.right.value).startswith(":")
              and _PREFIXISH.search(ast.unparse(node.left))):
            found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("snippet", [
    'key = f"{self.prefix}:task:{task_id}"',
    'raw = redis.get(f"{p}:task:{event.taskId}")',
    'pipe.zadd(f"{self.p}:wait:{sys_code}", {})',
    'k = f"{settings.redis_prefix}:audit:{sys_code or \'-\'}"',
    'COUNTERS_KEY = "{prefix}:alerts:counters"',
    'k = prefix + ":sweeper"',
    'pattern = f"{self.prefix}:{pattern}"',
])
def test_the_source_check_catches_a_key_built_by_hand(snippet):
    assert _key_builds(snippet)


@pytest.mark.parametrize("snippet", [
    '"""Keys: ``{prefix}:task:{taskId}``."""',
    'who = f"{socket.gethostname()}:{os.getpid()}"',
    'ids = f"{eid}:{n}"',
    'path = f"{self.prefix}/{key}"',
    'text = f"{field}: {rule}"',
])
def test_the_source_check_leaves_other_strings_alone(snippet):
    assert not _key_builds(snippet)


def test_no_module_outside_plait_keys_builds_a_redis_key(gc_paused):
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    sources = [f for f in files if not f.startswith("tests/") and f != "plait/keys.py"]
    assert "plait/projection.py" in sources and "alerting/agents.py" in sources
    offenders = [f"{f}:{line}: {text}" for f in sources
                 for line, text in _key_builds((ROOT / f).read_text())]
    assert offenders == [], "build Redis keys with plait.keys:\n" + "\n".join(offenders)


def test_alerting_does_not_read_the_projection_format():
    """The slow-task rule reads createdAt through ``Projection.get``."""
    source = (ROOT / "alerting" / "agents.py").read_text()
    assert ":task:" not in source and "K.task(" not in source
