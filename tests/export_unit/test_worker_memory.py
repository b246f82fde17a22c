"""``plait.memory.release_freed_memory``: a worker hands what it freed back to the OS after
each file (docs/perf-notes.md, "Writer worker peak RSS") and after a storm's alerts went
(``plait.memory.TrimAfterShrink``)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from plait import memory
from plait.errors import PermanentError
from plait.memory import TrimAfterShrink
from plait.spec import DocumentConfig
from sinks.store import LocalStore
from streams import files
from streams.files import encode_shard
from streams.layout import shard_key

ROOT = Path(__file__).resolve().parents[2]

# An 8 MiB block allocated and freed (glibc's mmap threshold rises to its size), then 128 blocks
# of 512 KiB (so on the heap), every other one freed: 32 MiB of holes between live blocks, which
# glibc keeps unless trimmed.
PROBE = r'''
import json
from ops.cli import lean_worker
lean_worker()
from plait.memory import release_freed_memory

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

first = b"x" * (8 << 20)
del first
blocks = [b"x" * (512 << 10) for _ in range(128)]
del blocks[::2]
held = rss_mb()
released = release_freed_memory()
print(json.dumps({"released": released, "returned_mb": held - rss_mb()}))
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_memory_freed_between_live_blocks_goes_back_to_the_os():
    # when a worker process frees 32 MiB of blocks lying between blocks it keeps
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    # then releasing gives most of it back
    assert got["released"] is True
    assert got["returned_mb"] > 24, got


def test_finish_releases_freed_memory_after_the_file_and_after_a_failure(tmp_path, monkeypatch):
    calls, called = [], threading.Semaphore(0)

    def release() -> bool:
        calls.append(1)
        called.release()
        return True

    monkeypatch.setattr(memory, "release_freed_memory", release)
    store = LocalStore(tmp_path / "store", "http://127.0.0.1:1", "secret")
    ctx = SimpleNamespace(files={}, store=store)
    doc = DocumentConfig(fileName="f", fileFormat="csv")
    store.put_bytes(shard_key("t1", 0), encode_shard(pa.record_batch({"a": [1, 2]}), {}))
    # when a file is built from its shards
    built = files.finish(ctx, "t1", 0, doc)
    # then the memory is released once it is uploaded
    assert built.report.rows == 2 and called.acquire(timeout=10) and calls == [1]
    # and also when the file cannot be built
    with pytest.raises(PermanentError):
        files.finish(ctx, "t2", 0, doc)
    assert called.acquire(timeout=10) and calls == [1, 1]


def test_memory_is_released_once_the_count_halved_by_enough_not_per_batch():
    trim = TrimAfterShrink(min_freed=5_000)
    # when 50,000 alerts open, then resolve 1,000 a batch
    asked = [n for n in range(0, 50_001, 1_000) if trim.observe(n)]
    asked += [n for n in range(50_000, -1, -1_000) if trim.observe(n)]
    # then release is asked at each halving while 5,000 or more went: 4 times, not 50
    assert asked == [25_000, 12_000, 6_000, 1_000], asked
    # and a steady churn around a level never asks, nor a count that only grows
    assert not any(trim.observe(n) for n in [6_000, 4_000, 6_000, 3_500, 5_000] * 10)
    assert not any(TrimAfterShrink(100).observe(n) for n in range(0, 10_000, 7))
